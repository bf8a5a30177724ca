"""Per-operation recording of chosen optimizer steps, for the first-divergence drill-down.

Switched on only in a replay (REPROBOX_OPLOG_STEPS="6,7") and only for those steps: a
TorchDispatchMode sees every aten operation of the forward, the backward (the autograd engine runs
under the same thread-local mode stack) and the optimizer, and appends one line per operation to
`oplog/rank<R>.jsonl` (format: `reprobox.records.oplog`) with a digest of each tensor it read (before
it ran: in-place ops change their input) and wrote. Each line says under which module the op ran
(global module hooks, named as `named_modules()` names them), in which phase, and at which line of the
user's code; a backward op is attributed to the forward op that created its autograd node (through
the node's sequence number), unless user code runs it (a custom Function's backward). Batches a
DataLoader yields and the outermost module's inputs are digested too, so a data difference is named
as such. Result bytes are kept within a budget per step so that the controller can count how many
elements differ. PyTorch's own DebugMode hashes are order-blind (a norm) and need equal-length logs:
this recorder uses real digests and leaves alignment to the controller.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import sys
import time
import weakref
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

from reprobox.guest import settings
from reprobox.records.oplog import OPLOG_DIR, OPLOG_SCHEMA, encode_line, log_name, values_name

DIGEST_CHARS = 32
SAVE_BUDGET = 64 << 20  # result bytes kept per step and process
SAVE_LIMIT = 16 << 20  # the largest single result kept
NUMPY_DTYPES = ("float32", "float64", "float16", "int64", "int32", "int16", "int8", "uint8", "bool")
ENGINE_FRAMES = ("_engine_run_backward", "run_backward")
# Operations whose result is uninitialised memory: its bytes differ from run to run and mean nothing.
UNINITIALISED = frozenset(
    ("empty", "empty_like", "new_empty", "empty_strided", "new_empty_strided", "empty_permuted")
)
UNINITIALISED_DIGEST = "uninitialised"
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
        self.outside = "setup"  # the phase of an op outside modules, backward and optimizer
        self.paused = 0
        self.in_optimizer = False
        self.in_data = 0
        self.module_stack: list[tuple[str, str]] = []
        self.names: dict[int, str] = {}  # id(module) -> its name in the outermost module
        self.tags: dict[int, str] = {}  # id(tensor) -> param:NAME, buffer:NAME, optim:NAME
        self.nodes: dict[int, tuple[str, str, str]] = {}  # autograd node sequence nr -> module, class, source
        self.last_sequence = -1
        self.cache: dict[int, tuple[Any, int, str]] = {}
        self.mode: Any = None
        self.handles: list[Any] = []
        self.original_next: Any = None
        self.original_iter: Any = None
        roots = {Path(str(torch.__file__)).parent, Path(__file__).parents[1]}
        self.library_roots = tuple(f"{root}{os.sep}" for root in roots)
        # The standard library (not its site-packages: a framework there is code the user runs).
        self.stdlib = f"{Path(os.__file__).parent}{os.sep}"
        self.code_dir = (os.environ.get(settings.CODE_DIR) or "").rstrip(os.sep) + os.sep
        self.library_files: dict[str, bool] = {}  # per frame file: skipped when looking for the user's line
        self.facts: dict[Any, _OpFacts] = {}  # per operator: what recording needs to know of it

    # -- the step boundaries, called by the trail ------------------------------------------------------

    def begin(self, step: int) -> None:
        """Start recording step `step` (the trail calls this when step - 1 has ended)."""
        self.step = step
        self.outside = "setup" if step == 1 else "data"
        self.in_optimizer = False
        self.saved = 0
        if step not in self.steps or self.mode is not None:
            return
        self._open()
        self._install()

    def end(self, step: int) -> None:
        """Step `step` is over: stop recording unless the next step is recorded too."""
        self.in_optimizer = False
        if self.mode is not None and step + 1 not in self.steps:
            self._uninstall()
        if self.handle is not None:
            self.handle.flush()
            self.values.flush()
        self.begin(step + 1)

    def close(self) -> None:
        if self.mode is not None:
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
        self.in_data += 1
        self.paused += 1 if workers else 0
        try:
            yield
        finally:
            self.in_data -= 1
            self.paused -= 1 if workers else 0

    # -- recording ---------------------------------------------------------------------------------------

    def record(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """Run one operation, writing its line; called from the mode's __torch_dispatch__."""
        if self.paused or func.namespace == "profiler":  # record_function markers are no computation
            return func(*args, **kwargs)
        torch = self.torch
        facts = self.facts.get(func)
        if facts is None:
            facts = self.facts[func] = _OpFacts(torch, func)
        flatten = torch.utils._pytree.tree_flatten
        flat_inputs = flatten((args, kwargs))[0]
        flat_read = flat_inputs
        if (facts.overwrites and args) or "out" in kwargs:  # what the op writes over is not read
            read_args = (OVERWRITTEN, *args[1:]) if facts.overwrites and args else args
            flat_read = flatten(
                (read_args, {k: OVERWRITTEN if k == "out" else v for k, v in kwargs.items()})
            )[0]
        inputs = [self.describe(x) for x in flat_read]
        rng = self._generator_digest(kwargs, flat_inputs) if facts.seeded else None
        started = time.monotonic_ns()
        result = func(*args, **kwargs)
        flat_outputs = flatten(result)[0]
        if facts.base in UNINITIALISED_AFTER:
            for tensor in flat_outputs:
                self.remember(tensor, UNINITIALISED_DIGEST)
        elif facts.view:  # its bytes are its input's: a digest derived from theirs, no hashing
            for position, tensor in enumerate(flat_outputs):
                self.remember(tensor, _view_digest(facts.base, inputs, position, tensor))
        outputs = [self.describe(x, save=True) for x in flat_outputs]
        phase, module, module_class, source = self._where(torch)
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
            return {"v": _value_text(torch, value)}
        data: dict[str, Any] = {
            "d": self.digest(value),
            "shape": list(value.shape),
            "dtype": str(value.dtype).removeprefix("torch."),
        }
        tag = self.tags.get(id(value))
        if tag:
            data["tag"] = tag
        if save:
            at = self._save(value)
            if at is not None:
                data["at"] = at
        return data

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
            from reprobox.guest.trail import _device_checksum

            return _device_checksum(torch, data)
        raw = self._bytes(data)
        return hashlib.sha256(raw).hexdigest()[:DIGEST_CHARS]

    def _bytes(self, data: Any) -> memoryview:
        torch = self.torch
        flat = data.contiguous().reshape(-1)
        if flat.numel() == 0:
            return memoryview(b"")
        if str(flat.dtype).removeprefix("torch.") not in NUMPY_DTYPES:
            flat = flat.view(torch.uint8) if flat.element_size() == 1 else _as_bytes(torch, flat)
        return memoryview(flat.numpy()).cast("B")

    def _save(self, tensor: Any) -> list[int] | None:
        """Keep a result's bytes (within the step's budget) for counting differing elements later."""
        torch = self.torch
        if self.values is None or tensor.layout != torch.strided or tensor.device.type == "meta":
            return None
        if self.cache.get(id(tensor), (None, None, ""))[2].startswith((UNINITIALISED_DIGEST, "view:")):
            return None
        size = tensor.numel() * tensor.element_size()
        if size == 0 or size > SAVE_LIMIT or self.saved + size > SAVE_BUDGET:
            return None
        raw = self._bytes(tensor.detach().cpu())
        offset = self.values.tell()
        self.values.write(raw)
        self.saved += size
        return [offset, len(raw)]

    def _generator_digest(self, kwargs: dict[str, Any], inputs: list[Any]) -> str:
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

    def _where(self, torch: ModuleType) -> tuple[str, str, str, str]:
        """The op's phase, module (name, class) and source line; a backward op's from its autograd node."""
        node = torch._C._current_autograd_node()
        if node is not None:
            self.outside = "backward"
            sequence = node._sequence_nr()
            module, module_class, forward_source = self.nodes.get(sequence, ("", "", ""))
            if not module_class and hasattr(node, "variable"):  # AccumulateGrad: the parameter's own
                module = self.tags.get(id(node.variable), "").partition(":")[2].rpartition(".")[0]
            source = self._source(inside_engine=True) or forward_source
            return "backward", module, module_class, source
        source = self._source(inside_engine=False)
        if self.module_stack:
            module, module_class = self.module_stack[-1]
            phase = "forward"
        else:  # e.g. the loss, computed outside any module
            module, module_class = "", ""
            phase = "optimizer" if self.in_optimizer else "data" if self.in_data else self.outside
        sequence = torch._C._autograd._get_sequence_nr()
        if sequence != self.last_sequence:  # this op made autograd nodes: its backward ops are named so
            for created in range(max(self.last_sequence, sequence - 64), sequence):
                self.nodes[created] = (module, module_class, source)
            self.last_sequence = sequence
        return phase, module, module_class, source

    def _source(self, *, inside_engine: bool) -> str:
        """The innermost frame of the user's code (outside torch and reprobox), as path:line.

        In the backward, only a frame called by the autograd engine counts (a custom Function's
        backward): the frame that called backward() says nothing about which op ran.
        """
        frame: Any = sys._getframe(1)
        while frame is not None:
            filename = frame.f_code.co_filename
            if inside_engine and frame.f_code.co_name in ENGINE_FRAMES:
                return ""
            if not self._library(filename):
                return f"{self._path(filename)}:{frame.f_lineno}"
            frame = frame.f_back
        return ""

    def _library(self, filename: str) -> bool:
        """torch, reprobox, the standard library and frozen modules: never the user's line."""
        known = self.library_files.get(filename)
        if known is None:
            known = filename.startswith((*self.library_roots, "<")) or (
                filename.startswith(self.stdlib) and "-packages" + os.sep not in filename
            )
            self.library_files[filename] = known
        return known

    def _path(self, filename: str) -> str:
        if self.code_dir != os.sep and filename.startswith(self.code_dir):
            return filename[len(self.code_dir) :]
        _, found, rest = filename.rpartition("-packages" + os.sep)
        return rest if found else filename

    def _write(self, line: dict[str, Any]) -> None:
        if self.handle is not None:
            self.handle.write(encode_line(line))

    # -- installation --------------------------------------------------------------------------------------

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

    def _install(self) -> None:
        from torch.nn.modules import module as nn_module
        from torch.utils._python_dispatch import TorchDispatchMode
        from torch.utils.data import dataloader

        recorder = self

        class _Mode(TorchDispatchMode):  # type: ignore[no-untyped-call]
            def __torch_dispatch__(
                self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None
            ) -> Any:
                return recorder.record(func, args, kwargs or {})

        self.handles = [
            nn_module.register_module_forward_pre_hook(self._enter_module),
            nn_module.register_module_forward_hook(self._leave_module, always_call=True),
        ]
        self.original_next = dataloader._BaseDataLoaderIter.__next__
        original = self.original_next

        def next_batch(iterator: Any) -> Any:
            workers = int(getattr(iterator, "_num_workers", 0) or 0)
            with recorder.loading(workers):
                batch = original(iterator)
            with recorder.pause():
                recorder.outside = "data" if recorder.outside == "setup" else recorder.outside
                index = int(getattr(iterator, "_num_yielded", 0)) - 1
                tensors = recorder.torch.utils._pytree.tree_flatten(batch)[0]
                described = [recorder.describe(x) for x in tensors]
                recorder._write({"step": recorder.step, "batch": index, "in": described})
            return batch

        self.original_iter = dataloader.DataLoader.__iter__
        original_iter = self.original_iter

        def start_epoch(loader: Any) -> Any:
            with recorder.loading(int(getattr(loader, "num_workers", 0) or 0)):
                return original_iter(loader)

        dataloader._BaseDataLoaderIter.__next__ = next_batch  # type: ignore[method-assign,assignment]
        dataloader.DataLoader.__iter__ = start_epoch  # type: ignore[method-assign]
        self.mode = _Mode()  # type: ignore[no-untyped-call]
        self.mode.__enter__()

    def _uninstall(self) -> None:
        from torch.utils.data import dataloader

        self.mode.__exit__(None, None, None)
        self.mode = None
        for handle in self.handles:
            handle.remove()
        self.handles = []
        if self.original_next is not None:
            dataloader._BaseDataLoaderIter.__next__ = self.original_next  # type: ignore[method-assign]
            dataloader.DataLoader.__iter__ = self.original_iter  # type: ignore[method-assign]
        self.module_stack.clear()

    def _enter_module(self, module: Any, args: tuple[Any, ...]) -> None:
        if not self.module_stack:
            with self.pause():
                self._outermost(module, args)
        name = self.names.get(id(module), "")
        self.module_stack.append((name, type(module).__name__))

    def _leave_module(self, module: Any, args: Any, output: Any) -> None:
        if self.module_stack:
            self.module_stack.pop()

    def _outermost(self, module: Any, args: tuple[Any, ...]) -> None:
        """An outermost module's forward starts: name its modules and tensors, digest what it is given."""
        if self.outside in ("setup", "data"):
            self.outside = "forward"
        if not self.names or id(module) not in self.names:
            self.names.update({id(m): name for name, m in module.named_modules()})
            self.names[id(module)] = ""
            self.tags.update({id(p): f"param:{name}" for name, p in module.named_parameters()})
            self.tags.update({id(b): f"buffer:{name}" for name, b in module.named_buffers()})
        flat = self.torch.utils._pytree.tree_flatten(args)[0]
        tensors = [x for x in flat if isinstance(x, self.torch.Tensor)]
        if tensors:
            line = {"step": self.step, "model_input": type(module).__name__}
            line["in"] = [self.describe(x) for x in tensors]
            self._write(line)

    def optimizer_starts(self, optimizer: Any) -> None:
        """The optimizer's step begins: name its state tensors, so a differing one is named."""
        self.in_optimizer = True
        if self.mode is None:
            return
        for param, state in optimizer.state.items():
            name = self.tags.get(id(param), "param:?").partition(":")[2]
            for key, value in state.items():
                if isinstance(value, self.torch.Tensor):
                    self.tags.setdefault(id(value), f"optim:{name}.{key}")


