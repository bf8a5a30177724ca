"""Entropy containment: random generators created without a seed draw it from the job's seed instead.

Code such as `np.random.default_rng()`, `random.Random()` or `torch.Generator().seed()` asks the
operating system for a seed, so even a fully seeded job would differ on every run. Nothing in such code
needs true randomness, so inside a reprobox job every unseeded creation gets a seed derived from the job
seed. The n-th unseeded creation (n = 0, 1, ...) of a kind of generator at one call site gets::

    text  = f"reprobox-unseeded/1 {seed} {rank} {worker} {kind} {site} {n}"
    bytes = sha256(f"{text} 0") || sha256(f"{text} 1") || ...   (as many blocks as needed, UTF-8 text)
    value = the first `bits` bits of `bytes`, as a big-endian unsigned integer

where `seed` is REPROBOX_SEED, `rank` is RANK (0 when unset, as for the seeds reprobox sets), `worker`
is the DataLoader worker's own torch seed (`torch.utils.data.get_worker_info().seed`) inside a worker
and `-` elsewhere, so forked workers draw different streams; `site` is `module:function` of the code
that asked for the generator (the first frame outside the generator's own library; the function's
qualified name, its plain name on Python 3.10; `__mp_main__` counts as `__main__`), and `n` counts per
(seed, rank, worker, kind, site). Counting per call site keeps a job's seeds stable when a library or
a background thread creates generators of its own at moments that vary between runs. The kinds and
bit widths:

- `random.Random`, 128 bits: `random.Random()` and `random.Random(None)` (subclasses that keep its
  `seed` too), and `random.seed()` without an argument.
- `numpy.SeedSequence`, `pool_size * 32` bits (128 by default): the entropy of every unseeded NumPy
  generator, which all take it from one `SeedSequence()`: `np.random.default_rng()`,
  `np.random.SeedSequence()`, the bit generators (`PCG64()`, `Philox()`, `MT19937()`, ...),
  `np.random.RandomState()` and `np.random.seed()`.
- `torch.Generator:<device type>`, 64 bits (53 on CUDA, as torch itself draws there): every
  `Generator.seed()` call, which also covers `torch.seed()`, `torch.random.seed()`, `torch.cuda.seed()`
  and `torch.cuda.seed_all()`.

The objects keep their own types (only a factory's seed source or a method is replaced), so they pickle
and load without reprobox, and `isinstance`/`type(x) is ...` checks hold. Explicit seeds are untouched.
Sources of true randomness stay truly random: `os.urandom`, `uuid.uuid4`, `secrets`,
`random.SystemRandom`, and the `random.Random()` that `tempfile` creates for the names of temporary
files and of multiprocessing's semaphores, which must not repeat between processes running side by
side. `determinism: {seed_unseeded_generators: false}` turns all of this off.
"""

from __future__ import annotations

import itertools
import os
import sys

from reprobox.guest import settings

TYPE_CHECKING = False  # imported in every process of the job at start-up: typing costs more than all this
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from types import FrameType, ModuleType
    from typing import Any

SCHEME = "reprobox-unseeded/1"
RANDOM_KIND = "random.Random"
NUMPY_KIND = "numpy.SeedSequence"
TORCH_KIND = "torch.Generator"  # followed by ":" and the generator's device type
RANDOM_BITS = 128
TORCH_BITS = 64
TORCH_CUDA_BITS = 53

# Modules whose frames are the generator's own machinery, skipped to find the call site.
RANDOM_INTERNALS = ("random",)
NUMPY_INTERNALS = ("numpy",)  # and its submodules
TORCH_INTERNALS = ("torch.random", "torch.cuda.random")
# Call sites whose generators name things (temporary files, semaphores): they stay truly random.
TRULY_RANDOM_SITES = frozenset({"tempfile"})


class Origin(tuple[int, int, "int | None", str, str]):
    """Where an unseeded generator is created (seed, rank, worker, kind, site); each counts its own
    creations. A plain tuple, so it hashes and unpacks as one."""

    __slots__ = ()

    def __new__(cls, seed: int, rank: int, worker: int | None, kind: str, site: str) -> Origin:
        return super().__new__(cls, (seed, rank, worker, kind, site))


