"""TorchScript archives (``torch.jit.save`` of a scripted or traced module), read member by member without
torch and without running their code.

An archive holds, under ``<archive>/`` (``_torch_archive``): ``data.pkl``, the module's attributes, its
parameters and buffers over storages in ``data/``; ``constants.pkl``, the tensors the code names
``CONSTANTS.c0``, ``CONSTANTS.c1`` ... over storages in ``constants/``; a traced module's
``traced_inputs.pkl`` over ``traced_inputs/``; ``code/``, the TorchScript source of each class, and
beside each file its ``.debug_pkl`` (the source ranges it came from: file names, lines and the traced
stack); ``extra/``, the files the caller added (``_extra_files``); and the format's version, byte order
and serialization id.

Names: ``data.pkl``'s by their place in the module (``fc.weight``, ``training``, ``__class__`` the
TorchScript class the pickle names), as a ``torch.save`` of the module would; any other member's under
its path: ``constants.pkl/c0``, ``traced_inputs.pkl/...``, ``code/__torch__.py`` (its text),
``code/__torch__.py.debug_pkl/...``, ``extra/<name>``. Every pickle goes through the safe pickle reader:
the classes it names are recorded as their name and state, never imported; the code is a value, never
compiled or run. A member that cannot be read (a pickle naming a storage its archive lacks), and any member
of another kind (a mobile ``bytecode.pkl``'s companions), is a gap, named in the note.
"""

from __future__ import annotations

from pathlib import Path

from reprobox.guest.hashing._torch_archive import TorchArchive, open_archive
from reprobox.guest.hashing._torch_archive_read import ArchiveRead, loader, planner

READER_NAME = "TorchScript archive reader"
NOTE = (
    "a TorchScript archive: its code is compared as text, never compiled or run; its pickles read by the "
    "safe pickle reader, which imports and runs nothing named in the file"
)
BOUNDS = (
    "a torch zip's member count and expansion; each pickle at most 1 GiB, by the safe pickle reader's "
    "nesting, expansion and storage bounds, its storages inside the file; code and extra files 64 MiB each"
)
_PICKLE = ".pkl"
_DEBUG = ".debug_pkl"


def read_torchscript(path: Path) -> ArchiveRead:
    """The archive's members, as the module's docstring names them; ValueError (OverLimit for a limit)
    when it holds no readable ``data.pkl``."""
    with open_archive(path, "torchscript", READER_NAME) as archive:
        archive.read.note = NOTE
        archive.framing_or_id()
        if "data.pkl" not in archive.members:
            raise ValueError("it holds no data.pkl")
        archive.read.add("", archive.pickle("data.pkl", "data/"), archive.span("data.pkl"))
        for name in archive.order:
            if name not in archive.taken:
                _member(archive, name)
        return archive.finish()


def _member(archive: TorchArchive, name: str) -> None:
    """One member besides ``data.pkl`` (a storage is its tensors'; a member of another kind, a gap)."""
    if name.startswith("code/"):
        archive.optional(name, lambda n: archive.pickle(n, None) if n.endswith(_DEBUG) else archive.text(n))
    elif name.startswith("extra/"):
        archive.optional(name, archive.text_or_bytes)
    elif name.endswith(_PICKLE) and "/" not in name:  # constants.pkl, traced_inputs.pkl
        archive.optional(name, lambda n: _pickled(archive, n))


def _pickled(archive: TorchArchive, name: str) -> object:
    """A pickle beside ``data.pkl``, over its own storages (``constants.pkl`` over ``constants/``)."""
    tree = archive.pickle(name, name.removesuffix(_PICKLE) + "/", shapes_only=name == "traced_inputs.pkl")
    if name == "constants.pkl" and isinstance(tree, tuple):  # named as the code names them
        return {f"c{index}": value for index, value in enumerate(tree)}
    return tree


plan_torchscript = planner(read_torchscript, "TorchScript")
"""The table's plan for a TorchScript archive (recognised by ``_sniff.is_torchscript``)."""
load_torchscript = loader(read_torchscript, "TorchScript")
