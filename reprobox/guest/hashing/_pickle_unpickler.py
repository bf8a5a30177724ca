"""The safe pickle reader's unpickler: globals come from our own table or become stand-ins, nothing is
imported, and the opcodes are checked against the data before anything is unpickled."""

from __future__ import annotations

import pickle
import pickletools
from collections.abc import Callable
from typing import IO, Any

from reprobox.guest.hashing._bounds import OverLimit, check_cpu_budget
from reprobox.guest.hashing._pickle_globals import MODULE_ALIASES, SAFE_CALLABLES
from reprobox.guest.hashing._pickle_objects import NdarrayType, StorageType, stand_in_class
from reprobox.guest.hashing._torch_types import DTYPES, QSCHEMES, STORAGE_DTYPES

_MAX_GLOBALS = 10_000


class Globals:
    """The globals one pickle names: ours from the table, or inert stand-ins; nothing is imported."""

    def __init__(self) -> None:
        self._classes: dict[str, object] = {}
        self.names: dict[int, str] = {}  # id(global) -> "module.Name", for globals used as values

    def find(self, module: str, name: str) -> Any:
        if not isinstance(module, str) or not isinstance(name, str):
            raise ValueError("a global is named by something other than text")
        module = MODULE_ALIASES.get(module, module)
        qualified = f"{module}.{name}"
        if qualified not in self._classes:
            if len(self._classes) >= _MAX_GLOBALS:
                raise OverLimit(f"the pickle names more than {_MAX_GLOBALS} globals")
            found = _known_global(module, name)
            self._classes[qualified] = found if found is not None else stand_in_class(qualified)
            self.names[id(self._classes[qualified])] = qualified
        return self._classes[qualified]


class SafeUnpickler(pickle.Unpickler):
    """Globals come from our table or are stand-ins; persistent ids go to the container's callback."""

    def __init__(self, stream: IO[bytes], persistent: Callable[[object], object]) -> None:
        super().__init__(stream, encoding="latin1")  # py2 str
        self._persistent = persistent
        self._globals = Globals()
        self.global_names = self._globals.names

    def find_class(self, module: str, name: str) -> Any:
        return self._globals.find(module, name)

    def persistent_load(self, pid: Any) -> Any:
        return self._persistent(pid)


def _known_global(module: str, name: str) -> object | None:
    safe = SAFE_CALLABLES.get((module, name))
    if safe is not None:
        return safe
    if module in ("numpy", "numpy.core.multiarray", "numpy._core.multiarray") and name == "ndarray":
        return NdarrayType()
    if module in ("torch", "torch.storage"):
        storage = _storage_types().get(name)
        if storage is not None:
            return storage
    if module == "torch":
        return _torch_values().get(name)
    return None


def _storage_types() -> dict[str, StorageType]:
    return {name: StorageType(name, dtype) for name, dtype in STORAGE_DTYPES.items()}


def _torch_values() -> dict[str, object]:
    """torch's dtypes and quantization schemes by name (``torch.float32`` pickled as a global)."""
    return {**DTYPES, **QSCHEMES}


MEMORY_PER_DATA_BYTE = 16
MEMORY_FLOOR = 256 << 20
"""What unpickling may cost in memory: this many bytes per byte of pickle data, plus the floor. A genuine
pickle builds a few bytes of objects per byte; a run of one-byte opcodes that each push a new set (216
bytes) or list onto the stack costs two hundred times the data, and is refused before it is built."""

OPCODE_COST = {
    "EMPTY_SET": 216,
    "FROZENSET": 216,
    "EMPTY_DICT": 64,
    "DICT": 64,
    "EMPTY_LIST": 56,
    "LIST": 56,
    "TUPLE": 56,
    "TUPLE1": 48,
    "TUPLE2": 56,
    "TUPLE3": 64,
    "BINFLOAT": 24,
    "FLOAT": 24,
    "NEWOBJ": 200,
    "NEWOBJ_EX": 200,
    "REDUCE": 200,
    "OBJ": 200,
    "INST": 200,
    "BUILD": 64,
    "SETITEM": 32,
    "SETITEMS": 32,
    "APPEND": 8,
    "APPENDS": 8,
    "ADDITEMS": 64,
}
OPCODE_FLOOR_COST = 16  # a stack slot, and the walk itself
_OPS_PER_BUDGET_CHECK = 1 << 16  # the file's CPU budget, checked as the opcodes are walked


def _opcode_cost(name: str, arg: object) -> int:
    """Roughly the bytes of objects an opcode makes the unpickler hold (CPython's object sizes)."""
    if isinstance(arg, (str, bytes, bytearray)):
        return len(arg) + 56
    if isinstance(arg, int) and name.startswith("LONG"):
        return arg.bit_length() // 8 + 32
    return OPCODE_COST.get(name, OPCODE_FLOOR_COST)


def _check_opcodes(stream: IO[bytes], end: int) -> None:
    """Walk the opcodes before unpickling: counted data, frames and memo indices must fit the file, and
    what they would build must fit the memory budget (``MEMORY_PER_DATA_BYTE``)."""
    start = stream.tell()
    budget = MEMORY_PER_DATA_BYTE * max(0, end - start) + MEMORY_FLOOR
    for ops, (op, arg, pos) in enumerate(pickletools.genops(stream), start=1):
        if not ops % _OPS_PER_BUDGET_CHECK:
            check_cpu_budget(f"{ops} opcodes of the pickle checked")
        budget -= _opcode_cost(op.name, arg)
        if budget < 0:
            raise OverLimit(
                f"the pickle would build far more objects than its {end - start} bytes hold "
                f"(over {MEMORY_PER_DATA_BYTE} bytes of memory per byte)"
            )
        number = arg if isinstance(arg, int) else 0
        if op.name == "PROTO" and not 0 <= number <= pickle.HIGHEST_PROTOCOL:
            raise ValueError(f"unknown pickle protocol {arg}")
        if op.name == "FRAME" and number > end - (pos or 0):
            raise OverLimit("a pickle frame runs past the end of the data")
        if op.name in ("PUT", "BINPUT", "LONG_BINPUT") and number > ops:
            raise ValueError("a pickle memo index is out of range")
    stream.seek(start)


def load_checked(unpickler: SafeUnpickler, stream: IO[bytes], end: int) -> object:
    _check_opcodes(stream, end)
    return unpickler.load()


class NoStorages:
    def refuse(self, pid: object) -> object:
        raise ValueError("a plain pickle refers to persistent ids, which only torch files define")
