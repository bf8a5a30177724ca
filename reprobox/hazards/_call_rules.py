"""Which calls, and which assignments to torch settings, are hazards: tables of rules with conditions.

A condition looks at one call's arguments and returns None to skip it, or the detail that fills the
rule's message. The names of calls whose value changes on every run (clock, entropy) and of calls that
take seeds are here too; the scanner checks seed values against them.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from reprobox.hazards._syntax import _arg, _Callee, _has_splat, _is_const, _names, _short

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


# DataLoader(dataset, batch_size, shuffle, sampler, batch_sampler, num_workers, collate_fn, pin_memory,
#            drop_last, timeout, worker_init_fn, multiprocessing_context, generator, ...)
_SEEDING_OPTIONS = (("generator", 12), ("worker_init_fn", 10))


def _dataloader_seeding(call: ast.Call) -> tuple[ast.expr | None, list[str], list[str]]:
    """(num_workers, seeding options passed as None or left out, options `**kwargs` may hold)."""
    splat = _has_splat(call)
    workers = _arg(call, "num_workers", 5)
    missing: list[str] = []
    unknown: list[str] = []
    for name, position in _SEEDING_OPTIONS:
        value = _arg(call, name, position)
        if _is_const(value, None) or (value is None and not splat):
            missing.append(f"{name}=")
        elif value is None:
            unknown.append(f"{name}=")
    return workers, missing, unknown


def _dataloader_workers(call: ast.Call, _callee: _Callee) -> str | None:
    workers, missing, _unknown = _dataloader_seeding(call)
    if workers is None or _is_const(workers, 0) or not missing:
        return None
    return f"num_workers={_short(workers)} but no {' and no '.join(missing)}"


def _dataloader_unchecked(call: ast.Call, _callee: _Callee) -> str | None:
    # Only when options hidden in *args/**kwargs decide it, and _dataloader_workers has not spoken.
    workers, missing, unknown = _dataloader_seeding(call)
    if not unknown or _is_const(workers, 0) or (workers is not None and missing):
        return None
    splats = [f"*{_short(a.value)}" for a in call.args if isinstance(a, ast.Starred)]
    splats += [f"**{_short(kw.value)}" for kw in call.keywords if kw.arg is None]
    return " and ".join(splats)


def _random_split_unseeded(call: ast.Call, _callee: _Callee) -> str | None:
    # random_split(dataset, lengths, generator=default_generator)
    generator = _arg(call, "generator", 2)
    if generator is None:
        return None if _has_splat(call) else "without generator="
    if _is_const(generator, None) or (
        isinstance(generator, ast.Attribute) and generator.attr == "default_generator"
    ):
        return f"with generator={_short(generator)}"
    return None


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
    CallRule("dataloader-unchecked", _names("DataLoader"), "torch", _dataloader_unchecked),
    CallRule("random-split-unseeded", _names("random_split"), "torch", _random_split_unseeded),
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
        "unseeded-generator",
        _names(
            "random.seed random.Random numpy.random.seed numpy.random.default_rng "
            "numpy.random.RandomState numpy.random.SeedSequence numpy.random.PCG64 numpy.random.PCG64DXSM "
            "numpy.random.Philox numpy.random.SFC64 numpy.random.MT19937"
        ),
        "exact",
        _no_seed,
    ),
    CallRule(
        "unseeded-generator",
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
