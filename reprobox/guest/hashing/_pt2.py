"""torch.export's PT2 archives (``torch.export.save``, ``torch.export.pt2_archive``'s ``package_pt2``), read
by the PT2 archive spec (``torch/export/pt2_archive/constants.py``) without torch and without running them.

An archive holds, under ``<archive>/`` (``_torch_archive``): ``archive_format`` (``pt2``) and
``archive_version``; for each model ``models/<model>.json`` (the serialized ExportedProgram: its graph, its
signature, each node's stack trace), ``data/weights/<model>_weights_config.json`` and
``data/constants/<model>_constants_config.json`` (for each weight and constant by FQN, the member that
holds it and its dtype, sizes, strides and storage offset), the members those name (``weight_<n>``,
``tensor_<n>``: a storage's raw bytes, shared by every tensor that views it; for a tensor subclass or an
object, a ``torch.save`` or pickle of it), and ``data/sample_inputs/<model>.pt``, a ``torch.save`` of the
example inputs; ``extra/``, files the caller added; the format's version, byte order and serialization id.

Names: each weight and constant by its FQN (``fc.weight``; ``<model>/fc.weight`` in a model not named
``model``), its tensor read from the member its config names; every other member's values under its path
(``models/model.json/graph_module.graph.nodes.0.target``, ``data/sample_inputs/model.pt/0.0``,
``archive_format``). AOTInductor's compiled artifacts (``data/aotinductor/``), ExecuTorch's and any other
member are not read: they are gaps, named in the note.
"""

from __future__ import annotations

import functools
import zipfile
from pathlib import Path

from reprobox.guest.hashing._bounds import MAX_ELEMENTS, check_shape
from reprobox.guest.hashing._filebytes import FileSpan
from reprobox.guest.hashing._pickle_objects import StorageRef, TensorSpec
from reprobox.guest.hashing._torch_archive import TorchArchive, open_archive
from reprobox.guest.hashing._torch_archive_read import ArchiveRead, loader, planner
from reprobox.guest.hashing._torch_types import DTYPES, SavedTensor

READER_NAME = "PT2 archive reader"
NOTE = (
    "a PT2 archive (torch.export): its graph is compared as values, never run; its pickled parts read by "
    "the safe pickle reader, which imports and runs nothing named in the file"
)
BOUNDS = (
    "a torch zip's member count and expansion; JSON members 64 MiB and 1,000,000 entries each, 200 levels; "
    "every weight's dtype one of the schema's, its shape as every reader's and its view inside its member; "
    "pickled members through the safe pickle reader's bounds, each copied to a private temporary file"
)
_DEFAULT_MODEL = "model"
_STRIDED = 7  # torch._export.serde.schema.Layout.Strided
SCALAR_TYPES = {
    1: "uint8",
    2: "int8",
    3: "int16",
    4: "int32",
    5: "int64",
    6: "float16",
    7: "float32",
    8: "float64",
    9: "complex32",
    10: "complex64",
    11: "complex128",
    12: "bool",
    13: "bfloat16",
    28: "uint16",
    29: "float8_e4m3fn",
    30: "float8_e5m2",
    31: "float8_e4m3fnuz",
    32: "float8_e5m2fnuz",
    33: "float8_e8m0fnu",
    34: "uint32",
    35: "uint64",
}
"""``torch._export.serde.schema.ScalarType``: each dtype's number in a ``tensor_meta``."""


def read_pt2(path: Path) -> ArchiveRead:
    """The archive's members, as the module's docstring names them; ValueError (OverLimit for a limit)
    when its models, their configs or the weights they name cannot be read."""
    with open_archive(path, "pt2", READER_NAME) as archive:
        archive.read.note = NOTE
        archive.framing_or_id()
        for name in ("archive_format", "archive_version"):
            if name in archive.members:
                archive.read.add(name, archive.text(name), archive.span(name))
        for name in list(archive.order):
            model = name.removeprefix("models/").removesuffix(".json")
            if name == f"models/{model}.json" and "/" not in model:
                _model(archive, model)
        for name in archive.order:
            if name in archive.taken:
                continue
            if name.startswith("extra/"):
                archive.optional(name, archive.text_or_bytes)
            elif name.startswith("data/") and name.endswith(".pt"):  # an older archive's weights file
                archive.tolerant(name, functools.partial(archive.nested, name, name))
        return archive.finish()


