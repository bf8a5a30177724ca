"""What else a training step depends on, digested at each trail step of a job that declares `resume:`:
every RNG stream (torch CPU and CUDA, NumPy's global generator, Python's `random`, the generators of
DataLoaders and their samplers) and every optimizer's and LR scheduler's state. A resumed run whose
state differs from the uninterrupted run's at the same step names what its checkpoint failed to
restore. Reading state consumes no random number and changes nothing.

DataLoaders and schedulers are found as they are made (their constructors are watched once torch is
imported), so no scan of the heap runs at each step.
"""

from __future__ import annotations

import functools
import hashlib
import json
import random
import sys
import weakref
from collections.abc import Callable, Iterable
from types import ModuleType
from typing import Any

TensorDigest = Callable[[Any], str]

_LOADERS: weakref.WeakSet[Any] = weakref.WeakSet()
_SCHEDULERS: list[weakref.ref[Any]] = []  # in the order they were made: scheduler.0 is the first


def watch_constructors(torch_module: ModuleType) -> None:
    """Remember every DataLoader and LR scheduler the job makes (weakly: they are freed as usual)."""
    from torch.optim import lr_scheduler
    from torch.utils.data import DataLoader

    _register_on_init(DataLoader, _LOADERS.add)
    _register_on_init(lr_scheduler.LRScheduler, lambda s: _SCHEDULERS.append(weakref.ref(s)))
    plateau = getattr(lr_scheduler, "ReduceLROnPlateau", None)
    if plateau is not None and not issubclass(plateau, lr_scheduler.LRScheduler):
        _register_on_init(plateau, lambda s: _SCHEDULERS.append(weakref.ref(s)))


def _register_on_init(cls: type, register: Callable[[Any], None]) -> None:
    original = cls.__init__  # type: ignore[misc]
    if getattr(original, "_reprobox_watched", False):
        return

    @functools.wraps(original)
    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        if not _registered(self):  # once, though a subclass's own __init__ reaches this one
            register(self)

    init._reprobox_watched = True  # type: ignore[attr-defined]
    cls.__init__ = init  # type: ignore[misc]


def _registered(obj: Any) -> bool:
    return obj in _LOADERS or any(ref() is obj for ref in _SCHEDULERS)


def live_loaders() -> list[Any]:
    return list(_LOADERS)


def live_schedulers() -> list[Any]:
    return [s for s in (ref() for ref in _SCHEDULERS) if s is not None]


def state_digests(
    torch_module: ModuleType,
    optimizers: Iterable[Any],
    *,
    loaders: Iterable[Any],
    schedulers: Iterable[Any],
    tensor_digest: TensorDigest,
) -> dict[str, str]:
    """{key: digest} of every RNG stream, optimizer and scheduler (keys as in `reprobox.resume.state`)."""
    digests = {"rng.torch": _sha(torch_module.get_rng_state().numpy().tobytes())}
    cuda = torch_module.cuda
    if cuda.is_available() and cuda.is_initialized():
        digests["rng.cuda"] = _sha(b"".join(s.cpu().numpy().tobytes() for s in cuda.get_rng_state_all()))
    numpy_random = sys.modules.get("numpy.random")
    if numpy_random is not None:
        name, key, pos, has_gauss, cached = numpy_random.get_state()
        digests["rng.numpy"] = _sha(key.tobytes() + repr((name, pos, has_gauss, cached)).encode())
    digests["rng.python"] = _sha(repr(random.getstate()).encode())
    for index, generator in enumerate(_loader_generators(torch_module, loaders)):
        digests[f"rng.loader.{index}"] = _sha(generator.get_state().numpy().tobytes())
    for index, optimizer in enumerate(o for o in optimizers if o is not None):
        digests[f"optimizer.{index}"] = _state_dict_digest(
            optimizer.state_dict(), torch_module, tensor_digest
        )
    for index, scheduler in enumerate(schedulers):
        digests[f"scheduler.{index}"] = _state_dict_digest(
            scheduler.state_dict(), torch_module, tensor_digest
        )
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


def _state_dict_digest(state: Any, torch_module: ModuleType, tensor_digest: TensorDigest) -> str:
    """A digest of a state dict: tensors by their bytes, everything else by its canonical JSON."""

    def canonical(value: Any) -> Any:
        if isinstance(value, torch_module.Tensor):
            return {"tensor": tensor_digest(value)}
        if isinstance(value, dict):
            return {str(k): canonical(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [canonical(v) for v in value]
        return value

    text = json.dumps(canonical(state), sort_keys=True, default=repr, separators=(",", ":"))
    return _sha(text.encode())


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
