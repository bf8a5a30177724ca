"""Static scan of a job's code for known sources of run-to-run differences.

Seeding and deterministic flags, which the guest applies, cannot fix code that picks a seed from the
clock, iterates a set to number a vocabulary, or calls an op whose CUDA kernel adds in no fixed order.
This module finds such code before a run, with pure `ast` (torch is never imported), so that
`reprobox audit` can name the file, the line and the fix. What each hazard is and how to fix it is
data (`RULES`); which calls are hazards is data too (`CALL_RULES`, `ASSIGN_RULES`).

Matching is deliberately cheap and quiet: callees are resolved through the file's own imports
(`import torch.nn.functional as F`, `from torch import nn`, `from torch.utils.data import DataLoader
as DL`); a tensor method such as `x.index_add_(...)` matches on any receiver except a module imported
from another library (`np.bincount` is not flagged); anything not understood is left alone. Two rules
are heuristics, described where they are implemented: reading a `torch.empty` result before filling it
(`_Scanner._check_empty_reads`) and building an ordered thing from a set (`_Scanner._check_set_*`,
`_builds_sequence`). A finding is silenced by a `# reprobox: ignore` comment on its line, or by
`# reprobox: ignore[rule-a, rule-b]`.
"""

from __future__ import annotations

import ast
import fnmatch
import importlib.util
import os
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from reprobox.errors import UsageError

WARNING = "warning"
INFO = "info"

DEFAULT_EXCLUDE: tuple[str, ...] = (".git", ".venv", "venv", "__pycache__", "node_modules")


@dataclass(frozen=True)
class Finding:
    """One hazard at one place in the job's code."""

    path: str  # relative posix path within the code dir
    line: int  # 1-based
    column: int  # 1-based, as editors and linters print it
    rule: str
    message: str
    fix: str
    severity: str = WARNING  # "warning", or "info" for code that is only a risk in some set-ups

    def to_json(self) -> dict[str, object]:
        return {
            "path": self.path,
            "line": self.line,
            "column": self.column,
            "rule": self.rule,
            "severity": self.severity,
            "message": self.message,
            "fix": self.fix,
        }

    def __str__(self) -> str:
        return f"{self.path}:{self.line}:{self.column}: {self.rule}: {self.message}"


@dataclass(frozen=True)
class Rule:
    """What a hazard is and how to fix it; `{detail}` in the message is filled per finding."""

    id: str
    message: str
    fix: str
    severity: str = WARNING


_KEEP_DETERMINISTIC_ON = (
    "Keep torch.use_deterministic_algorithms(True) on (reprobox turns it on before your code runs), "
)

# Hazards the guest already neutralises when the job runs under reprobox; still hazards anywhere else.
COVERED_BY_REPROBOX: dict[str, str] = {
    "set-iteration-order": "reprobox fixes PYTHONHASHSEED, so the order repeats under reprobox "
    "on the same Python",
    "dataloader-unseeded-workers": "reprobox seeds torch's global RNG before the job starts, so the "
    "shuffle order and the worker seeds repeat under reprobox",
}

