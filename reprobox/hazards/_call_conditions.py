"""The conditions of the call rules: each looks at one call's arguments and returns None to let it
pass, or the detail that fills the rule's message (`""` when the message needs none).

Arguments are found by keyword or by position, as the callee's signature (quoted above each condition)
places them; options hidden in `*args` or `**kwargs` are never guessed.
"""

from __future__ import annotations

import ast

from reprobox.hazards._syntax import _arg, _Callee, _has_splat, _is_const, _names, _short


def always(_call: ast.Call, _callee: _Callee) -> str | None:
    return ""


def accumulate_on(call: ast.Call, callee: _Callee) -> str | None:
    # torch.index_put(x, indices, values, accumulate) vs x.index_put_(indices, values, accumulate):
    # every torch-rooted form (torch.index_put, torch.Tensor.index_put_) passes the tensor first.
    value = _arg(call, "accumulate", 3 if callee.torch_rooted else 2)
    return None if value is None or _is_const(value, False) else ""


def weights_given(call: ast.Call, callee: _Callee) -> str | None:
    # torch.bincount(x, weights, minlength) vs x.bincount(weights, minlength)
    value = _arg(call, "weights", 1 if callee.torch_rooted else 0)
    return None if value is None or _is_const(value, None) else ""


_LINEAR_MODES = _names("linear bilinear bicubic trilinear")


def linear_mode(call: ast.Call, callee: _Callee) -> str | None:
    # interpolate(input, size, scale_factor, mode, ...) / Upsample(size, scale_factor, mode, ...)
    mode = _arg(call, "mode", 2 if callee.last == "Upsample" else 3)
    if isinstance(mode, ast.Constant) and mode.value in _LINEAR_MODES:
        return f"{callee.last}(mode={mode.value!r})"
    return None


def bilinear(_call: ast.Call, callee: _Callee) -> str | None:
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


def dataloader_workers(call: ast.Call, _callee: _Callee) -> str | None:
    workers, missing, _unknown = _dataloader_seeding(call)
    if workers is None or _is_const(workers, 0) or not missing:
        return None
    return f"num_workers={_short(workers)} but no {' and no '.join(missing)}"


def dataloader_unchecked(call: ast.Call, _callee: _Callee) -> str | None:
    # Only when options hidden in *args/**kwargs decide it, and dataloader_workers has not spoken.
    workers, missing, unknown = _dataloader_seeding(call)
    if not unknown or _is_const(workers, 0) or (workers is not None and missing):
        return None
    splats = [f"*{_short(a.value)}" for a in call.args if isinstance(a, ast.Starred)]
    splats += [f"**{_short(kw.value)}" for kw in call.keywords if kw.arg is None]
    return " and ".join(splats)


def random_split_unseeded(call: ast.Call, _callee: _Callee) -> str | None:
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
AUTOTUNE_OPTIONS = _names("max_autotune max_autotune_gemm max_autotune_pointwise coordinate_descent_tuning")


def autotune(call: ast.Call) -> str | None:
    mode = _arg(call, "mode", None)
    if isinstance(mode, ast.Constant) and mode.value in _AUTOTUNE_MODES:
        return f"mode={mode.value!r}"
    options = _arg(call, "options", None)
    if isinstance(options, ast.Dict):
        for key, value in zip(options.keys, options.values, strict=True):
            if (
                isinstance(key, ast.Constant)
                and key.value in AUTOTUNE_OPTIONS
                and not _is_const(value, False)
            ):
                return f"options[{key.value!r}]"
    return None


def compile_autotune(call: ast.Call, _callee: _Callee) -> str | None:
    return autotune(call)


def compile_plain(call: ast.Call, _callee: _Callee) -> str | None:
    return None if autotune(call) else ""


def fused_attention(_call: ast.Call, callee: _Callee) -> str | None:
    if callee.last == "MultiheadAttention":
        return "MultiheadAttention can dispatch (through scaled_dot_product_attention) to"
    return f"{callee.last} can dispatch to"


def enables_fused(call: ast.Call, callee: _Callee) -> str | None:
    enabled = _arg(call, "enabled", 0)
    return None if _is_const(enabled, False) else f"{callee.last}(True) turns on"


_FUSED_BACKENDS = _names("FLASH_ATTENTION EFFICIENT_ATTENTION CUDNN_ATTENTION")


def names_fused_backend(call: ast.Call, _callee: _Callee) -> str | None:
    for node in ast.walk(call):
        if isinstance(node, ast.Attribute) and node.attr in _FUSED_BACKENDS:
            return f"sdpa_kernel({node.attr}) selects"
    return None


def legacy_sdp_kernel(call: ast.Call, _callee: _Callee) -> str | None:
    # torch.backends.cuda.sdp_kernel(enable_flash=True, enable_math=True, enable_mem_efficient=True, ...)
    for name, position in (("enable_flash", 0), ("enable_mem_efficient", 2), ("enable_cudnn", 3)):
        if not _is_const(_arg(call, name, position), False):
            return f"sdp_kernel({name}) allows"
    return None


def deterministic_not_true(call: ast.Call, _callee: _Callee) -> str | None:
    mode = _arg(call, "mode", 0)
    return None if _is_const(mode, True) else ""


def debug_mode_off(call: ast.Call, _callee: _Callee) -> str | None:
    mode = _arg(call, "debug_mode", 0)
    return None if _is_const(mode, 1, 2, "warn", "error") else ""


def no_seed(call: ast.Call, callee: _Callee) -> str | None:
    seed = _arg(call, "seed", 0) or _arg(call, "a", 0) or _arg(call, "entropy", 0)
    if seed is None or _is_const(seed, None):
        return f"{callee.qualname}() without a seed draws one from the operating system"
    return None


def torch_reseed(_call: ast.Call, callee: _Callee) -> str | None:
    return f"{callee.qualname}() picks a new nondeterministic seed"
