"""The hash trail: per-parameter digests every K optimizer steps, with no change to the job's code.

A global optimizer step post-hook (torch.optim's `register_optimizer_step_post_hook`) counts steps over
every optimizer of the process (step 1 is the first `step()` call) and, every K steps, appends one JSON
line to `trail.jsonl` in the run dir:

    {"step": 20, "model": "<sha256 over the parameter digests>",
     "params": {"fc.weight": ["<digest>", <sum>, <l2 norm>], ...}, "scalars": {"loss": 0.71}}

On CPU a parameter's digest is the sha256 of its bytes. On a GPU it is computed on the device (a
position-weighted 64-bit checksum of the raw bits), so only a few bytes per parameter cross to the host.
The sum and norm (float64) are there to show how far two runs drift apart, not to decide equality.

The same hook ends the job cleanly at `--max-steps` and, with a reference trail, stops a rerun at the
first step whose digests differ from the reference, waiting for the reference when it is behind.
`log(step, **scalars)` lets a job add its own values (the loss of the last backward() is recorded
automatically). The line format lives in `reprobox.records.trail`, shared with the trail's readers.
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import math
import os
import threading
import time
import weakref
from collections.abc import Iterable
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from reprobox.guest import settings, stepclock
from reprobox.records.files import write_json_atomic
from reprobox.records.trail import (
    STOP_DIVERGED,
    STOP_FILE,
    STOP_MAX_STEPS,
    StepRecord,
    StepScalars,
    StoppedEarly,
    TrailHeader,
    TrailVersionError,
    decode_line,
    encode_line,
)

if TYPE_CHECKING:
    import torch

    from reprobox.guest.oplog import OpRecorder

REFERENCE_WAIT_SECONDS = 600.0
REFERENCE_CHUNK_CHARS = 1 << 20  # read a growing reference trail a bounded piece at a time
REFERENCE_LINE_LIMIT = 64 << 20


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
        self.reference = _Reference(run_dir, os.environ.get(settings.REFERENCE_TRAIL))
        self.clock = stepclock.from_environment(torch_module, run_dir, dict(os.environ))
        self.write(TrailHeader(every, max_steps, os.getpid(), start))

    def write(self, record: TrailHeader | StepRecord | StepScalars) -> None:
        self.handle.write(encode_line(record))

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
                digests[name] = _digest(self.torch, param)
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
                tensor_digest=lambda tensor: _bytes_digest(self.torch, tensor),
            )

    def stop(self, stopped: StoppedEarly) -> None:
        """End the job at once, cleanly (finally blocks run), saying why for the guest to record."""
        path = self.run_dir / settings.GUEST_STATE / STOP_FILE
        write_json_atomic(path, stopped.to_json(), indent=None, mode=None)
        self.handle.flush()
        raise SystemExit(0)


class _Reference:
    """A reference run's trail, read as it grows, to compare each of our records with."""

    def __init__(self, run_dir: Path, location: str | None) -> None:
        self.path = None if not location else Path(location)
        self.records: dict[int, StepRecord] = {}
        self.offset = 0
        self.buffer = ""
        self.finished = False

    def differs(self, record: StepRecord) -> list[str]:
        """Names of parameters whose digest differs from the reference at the same step ([] if equal)."""
        if self.path is None:
            return []
        reference = self.wait_for(record.step)
        if reference is None:
            return []
        ours, theirs = record.digests(), reference.digests()
        return sorted(n for n in set(ours) | set(theirs) if ours.get(n) != theirs.get(n))

    def wait_for(self, step: int) -> StepRecord | None:
        deadline = time.monotonic() + REFERENCE_WAIT_SECONDS
        while step not in self.records and not self.finished and time.monotonic() < deadline:
            if not self.read_more():
                time.sleep(0.01)
        return self.records.get(step)

    def read_more(self) -> bool:
        from reprobox import saferead  # only runs checked against a reference pay for it

        assert self.path is not None
        try:
            fd = saferead.open_regular(self.path)
        except FileNotFoundError:
            return False
        except saferead.UnsafeFile:
            self.finished = True  # a link or FIFO planted in the reference run is no reference
            return False
        with os.fdopen(fd, "r", encoding="utf-8", errors="replace") as handle:
            handle.seek(self.offset)
            chunk = handle.read(REFERENCE_CHUNK_CHARS)
            self.offset = handle.tell()
        if not chunk:
            self.finished = (self.path.parent / settings.GUEST_STATE / settings.GUEST_RESULT).exists() or (
                self.path.with_name(settings.GUEST_RESULT).exists()
            )
            return False
        self.buffer += chunk
        *lines, self.buffer = self.buffer.split("\n")
        if len(self.buffer) > REFERENCE_LINE_LIMIT:  # no trail line is this long: not a trail
            self.finished = True
        for line in lines:
            with contextlib.suppress(TrailVersionError):  # only the steps are compared
                item = decode_line(line) if line.strip() else None
                if isinstance(item, StepRecord):
                    self.records[item.step] = item
        return True


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


NUMPY_FLOATS = ("float32", "float64", "float16")


def _digest(torch_module: ModuleType, tensor: torch.Tensor) -> list[Any]:
    """[digest, sum, L2 norm] of one parameter; on CPU through a zero-copy NumPy view (fewer torch calls)."""
    data = tensor.detach()
    if data.numel() == 0:
        return [hashlib.sha256(b"").hexdigest(), 0.0, 0.0]
    if data.device.type == "cpu" and str(data.dtype).removeprefix("torch.") in NUMPY_FLOATS:
        values = (data if data.is_contiguous() else data.contiguous()).numpy().reshape(-1)
        digest = hashlib.sha256(values.view("uint8").data).hexdigest()
        return [digest, float(values.sum(dtype="float64")), math.sqrt(float(values.dot(values)))]
    digest = _bytes_digest(torch_module, data)
    if not (data.is_floating_point() or data.is_complex()):
        data = data.double()
    total = float(data.sum(dtype=torch_module.float64).real)
    norm = float(torch_module.linalg.vector_norm(data, dtype=torch_module.float64))
    return [digest, total, norm]


def _bytes_digest(torch_module: ModuleType, tensor: torch.Tensor) -> str:
    """A tensor's digest alone: sha256 of its bytes on CPU, the on-device checksum elsewhere."""
    data = tensor.detach()
    if data.device.type != "cpu":
        return _device_checksum(torch_module, data)
    if data.is_contiguous() and str(data.dtype).removeprefix("torch.") in NUMPY_FLOATS:
        return hashlib.sha256(data.numpy().data).hexdigest()  # the same bytes, fewer torch calls
    flat = data.contiguous().reshape(-1)
    return hashlib.sha256(flat.view(torch_module.uint8).numpy().data).hexdigest()


def _device_checksum(torch_module: ModuleType, data: torch.Tensor) -> str:
    """A bit-exact checksum computed on the device: sum of raw 32-bit words times odd position weights."""
    flat = data.contiguous().reshape(-1).view(torch_module.uint8)
    pad = (-flat.numel()) % 4
    if pad or flat.storage_offset() % 4:  # whole words, at an offset that can be read as words
        flat = torch_module.cat([flat, flat.new_zeros(pad)])
    words = flat.view(torch_module.int32).to(torch_module.int64)
    weights = torch_module.arange(words.numel(), device=words.device, dtype=torch_module.int64) * 2 + 1
    mixed = (words * weights) ^ (words << 17)
    total = int(mixed.sum())
    return f"dev:{total & (2**64 - 1):016x}:{words.numel()}"


def _is_main_process() -> bool:
    import multiprocessing

    return multiprocessing.parent_process() is None