RULES: dict[str, Rule] = {
    r.id: r
    for r in (
        Rule(
            "index-add",
            "index_add on a CUDA tensor accumulates with atomicAdd, so repeated indices are summed in no "
            "fixed order and floating-point results differ between runs.",
            _KEEP_DETERMINISTIC_ON + "which switches index_add to a deterministic kernel, and do not "
            "turn it off around this call.",
        ),
        Rule(
            "scatter-add",
            "scatter_add/scatter_reduce on a CUDA tensor accumulate with atomic operations, so repeated "
            "indices are combined in no fixed order.",
            _KEEP_DETERMINISTIC_ON + "which makes scatter_add_ and scatter_reduce with reduce='sum' or "
            "'mean' deterministic on CUDA, and avoid reduce='prod' on CUDA, which has no deterministic "
            "implementation.",
        ),
        Rule(
            "index-put-accumulate",
            "index_put with accumulate=True sums into repeated indices in no fixed order unless "
            "deterministic algorithms are on.",
            _KEEP_DETERMINISTIC_ON + "which makes index_put(accumulate=True) deterministic, or remove "
            "duplicate indices before the call.",
        ),
        Rule(
            "put",
            "Tensor.put_ has no deterministic implementation with accumulate=False on any device, nor "
            "with accumulate=True on CUDA.",
            "Write through indexing instead (x.view(-1)[index] = source, or "
            "x.view(-1).index_put_((index,), source, accumulate=True) to add), which is deterministic "
            "under torch.use_deterministic_algorithms(True).",
        ),
        Rule(
            "bincount",
            "bincount with weights= on a CUDA tensor adds the weights atomically in no fixed order and "
            "has no deterministic implementation.",
            "Compute the weighted counts on CPU (x.cpu().bincount(w.cpu())) or as a one-hot product "
            "(F.one_hot(x, n).to(w.dtype).T @ w) in verified runs.",
        ),
        Rule(
            "histc",
            "torch.histc on a CUDA tensor with floating-point input has no deterministic implementation.",
            "Compute the histogram on CPU (torch.histc(x.cpu(), ...)) in verified runs.",
        ),
        Rule(
            "embedding-bag",
            "EmbeddingBag may produce nondeterministic gradients on CUDA, and with mode='max' its CUDA "
            "backward has no deterministic implementation at all.",
            "Avoid mode='max' on CUDA (it throws under torch.use_deterministic_algorithms(True)); with "
            "mode='sum' or 'mean' keep deterministic algorithms on and check the job with reprobox verify.",
        ),
        Rule(
            "ctc-loss",
            "CTC loss has no deterministic backward on CUDA (and cuDNN may pick a nondeterministic "
            "algorithm), so its gradients differ between runs.",
            "Compute the loss on CPU in verified runs (F.ctc_loss(log_probs.cpu(), ...)), where its "
            "backward is deterministic.",
        ),
        Rule(
            "interpolate",
            "{detail} has a CUDA backward that adds gradients atomically in no fixed order and throws "
            "under torch.use_deterministic_algorithms(True); the forward pass is deterministic.",
            "If nearest-neighbour upsampling by an integer factor s suits the model, use "
            "F.interpolate(x, scale_factor=s, mode='nearest') or "
            "x.repeat_interleave(s, -1).repeat_interleave(s, -2), whose backward is deterministic.",
        ),
        Rule(
            "max-unpool",
            "MaxUnpool has no deterministic implementation on any device: with repeated indices the "
            "value that lands last wins.",
            "Rebuild the unpooled tensor with scatter_ on flattened views, e.g. x.new_zeros(n, c, h * w)"
            ".scatter_(2, indices.flatten(2), pooled.flatten(2)).view(n, c, h, w), which is "
            "deterministic under torch.use_deterministic_algorithms(True).",
        ),
        Rule(
            "grid-sample",
            "grid_sample's backward on CUDA adds gradients atomically in no fixed order and has no "
            "deterministic implementation.",
            "Run the grid_sample backward on CPU in verified runs, or accept small gradient "
            "differences and compare with a tolerance.",
        ),
        Rule(
            "uninitialized-empty",
            "{detail}, so its values are whatever was in memory (NaN when deterministic algorithms "
            "fill uninitialized memory).",
            "Allocate with torch.zeros/torch.full, or fill the tensor (.zero_(), .fill_(), .copy_(), "
            "out=) before reading it.",
        ),
        Rule(
            "dataloader-unseeded-workers",
            "DataLoader with {detail}: worker seeds and the shuffle order come from the global torch "
            "RNG, so they change whenever anything draws random numbers before the loader runs.",
            "Pass generator=g, a torch.Generator seeded once with g.manual_seed(seed), and "
            "worker_init_fn=seed_worker, which seeds numpy and random from torch.initial_seed() % 2**32, "
            "as PyTorch's reproducibility notes show (reprobox.generator() and reprobox.seed_worker are "
            "both ready-made).",
        ),
        Rule(
            "seed-from-clock",
            "The seed is derived from the clock ({detail}), so it changes on every run.",
            "Use a fixed seed from the job's configuration (reprobox seeds random, numpy and torch "
            "before your code runs) and record it.",
        ),
        Rule(
            "seed-from-entropy",
            "The seed comes from a source that differs on every run ({detail}).",
            "Use a fixed seed from the job's configuration (reprobox seeds random, numpy and torch "
            "before your code runs), or pass an explicit seed to the generator.",
        ),
        Rule(
            "set-iteration-order",
            "Iterating a set fixes an order that follows string hashing, which changes with "
            "PYTHONHASHSEED and the Python version, so indices or sequences built from it are not "
            "stable.",
            "Iterate the set in sorted order instead, for example enumerate(sorted(set(words))).",
        ),
        Rule(
            "compile-autotune",
            "torch.compile autotuning ({detail}) picks kernels by timing them on the device, so the "
            "chosen kernels, and their rounding, can change between runs and machines.",
            "Use the default mode in verified runs; under torch.use_deterministic_algorithms(True), "
            "which reprobox sets, Inductor's deterministic mode also skips this autotuning.",
        ),
        Rule(
            "compile",
            "torch.compile generates kernels whose rounding can differ from eager mode and between "
            "torch, Triton and GPU versions.",
            "Compare compiled runs only with compiled runs on the same pinned image and GPU model, and "
            "set torch._inductor.config.fallback_random = True if random ops must match eager mode.",
            INFO,
        ),
        Rule(
            "fused-attention",
            "{detail} fused CUDA attention kernels (FlashAttention, memory-efficient, cuDNN), whose "
            "results depend on the kernel chosen and which may use nondeterministic algorithms.",
            "Select the math backend in verified runs: with torch.nn.attention.sdpa_kernel("
            "SDPBackend.MATH): around the attention calls.",
        ),
        Rule(
            "cudnn-benchmark",
            "torch.backends.cudnn.benchmark enabled: cuDNN times several convolution algorithms and "
            "keeps the fastest, which can differ between runs and machines.",
            "Remove the assignment or set it to False; reprobox sets cudnn.benchmark = False before your "
            "code runs.",
        ),
        Rule(
            "cudnn-deterministic-off",
            "torch.backends.cudnn.deterministic turned off lets cuDNN pick nondeterministic convolution "
            "algorithms.",
            "Remove the assignment; reprobox sets cudnn.deterministic = True before your code runs.",
        ),
        Rule(
            "deterministic-algorithms-off",
            "This call can turn off deterministic algorithms that reprobox turned on, so ops with "
            "nondeterministic kernels run without an error or a warning.",
            "Remove the call; to find the ops that lack deterministic kernels, run with warn_only=True "
            "and read the audit records instead.",
        ),
        Rule(
            "syntax-error",
            "Python cannot parse this file ({detail}), so it was not scanned for hazards.",
            "Fix the syntax error (python -m py_compile shows it) so the file can be scanned.",
        ),
        Rule(
            "unreadable-file",
            "This file could not be read ({detail}), so it was not scanned for hazards.",
            "Make the file readable by the user running reprobox, or exclude its folder.",
        ),
    )
}


# ---------------------------------------------------------------------------------------------------
# Name resolution