def _model(archive: TorchArchive, model: str) -> None:
    """One model: its program as values, its weights and constants by FQN, its sample inputs."""
    program = f"models/{model}.json"
    archive.read.add(program, archive.json(program), archive.span(program))
    for folder, config in (
        ("data/weights/", f"data/weights/{model}_weights_config.json"),
        ("data/constants/", f"data/constants/{model}_constants_config.json"),
    ):
        if config in archive.members:
            document = archive.json(config)
            archive.read.add(config, document, archive.span(config))
            _payloads(archive, model, folder, config, document)
    inputs = f"data/sample_inputs/{model}.pt"
    if inputs in archive.members:
        archive.tolerant(inputs, functools.partial(archive.nested, inputs, inputs))


def _payloads(archive: TorchArchive, model: str, folder: str, config: str, document: object) -> None:
    """Each weight or constant a config lists, read from the member it names."""
    entries = document.get("config") if isinstance(document, dict) else None
    if not isinstance(entries, dict):
        raise ValueError(f"member '{config}' holds no config mapping")
    storages = _RawMembers(archive)
    for fqn, meta in entries.items():
        name = fqn if model == _DEFAULT_MODEL else f"{model}/{fqn}"
        path_name = meta.get("path_name") if isinstance(meta, dict) else None
        member = f"{folder}{path_name}"
        if not isinstance(path_name, str) or "/" in path_name or member not in archive.members:
            raise ValueError(f"payload '{fqn}' of {config} names no member of {folder} the archive holds")
        if meta.get("use_pickle") is True:  # a tensor subclass or an object: a file of its own
            archive.nested(member, name)
        else:
            archive.read.add_tensors([(name, _raw_tensor(archive, storages, member, fqn, meta))])
            archive.taken.add(member)


def _raw_tensor(
    archive: TorchArchive, storages: _RawMembers, member: str, fqn: str, meta: dict[str, object]
) -> object:
    """A weight or constant over a member's raw bytes, viewed as its ``tensor_meta`` says."""
    tensor_meta = meta.get("tensor_meta")
    if not isinstance(tensor_meta, dict):
        raise ValueError(f"payload '{fqn}' has no tensor_meta")
    number = tensor_meta.get("dtype")
    dtype = DTYPES.get(SCALAR_TYPES.get(number, "")) if type(number) is int else None
    if dtype is None:
        raise ValueError(f"payload '{fqn}' has a dtype the PT2 schema does not list ({str(number)[:20]})")
    if tensor_meta.get("layout") != _STRIDED:
        raise ValueError(f"payload '{fqn}' is not a strided tensor, the only layout saved as raw bytes")
    what = f"payload '{fqn}'"
    size = check_shape(_ints(tensor_meta.get("sizes"), what), what)
    stride = _ints(tensor_meta.get("strides"), what)
    (offset,) = _ints([tensor_meta.get("storage_offset")], what)
    nbytes = archive.members[member][0].file_size
    if nbytes == 0:  # torch.load makes zeros of it: a tensor saved without bytes
        return SavedTensor(dtype, size, None)
    return archive.maker.tensor(TensorSpec(StorageRef(storages, member, dtype, nbytes), offset, size, stride))


def _ints(values: object, what: str) -> tuple[int, ...]:
    """A list of serialized SymInts that are all plain integers (``{"as_int": 3}``), each within bounds."""
    if not isinstance(values, list):
        raise ValueError(f"{what} has sizes, strides or an offset that are not a list")
    out = []
    for value in values:
        number = value.get("as_int") if isinstance(value, dict) and len(value) == 1 else None
        if type(number) is not int or not 0 <= number <= MAX_ELEMENTS:
            raise ValueError(f"{what} has a size, stride or offset that is no integer in bounds (a symbol?)")
        out.append(number)
    return tuple(out)


class _RawMembers:
    """The members a config names as raw storages, found in place in the file (``TensorMaker``'s source)."""

    def __init__(self, archive: TorchArchive) -> None:
        self._archive = archive

    def storage_span(self, key: str, nbytes: int) -> FileSpan:
        info, span = self._archive.members[key]
        if info.compress_type != zipfile.ZIP_STORED or span is None:
            raise ValueError(f"member '{key}' is compressed, which torch's writer never does")
        return self._archive.file.span(span[0], nbytes)


plan_pt2 = planner(read_pt2, "PT2")
"""The table's plan for a PT2 archive (recognised by ``_sniff.is_pt2``)."""
load_pt2 = loader(read_pt2, "PT2")
