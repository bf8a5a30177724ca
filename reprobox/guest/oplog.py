"""Per-operation recording of chosen optimizer steps, for the first-divergence drill-down.

Switched on only in a replay (REPROBOX_OPLOG_STEPS="6,7") and only for those steps: a
TorchDispatchMode sees every aten operation of the forward, the backward (the autograd engine runs
under the same thread-local mode stack) and the optimizer, and appends one line per operation to
`oplog/rank<R>.jsonl` (format: `reprobox.records.oplog`) with a digest of each tensor it read (before
it ran: in-place ops change their input) and wrote (`reprobox.guest.oplog_digests`). Each line says
under which module the op ran (global module hooks), in which phase, and at which line of the user's
code (`reprobox.guest.oplog_source`; a backward op goes by the forward op that created its autograd
node). Batches a DataLoader yields and the outermost module's inputs are digested too, so a data
difference is named as such; the hooks that report all this are `reprobox.guest.oplog_hooks`. Result
bytes are kept within a budget per step so that the controller can count how many elements differ.
PyTorch's own DebugMode hashes are order-blind (a norm) and need equal-length logs: this recorder uses
real digests and leaves alignment to the controller.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

from reprobox.guest import settings
from reprobox.guest.oplog_digests import (
    OVERWRITTEN,
    UNINITIALISED_AFTER,
    UNINITIALISED_DIGEST,
    OpFacts,
    TensorDigests,
    value_text,
    view_digest,
)
from reprobox.guest.oplog_hooks import TorchHooks
from reprobox.guest.oplog_source import Attribution
from reprobox.records.oplog import OPLOG_DIR, OPLOG_SCHEMA, encode_line, log_name, values_name

SAVE_BUDGET = 64 << 20  # result bytes kept per step and process
SAVE_LIMIT = 16 << 20  # the largest single result kept


def steps_from_env(env: dict[str, str] | os._Environ[str]) -> set[int]:
    text = env.get(settings.OPLOG_STEPS) or ""
    return {int(part) for part in text.split(",") if part.strip().isdigit() and int(part) > 0}


class OpRecorder:
    """Records the operations of the chosen steps; driven by the trail's step hook."""

    def __init__(self, torch: ModuleType, run_dir: Path, steps: set[int]) -> None:
        self.torch = torch
        self.folder = run_dir / OPLOG_DIR
        self.steps = steps
        self.rank = int(os.environ.get("RANK", "0") or 0)
        self.handle: Any = None
        self.values: Any = None
        self.saved = 0
        self.index = 0
        self.step = 0
        self.paused = 0
        self.hooks: TorchHooks | None = None  # while the recorded steps run
        self.facts: dict[Any, OpFacts] = {}  # per operator: what recording needs to know of it
        self.digests = TensorDigests(torch)
        self.attribution = Attribution(torch)  # phase, module and source line of each op

    # -- the step boundaries, called by the trail ------------------------------------------------------

    def begin(self, step: int) -> None:
        """Start recording step `step` (the trail calls this when step - 1 has ended)."""
        self.step = step
        self.attribution.begin(step)
        self.saved = 0
        if step not in self.steps or self.hooks is not None:
            return
        self._open()
        self.hooks = TorchHooks(self)

    def end(self, step: int) -> None:
        """Step `step` is over: stop recording unless the next step is recorded too."""
        self.attribution.in_optimizer = False
        if self.hooks is not None and step + 1 not in self.steps:
            self._uninstall()
        if self.handle is not None:
            self.handle.flush()
            self.values.flush()
        self.begin(step + 1)

    def close(self) -> None:
        if self.hooks is not None:
            self._uninstall()
        if self.handle is not None:
            self.handle.close()
            self.values.close()
            self.handle = None

    def pause(self) -> _Paused:
        return _Paused(self)

    @contextlib.contextmanager
    def loading(self, workers: int) -> Iterator[None]:
        """A DataLoader at work: its operations are in the data phase. With worker processes they are
        not recorded at all: when a batch reaches this process, and when indices are handed to the
        workers (creating or resetting an iterator, fetching a batch), depends on timing; the batch's
        digest is recorded instead."""
        self.attribution.in_data += 1
        self.paused += 1 if workers else 0
        try:
            yield
        finally:
            self.attribution.in_data -= 1
            self.paused -= 1 if workers else 0

    # -- recording ---------------------------------------------------------------------------------------

    def record(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """Run one operation, writing its line; called from the mode's __torch_dispatch__."""
        if self.paused or func.namespace == "profiler":  # record_function markers are no computation
            return func(*args, **kwargs)
        torch = self.torch
        facts = self.facts.get(func)
        if facts is None:
            facts = self.facts[func] = OpFacts(torch, func)
        flatten = torch.utils._pytree.tree_flatten
        flat_inputs = flatten((args, kwargs))[0]
        flat_read = flat_inputs
        if (facts.overwrites and args) or "out" in kwargs:  # what the op writes over is not read
            read_args = (OVERWRITTEN, *args[1:]) if facts.overwrites and args else args
            flat_read = flatten(
                (read_args, {k: OVERWRITTEN if k == "out" else v for k, v in kwargs.items()})
            )[0]
        inputs = [self.describe(x) for x in flat_read]
        rng = self.digests.generator(kwargs, flat_inputs) if facts.seeded else None
        started = time.monotonic_ns()
        result = func(*args, **kwargs)
        flat_outputs = flatten(result)[0]
        if facts.base in UNINITIALISED_AFTER:
            for tensor in flat_outputs:
                self.digests.remember(tensor, UNINITIALISED_DIGEST)
        elif facts.view:  # its bytes are its input's: a digest derived from theirs, no hashing
            for position, tensor in enumerate(flat_outputs):
                self.digests.remember(tensor, view_digest(facts.base, inputs, position, tensor))
        outputs = [self.describe(x, save=True) for x in flat_outputs]
        phase, module, module_class, source = self.attribution.where()
        line: dict[str, Any] = {
            "step": self.step,
            "i": self.index,
            "op": facts.name,
            "phase": phase,
            "module": module,
            "class": module_class,
            "source": source,
            "in": inputs,
            "out": outputs,
            "t": started,
        }
        if rng is not None:
            line["rng"] = rng
        if facts.bitwise:
            line["bitwise"] = True
        self.index += 1
        self._write(line)
        return result

    def describe(self, value: Any, *, save: bool = False) -> dict[str, Any]:
        """An argument as the log holds it: a tensor's digest, shape, dtype (and saved bytes), or text."""
        torch = self.torch
        if not isinstance(value, torch.Tensor):
            return {"v": value_text(torch, value)}
        data: dict[str, Any] = {
            "d": self.digests.digest(value),
            "shape": list(value.shape),
            "dtype": str(value.dtype).removeprefix("torch."),
        }
        tag = self.attribution.tags.get(id(value))
        if tag:
            data["tag"] = tag
        if save:
            at = self._save(value)
            if at is not None:
                data["at"] = at
        return data

    def _save(self, tensor: Any) -> list[int] | None:
        """Keep a result's bytes (within the step's budget) for counting differing elements later."""
        torch = self.torch
        if self.values is None or tensor.layout != torch.strided or tensor.device.type == "meta":
            return None
        if self.digests.owns_no_bytes(tensor):
            return None
        size = tensor.numel() * tensor.element_size()
        if size == 0 or size > SAVE_LIMIT or self.saved + size > SAVE_BUDGET:
            return None
        raw = self.digests.raw(tensor.detach().cpu())
        offset = self.values.tell()
        self.values.write(raw)
        self.saved += size
        return [offset, len(raw)]

    def _write(self, line: dict[str, Any]) -> None:
        if self.handle is not None:
            self.handle.write(encode_line(line))

    # -- the log's files ------------------------------------------------------------------------------------

    def _open(self) -> None:
        if self.handle is not None:
            return
        self.folder.mkdir(parents=True, exist_ok=True)
        self.handle = (self.folder / log_name(self.rank)).open("w", encoding="utf-8")
        self.values = (self.folder / values_name(self.rank)).open("wb")
        torch = self.torch
        header = {
            "schema": OPLOG_SCHEMA,
            "rank": self.rank,
            "world": int(os.environ.get("WORLD_SIZE", "1") or 1),
            "pid": os.getpid(),
            "steps": sorted(self.steps),
            "threads": torch.get_num_threads(),
            "deterministic_algorithms": torch.are_deterministic_algorithms_enabled(),
            "torch": str(torch.__version__),
            "cuda": bool(torch.cuda.is_available()),
        }
        self._write(header)

    def _uninstall(self) -> None:
        assert self.hooks is not None
        self.hooks.remove()
        self.hooks = None
        self.attribution.module_stack.clear()

    # -- what the hooks report -----------------------------------------------------------------------------

    def enter_module(self, module: Any, args: tuple[Any, ...]) -> None:
        if not self.attribution.module_stack:
            with self.pause():
                self._outermost(module, args)
        self.attribution.enter(module)

    def leave_module(self, module: Any, args: Any, output: Any) -> None:
        self.attribution.leave()

    def batch(self, index: int, batch: Any) -> None:
        """A DataLoader yielded batch `index` of its epoch: its digests are recorded."""
        with self.pause():
            self.attribution.batch_arrives()
            tensors = self.torch.utils._pytree.tree_flatten(batch)[0]
            described = [self.describe(x) for x in tensors]
            self._write({"step": self.step, "batch": index, "in": described})

    def _outermost(self, module: Any, args: tuple[Any, ...]) -> None:
        """An outermost module's forward starts: name its modules and tensors, digest what it is given."""
        self.attribution.outermost(module)
        flat = self.torch.utils._pytree.tree_flatten(args)[0]
        tensors = [x for x in flat if isinstance(x, self.torch.Tensor)]
        if tensors:
            line = {"step": self.step, "model_input": type(module).__name__}
            line["in"] = [self.describe(x) for x in tensors]
            self._write(line)

    def optimizer_starts(self, optimizer: Any) -> None:
        """The optimizer's step begins: name its state tensors, so a differing one is named."""
        self.attribution.in_optimizer = True
        if self.hooks is None:
            return
        self.attribution.name_optimizer_state(optimizer)


class _Paused:
    """Operations run inside are not recorded (reprobox's own work: trail digests, batch digests)."""

    def __init__(self, recorder: OpRecorder) -> None:
        self.recorder = recorder

    def __enter__(self) -> None:
        self.recorder.paused += 1

    def __exit__(self, *exc: object) -> None:
        self.recorder.paused -= 1


RECORDER: OpRecorder | None = None


def install(torch: ModuleType, run_dir: Path) -> OpRecorder | None:
    """Create the recorder when this replay asks for one (REPROBOX_OPLOG_STEPS); starts at step 1."""
    global RECORDER  # noqa: PLW0603 - one recorder per process, reached from the trail's step hook
    steps = steps_from_env(os.environ)
    if not steps or RECORDER is not None:
        return RECORDER
    launcher = sys.argv[0] if sys.argv else ""
    if "RANK" not in os.environ and (
        Path(launcher).name == "torchrun" or Path(launcher).parts[-2:] == ("distributed", "run.py")
    ):
        return None  # torchrun's agent trains nothing; each rank it starts records its own log
    from torch.optim.optimizer import register_optimizer_step_pre_hook

    RECORDER = OpRecorder(torch, run_dir, steps)
    recorder = RECORDER
    register_optimizer_step_pre_hook(lambda optimizer, _args, _kwargs: recorder.optimizer_starts(optimizer))
    import atexit

    atexit.register(recorder.close)
    recorder.begin(1)
    return recorder