@dataclass(frozen=True)
class _Callee:
    """What a call's `func` expression names, with the file's import aliases resolved."""

    qualname: str | None  # e.g. "torch.nn.functional.interpolate"; None when not a plain name chain
    last: str  # final name or attribute
    torch_rooted: bool  # resolves into the torch package
    foreign: bool  # resolves into another imported module (numpy, re, ...)
    attribute: bool  # `something.last(...)` rather than a bare `last(...)`

    def parts(self) -> list[str]:
        return self.qualname.split(".") if self.qualname else [self.last]


def _import_aliases(tree: ast.AST) -> dict[str, str]:
    """Local name -> dotted module or object path, from every import in the file."""
    aliases: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    aliases[alias.asname] = alias.name
                else:
                    root = alias.name.split(".")[0]
                    aliases[root] = root
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                if alias.name != "*":
                    aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return aliases


def _dotted(expr: ast.expr) -> tuple[str, list[str]] | None:
    """`a.b.c` -> ("a", ["b", "c"]); None when the chain does not start at a name."""
    attrs: list[str] = []
    while isinstance(expr, ast.Attribute):
        attrs.append(expr.attr)
        expr = expr.value
    if isinstance(expr, ast.Name):
        return expr.id, attrs[::-1]
    return None


# ---------------------------------------------------------------------------------------------------
# Small helpers


def _names(words: str) -> frozenset[str]:
    return frozenset(words.split())


def _arg(call: ast.Call, keyword: str, position: int | None) -> ast.expr | None:
    for kw in call.keywords:
        if kw.arg == keyword:
            return kw.value
    if position is not None and position < len(call.args):
        arg = call.args[position]
        return None if isinstance(arg, ast.Starred) else arg
    return None


def _has_splat(call: ast.Call) -> bool:
    return any(kw.arg is None for kw in call.keywords) or any(isinstance(a, ast.Starred) for a in call.args)


def _is_const(expr: ast.expr | None, *values: object) -> bool:
    return (
        isinstance(expr, ast.Constant)
        and type(expr.value) in {type(v) for v in values}
        and expr.value in values
    )


def _short(expr: ast.expr, limit: int = 40) -> str:
    text = ast.unparse(expr)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _scope_walk(scope: ast.AST) -> Iterator[ast.AST]:
    """Every node of a scope, not descending into nested functions, lambdas or classes."""
    stack = list(ast.iter_child_nodes(scope))
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            stack.extend(ast.iter_child_nodes(node))


def _position(node: ast.AST) -> tuple[int, int]:
    return getattr(node, "lineno", 0), getattr(node, "col_offset", 0)


# ---------------------------------------------------------------------------------------------------
# Call-shaped rules, as a table


Receiver = Literal["torch", "any", "exact"]
Condition = Callable[[ast.Call, _Callee], str | None]


@dataclass(frozen=True)
class CallRule:
    """A call that is a hazard: by the callee's last name (or full name for "exact").

    receiver "torch": the callee resolves into torch (`F.interpolate`, `nn.CTCLoss`).
    receiver "any": a method on any receiver that is not another library's module (`x.index_add_`),
    or the torch function of that name. receiver "exact": `names` are full dotted names.
    `condition` returns None to skip the call, or the detail to put into the rule's message.
    """

    rule: str
    names: frozenset[str]
    receiver: Receiver
    condition: Condition | None = None

    def matches(self, callee: _Callee) -> bool:
        if self.receiver == "exact":
            return callee.qualname in self.names
        parts = callee.parts()
        named = callee.last in self.names or (
            len(parts) >= 2 and parts[-2] in self.names and callee.last == "from_pretrained"
        )
        if not named:
            return False
        if self.receiver == "torch":
            return callee.torch_rooted
        return callee.torch_rooted or (callee.attribute and not callee.foreign)


def _always(_call: ast.Call, _callee: _Callee) -> str | None:
    return ""


def _accumulate_on(call: ast.Call, callee: _Callee) -> str | None:
    # torch.index_put(x, indices, values, accumulate) vs x.index_put_(indices, values, accumulate):
    # every torch-rooted form (torch.index_put, torch.Tensor.index_put_) passes the tensor first.
    value = _arg(call, "accumulate", 3 if callee.torch_rooted else 2)
    return None if value is None or _is_const(value, False) else ""


def _weights_given(call: ast.Call, callee: _Callee) -> str | None:
    # torch.bincount(x, weights, minlength) vs x.bincount(weights, minlength)
    value = _arg(call, "weights", 1 if callee.torch_rooted else 0)
    return None if value is None or _is_const(value, None) else ""


_LINEAR_MODES = _names("linear bilinear bicubic trilinear")


def _linear_mode(call: ast.Call, callee: _Callee) -> str | None:
    # interpolate(input, size, scale_factor, mode, ...) / Upsample(size, scale_factor, mode, ...)
    mode = _arg(call, "mode", 2 if callee.last == "Upsample" else 3)
    if isinstance(mode, ast.Constant) and mode.value in _LINEAR_MODES:
        return f"{callee.last}(mode={mode.value!r})"
    return None


def _bilinear(_call: ast.Call, callee: _Callee) -> str | None:
    return f"{callee.last} (bilinear)"


def _dataloader_workers(call: ast.Call, _callee: _Callee) -> str | None:
    if _has_splat(call):
        return None  # options come from elsewhere; stay quiet
    workers = _arg(call, "num_workers", 5)
    if workers is None or _is_const(workers, 0):
        return None
    missing = [
        f"{name}="
        for name, position in (("generator", 12), ("worker_init_fn", 10))
        if _arg(call, name, position) is None or _is_const(_arg(call, name, position), None)
    ]
    if not missing:
        return None
    return f"num_workers={_short(workers)} but no {' and no '.join(missing)}"


