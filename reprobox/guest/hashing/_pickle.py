"""A structural reader for pickled checkpoints that imports and runs nothing named in the file.

Every torch file is read here, without torch. ``torch.load(weights_only=True)`` would refuse whole
files for one foreign global: ``torch.save(model)``,
timm's ``.pth.tar`` (its parsed command-line ``Namespace``), Hugging Face's ``training_args.bin`` and
``rng_state.pth``, Lightning's ``.ckpt`` (``AttributeDict``), plain ``.pkl`` files. This reader still
yields their tensors and plain values. It is a ``pickle.Unpickler`` whose ``find_class`` never imports:
a small table of known globals (torch tensors and storages, NumPy arrays, dtypes and scalars,
``OrderedDict``, ``set``, ``bytes``, a ``datetime`` as its ISO 8601 text, and the like) is rebuilt by
our own functions, and every other global becomes an inert stand-in class that records its arguments,
state and items. Tensor bytes are read from the file itself, never through ``torch.load``: each tensor
is a span of the file, read by ``pread`` only when it is hashed (``_filebytes``), so a file cut short or
replaced meanwhile raises ``FileChanged`` rather than killing the process with SIGBUS as a memory map
would. Comparison reads them the same way, one tensor at a time (``_load``).

``fickling`` is not used: it decides whether a pickle is safe to hand to the real unpickler (by an
allowlist of imports) or decompiles it to Python source, but it yields no values without running the
allowed globals, and it would be one more locked dependency in every job image.

Containers: torch's zip format (``<archive>/data.pkl`` with storages in ``<archive>/data/<key>``),
torch's legacy non-zip format (a magic number, then pickles, then raw storages) and plain pickles of
protocol 0 to 5, and joblib.dump's files, whose arrays follow their pickled descriptions as raw bytes
(``_pickle_joblib``). Torch's pre-1.0 tar format is refused.

A stand-in becomes a mapping, so its fields get dotted names like any other mapping's:

- ``__class__``: the ``module.Name`` the pickle named (``args.__class__ = "train.Config"``);
- its state's keys, merged in (``args.output``, ``_modules.fc._parameters.weight``), then the items
  set on it (``AttributeDict`` keys, ``hyper_parameters.lr``);
- ``__args__`` and ``__kwargs__``: what the class was called with (``SchedulerType("linear")``),
  ``__state__``: a state that is not a mapping, ``__items__``: items appended to it,
  ``__attribute__``: the member of ``getattr(Class, "MEMBER")`` (how enums pickle).

A global used as a value is its ``"module.Name"`` string; NumPy scalars become Python scalars; NumPy
arrays of other than plain numeric dtypes become ``{"__class__": "numpy.ndarray", "dtype", "shape",
"data"}``; an object reached again while it is being read is ``"<cycle: module.Name>"``.

A malformed, truncated or hostile file raises ``ValueError`` with a short reason: the opcodes are
checked against the data before anything is unpickled, and nesting depth, expanded size and the bytes
tensors span are bounded.

The unpickler and its table of globals are in ``_pickle_unpickler``, torch's two containers in
``_pickle_torch``, the placeholders and the functions that build them in ``_pickle_objects`` and
``_pickle_globals``, and the turning of all that into plain data in ``_pickle_plain`` and
``_pickle_arrays``.
"""

from __future__ import annotations

import io
import pickle
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from reprobox.guest.hashing._bounds import MAX_NESTING, OverLimit, expansion_budget, limit_reason, over_limit
from reprobox.guest.hashing._filebytes import FileIdentity
from reprobox.guest.hashing._layout import Span
from reprobox.guest.hashing._pickle_arrays import TensorMaker
from reprobox.guest.hashing._pickle_plain import Plainer
from reprobox.guest.hashing._pickle_torch import OpenFile, read_legacy, read_zip
from reprobox.guest.hashing._pickle_unpickler import NoStorages, SafeUnpickler, load_checked
from reprobox.guest.hashing._sniff import LEGACY_MAGIC, ZIP_MAGIC
from reprobox.guest.hashing._zipdamage import ZIP_DAMAGE

