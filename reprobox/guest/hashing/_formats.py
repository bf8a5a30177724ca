"""Reading each checkpoint format without running anything from it: torch, pickle, safetensors, NumPy.

A reader plans one file's hashing: the tensors to hash and the digests of its plain values, or the
plain-file fallback with a note saying why the content could not be read safely. Torch files (both
``torch.save`` formats) and plain pickles are read by the safe pickle reader (``_pickle``), which imports
and runs nothing named in the file, and reads each tensor from the file by ``pread`` as it is hashed,
never through a memory map: hashing a checkpoint needs the standard library and NumPy, never torch, but
for quantized tensors, and a file changed while it is hashed raises ``FileChanged`` (never SIGBUS).
Safetensors files are read in ``_safetensors``, NumPy files in ``_numpy_files``, text in ``_text``, and
logging tools' files (TensorBoard, MLflow, W&B) in ``_logformats``, recognised by their name and place.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

from reprobox.guest.hashing._arrays import Buffers, _Array, _arrays_from, _Content, _opaque, _refused
from reprobox.guest.hashing._canonical import _metadata_digests, flatten
from reprobox.guest.hashing._filebytes import FileIdentity, check_unchanged
from reprobox.guest.hashing._layout import Layout
from reprobox.guest.hashing._pickle import READER_NAME, PickleRead, read_pickle
from reprobox.guest.hashing._pickle_arrays import TorchNeeded
from reprobox.guest.hashing._pickle_objects import CLASS_KEY
from reprobox.guest.hashing._torch_types import SavedTensor


def _stand_in_note(values: list[tuple[str, object]]) -> str | None:
    """For a torch file that names classes of its own: which, and how the reader records them (a
    TorchScript archive, whose code names its classes, is read by ``_torchscript``)."""
    classes = sorted({str(v) for name, v in values if name.rsplit(".", 1)[-1] == CLASS_KEY})
    how = (
        "read by the safe pickle reader, which imports and runs nothing named in the file, so objects it "
        "names are recorded as their class, arguments and state"
    )
    if not classes:
        return None
    named = ", ".join(classes[:3]) + (f" and {len(classes) - 3} more" if len(classes) > 3 else "")
    refused = "which torch.load(weights_only=True) would have refused"
    return f"the file names classes beyond tensors and containers ({named}), {refused}; {how}"


def _torch_needed_note(exc: TorchNeeded) -> str:
    return f"content not hashed: the file holds {exc}; the content hash is the file sha256"


def _plan_torch(path: Path) -> _Content:
    """A torch.save file (zip or legacy format), read by the safe pickle reader without torch."""
    return _plan_pickle(path, "torch")


def _plan_pickle(path: Path, kind: str = "pickle") -> _Content:
    """A pickled file (torch.save's or plain) through the safe reader, tensors as spans of the file;
    ``kind`` is what the file was taken for, named when it cannot be read."""
    try:
        read = read_pickle(path)
        named_arrays, values = flatten(read.obj)
    except (ValueError, RecursionError) as exc:
        return _refused(kind, exc)
    except TorchNeeded as exc:
        return _opaque(_torch_needed_note(exc))
    return _Content(
        format=read.container,
        arrays=[a for pair in named_arrays for a in _unchanged_arrays(path, read.identity, pair)],
        metadata=_metadata_digests(values),
        note=_stand_in_note(values) if read.container == "torch" else None,
        keepalive=read,
        reader=READER_NAME,
        layout=_layout(read, named_arrays),
    )


def _layout(read: PickleRead, named_arrays: list[tuple[str, Any]]) -> Layout:
    """The pickles and the container's framing, and the storage bytes of each tensor hashed from the
    file; what no tensor covers (a storage's bytes beyond its views, another archive) is a gap."""
    covered = [
        (value.covers.offset, value.covers.offset + value.covers.nbytes)
        for _name, value in named_arrays
        if isinstance(value, SavedTensor) and value.covers is not None
    ]
    return Layout.of(read.identity.size, [*read.parsed, *covered], read.framing)


def _unchanged_arrays(path: Path, identity: FileIdentity, pair: tuple[str, Any]) -> list[_Array]:
    """A value's arrays, hashed only while the file is what it was when read. A tensor read from the file
    checks that itself; an array unpickled into memory (NumPy's, or one torch built) would otherwise
    outlive a change that the file's own sha256 sees."""
    arrays = _arrays_from([pair])
    if isinstance(pair[1], SavedTensor):
        return arrays
    return [replace(a, buffers=_checked(path, identity, a.buffers)) for a in arrays]


def _checked(path: Path, identity: FileIdentity, buffers: Buffers) -> Buffers:
    """``buffers``, after checking that the file is still ``identity`` (FileChanged if not)."""

    def checked(budget: int) -> Iterator[bytes | memoryview]:
        check_unchanged(path, identity)
        yield from buffers(budget)

    return checked