_AUTOTUNE_MODES = _names("max-autotune max-autotune-no-cudagraphs")
_AUTOTUNE_OPTIONS = _names("max_autotune max_autotune_gemm max_autotune_pointwise coordinate_descent_tuning")


def _autotune(call: ast.Call) -> str | None:
    mode = _arg(call, "mode", None)
    if isinstance(mode, ast.Constant) and mode.value in _AUTOTUNE_MODES:
        return f"mode={mode.value!r}"
    options = _arg(call, "options", None)
    if isinstance(options, ast.Dict):
        for key, value in zip(options.keys, options.values, strict=True):
            if (
                isinstance(key, ast.Constant)
                and key.value in _AUTOTUNE_OPTIONS
                and not _is_const(value, False)
            ):
                return f"options[{key.value!r}]"
    return None


def _compile_autotune(call: ast.Call, _callee: _Callee) -> str | None:
    return _autotune(call)


def _compile_plain(call: ast.Call, _callee: _Callee) -> str | None:
    return None if _autotune(call) else ""


def _fused_attention(_call: ast.Call, callee: _Callee) -> str | None:
    if callee.last == "MultiheadAttention":
        return "MultiheadAttention can dispatch (through scaled_dot_product_attention) to"
    return f"{callee.last} can dispatch to"


def _enables_fused(call: ast.Call, callee: _Callee) -> str | None:
    enabled = _arg(call, "enabled", 0)
    return None if _is_const(enabled, False) else f"{callee.last}(True) turns on"


_FUSED_BACKENDS = _names("FLASH_ATTENTION EFFICIENT_ATTENTION CUDNN_ATTENTION")


def _names_fused_backend(call: ast.Call, _callee: _Callee) -> str | None:
    for node in ast.walk(call):
        if isinstance(node, ast.Attribute) and node.attr in _FUSED_BACKENDS:
            return f"sdpa_kernel({node.attr}) selects"
    return None


def _legacy_sdp_kernel(call: ast.Call, _callee: _Callee) -> str | None:
    # torch.backends.cuda.sdp_kernel(enable_flash=True, enable_math=True, enable_mem_efficient=True, ...)
    for name, position in (("enable_flash", 0), ("enable_mem_efficient", 2), ("enable_cudnn", 3)):
        if not _is_const(_arg(call, name, position), False):
            return f"sdp_kernel({name}) allows"
    return None


def _deterministic_not_true(call: ast.Call, _callee: _Callee) -> str | None:
    mode = _arg(call, "mode", 0)
    return None if _is_const(mode, True) else ""


def _debug_mode_off(call: ast.Call, _callee: _Callee) -> str | None:
    mode = _arg(call, "debug_mode", 0)
    return None if _is_const(mode, 1, 2, "warn", "error") else ""


def _no_seed(call: ast.Call, callee: _Callee) -> str | None:
    seed = _arg(call, "seed", 0) or _arg(call, "a", 0) or _arg(call, "entropy", 0)
    if seed is None or _is_const(seed, None):
        return f"{callee.qualname}() without a seed draws one from the operating system"
    return None


def _torch_reseed(_call: ast.Call, callee: _Callee) -> str | None:
    return f"{callee.qualname}() picks a new nondeterministic seed"


CALL_RULES: tuple[CallRule, ...] = (
    CallRule("index-add", _names("index_add_ index_add"), "any"),
    CallRule("scatter-add", _names("scatter_add_ scatter_add scatter_reduce_ scatter_reduce"), "any"),
    CallRule("index-put-accumulate", _names("index_put_ index_put"), "any", _accumulate_on),
    CallRule("put", _names("put_"), "any"),
    CallRule("put", _names("put"), "torch"),
    CallRule("bincount", _names("bincount"), "any", _weights_given),
    CallRule("histc", _names("histc"), "any"),
    CallRule("embedding-bag", _names("embedding_bag EmbeddingBag"), "torch"),
    CallRule("ctc-loss", _names("ctc_loss CTCLoss"), "torch"),
    CallRule("interpolate", _names("interpolate upsample Upsample"), "torch", _linear_mode),
    CallRule("interpolate", _names("upsample_bilinear UpsamplingBilinear2d"), "torch", _bilinear),
    CallRule(
        "max-unpool",
        _names("max_unpool1d max_unpool2d max_unpool3d MaxUnpool1d MaxUnpool2d MaxUnpool3d"),
        "torch",
    ),
    CallRule("grid-sample", _names("grid_sample"), "torch"),
    CallRule("dataloader-unseeded-workers", _names("DataLoader"), "torch", _dataloader_workers),
    CallRule("compile-autotune", _names("compile"), "torch", _compile_autotune),
    CallRule("compile", _names("compile"), "torch", _compile_plain),
    CallRule(
        "fused-attention",
        _names("scaled_dot_product_attention MultiheadAttention"),
        "torch",
        _fused_attention,
    ),
    CallRule(
        "fused-attention",
        _names("enable_flash_sdp enable_mem_efficient_sdp enable_cudnn_sdp"),
        "torch",
        _enables_fused,
    ),
    CallRule("fused-attention", _names("sdpa_kernel"), "torch", _names_fused_backend),
    CallRule("fused-attention", _names("sdp_kernel"), "torch", _legacy_sdp_kernel),
    CallRule(
        "deterministic-algorithms-off",
        _names("use_deterministic_algorithms"),
        "torch",
        _deterministic_not_true,
    ),
    CallRule(
        "deterministic-algorithms-off", _names("set_deterministic_debug_mode"), "torch", _debug_mode_off
    ),
    CallRule(
        "seed-from-entropy",
        _names(
            "random.seed random.Random numpy.random.seed numpy.random.default_rng "
            "numpy.random.RandomState numpy.random.SeedSequence"
        ),
        "exact",
        _no_seed,
    ),
    CallRule(
        "seed-from-entropy",
        _names("torch.seed torch.random.seed torch.cuda.seed torch.cuda.seed_all"),
        "exact",
        _torch_reseed,
    ),
)