class _Paused:
    """Operations run inside are not recorded (reprobox's own work: trail digests, batch digests)."""

    def __init__(self, recorder: OpRecorder) -> None:
        self.recorder = recorder

    def __enter__(self) -> None:
        self.recorder.paused += 1

    def __exit__(self, *exc: object) -> None:
        self.recorder.paused -= 1


class _OpFacts:
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


def _view_digest(name: str, inputs: list[dict[str, Any]], position: int, tensor: Any) -> str:
    if not hasattr(tensor, "stride"):
        return UNINITIALISED_DIGEST
    layout = (
        f"{name}|{position}|{list(tensor.shape)}|{tensor.stride()}|{tensor.storage_offset()}|{tensor.dtype}"
    )
    text = layout + "|" + "|".join(str(arg.get("d") or arg.get("v")) for arg in inputs)
    return "view:" + hashlib.sha256(text.encode()).hexdigest()[: DIGEST_CHARS - 5]


def _as_bytes(torch: ModuleType, flat: Any) -> Any:
    """A view of a tensor's bytes as uint8, for dtypes NumPy lacks (bfloat16, float8, complex32...)."""
    if flat.is_complex():
        flat = torch.view_as_real(flat).reshape(-1)
    return flat.view(torch.uint8)


ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


def _value_text(torch: ModuleType, value: Any) -> str:
    """A non-tensor argument as text that is equal in two runs when the value is (no addresses)."""
    if isinstance(value, (torch.UntypedStorage, torch.TypedStorage)):
        return f"<storage of {value.nbytes()} bytes>"
    text = ADDRESS.sub("", repr(value))
    return text if len(text) <= 200 else "sha256:" + hashlib.sha256(text.encode()).hexdigest()


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
