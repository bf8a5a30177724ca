"""``python -m tests.fuzz.atheris_target TARGET [libFuzzer flags] [CORPUS]``: one target, coverage-guided.

atheris (libFuzzer for Python) instruments the readers and keeps the inputs that reach new code; its
mutations are this package's framing-aware ones (``mutate``), and its limits libFuzzer's own
(``-timeout``, ``-rss_limit_mb``). An input that ends otherwise than read or refused (UsageError) is a
crash, which libFuzzer writes to ``-artifact_prefix``. A text input is hashed under each text suffix, a
compressed one under a JSON and an .npy name. A target whose seeds are folders (``FOLDERS``) mutates the
first seed's file, beside that seed's other files, and hashes every file of the folder. A target of a
decoder fuzzed on its own (``DIRECT_READERS``) hands the input to it.
"""

from __future__ import annotations

import contextlib
import random
import sys
import tempfile
import warnings
from pathlib import Path

import atheris

with atheris.instrument_imports(include=["reprobox.guest.hashing"]):
    from reprobox.guest.hashing import _zstd, hash_checkpoint  # noqa: F401 - _zstd: instrumented here

from reprobox.errors import UsageError
from reprobox.guest.hashing._bounds import OverLimit
from reprobox.guest.hashing._zstd import ZstdError
from tests.fuzz.forkserver import (
    DIRECT_READERS,
    FOLDERS,
    TARGET_FILES,
    folder_input,
    input_path,
    input_root,
    preload,
)
from tests.fuzz.mutate import MUTATORS

TEXT_SUFFIXES = (".json", ".jsonl", ".yaml", ".csv")
COMPRESSED_SUFFIXES = (".json.gz", ".npy.gz")  # the name picks the reader of what the stream holds


def main(argv: list[str]) -> None:
    target = argv[1]
    folder = Path(tempfile.mkdtemp(prefix="reprobox-atheris-"))
    suffixes = {"text": TEXT_SUFFIXES, "compressed": COMPRESSED_SUFFIXES}.get(target, ("",))
    mutator = MUTATORS[target]
    preload()
    warnings.simplefilter("ignore")

    args = argv[2:]
    if target in FOLDERS:  # the corpus: the first seed folder's file, its companions written once
        first = sorted(p for p in Path(args[-1]).iterdir() if p.is_dir())[0]
        (folder / "corpus").mkdir()
        (folder / "corpus" / first.name).write_bytes((first / TARGET_FILES[target]).read_bytes())
        args[-1] = str(folder / "corpus")
        checkpoint = folder_input(folder / "work", target, first)

    def one_input(data: bytes) -> None:
        if TARGET_FILES[target] in DIRECT_READERS:  # a decoder fuzzed on its own: its own errors refuse
            with contextlib.suppress(ZstdError, OverLimit):
                DIRECT_READERS[TARGET_FILES[target]](data)
            return
        if target in FOLDERS:
            checkpoint.write_bytes(data)
            with contextlib.suppress(UsageError):  # refused, exit 2: a passing outcome
                root = input_root(checkpoint, target)
                for path in sorted(p for p in root.rglob("*") if p.is_file()):
                    hash_checkpoint(path, relative_to=root, workers=1, strict=True)
            return
        for suffix in suffixes:
            path = input_path(folder, target, suffix)
            path.write_bytes(data)
            with contextlib.suppress(UsageError):  # refused, exit 2: a passing outcome
                hash_checkpoint(path, relative_to=path.parent, workers=1, strict=True)

    def mutate(data: bytes, max_size: int, seed: int) -> bytes:
        return mutator(random.Random(seed), data)[:max_size]

    atheris.Setup([argv[0], *args], one_input, custom_mutator=mutate)
    atheris.Fuzz()


if __name__ == "__main__":
    main(sys.argv)