@dataclass(frozen=True)
class AssignRule:
    """An assignment to a torch setting that is a hazard unless the value is literally `safe`."""

    rule: str
    target: str
    safe: bool
    detail: str = ""


ASSIGN_RULES: tuple[AssignRule, ...] = (
    AssignRule("cudnn-benchmark", "torch.backends.cudnn.benchmark", safe=False),
    AssignRule("cudnn-deterministic-off", "torch.backends.cudnn.deterministic", safe=True),
    *(
        AssignRule("compile-autotune", f"torch._inductor.config.{option}", safe=False, detail=option)
        for option in sorted(_AUTOTUNE_OPTIONS)
    ),
)

# Calls whose value changes on every run, by full dotted name (after import aliases).
_CLOCK_CALLS = _names(
    "time.time time.time_ns time.perf_counter time.perf_counter_ns time.monotonic time.monotonic_ns "
    "time.process_time time.process_time_ns datetime.datetime.now datetime.datetime.utcnow "
    "datetime.datetime.today datetime.date.today"
)
_ENTROPY_CALLS = _names("os.urandom os.getrandom os.getpid uuid.uuid1 uuid.uuid4 random.SystemRandom")
# Calls whose arguments are seeds (any receiver), besides keyword arguments named *seed*.
_SEED_CALLS = _names(
    "seed manual_seed manual_seed_all set_seed seed_everything default_rng RandomState SeedSequence "
    "Random PCG64 Philox MT19937 PRNGKey set_random_seed"
)

# How a use of a torch.empty result is classified (see _Scanner._check_empty_reads).
_FILL_METHODS = _names(
    "zero_ fill_ normal_ uniform_ copy_ random_ bernoulli_ exponential_ geometric_ log_normal_ cauchy_"
)
_METADATA = _names(
    "shape dtype device ndim layout is_cuda requires_grad names nbytes itemsize size dim numel nelement "
    "stride element_size is_contiguous storage_offset data_ptr get_device is_floating_point is_complex "
    "new_zeros new_ones new_full new_empty new_tensor"
)
_VIEW_METHODS = _names(
    "view view_as reshape reshape_as flatten unflatten squeeze unsqueeze permute transpose t narrow select "
    "expand expand_as as_strided movedim diagonal contiguous clone detach to cuda cpu float half double "
    "bfloat16 long int pin_memory share_memory_ requires_grad_"
)
_VIEW_ATTRIBUTES = _names("T mT H mH data real imag")
_READING_BUILTINS = _names("print float int bool sum min max abs")
# In-place writes that may cover only part of the tensor: what is read later is unknowable.
_PARTIAL_WRITE_METHODS = _names(
    "scatter_ index_copy_ index_fill_ masked_fill_ masked_scatter_ put_ index_put_ fill_diagonal_"
)
_OUT_KEYWORDS = _names("out output")
_WRAPPING_CONSTRUCTORS = _names("Parameter Buffer UninitializedParameter register_buffer")
# torch namespaces whose functions write into tensors passed to them (collectives, kernels' outputs).
_WRITING_NAMESPACES = _names("torch.distributed torch.cuda.nccl torch._C torch.ops")
_EMPTY_FACTORIES = _names("empty empty_like empty_strided empty_permuted")

# Consumers for which the order of a set's elements does not matter.
_ORDER_FREE_CONSUMERS = _names("sorted set frozenset len sum min max any all")
_IGNORE_COMMENT = re.compile(r"#\s*reprobox:\s*ignore(?:\[(?P<rules>[^\]]*)\])?")

Use = Literal["fill", "read", "escape", "neutral"]


# ---------------------------------------------------------------------------------------------------
# The scanner


