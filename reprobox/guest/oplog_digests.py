"""What the op log (`reprobox.guest.oplog`) says of each value an operation reads or writes.

A tensor's digest is the sha256 of its bytes (on a GPU the on-device checksum of
`reprobox.guest.tensorhash`), cached per tensor until it is written to. Some results get a digest
without hashing: a view's is derived from its inputs' (equal inputs, equal views), and uninitialised
memory (`empty`, `set_`) is marked as such, since its bytes differ from run to run and mean nothing. A
random draw carries the digest of its generator's state before it; a non-tensor argument is text with
no addresses in it. `OpFacts` are what these depend on, worked out once per operator.
"""

from __future__ import annotations

import hashlib
import re
import weakref
from types import ModuleType
from typing import Any

from reprobox.guest.tensorhash import device_checksum

DIGEST_CHARS = 32
NUMPY_DTYPES = ("float32", "float64", "float16", "int64", "int32", "int16", "int8", "uint8", "bool")
# Operations whose result is uninitialised memory: its bytes differ from run to run and mean nothing.
UNINITIALISED = frozenset(
    ("empty", "empty_like", "new_empty", "empty_strided", "new_empty_strided", "empty_permuted")
)
UNINITIALISED_DIGEST = "uninitialised"
VIEW_DIGEST = "view:"
# `set_` points a tensor at a storage whose bytes may be fresh memory (deepcopy makes one, then copies).
UNINITIALISED_AFTER = UNINITIALISED | {"set_"}
# In-place operations that overwrite their first argument without reading it: its old bytes (often
# uninitialised memory) are no input. An `out=` argument is the same.
OVERWRITES = frozenset(
    (
        "copy_",
        "fill_",
        "zero_",
        "set_",
        "random_",
        "uniform_",
        "normal_",
        "bernoulli_",
        "exponential_",
        "geometric_",
        "cauchy_",
        "log_normal_",
    )
)
OVERWRITTEN = "<overwritten>"
ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


class OpFacts:
    """What recording needs to know of an operator, worked out once per operator."""

    __slots__ = ("base", "bitwise", "name", "overwrites", "seeded", "view")

    def __init__(self, torch: ModuleType, func: Any) -> None:
        schema = getattr(func, "_schema", None)
        overload = getattr(func, "_overloadname", "")
        qualified = str(schema.name) if schema is not None else str(func)
        self.name = qualified + (f".{overload}" if overload and overload != "default" else "")
        self.base = qualified.partition("::")[2]
        self.overwrites = self.base in OVERWRITES
        tags = getattr(func, "tags", ())
        self.seeded = torch.Tag.nondeterministic_seeded in tags
        self.bitwise = torch.Tag.nondeterministic_bitwise in tags
        # A view: every result aliases an input the op does not write (view, t, expand, detach...),
        # so equal inputs give equal views.
        infos = [getattr(r, "alias_info", None) for r in getattr(schema, "returns", None) or ()]
        self.view = bool(infos) and all(info is not None and not info.is_write for info in infos)


class TensorDigests:
    """Tensor digests, each cached until its tensor is written to (its version changes) or freed."""

    def __init__(self, torch: ModuleType) -> None:
        self.torch = torch
        self.cache: dict[int, tuple[Any, int, str]] = {}

    def digest(self, tensor: Any) -> str:
        """sha256 of the tensor's bytes (on a GPU, a checksum computed on the device), cached per version."""
        key = id(tensor)
        try:
            version = tensor._version
        except (RuntimeError, AttributeError):  # inference tensors keep no version: no cache
            return self._digest(tensor)
        cached = self.cache.get(key)
        if cached is not None and cached[0]() is tensor and cached[1] == version:
            return cached[2]
        digest = self._digest(tensor)
        self.remember(tensor, digest)
        return digest

    def remember(self, tensor: Any, digest: str) -> None:
        """Cache a tensor's digest until it is written to (its version changes) or freed."""
        if not isinstance(tensor, self.torch.Tensor):
            return
        try:
            version = tensor._version
        except (RuntimeError, AttributeError):
            return
        key = id(tensor)
        cache = self.cache

        def forget(_ref: object) -> None:
            cache.pop(key, None)

        try:
            ref = weakref.ref(tensor, forget)
        except TypeError:
            return
        self.cache[key] = (ref, version, digest)

    def owns_no_bytes(self, tensor: Any) -> bool:
        """Whether the tensor's digest was given, not hashed: uninitialised memory, or a view."""
        return self.cache.get(id(tensor), (None, None, ""))[2].startswith((UNINITIALISED_DIGEST, VIEW_DIGEST))

    def _digest(self, tensor: Any) -> str:
        torch = self.torch
        if tensor.layout != torch.strided or tensor.device.type == "meta":
            return f"{tensor.layout}:{tensor.device.type}"
        data = tensor.detach()
        if data.is_conj():
            data = data.resolve_conj()
        if data.is_neg():
            data = data.resolve_neg()
        if data.device.type != "cpu":
            return device_checksum(torch, data)
        raw = self.raw(data)
        return hashlib.sha256(raw).hexdigest()[:DIGEST_CHARS]

    def raw(self, data: Any) -> memoryview:
        """A CPU tensor's bytes, in order, as one flat view."""
        torch = self.torch
        flat = data.contiguous().reshape(-1)
        if flat.numel() == 0:
            return memoryview(b"")
        if str(flat.dtype).removeprefix("torch.") not in NUMPY_DTYPES:
            flat = flat.view(torch.uint8) if flat.element_size() == 1 else _as_bytes(torch, flat)
        return memoryview(flat.numpy()).cast("B")

    def generator(self, kwargs: dict[str, Any], inputs: list[Any]) -> str:
        """For a random draw, the digest of the generator's state before it: equal states, equal draws."""
        torch = self.torch
        generator = kwargs.get("generator")
        if generator is None:
            device = next((x.device for x in inputs if isinstance(x, torch.Tensor)), None)
            device = kwargs.get("device") or device or torch.device("cpu")
            device = torch.device(device)
            if device.type == "cuda":
                generator = torch.cuda.default_generators[device.index or torch.cuda.current_device()]
            else:
                generator = torch.default_generator
        state = generator.get_state()
        return hashlib.sha256(state.numpy().tobytes()).hexdigest()[:DIGEST_CHARS]


def view_digest(name: str, inputs: list[dict[str, Any]], position: int, tensor: Any) -> str:
    """A view's digest, from its layout and its inputs' digests: its bytes are theirs."""
    if not hasattr(tensor, "stride"):
        return UNINITIALISED_DIGEST
    layout = (
        f"{name}|{position}|{list(tensor.shape)}|{tensor.stride()}|{tensor.storage_offset()}|{tensor.dtype}"
    )
    text = layout + "|" + "|".join(str(arg.get("d") or arg.get("v")) for arg in inputs)
    return VIEW_DIGEST + hashlib.sha256(text.encode()).hexdigest()[: DIGEST_CHARS - 5]


def value_text(torch: ModuleType, value: Any) -> str:
    """A non-tensor argument as text that is equal in two runs when the value is (no addresses)."""
    if isinstance(value, (torch.UntypedStorage, torch.TypedStorage)):
        return f"<storage of {value.nbytes()} bytes>"
    text = ADDRESS.sub("", repr(value))
    return text if len(text) <= 200 else "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def _as_bytes(torch: ModuleType, flat: Any) -> Any:
    """A view of a tensor's bytes as uint8, for dtypes NumPy lacks (bfloat16, float8, complex32...)."""
    if flat.is_complex():
        flat = torch.view_as_real(flat).reshape(-1)
    return flat.view(torch.uint8)
