"""The hash trail: per-parameter digests every K optimizer steps, with no change to the job's code.

A global optimizer step post-hook (torch.optim's `register_optimizer_step_post_hook`) counts steps over
every optimizer of the process (step 1 is the first `step()` call) and, every K steps, appends one JSON
line to `trail.jsonl` in the run dir:

    {"step": 20, "model": "<sha256 over the parameter digests>",
     "params": {"fc.weight": ["<digest>", <sum>, <l2 norm>], ...}, "scalars": {"loss": 0.71}}

How a parameter is digested (on CPU its bytes' sha256, on a GPU a checksum computed on the device) is
`reprobox.guest.tensorhash`; with `resume:` each recorded step also digests the state going into it
(`reprobox.guest.trail_state`).

The same hook ends the job cleanly at `--max-steps` and, with a reference trail, stops a rerun at the
first step whose digests differ from the reference (`reprobox.guest.trail_reference`, which waits for
the reference when it is behind). `log(step, **scalars)` lets a job add its own values (the loss of the
last backward() is recorded automatically). The line format lives in `reprobox.records.trail`, shared
with the trail's readers.
"""

from __future__ import annotations

import gc
import hashlib
import os
import threading
import weakref
from collections.abc import Iterable
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from reprobox.diskspace import stop_job
from reprobox.fileio import write_json_atomic
from reprobox.guest import settings, stepclock
from reprobox.guest.tensorhash import bytes_digest, parameter_digest
from reprobox.guest.trail_reference import ReferenceTrail
from reprobox.records.trail import (
    STOP_DIVERGED,
    STOP_FILE,
    STOP_MAX_STEPS,
    StepRecord,
    StepScalars,
    StoppedEarly,
    TrailHeader,
    encode_line,
)

if TYPE_CHECKING:
    import torch

    from reprobox.guest.oplog import OpRecorder


class _StepRecorder:
    """Per-process trail state; one instance, created when the step hook is installed."""

    def __init__(
        self,
        torch_module: ModuleType,
        run_dir: Path,
        every: int,
        max_steps: int | None,
        *,
        start: int = 0,
        with_state: bool = False,
    ) -> None:
        self.torch = torch_module
        self.run_dir = run_dir
        self.every = every
        self.max_steps = max_steps
        self.step = start  # a resumed run counts on from the step its checkpoint was saved after
        self.with_state = with_state
        self.pending_state: dict[str, str] | None = None  # digested by the pre-step hook
        self.names: dict[int, str] = {}
        self.optimizers: list[weakref.ref[Any]] = []  # in first-step order, so fallback names are stable
        self.optimizer_ids: set[int] = set()
        self.last_loss: Any = None
        self.pending_scalars: dict[int, dict[str, float]] = {}
        self.lock = threading.Lock()
        self.handle = (run_dir / settings.TRAIL_FILE).open("a", encoding="utf-8", buffering=1)
        self.reference = ReferenceTrail(run_dir, os.environ.get(settings.REFERENCE_TRAIL))
        self.clock = stepclock.from_environment(torch_module, run_dir, dict(os.environ))
        self.write(TrailHeader(every, max_steps, os.getpid(), start))

    def write(self, record: TrailHeader | StepRecord | StepScalars) -> None:
        try:
            self.handle.write(encode_line(record))
        except OSError as exc:  # a full disk ends the job with one line, not a traceback of ours
            raise stop_job(exc, self.run_dir / settings.TRAIL_FILE, self.handle) from None

    def records(self, step: int) -> bool:
        """Whether optimizer step `step` gets a trail record."""
        return step % self.every == 0 or (self.max_steps is not None and step >= self.max_steps)

    def after_step(self, optimizer: Any) -> None:
        if self.clock is not None:
            self.clock.arrived(self.step + 1)
        recorder = _OPLOG
        if recorder is None:
            self.count_step(optimizer, None)
        else:
            recorder.paused += 1  # the trail's own digests are no operations of the job
            try:
                self.count_step(optimizer, recorder)
            finally:
                recorder.paused -= 1
        if self.clock is not None:
            self.clock.leaving()

    def count_step(self, optimizer: Any, recorder: OpRecorder | None) -> None:
        with self.lock:
            self.step += 1
            step = self.step
            last = self.max_steps is not None and step >= self.max_steps
            self.track(optimizer)
            if not self.records(step):
                if recorder is not None:
                    recorder.end(step)
                return
            record = self.record(step, _optimizer_params(ref() for ref in self.optimizers))
            self.write(record)
        if recorder is not None:
            recorder.end(step)
        diverged = self.reference.differs(record)
        if diverged:
            self.stop(StoppedEarly(STOP_DIVERGED, step, diverged))
        if last:
            self.stop(StoppedEarly(STOP_MAX_STEPS, step))

    def track(self, optimizer: Any) -> None:
        if id(optimizer) not in self.optimizer_ids:
            self.optimizer_ids.add(id(optimizer))
            self.optimizers.append(weakref.ref(optimizer))

    def before_step(self, optimizer: Any) -> None:
        """The state going into a recorded step, before the optimizer changes it: after a resume, what
        differs here is what the checkpoint did not restore, not what the first step then changed."""
        recorder = _OPLOG
        if recorder is None:
            self.take_state(optimizer)
            return
        with recorder.pause():  # reading state is no operation of the job
            self.take_state(optimizer)

    def take_state(self, optimizer: Any) -> None:
        with self.lock:
            self.track(optimizer)
            if self.records(self.step + 1):
                self.pending_state = self.state()

    def record(self, step: int, params: list[torch.Tensor]) -> StepRecord:
        if not self.names:
            self.names = _parameter_names(self.torch, params)
        digests: dict[str, list[Any]] = {}
        with self.torch.no_grad():
            for index, param in enumerate(params):
                name = self.names.get(id(param), f"param.{index}")
                digests[name] = parameter_digest(self.torch, param)
        model = hashlib.sha256(
            "".join(f"{n}={d[0]};" for n, d in sorted(digests.items())).encode()
        ).hexdigest()
        scalars = self.pending_scalars.pop(step, {})
        if self.last_loss is not None:
            scalars.setdefault("loss", float(self.last_loss))
        state, self.pending_state = self.pending_state, None
        return StepRecord(step, digests, model, scalars, state)

    def state(self) -> dict[str, str]:
        from reprobox.guest import trail_state

        with self.torch.no_grad():
            return trail_state.state_digests(
                self.torch,
                [ref() for ref in self.optimizers],
                loaders=trail_state.live_loaders(),
                schedulers=trail_state.live_schedulers(),
                tensor_digest=lambda tensor: bytes_digest(self.torch, tensor),
            )

    def stop(self, stopped: StoppedEarly) -> None:
        """End the job at once, cleanly (finally blocks and exit handlers run), saying why for the guest
        to record.

        What is alive now is frozen out of the cyclic collector (it is freed when the process ends):
        the interpreter's teardown otherwise walks every object of torch's modules in each of its
        collections, seconds that the verdict waiting for this run's record would wait too.
        """
        path = self.run_dir / settings.GUEST_STATE / STOP_FILE
        try:
            write_json_atomic(path, stopped.to_json(), indent=None, mode=None)
        except OSError as exc:
            raise stop_job(exc, path) from None
        self.handle.flush()
        gc.freeze()
        raise SystemExit(0)