class _Scanner(ast.NodeVisitor):
    """One pass over one file's tree; findings accumulate in `self.findings`."""

    def __init__(self, path: str, tree: ast.Module) -> None:
        self.path = path
        self.aliases = _import_aliases(tree)
        self.parents: dict[ast.AST, ast.AST] = {
            child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)
        }
        self.findings: list[Finding] = []
        self._set_names: list[frozenset[str]] = []
        self._math_attention_depth = 0

    # -- reporting ----------------------------------------------------------------------------------

    def report(self, node: ast.AST, rule_id: str, detail: str = "") -> None:
        rule = RULES[rule_id]
        line, column = _position(node)
        self.findings.append(
            Finding(
                path=self.path,
                line=line,
                column=column + 1,
                rule=rule.id,
                message=rule.message.format(detail=detail),
                fix=rule.fix,
                severity=rule.severity,
            )
        )

    # -- resolution ---------------------------------------------------------------------------------

    def resolve(self, expr: ast.expr) -> _Callee:
        chain = _dotted(expr)
        if chain is None:
            last = expr.attr if isinstance(expr, ast.Attribute) else ""
            return _Callee(None, last, torch_rooted=False, foreign=False, attribute=True)
        base, attrs = chain
        imported = self.aliases.get(base)
        qualname = ".".join([imported or base, *attrs])
        root = qualname.split(".")[0]
        return _Callee(
            qualname=qualname,
            last=qualname.split(".")[-1],
            torch_rooted=imported is not None and root == "torch",
            foreign=imported is not None and root != "torch",
            attribute=bool(attrs),
        )

    # -- scopes -------------------------------------------------------------------------------------

    def _enter_scope(self, scope: ast.AST) -> None:
        self._set_names.append(self._names_bound_to_sets(scope))
        self._check_empty_reads(scope)

    def visit_Module(self, node: ast.Module) -> None:
        self._enter_scope(node)
        self.generic_visit(node)
        self._set_names.pop()

    def _visit_function(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        for decorator in node.decorator_list:
            if not isinstance(decorator, ast.Call) and self.resolve(decorator).qualname == "torch.compile":
                self.report(decorator, "compile")
        self._enter_scope(node)
        self.generic_visit(node)
        self._set_names.pop()

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self._visit_function(node)

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> None:
        self._visit_function(node)

    def visit_Lambda(self, node: ast.Lambda) -> None:
        self._set_names.append(frozenset())
        self.generic_visit(node)
        self._set_names.pop()

    def visit_With(self, node: ast.With) -> None:
        math_only = any(self._is_math_only_attention(item.context_expr) for item in node.items)
        self._math_attention_depth += math_only
        self.generic_visit(node)
        self._math_attention_depth -= math_only

    def _is_math_only_attention(self, expr: ast.expr) -> bool:
        if not isinstance(expr, ast.Call) or self.resolve(expr.func).last != "sdpa_kernel":
            return False
        backends = [n.attr for n in ast.walk(expr) if isinstance(n, ast.Attribute) and n.attr.isupper()]
        return bool(backends) and all(b == "MATH" for b in backends)

    # -- calls --------------------------------------------------------------------------------------

    def visit_Call(self, node: ast.Call) -> None:
        callee = self.resolve(node.func)
        for entry in CALL_RULES:
            if not entry.matches(callee):
                continue
            if entry.rule == "fused-attention" and self._math_attention_depth:
                continue
            detail = (entry.condition or _always)(node, callee)
            if detail is not None:
                self.report(node, entry.rule, detail)
        if callee.attribute and not callee.torch_rooted and not callee.foreign and callee.last == "compile":
            detail = _autotune(node)  # model.compile(mode="max-autotune"), nn.Module.compile
            if detail:
                self.report(node, "compile-autotune", detail)
        self._check_seed_call(node, callee)
        self._check_set_consumer(node, callee)
        self._check_unassigned_empty(node, callee)
        self.generic_visit(node)

    # -- assignments --------------------------------------------------------------------------------

    def visit_Assign(self, node: ast.Assign) -> None:
        for target in node.targets:
            self._check_assignment(target, node.value)
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is not None:
            self._check_assignment(node.target, node.value)
        self.generic_visit(node)

    def _check_assignment(self, target: ast.expr, value: ast.expr) -> None:
        if isinstance(target, ast.Attribute):
            qualname = self.resolve(target).qualname
            for entry in ASSIGN_RULES:
                if qualname == entry.target and not _is_const(value, entry.safe):
                    self.report(target, entry.rule, entry.detail)
        name = target.id if isinstance(target, ast.Name) else getattr(target, "attr", "")
        if "seed" in name.lower():
            self._check_seed_value(value)

    # -- seeds --------------------------------------------------------------------------------------

    def _check_seed_call(self, node: ast.Call, callee: _Callee) -> None:
        if callee.last in _SEED_CALLS:
            for arg in node.args:
                self._check_seed_value(arg)
        for kw in node.keywords:
            if callee.last in _SEED_CALLS or (kw.arg and "seed" in kw.arg.lower()):
                self._check_seed_value(kw.value)

    def _check_seed_value(self, value: ast.expr) -> None:
        for node in ast.walk(value):
            if not isinstance(node, ast.Call):
                continue
            qualname = self.resolve(node.func).qualname or ""
            if qualname in _CLOCK_CALLS:
                self.report(value, "seed-from-clock", f"{qualname}()")
                return
            if qualname in _ENTROPY_CALLS or qualname.startswith("secrets."):
                self.report(value, "seed-from-entropy", f"{qualname}()")
                return

    # -- set iteration ------------------------------------------------------------------------------

    def _names_bound_to_sets(self, scope: ast.AST) -> frozenset[str]:
        """Names that every binding in the scope binds to a set (`s |= ...` keeps a set a set)."""
        bound: dict[str, bool] = {}
        for node in _scope_walk(scope):
            if not isinstance(node, ast.Name) or not isinstance(node.ctx, ast.Store):
                continue
            parent = self.parents.get(node)
            if isinstance(parent, ast.AugAssign):
                continue
            value = parent.value if isinstance(parent, (ast.Assign, ast.AnnAssign, ast.NamedExpr)) else None
            is_set = value is not None and self._is_set_literal_or_call(value)
            bound[node.id] = bound.get(node.id, True) and is_set
        return frozenset(name for name, is_set in bound.items() if is_set)

    def _is_set_literal_or_call(self, expr: ast.expr) -> bool:
        if isinstance(expr, (ast.Set, ast.SetComp)):
            return True
        return (
            isinstance(expr, ast.Call)
            and isinstance(expr.func, ast.Name)
            and expr.func.id in {"set", "frozenset"}
            and expr.func.id not in self.aliases
        )

    def _is_set(self, expr: ast.expr) -> bool:
        if self._is_set_literal_or_call(expr):
            return True
        return isinstance(expr, ast.Name) and bool(self._set_names) and expr.id in self._set_names[-1]

    def _consumed_order_free(self, node: ast.AST) -> bool:
        parent = self.parents.get(node)
        return (
            isinstance(parent, ast.Call)
            and node in parent.args
            and isinstance(parent.func, ast.Name)
            and parent.func.id in _ORDER_FREE_CONSUMERS
        )

    def _check_set_consumer(self, node: ast.Call, callee: _Callee) -> None:
        """enumerate(S), list(S), tuple(S) and "sep".join(S), where S is a set literal, a set(...) or
        frozenset(...) call, a set comprehension, or a name bound only to those in this scope.

        Comprehensions over S and loops over S that build a sequence are checked in their visitors;
        sorted(S), len(S), sum(...) and other order-free consumers are fine.
        """
        if not node.args or not self._is_set(node.args[0]):
            return
        bare = isinstance(node.func, ast.Name) and node.func.id not in self.aliases
        numbered = bare and callee.last == "enumerate"
        listed = bare and callee.last in {"list", "tuple"} and not self._consumed_order_free(node)
        joined = isinstance(node.func, ast.Attribute) and node.func.attr == "join" and len(node.args) == 1
        if numbered or listed or joined:
            self.report(node, "set-iteration-order")

    def _check_comprehension(self, node: ast.ListComp | ast.DictComp | ast.GeneratorExp) -> None:
        if self._is_set(node.generators[0].iter) and not self._consumed_order_free(node):
            self.report(node, "set-iteration-order")
        self.generic_visit(node)

    def visit_ListComp(self, node: ast.ListComp) -> None:
        self._check_comprehension(node)

    def visit_DictComp(self, node: ast.DictComp) -> None:
        self._check_comprehension(node)

    def visit_GeneratorExp(self, node: ast.GeneratorExp) -> None:
        self._check_comprehension(node)

    def _visit_for(self, node: ast.For | ast.AsyncFor) -> None:
        # A plain loop over a set matters when it builds an ordered thing: d[key] = ..., out.append(...).
        if self._is_set(node.iter) and _builds_sequence(node):
            self.report(node, "set-iteration-order")
        self.generic_visit(node)

    def visit_For(self, node: ast.For) -> None:
        self._visit_for(node)

    def visit_AsyncFor(self, node: ast.AsyncFor) -> None:
        self._visit_for(node)

    # -- uninitialized memory -----------------------------------------------------------------------

    def _is_empty_factory(self, expr: ast.expr) -> bool:
        if not isinstance(expr, ast.Call) or any(_is_const(arg, 0) for arg in expr.args):
            return False  # a dimension of literal 0: no elements to be uninitialized
        callee = self.resolve(expr.func)
        if callee.torch_rooted and callee.last in _EMPTY_FACTORIES:
            return True
        return callee.last == "new_empty" and callee.attribute and not callee.foreign

    def _check_unassigned_empty(self, node: ast.Call, _callee: _Callee) -> None:
        parent = self.parents.get(node)
        if isinstance(parent, (ast.Assign, ast.AnnAssign, ast.NamedExpr)) or not self._is_empty_factory(node):
            return
        use, at = self._classify_use(node)
        if use == "read":
            self.report(node, "uninitialized-empty", f"{_short(node.func)}() is read on line {at} unfilled")

    def _check_empty_reads(self, scope: ast.AST) -> None:
        """`name = torch.empty(...)` read before anything fills it.

        The first use of the name after the assignment, in source order within the same scope,
        decides: an in-place fill (.zero_(), .fill_(), .normal_(), .copy_(), ...), any store into it
        (`buf[i] = ...`, even partial, so loops that fill a buffer stay quiet), `out=buf`, or an
        `nn.init.*_(buf)` call counts as filled; arithmetic, a reducing or in-place-arithmetic method,
        `buf += ...`, or passing it to a torch function counts as a read and is reported; anything
        else (returning it, passing it to other code, rebinding it) ends the search quietly.
        Metadata (`.shape`, `.size()`, ...) is skipped over, and views (`.view()`, `buf[0]`,
        `.to()`) are followed to their own first use.
        """
        walked = list(_scope_walk(scope))
        for node in walked:
            if not isinstance(node, (ast.Assign, ast.AnnAssign)) or node.value is None:
                continue
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if len(targets) != 1 or not isinstance(targets[0], ast.Name):
                continue
            factory = node.value
            if not isinstance(factory, ast.Call) or not self._is_empty_factory(factory):
                continue
            name = targets[0].id
            after = (node.end_lineno or node.lineno, node.end_col_offset or 0)
            uses = sorted(
                (n for n in walked if isinstance(n, ast.Name) and n.id == name and _position(n) >= after),
                key=_position,
            )
            for use_node in uses:
                use, at = self._classify_use(use_node)
                if use == "neutral":
                    continue
                if use == "read":
                    detail = f"{name} = {_short(factory.func)}(...) is read on line {at} before it is filled"
                    self.report(factory, "uninitialized-empty", detail)
                break

    def _classify_use(self, expr: ast.expr) -> tuple[Use, int]:
        """Fill, read, escape or neutral: what the code around `expr` does with the tensor."""
        line = getattr(expr, "lineno", 0)
        if isinstance(expr, ast.Name) and not isinstance(expr.ctx, ast.Load):
            parent = self.parents.get(expr)
            augmented = isinstance(parent, ast.AugAssign) and parent.target is expr
            return ("read" if augmented else "escape"), line
        step: Use | ast.expr = expr
        while not isinstance(step, str):
            step = self._follow(step)
        return step, line

    def _follow(self, expr: ast.expr) -> Use | ast.expr:
        """One step outward from `expr`: a verdict, or the view of the tensor to follow next."""
        parent = self.parents.get(expr)
        if isinstance(parent, ast.Subscript) and parent.value is expr:
            if not isinstance(parent.ctx, ast.Store):
                return parent  # buf[i] is a view: its use decides
            grand = self.parents.get(parent)
            return "read" if isinstance(grand, ast.AugAssign) and grand.target is parent else "fill"
        if isinstance(parent, ast.Attribute) and parent.value is expr:
            return self._follow_attribute(parent)
        if isinstance(parent, ast.keyword) or (isinstance(parent, ast.Call) and expr in parent.args):
            if isinstance(parent, ast.keyword) and parent.arg in _OUT_KEYWORDS:
                return "fill"
            call = self.parents.get(parent) if isinstance(parent, ast.keyword) else parent
            return self._classify_argument(call, expr)
        return (
            "read" if isinstance(parent, (ast.BinOp, ast.UnaryOp, ast.Compare, ast.AugAssign)) else "escape"
        )

    def _follow_attribute(self, attribute: ast.Attribute) -> Use | ast.expr:
        grand = self.parents.get(attribute)
        if attribute.attr in _METADATA:
            return "neutral"
        if isinstance(grand, ast.Call) and grand.func is attribute:
            if attribute.attr in _FILL_METHODS:
                return "fill"
            if attribute.attr in _PARTIAL_WRITE_METHODS:
                return "escape"
            return grand if attribute.attr in _VIEW_METHODS else "read"
        return attribute if attribute.attr in _VIEW_ATTRIBUTES else "escape"

    def _classify_argument(self, call: ast.AST | None, arg: ast.expr) -> Use:
        if not isinstance(call, ast.Call):
            return "escape"
        callee = self.resolve(call.func)
        if callee.torch_rooted and callee.last.endswith("_") and call.args and call.args[0] is arg:
            return "fill"  # torch.nn.init.normal_(w), ...
        qualname = callee.qualname or ""
        writes = any(qualname.startswith(f"{namespace}.") for namespace in _WRITING_NAMESPACES)
        if callee.torch_rooted and not writes and not callee.last.startswith("_"):
            return "escape" if callee.last in _WRAPPING_CONSTRUCTORS else "read"
        if (
            isinstance(call.func, ast.Name)
            and call.func.id in _READING_BUILTINS
            and call.func.id not in self.aliases
        ):
            return "read"
        return "escape"


def _builds_sequence(loop: ast.For | ast.AsyncFor) -> bool:
    """Whether a loop's result depends on its order: it appends, or numbers what it stores.

    `out.append(w)` and `index[w] = len(index)` (or `= i` with `i += 1` in the loop) do;
    `table[w] = f(w)` does not, as each entry is the same whatever the order.
    """
    counters = {
        node.target.id
        for node in ast.walk(loop)
        if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name)
    }
    for node in ast.walk(loop):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in {"append", "extend", "insert", "write"}
        ):
            return True
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Subscript) for t in node.targets):
            for part in ast.walk(node.value):
                if isinstance(part, ast.Name) and (part.id in counters or part.id == "len"):
                    return True
    return False


