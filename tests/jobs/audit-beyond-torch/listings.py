"""Directory listings and sets used in their order; each planted line carries a hazard comment."""

# ruff: noqa: PTH107, PTH118, PTH207, PTH208

import glob
import os
from pathlib import Path


def shards(folder: str) -> list[str]:
    names = os.listdir(folder)  # hazard: unsorted-listing
    if os.environ.get("SORTED"):
        names = sorted(names)  # only sometimes: the listing above is still used unsorted
    return [os.path.join(folder, name) for name in names]


def text_files(root: Path) -> list[Path]:
    found = []
    for path in root.rglob("*.txt"):  # hazard: unsorted-listing
        found.append(path)
    return found


def walked(root: str) -> list[str]:
    paths = []
    for folder, _dirs, files in os.walk(root):  # hazard: unsorted-listing
        for name in files:
            paths.append(os.path.join(folder, name))
    return paths


def entries(root: str) -> list[str]:
    with os.scandir(root) as listing:  # hazard: unsorted-listing
        return [entry.name for entry in listing]


def quiet(root: str, pattern: str) -> list[object]:
    """Sorted, counted, tested, or iterated without building anything: the order does not matter."""
    ordered = sorted(os.listdir(root))
    files = glob.glob(pattern)
    files.sort()
    kept = [name for name in os.listdir(root) if name.endswith(".txt")]
    kept.sort()
    count = len(glob.glob(pattern))
    present = "config.yaml" in os.listdir(root)
    empty = not os.listdir(root)
    for name in os.listdir(root):
        os.remove(os.path.join(root, name))
    suffixes = {path.suffix for path in Path(root).iterdir()}
    walked = []
    for folder, dirs, names in os.walk(root):
        dirs.sort()
        for name in sorted(names):
            walked.append(os.path.join(folder, name))
    collected = []
    for path in Path(root).glob("*.bin"):
        collected.append(path)
    collected.sort()
    return [ordered, files, kept, count, present, empty, suffixes, walked, collected]


def sets(words: list[str], other: dict[str, int], out: object) -> list[object]:
    vocab = dict.fromkeys(set(words))
    ids = {word: index for index, word in enumerate(vocab)}  # hazard: set-iteration-order
    seen = set(words)
    both = seen | {"<unk>"}
    listed = list(both)  # hazard: set-iteration-order
    pairs = dict(zip(seen, range(len(seen)), strict=True))  # hazard: set-iteration-order
    shared = other.keys() - seen
    first = tuple(shared)  # hazard: set-iteration-order
    out.writelines(seen)  # hazard: set-iteration-order
    for word in seen.union(other):  # hazard: set-iteration-order
        print(word, file=out)
    ordered = sorted(both)
    known = [word for word in words if word in both]
    upper = set(map(str.upper, seen))
    size = len(seen - {"<unk>"})
    for word in seen:
        print(word)
    return [ids, listed, pairs, first, ordered, known, upper, size]


def numbered(words: set[str]):
    for word in set(words):  # hazard: set-iteration-order
        yield word.upper()