_TRAIL: _StepRecorder | None = None
_OPLOG: OpRecorder | None = None  # a drill-down replay's per-operation recorder


def install_step_hook(torch_module: ModuleType) -> None:
    """Register the global step hook (once per process) when the job asked for a trail or a step limit."""
    global _TRAIL, _OPLOG  # noqa: PLW0603 - one of each per process, reached from torch's global hook
    run_dir = os.environ.get(settings.RUN_DIR)
    if _TRAIL is not None or not run_dir or not _is_main_process():
        return
    every = int(os.environ.get(settings.TRAIL_EVERY) or 0)
    max_steps = int(os.environ[settings.MAX_STEPS]) if os.environ.get(settings.MAX_STEPS) else None
    start = max(0, int(os.environ.get(settings.RESUME_STEP) or 0))
    with_state = os.environ.get(settings.TRAIL_STATE) == "1"
    if with_state:
        from reprobox.guest import trail_state

        trail_state.watch_constructors(torch_module)
    # A prefix check without an explicit trail records every step, so a divergence is located exactly.
    _TRAIL = _StepRecorder(
        torch_module, Path(run_dir), every or 1, max_steps, start=start, with_state=with_state
    )
    from torch.optim.optimizer import register_optimizer_step_post_hook

    trail = _TRAIL
    if os.environ.get(settings.OPLOG_STEPS):
        from reprobox.guest import oplog

        _OPLOG = oplog.install(torch_module, Path(run_dir))
    register_optimizer_step_post_hook(lambda optimizer, _args, _kwargs: trail.after_step(optimizer))
    if with_state:
        from torch.optim.optimizer import register_optimizer_step_pre_hook

        register_optimizer_step_pre_hook(lambda optimizer, _args, _kwargs: trail.before_step(optimizer))
    _watch_backward(torch_module)


def log(step: int, **scalars: float) -> None:
    """Attach scalars (e.g. loss=...) to the trail record of optimizer step `step`; no-op without a trail."""
    if _TRAIL is None:
        return
    values = {name: float(value) for name, value in scalars.items()}
    with _TRAIL.lock:
        if step <= _TRAIL.step:
            _TRAIL.write(StepScalars(step, values))
        else:
            _TRAIL.pending_scalars.setdefault(step, {}).update(values)


def _watch_backward(torch_module: ModuleType) -> None:
    """Remember the scalar that backward() was last called on: in a training loop, that is the loss."""
    original = torch_module.Tensor.backward

    def backward(self: Any, *args: Any, **kwargs: Any) -> Any:
        trail = _TRAIL
        if trail is not None and trail.records(trail.step + 1) and self.numel() == 1:
            if _OPLOG is not None:
                with _OPLOG.pause():
                    trail.last_loss = self.detach()
            else:
                trail.last_loss = self.detach()  # only before a recorded step: a detach per step costs
        return original(self, *args, **kwargs)

    torch_module.Tensor.backward = backward


def _optimizer_params(optimizers: Iterable[Any]) -> list[torch.Tensor]:
    seen: set[int] = set()
    params = []
    for optimizer in optimizers:
        if optimizer is None:
            continue
        for group in optimizer.param_groups:
            for param in group["params"]:
                if id(param) not in seen:
                    seen.add(id(param))
                    params.append(param)
    return params


def _parameter_names(torch_module: ModuleType, params: list[torch.Tensor]) -> dict[int, str]:
    """Name parameters after the largest nn.Module holding them (found once, by a scan of live objects)."""
    wanted = {id(p) for p in params}
    best: dict[int, str] = {}
    module_type = torch_module.nn.Module
    # type(), not isinstance(): isinstance may call a deprecated object's __class__ and warn.
    modules = [o for o in gc.get_objects() if issubclass(type(o), module_type)]
    modules.sort(key=lambda m: -sum(1 for _ in m.parameters()))
    for module in modules:
        for name, param in module.named_parameters():
            if id(param) in wanted and id(param) not in best:
                best[id(param)] = name
        if len(best) == len(wanted):
            break
    return best


def _is_main_process() -> bool:
    import multiprocessing

    return multiprocessing.parent_process() is None