def derive_seed(origin: Origin, n: int, bits: int) -> int:
    """The seed for the n-th unseeded generator created at `origin`: the derivation documented above."""
    import hashlib

    seed, rank, worker, kind, site = origin
    text = f"{SCHEME} {seed} {rank} {'-' if worker is None else worker} {kind} {site} {n}"
    blocks = -(-bits // 256)
    stream = b"".join(hashlib.sha256(f"{text} {block}".encode()).digest() for block in range(blocks))
    return int.from_bytes(stream, "big") >> (len(stream) * 8 - bits)


def worker_seed() -> int | None:
    """The DataLoader worker's torch seed inside a worker, else None (never imports torch)."""
    data = sys.modules.get("torch.utils.data")
    get_worker_info = getattr(data, "get_worker_info", None)
    info = get_worker_info() if get_worker_info is not None else None
    return None if info is None else int(info.seed)


def call_site(frame: FrameType | None, internals: tuple[str, ...]) -> tuple[str, str]:
    """(module, function) of the first frame from `frame` outward that is not in `internals` or here."""
    while frame is not None:
        module = str(frame.f_globals.get("__name__", "?"))
        if module != __name__ and not any(module == m or module.startswith(f"{m}.") for m in internals):
            code = frame.f_code
            function = getattr(code, "co_qualname", code.co_name)  # co_qualname: Python 3.11+
            return ("__main__" if module == "__mp_main__" else module), function
        frame = frame.f_back
    return "-", "-"


class Stream:
    """Counts unseeded creations per context and call site and hands out their derived seeds.

    The environment is read at each draw (RANK may be set by the job's own launcher code); whether
    containment is on is read once, lazily, so a process that never creates an unseeded generator
    never parses the determinism settings.
    """

    def __init__(self, env: Mapping[str, str] | None = None) -> None:
        self.env = os.environ if env is None else env
        self.counters: dict[Origin, itertools.count[int]] = {}
        self._enabled: bool | None = None

    @property
    def enabled(self) -> bool:
        if self._enabled is None:
            from reprobox.guest import determinism

            try:
                self._enabled = determinism.settings_from_env(self.env).seed_unseeded_generators
            except (ValueError, TypeError):  # settings unreadable: keep the default, never break user code
                self._enabled = True
        return self._enabled

    def draw(self, kind: str, bits: int, internals: tuple[str, ...] = ()) -> int | None:
        """The next derived seed for an unseeded `kind` created by the calling code (the first frame
        outside `internals`), or None when containment is off or that code must stay truly random."""
        if not self.enabled:
            return None
        module, function = call_site(sys._getframe(1), internals)
        if module in TRULY_RANDOM_SITES:
            return None
        origin = Origin(
            seed=int(self.env.get(settings.SEED, "0") or 0),
            rank=int(self.env.get("RANK", "0") or 0),
            worker=worker_seed(),
            kind=kind,
            site=f"{module}:{function}",
        )
        # setdefault and next() on itertools.count are atomic under the GIL: no lock to hold across fork.
        n = next(self.counters.setdefault(origin, itertools.count()))
        return derive_seed(origin, n, bits)


STREAM = Stream()

_WRAPPED = "__reprobox_unseeded__"


def _mark(wrapper: Callable[..., Any], original: Any) -> None:
    for name in ("__name__", "__qualname__", "__doc__"):
        value = getattr(original, name, None)
        if value is not None:
            setattr(wrapper, name, value)
    wrapper.__wrapped__ = original  # type: ignore[attr-defined]
    setattr(wrapper, _WRAPPED, True)


def _is_wrapped(value: object) -> bool:
    return bool(getattr(value, _WRAPPED, False))


def contain_random(random_module: ModuleType, stream: Stream = STREAM) -> None:
    """Make `random.Random()` and `random.seed()` without a seed draw from `stream`.

    `Random` is a Python class, so its `seed` method is replaced in place; `random.seed` is the global
    instance's bound method, captured at import, so it is wrapped separately. Cheap enough for every
    process: whether containment is on is decided at the first unseeded call.
    """
    cls = random_module.Random
    original_method = cls.seed
    if not _is_wrapped(original_method):

        def seed_method(self: Any, a: Any = None, version: int = 2) -> None:
            if a is None:
                a = stream.draw(RANDOM_KIND, RANDOM_BITS, RANDOM_INTERNALS)
            original_method(self, a, version)

        _mark(seed_method, original_method)
        cls.seed = seed_method
    original_function = random_module.seed
    if not _is_wrapped(original_function):

        def seed_function(a: Any = None, version: int = 2) -> None:
            if a is None:
                a = stream.draw(RANDOM_KIND, RANDOM_BITS, RANDOM_INTERNALS)
            original_function(a, version)

        _mark(seed_function, original_function)
        setattr(random_module, "seed", seed_function)  # noqa: B010 - mypy cannot see a module's own names


def contain_numpy(numpy_random: ModuleType, stream: Stream = STREAM) -> None:
    """Make every unseeded NumPy generator take its entropy from `stream`.

    NumPy's `SeedSequence` (a compiled class) fills an unseeded pool from the `randbits` function of
    `numpy.random.bit_generator`, looked up as a module global on each call; every unseeded generator,
    the legacy `RandomState()` and `np.random.seed()` included, gets its entropy there. Replacing that
    one function leaves every class as it is.
    """
    if not stream.enabled:
        return
    module = sys.modules.get("numpy.random.bit_generator") or getattr(numpy_random, "bit_generator", None)
    original = getattr(module, "randbits", None)
    if module is None or original is None:
        _warn("numpy.random.bit_generator has no randbits to replace", "NumPy")
        return
    if _is_wrapped(original):
        return

    def randbits(k: int) -> int:
        value = stream.draw(NUMPY_KIND, k, NUMPY_INTERNALS)
        return int(original(k)) if value is None else value

    _mark(randbits, original)
    setattr(module, "randbits", randbits)  # noqa: B010 - numpy's stubs do not list it


def contain_torch(torch: ModuleType, stream: Stream = STREAM) -> None:
    """Make `Generator.seed()` (and so `torch.seed()`, `torch.cuda.seed()`, ...) draw from `stream`.

    `torch.Generator` is a compiled type that refuses new attributes, and a subclass would change what
    pickles and what `type(g) is torch.Generator` says; so the `seed` entry of the type's own dict is
    replaced and the type's attribute caches invalidated (`PyType_Modified`), as CPython does itself
    after a class attribute is set.
    """
    if not stream.enabled:
        return
    cls = torch.Generator
    original = cls.__dict__.get("seed")
    if original is None or _is_wrapped(original):
        return

    def seed(self: Any) -> int:
        device = str(self.device.type)
        bits = TORCH_CUDA_BITS if device == "cuda" else TORCH_BITS
        value = stream.draw(f"{TORCH_KIND}:{device}", bits, TORCH_INTERNALS)
        if value is None:
            return int(original(self))
        self.manual_seed(value)
        return value

    _mark(seed, original)
    try:
        _set_type_attribute(cls, "seed", seed)
    except Exception as error:  # noqa: BLE001 - a failed patch must not break `import torch`
        _warn(f"torch.Generator.seed could not be replaced ({error})", "torch")


def _set_type_attribute(cls: type, name: str, value: object) -> None:
    """Set an attribute on a compiled type that refuses `setattr` (an immutable type)."""
    import ctypes
    import gc

    (namespace,) = gc.get_referents(cls.__dict__)  # the dict behind the read-only mappingproxy
    if not isinstance(namespace, dict):
        raise TypeError(f"{cls.__qualname__}'s namespace is a {type(namespace).__name__}, not a dict")
    namespace[name] = value
    ctypes.pythonapi.PyType_Modified(ctypes.py_object(cls))
    if cls.__dict__.get(name) is not value:
        raise RuntimeError(f"{cls.__qualname__}.{name} did not take the new value")


def _warn(reason: str, library: str) -> None:
    import warnings

    warnings.warn(
        f"reprobox: {reason}, so {library} generators created without a seed are not seeded from the "
        "job seed; pass explicit seeds to them",
        RuntimeWarning,
        stacklevel=3,
    )
