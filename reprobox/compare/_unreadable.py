"""Output files whose bytes differ in a format reprobox cannot read: what is known of them, and nothing more.

Such a difference may be a real one or a stamp of the run (a PNG's time chunk, a profiler's clock), and
reprobox cannot tell which. So it never calls it "a real nondeterminism". A file the job file declares a
checkpoint (an explicit `checkpoints:` pattern selected it) differs, and the runs are not reproducible.
Any other is listed with its type and its first differing bytes, as diffoscope shows them, and leaves
the comparison without a verdict until the job file accepts it (`compare: ignore`) or the job writes it
reproducibly. One that may hold the model (a checkpoint's name or container type) is never advised
away: ignoring it would leave the model out of the verdict, so the advice is to save its weights in a
format reprobox reads as well.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, BinaryIO

from reprobox import saferead
from reprobox.records.manifest import RunRecord

CHUNK = 1 << 16
SHOWN = 16  # bytes shown on each side of the first difference
MAX_SCANNED = 256 << 20  # a first difference past this is said to lie beyond it
MAGIC: tuple[tuple[bytes, str], ...] = (
    (b"%PDF", "PDF document"),
    (b"\x89PNG\r\n\x1a\n", "PNG image"),
    (b"\xff\xd8\xff", "JPEG image"),
    (b"GIF8", "GIF image"),
    (b"PK\x03\x04", "zip archive"),
    (b"\x1f\x8b", "gzip data"),
    (b"SQLite format 3\x00", "SQLite database"),
    (b"\x7fELF", "ELF binary"),
    (b"\x89HDF\r\n\x1a\n", "HDF5 file"),
    (b"BM", "BMP image"),
    (b"RIFF", "RIFF media (WAV, WebP, AVI)"),
    (b"ID3", "MP3 audio"),
    (b"OggS", "Ogg media"),
)


# The names of files that hold a model when the readers cannot take them apart (a torch file beyond the
# readers' limits, a framework's own archive, either compressed), and the types of the containers models
# are saved in.
CHECKPOINT_NAME = re.compile(
    r"\.(?:pt|pth|bin|ckpt|safetensors|npz|npy|zip|tar|h5|hdf5|keras|pkl|pickle|joblib|onnx|msgpack|gguf|"
    r"pdparams)(?:\.(?:gz|bz2|xz|lzma))?$",
    re.IGNORECASE,
)
CHECKPOINT_TYPES = frozenset({"zip archive", "HDF5 file"})  # as kind_of names them


def may_hold_tensors(path: str, kind: str | None = None) -> bool:
    """Whether an unread file may be a model: a checkpoint's name, or a checkpoint container's type."""
    return CHECKPOINT_NAME.search(path) is not None or kind in CHECKPOINT_TYPES


def declared(record: RunRecord) -> bool:
    """Whether the job file names its checkpoints (then every hashed file is one it declared)."""
    return bool(record.job_spec.get("checkpoints"))


def describe(record_a: RunRecord, record_b: RunRecord, path_a: str, path_b: str) -> dict[str, Any]:
    """The file's type and where the two runs' bytes first differ, both sides shown."""
    file_a, file_b = record_a.output_dir / path_a, record_b.output_dir / path_b
    entry: dict[str, Any] = {"checkpoint": path_a, "type": kind_of(file_a, record_a.output_dir)}
    try:
        entry["first_difference"] = first_difference(file_a, file_b, record_a.output_dir, record_b.output_dir)
    except (OSError, saferead.UnsafeFile) as exc:
        entry["first_difference"] = {"error": str(exc)}
    return entry


def kind_of(path: Path, root: Path) -> str:
    try:
        with _open(path, root) as handle:
            head = handle.read(64)
    except (OSError, saferead.UnsafeFile):
        return "unreadable file"
    for magic, kind in MAGIC:
        if head.startswith(magic):
            return kind
    try:
        head.decode("utf-8")
    except UnicodeDecodeError:
        return "binary data"
    return "text"


def _open(path: Path, root: Path) -> BinaryIO:
    """The file, opened the safe way every output is (no link followed, no FIFO or device)."""
    return os.fdopen(saferead.open_regular(path, root=root), "rb")


def first_difference(a: Path, b: Path, root_a: Path, root_b: Path) -> dict[str, Any]:
    """The offset of the first differing byte, with the bytes around it from each side (hex and text)."""
    offset = 0
    with _open(a, root_a) as fa, _open(b, root_b) as fb:
        while offset < MAX_SCANNED:
            ca, cb = fa.read(CHUNK), fb.read(CHUNK)
            if ca != cb:
                index = next((i for i, (x, y) in enumerate(zip(ca, cb, strict=False)) if x != y), None)
                at = offset + (index if index is not None else min(len(ca), len(cb)))
                return {"offset": at, "a": _around(fa, at), "b": _around(fb, at)}
            if not ca:
                return {"offset": None, "note": "the bytes are equal"}
            offset += len(ca)
    return {"offset": None, "note": f"no difference in the first {MAX_SCANNED >> 20} MiB"}


def _around(handle: BinaryIO, offset: int) -> dict[str, str]:
    start = max(0, offset - SHOWN)
    handle.seek(start)
    data = handle.read(2 * SHOWN)
    text = "".join(chr(c) if 32 <= c < 127 else "." for c in data)
    return {"from": str(start), "hex": data.hex(" "), "text": text}


def sentence(entries: list[dict[str, Any]], equal: str = "every tensor and value is equal") -> str:
    """What is known of the unreadable files that differ, for the verdict's first line; ``equal`` says
    what was compared and found equal beside them."""
    named = "; ".join(described(entry) for entry in entries[:3])
    more = f" and {len(entries) - 3} more" if len(entries) > 3 else ""
    return (
        f"{equal}, but {len(entries)} file{'s' if len(entries) > 1 else ''} "
        f"differ{'' if len(entries) > 1 else 's'} that reprobox cannot read: {named}{more}; whether that is "
        f"a stamp of the run or a real difference is not known: {advice(entries)}"
    )


def advice(entries: list[dict[str, Any]]) -> str:
    """What to do about unreadable files: never to ignore one that may hold the model (it would leave
    the model out of the verdict), only to make it readable or reproducible."""
    models = [str(e["checkpoint"]) for e in entries if may_hold_tensors(str(e["checkpoint"]), e.get("type"))]
    others = [e for e in entries if str(e["checkpoint"]) not in models]
    said = []
    if models:
        them = "it" if len(models) == 1 else "them"
        said.append(
            f"{', '.join(models[:3])} may hold the model, which a verdict must compare: save what "
            f"{'it holds' if len(models) == 1 else 'they hold'} in a format reprobox reads as well "
            f"(torch.save of a state_dict, safetensors, NumPy), or make the job write {them} reproducibly"
        )
    if others:
        them = "it" if len(others) == 1 else "them"
        named = f"{them}" if not models else ", ".join(str(e["checkpoint"]) for e in others[:3])
        said.append(
            f"list {named} under compare: ignore to accept {them}, or make the job write {them} reproducibly"
        )
    return "; ".join(said)


def described(entry: dict[str, Any]) -> str:
    """``plot.bin (binary data, first difference at byte 4 ('.BIN17641...' vs '.BIN17641...'))``."""
    first = entry.get("first_difference") or {}
    where = f", first difference at byte {first['offset']}" if first.get("offset") is not None else ""
    shown = f" ({first['a']['text']!r} vs {first['b']['text']!r})" if first.get("offset") is not None else ""
    return f"{entry['checkpoint']} ({entry['type']}{where}{shown})"
