"""What else a training step depends on, digested at each trail step of a job that declares `resume:`:
every RNG stream (torch CPU and CUDA, NumPy's global generator, Python's `random`, the generators of
DataLoaders and their samplers) and every optimizer's and LR scheduler's state. A resumed run whose
state differs from the uninterrupted run's at the same step names what its checkpoint failed to
restore. Reading state consumes no random number and changes nothing.

DataLoaders and schedulers are found as they are made (their constructors are watched once torch is
imported), so no scan of the heap runs at each step; they are kept weakly, in the order they were made,
so `rng.loader.0` and `scheduler.0` name the same objects in two runs of the same code.
"""

from __future__ import annotations

import array
import functools
import hashlib
import json
import random
import re
import sys
import weakref
from collections.abc import Callable, Iterable
from types import ModuleType
from typing import Any

TensorDigest = Callable[[Any], str]

# "<function f at 0x7f…>": an address differs from run to run, the object it names does not
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


class _Made:
    """Objects of a watched kind, weakly, in the order they were made (ids, not hashes: a job's class
    may define __eq__ without __hash__)."""

    def __init__(self) -> None:
        self.refs: dict[int, weakref.ref[Any]] = {}

    def add(self, obj: Any) -> None:
        key = id(obj)
        if key in self.refs and self.refs[key]() is obj:
            return  # a subclass's __init__ calling more than one watched __init__

        def forget(ref: weakref.ref[Any], key: int = key) -> None:
            if self.refs.get(key) is ref:
                del self.refs[key]

        self.refs[key] = weakref.ref(obj, forget)

    def live(self) -> list[Any]:
        return [obj for obj in (ref() for ref in list(self.refs.values())) if obj is not None]


_LOADERS = _Made()
_SCHEDULERS = _Made()


def watch_constructors(torch_module: ModuleType) -> None:
    """Remember every DataLoader and LR scheduler the job makes (weakly: they are freed as usual)."""
    from torch.optim import lr_scheduler
    from torch.utils.data import DataLoader

    _register_on_init(DataLoader, _LOADERS.add)
    base = getattr(lr_scheduler, "LRScheduler", None) or lr_scheduler._LRScheduler
    _register_on_init(base, _SCHEDULERS.add)
    plateau = getattr(lr_scheduler, "ReduceLROnPlateau", None)
    if plateau is not None:  # a subclass of LRScheduler whose __init__ does not call LRScheduler's
        _register_on_init(plateau, _SCHEDULERS.add)


def _register_on_init(cls: type, register: Callable[[Any], None]) -> None:
    original = cls.__init__  # type: ignore[misc]
    if getattr(original, "_reprobox_watched", False):
        return

    @functools.wraps(original)
    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        register(self)

    init._reprobox_watched = True  # type: ignore[attr-defined]
    cls.__init__ = init  # type: ignore[misc]


def live_loaders() -> list[Any]:
    return _LOADERS.live()


def live_schedulers() -> list[Any]:
    return _SCHEDULERS.live()


def state_digests(
    torch_module: ModuleType,
    optimizers: Iterable[Any],
    *,
    loaders: Iterable[Any],
    schedulers: Iterable[Any],
    tensor_digest: TensorDigest,
) -> dict[str, str]:
    """{key: digest} of every RNG stream, optimizer and scheduler (keys as in `reprobox.resume.state`).

    `optimizers` in the trail's first-step order; a freed one (None) keeps its index for those after it.
    """
    digests = _rng_digests(torch_module)
    for index, generator in enumerate(_loader_generators(torch_module, loaders)):
        digests[f"rng.loader.{index}"] = _sha(generator.get_state().numpy().tobytes())
    for index, optimizer in enumerate(optimizers):
        if optimizer is not None:
            digests[f"optimizer.{index}"] = _guarded(
                _optimizer_digest, optimizer, torch_module, tensor_digest
            )
    for index, scheduler in enumerate(schedulers):
        digests[f"scheduler.{index}"] = _guarded(_scheduler_digest, scheduler, torch_module, tensor_digest)
    return digests


def _rng_digests(torch_module: ModuleType) -> dict[str, str]:
    """The process-wide streams; CUDA's only once the job has started CUDA, NumPy's once it imported it."""
    digests = {"rng.torch": _sha(torch_module.get_rng_state().numpy().tobytes())}
    cuda = torch_module.cuda
    if cuda.is_initialized() and cuda.is_available():
        digests["rng.cuda"] = _sha(b"".join(s.numpy().tobytes() for s in cuda.get_rng_state_all()))
    numpy_random = sys.modules.get("numpy.random")
    if numpy_random is not None:
        name, key, pos, has_gauss, cached = numpy_random.get_state()
        digests["rng.numpy"] = _sha(key.tobytes() + repr((name, pos, has_gauss, cached)).encode())
    version, words, gauss = random.getstate()  # 625 words of 32 bits: packed, not repr'd (3x cheaper)
    digests["rng.python"] = _sha(array.array("Q", words).tobytes() + repr((version, gauss)).encode())
    return digests


def _loader_generators(torch_module: ModuleType, loaders: Iterable[Any]) -> list[Any]:
    """The distinct torch.Generators that decide what DataLoaders yield, in the order found."""
    found: dict[int, Any] = {}
    for loader in loaders:
        batch_sampler = getattr(loader, "batch_sampler", None)
        for holder in (loader, getattr(loader, "sampler", None), getattr(batch_sampler, "sampler", None)):
            generator = getattr(holder, "generator", None)
            if isinstance(generator, torch_module.Generator):
                found.setdefault(id(generator), generator)
    return list(found.values())


def _optimizer_digest(optimizer: Any, torch_module: ModuleType, tensor_digest: TensorDigest) -> str:
    """Its per-parameter state and its groups' hyperparameters; the groups' "params" are only indices."""
    state = optimizer.state_dict()
    groups = [{k: v for k, v in group.items() if k != "params"} for group in state.get("param_groups", [])]
    return _canonical_digest(
        {"state": state.get("state", {}), "param_groups": groups}, torch_module, tensor_digest
    )


def _scheduler_digest(scheduler: Any, torch_module: ModuleType, tensor_digest: TensorDigest) -> str:
    return _canonical_digest(scheduler.state_dict(), torch_module, tensor_digest)


def _canonical_digest(state: Any, torch_module: ModuleType, tensor_digest: TensorDigest) -> str:
    """A digest of a state dict: tensors by their bytes, everything else by its canonical JSON."""

    def canonical(value: Any) -> Any:
        if isinstance(value, torch_module.Tensor):
            return {"tensor": tensor_digest(value), "dtype": str(value.dtype), "shape": list(value.shape)}
        if isinstance(value, dict):
            return {str(k): canonical(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [canonical(v) for v in value]
        if isinstance(value, set | frozenset):
            return sorted((canonical(v) for v in value), key=_stable_repr)
        return value

    text = json.dumps(canonical(state), sort_keys=True, default=_stable_repr, separators=(",", ":"))
    return _sha(text.encode())


def _stable_repr(value: Any) -> str:
    return _ADDRESS.sub("", repr(value))


def _guarded(digest: Callable[..., str], *args: Any) -> str:
    """A state that cannot be read is recorded as such: the trail must never end the job's step."""
    try:
        return digest(*args)
    except Exception as error:  # noqa: BLE001 - a job's own scheduler may hold anything
        return f"unreadable:{type(error).__name__}"


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