READER_NAME = "safe pickle reader"


_ERRORS: tuple[type[Exception], ...] = (
    *ZIP_DAMAGE,
    pickle.UnpicklingError,
    TypeError,
    AttributeError,
    OverflowError,
    RecursionError,
    MemoryError,
)


@dataclass(frozen=True)
class PickleRead:
    """A pickled file as plain data: dicts, lists, tuples, scalars, tensors and NumPy arrays."""

    obj: object
    container: str  # "torch" (zip or legacy torch.save) or "pickle"
    identity: FileIdentity  # what the file was when it was read: its tensors are read only while it still is
    parsed: tuple[Span, ...] = ()  # the bytes read as pickles (``_layout``)
    framing: tuple[Span, ...] = ()  # the container's own (a zip's headers and directory, torch's version)


def read_pickle(path: Path) -> PickleRead:
    """The file's object tree, without importing or running anything it names; ValueError if unreadable
    (OverLimit, a ValueError, when a limit refused it).

    Tensors are read by ``pread`` each time their values are asked for (FileChanged, an OSError, if the
    file changed since).
    """
    with path.open("rb") as stream:
        identity = FileIdentity.of(stream.fileno())
        if identity.size == 0:
            raise ValueError("the file is empty")
        head = stream.read(len(LEGACY_MAGIC))
        stream.seek(0)
        file = OpenFile(path, stream, identity)
        try:
            if head.startswith(ZIP_MAGIC):
                unpickled = read_zip(file)
                container = "torch"
            elif head.startswith(LEGACY_MAGIC):
                unpickled = read_legacy(file)
                container = "torch"
            else:  # joblib's arrays after their wrappers, too (its reader is loaded for plain pickles only)
                from reprobox.guest.hashing._pickle_joblib import read_plain

                unpickled = read_plain(file)
                container = "pickle"
            tensors = TensorMaker(expansion_budget(identity.size), unpickled.big_endian)
            plain = Plainer(unpickled.global_names, tensors).plain(unpickled.obj)
        except _ERRORS as exc:
            raise (OverLimit if over_limit(exc) else ValueError)(_reason(exc)) from None
    return PickleRead(plain, container, identity, unpickled.parsed, unpickled.framing)


EMBEDDED_BUDGET = 1 << 30
"""The bytes the arrays of a pickle held inside another file may span (it refers to no storages)."""


def read_pickle_bytes(data: bytes) -> object:
    """A plain pickle held inside another file (a value of a JSON document), as plain data, read as
    ``read_pickle`` reads a file; ValueError if unreadable (OverLimit when a limit refused it)."""
    return read_held_pickle(data, NoStorages().refuse, TensorMaker(EMBEDDED_BUDGET))


def read_held_pickle(data: bytes, persistent: Callable[[object], object], tensors: TensorMaker) -> object:
    """A pickle held in memory, read to its last byte, as plain data: its persistent ids go to
    ``persistent`` (a torch archive's storages), its tensors are built by ``tensors``; ValueError if
    unreadable (OverLimit when a limit refused it)."""
    if not data:
        raise ValueError("the pickle is empty")
    stream = io.BytesIO(data)
    try:
        unpickler = SafeUnpickler(stream, persistent)
        obj = load_checked(unpickler, stream, len(data))
        if stream.tell() != len(data):
            raise ValueError(f"{len(data) - stream.tell()} bytes follow the pickle")
        return Plainer(unpickler.global_names, tensors).plain(obj)
    except _ERRORS as exc:
        raise (OverLimit if over_limit(exc) else ValueError)(_reason(exc)) from None


def _reason(exc: BaseException) -> str:
    if isinstance(exc, RecursionError):
        return f"the pickle nests too deeply (deeper than the {MAX_NESTING} levels read)"
    if isinstance(exc, MemoryError):
        return "the pickle asks for more memory than there is"
    return limit_reason(exc)
