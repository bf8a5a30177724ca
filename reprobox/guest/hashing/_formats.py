"""Reading each checkpoint format without running anything from it: torch, pickle, safetensors, NumPy.

A reader plans one file's hashing: the tensors to hash and the digests of its plain values, or the
plain-file fallback with a note saying why the content could not be read safely. Torch files are read
by ``torch.load(weights_only=True)`` first (fast, memory-mapped); what it refuses, and plain pickles,
go to the safe pickle reader (``_pickle``), which imports and runs nothing named in the file.
Safetensors files are read in ``_safetensors``, NumPy files in ``_numpy_files``, text in ``_text``, and
logging tools' files (TensorBoard, MLflow, W&B) in ``_logformats``, recognised by their name and place.
"""

from __future__ import annotations

import pickle
import warnings
from pathlib import Path

from reprobox.guest.hashing import _sniff
from reprobox.guest.hashing._arrays import _arrays_from, _Content, _first_sentence, _opaque, _refused
from reprobox.guest.hashing._bounds import check_zip_members, limit_reason, over_limit
from reprobox.guest.hashing._canonical import _metadata_digests, flatten
from reprobox.guest.hashing._pickle import PICKLE_SUFFIXES, READER_NAME, read_pickle

TORCH_SUFFIXES = frozenset({".pt", ".pth", ".bin", ".ckpt"})
WEIGHTS_ONLY_READER = "torch.load(weights_only=True)"


def is_torch_file(path: Path) -> bool:
    """A ``torch.save`` file: by its first bytes (``checkpoint.pth.tar``), else by a torch suffix unless
    its bytes are another container's (a zip without ``data.pkl`` is an archive). A ``.pkl`` suffix
    names the pickle reader, whatever the bytes."""
    suffix = _sniff.suffix(path)
    if suffix in PICKLE_SUFFIXES:
        return False
    if _sniff.pickled_kind(path) == "torch":
        return True
    return suffix in TORCH_SUFFIXES and _sniff.head(path)[:4] not in (b"PK\x03\x04", b"PK\x05\x06")


def _refused_reason(exc: pickle.UnpicklingError) -> str:
    """The one line of torch's long refusal message that names what was refused."""
    text = str(exc)
    marker = "WeightsUnpickler error:"
    if marker in text:
        text = text.split(marker, 1)[1]
    boilerplate = ("Weights only load failed", "Check the documentation")
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    lines = [line for line in lines if not line.startswith(boilerplate)]
    return _first_sentence(lines[0]) if lines else type(exc).__name__


def _fallback_note(why: str) -> str:
    return (
        f"{why}; read by the safe pickle reader, which imports and runs nothing named in the file, "
        "so objects it names are recorded as their class, arguments and state"
    )


def _weights_only_failure(exc: Exception) -> str:
    """Why ``torch.load(weights_only=True)`` did not read the file, in one short clause."""
    if isinstance(exc, pickle.UnpicklingError):
        return f"{WEIGHTS_ONLY_READER} refused the file ({_refused_reason(exc)})"
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    reason = _first_sentence(lines[0]) if lines else type(exc).__name__
    return f"{WEIGHTS_ONLY_READER} could not read the file ({reason})"


def _torch_load(path: Path) -> object:
    import torch

    with path.open("rb") as f:
        zip_format = f.read(4) == b"PK\x03\x04"  # only the zip format can be memory-mapped
    if zip_format:
        check_zip_members(path, "the archive")  # before torch reads its whole directory
    with warnings.catch_warnings():  # e.g. TorchScript archives: refused below, no need to warn too
        warnings.simplefilter("ignore")
        return torch.load(path, weights_only=True, mmap=zip_format, map_location="cpu")


def _plan_torch(path: Path) -> _Content:
    try:
        obj = _torch_load(path)
    except OSError:
        raise
    except Exception as exc:  # noqa: BLE001 - torch raises many types for a refused, damaged or foreign file
        return _plan_pickle(path, why=_weights_only_failure(exc))
    try:
        named_arrays, values = flatten(obj)
    except (ValueError, RecursionError) as exc:
        return _refused("torch", exc)
    return _Content(
        format="torch",
        arrays=_arrays_from(named_arrays),
        metadata=_metadata_digests(values),
        keepalive=obj,
        reader=WEIGHTS_ONLY_READER,
    )


def _plan_pickle(path: Path, why: str | None = None) -> _Content:
    """A pickled file through the safe reader; ``why`` says why torch's own loader did not read it."""
    try:
        read = read_pickle(path)
        named_arrays, values = flatten(read.obj)
    except (ValueError, RecursionError) as exc:
        if why is None:
            return _refused("pickle", exc)
        return _opaque(
            f"content not hashed: {why} and the safe pickle reader could not read it either "
            f"({_first_sentence(limit_reason(exc))}); the content hash is the file sha256",
            limit_reason(exc) if over_limit(exc) else None,
        )
    return _Content(
        format=read.container,
        arrays=_arrays_from(named_arrays),
        metadata=_metadata_digests(values),
        note=_fallback_note(why) if why is not None else None,
        keepalive=read,
        reader=READER_NAME,
    )
