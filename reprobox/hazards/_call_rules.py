"""Which calls, and which assignments to torch settings, are hazards: tables of rules with conditions.

A condition (in `_call_conditions`) looks at one call's arguments and returns None to skip it, or the
detail that fills the rule's message. The names of calls whose value changes on every run (clock,
entropy) and of calls that take seeds are here too; the scanner checks seed values against them.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from reprobox.hazards._call_conditions import (
    AUTOTUNE_OPTIONS,
    accumulate_on,
    bilinear,
    compile_autotune,
    compile_plain,
    dataloader_unchecked,
    dataloader_workers,
    debug_mode_off,
    deterministic_not_true,
    enables_fused,
    fused_attention,
    legacy_sdp_kernel,
    linear_mode,
    names_fused_backend,
    no_seed,
    random_split_unseeded,
    torch_reseed,
    weights_given,
)
from reprobox.hazards._library_conditions import (
    LIGHTGBM_ESTIMATORS,
    SKLEARN_RANDOM,
    lightgbm_not_deterministic,
    retrains_tokenizer,
    sklearn_unseeded,
    tokenizers_trainer,
)
from reprobox.hazards._syntax import _Callee, _names

Receiver = Literal["torch", "any", "exact", "package"]
Condition = Callable[[ast.Call, _Callee], str | None]


@dataclass(frozen=True)
class CallRule:
    """A call that is a hazard: by the callee's last name (or full name for "exact").

    receiver "torch": the callee resolves into torch (`F.interpolate`, `nn.CTCLoss`).
    receiver "any": a method on any receiver that is not another library's module (`x.index_add_`),
    or the torch function of that name. receiver "exact": `names` are full dotted names. receiver
    "package": the callee resolves into `package` (`sklearn.ensemble.RandomForestClassifier`, however
    imported) and ends in one of `names`.
    `condition` returns None to skip the call, or the detail to put into the rule's message.
    """

    rule: str
    names: frozenset[str]
    receiver: Receiver
    condition: Condition | None = None
    package: str = ""

    def matches(self, callee: _Callee) -> bool:
        if self.receiver == "exact":
            return callee.qualname in self.names
        if self.receiver == "package":
            root = (callee.qualname or "").split(".")[0]
            return root == self.package and callee.foreign and callee.last in self.names
        parts = callee.parts()
        named = callee.last in self.names or (
            len(parts) >= 2 and parts[-2] in self.names and callee.last == "from_pretrained"
        )
        if not named:
            return False
        if self.receiver == "torch":
            return callee.torch_rooted
        return callee.torch_rooted or (callee.attribute and not callee.foreign)


CALL_RULES: tuple[CallRule, ...] = (
    CallRule("index-add", _names("index_add_ index_add"), "any"),
    CallRule("scatter-add", _names("scatter_add_ scatter_add scatter_reduce_ scatter_reduce"), "any"),
    CallRule("index-put-accumulate", _names("index_put_ index_put"), "any", accumulate_on),
    CallRule("put", _names("put_"), "any"),
    CallRule("put", _names("put"), "torch"),
    CallRule("bincount", _names("bincount"), "any", weights_given),
    CallRule("histc", _names("histc"), "any"),
    CallRule("embedding-bag", _names("embedding_bag EmbeddingBag"), "torch"),
    CallRule("ctc-loss", _names("ctc_loss CTCLoss"), "torch"),
    CallRule("interpolate", _names("interpolate upsample Upsample"), "torch", linear_mode),
    CallRule("interpolate", _names("upsample_bilinear UpsamplingBilinear2d"), "torch", bilinear),
    CallRule(
        "max-unpool",
        _names("max_unpool1d max_unpool2d max_unpool3d MaxUnpool1d MaxUnpool2d MaxUnpool3d"),
        "torch",
    ),
    CallRule("grid-sample", _names("grid_sample"), "torch"),
    CallRule("dataloader-unseeded-workers", _names("DataLoader"), "torch", dataloader_workers),
    CallRule("dataloader-unchecked", _names("DataLoader"), "torch", dataloader_unchecked),
    CallRule("random-split-unseeded", _names("random_split"), "torch", random_split_unseeded),
    CallRule("compile-autotune", _names("compile"), "torch", compile_autotune),
    CallRule("compile", _names("compile"), "torch", compile_plain),
    CallRule(
        "fused-attention",
        _names("scaled_dot_product_attention MultiheadAttention"),
        "torch",
        fused_attention,
    ),
    CallRule(
        "fused-attention",
        _names("enable_flash_sdp enable_mem_efficient_sdp enable_cudnn_sdp"),
        "torch",
        enables_fused,
    ),
    CallRule("fused-attention", _names("sdpa_kernel"), "torch", names_fused_backend),
    CallRule("fused-attention", _names("sdp_kernel"), "torch", legacy_sdp_kernel),
    CallRule(
        "deterministic-algorithms-off",
        _names("use_deterministic_algorithms"),
        "torch",
        deterministic_not_true,
    ),
    CallRule("deterministic-algorithms-off", _names("set_deterministic_debug_mode"), "torch", debug_mode_off),
    CallRule(
        "unseeded-generator",
        _names(
            "random.seed random.Random numpy.random.seed numpy.random.default_rng "
            "numpy.random.RandomState numpy.random.SeedSequence numpy.random.PCG64 numpy.random.PCG64DXSM "
            "numpy.random.Philox numpy.random.SFC64 numpy.random.MT19937"
        ),
        "exact",
        no_seed,
    ),
    CallRule(
        "unseeded-generator",
        _names("torch.seed torch.random.seed torch.cuda.seed torch.cuda.seed_all"),
        "exact",
        torch_reseed,
    ),
    # Libraries beyond torch (why each is a hazard: `_library_conditions`).
    CallRule(
        "tokenizer-training",
        _names("WordPieceTrainer UnigramTrainer BpeTrainer"),
        "package",
        tokenizers_trainer,
        package="tokenizers",
    ),
    CallRule("tokenizer-retraining", _names("train_new_from_iterator"), "any", retrains_tokenizer),
    CallRule("sklearn-random-state", SKLEARN_RANDOM, "package", sklearn_unseeded, package="sklearn"),
    CallRule(
        "lightgbm-nondeterministic",
        LIGHTGBM_ESTIMATORS | _names("train cv"),
        "package",
        lightgbm_not_deterministic,
        package="lightgbm",
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
        for option in sorted(AUTOTUNE_OPTIONS)
    ),
)


# Calls whose value changes on every run, by full dotted name (after import aliases).
CLOCK_CALLS = _names(
    "time.time time.time_ns time.perf_counter time.perf_counter_ns time.monotonic time.monotonic_ns "
    "time.process_time time.process_time_ns datetime.datetime.now datetime.datetime.utcnow "
    "datetime.datetime.today datetime.date.today"
)


ENTROPY_CALLS = _names("os.urandom os.getrandom os.getpid uuid.uuid1 uuid.uuid4 random.SystemRandom")


# Calls whose arguments are seeds (any receiver), besides keyword arguments named *seed*.
SEED_CALLS = _names(
    "seed manual_seed manual_seed_all set_seed seed_everything default_rng RandomState SeedSequence "
    "Random PCG64 Philox MT19937 PRNGKey set_random_seed"
)