def _suppressed(finding: Finding, lines: Sequence[str]) -> bool:
    if not 1 <= finding.line <= len(lines):
        return False
    match = _IGNORE_COMMENT.search(lines[finding.line - 1])
    if match is None:
        return False
    listed = match.group("rules")
    return listed is None or finding.rule in {r.strip() for r in listed.split(",")}


def _sort_key(finding: Finding) -> tuple[str, int, int, str]:
    return finding.path, finding.line, finding.column, finding.rule


# ---------------------------------------------------------------------------------------------------
# Public entry points


def scan_source(source: str, path: str) -> list[Finding]:
    """Hazards in one file's source text; `path` is only used to label the findings."""
    try:
        tree = ast.parse(source, filename=path)
    except SyntaxError as error:
        reason = f"{error.msg}, line {error.lineno}" if error.lineno else error.msg
        return [_file_finding(path, "syntax-error", reason, error.lineno or 1, error.offset or 1)]
    except (ValueError, RecursionError, MemoryError) as error:
        return [_file_finding(path, "syntax-error", str(error) or type(error).__name__)]
    scanner = _Scanner(path, tree)
    try:
        scanner.visit(tree)
    except RecursionError:
        return [_file_finding(path, "syntax-error", "nested too deeply to analyse")]
    lines = source.splitlines()
    unique = {(f.line, f.column, f.rule): f for f in scanner.findings if not _suppressed(f, lines)}
    return sorted(unique.values(), key=_sort_key)


def scan_tree(code_dir: Path, *, exclude: Sequence[str] = DEFAULT_EXCLUDE) -> list[Finding]:
    """Hazards in every `.py` file under `code_dir`, skipping folders whose name matches `exclude`.

    `exclude` entries are folder or file names, or shell patterns (`build*`), matched against each
    path component; paths in the findings are relative to `code_dir`, with forward slashes.
    """
    if not code_dir.is_dir():
        raise UsageError(
            f"code directory {code_dir} does not exist or is not a folder; pass the folder that holds the "
            "job's Python code"
        )
    findings: list[Finding] = []
    for folder, dirnames, filenames in os.walk(code_dir):
        dirnames[:] = sorted(d for d in dirnames if not _excluded(d, exclude))
        for filename in sorted(filenames):
            if not filename.endswith(".py") or _excluded(filename, exclude):
                continue
            file_path = Path(folder) / filename
            relative = file_path.relative_to(code_dir).as_posix()
            try:
                source = importlib.util.decode_source(file_path.read_bytes())
            except OSError as error:
                findings.append(_file_finding(relative, "unreadable-file", error.strerror or str(error)))
                continue
            except (UnicodeDecodeError, SyntaxError) as error:
                findings.append(_file_finding(relative, "syntax-error", f"cannot decode it: {error}"))
                continue
            findings.extend(scan_source(source, relative))
    return sorted(findings, key=_sort_key)


def _excluded(name: str, patterns: Sequence[str]) -> bool:
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in patterns)


def _file_finding(path: str, rule_id: str, detail: str, line: int = 1, column: int = 1) -> Finding:
    rule = RULES[rule_id]
    return Finding(
        path=path,
        line=line,
        column=max(column, 1),
        rule=rule.id,
        message=rule.message.format(detail=detail),
        fix=rule.fix,
        severity=rule.severity,
    )
