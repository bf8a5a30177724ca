"""A run that died on an op with no deterministic kernel, told as one clause: the op, the job's line, the fix.

Under reprobox every job runs with `torch.use_deterministic_algorithms(True)`; an op that has only a
nondeterministic kernel then raises "<kernel> does not have a deterministic implementation, but you set
'torch.use_deterministic_algorithms(True)'. ..." and the run ends as a bare "exited with status 1". This
pure function reads the end of the job's log and, when the job's final traceback holds that error, names
the op, the job's own line that ran it and the deterministic alternative, plus warn-only as the way out.
It answers None for any other log, so the plain exit status stands.

torch names the op by its kernel ("adaptive_avg_pool2d_backward_cuda", "max_unpooling2d_forward_out",
"median CUDA with indices output"), so the fixes are keyed by the stem those names start with.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

# torch's words after the op's name (ATen's alertNotDeterministic and torch._prims_common's alike); the
# warning under warn_only=True says "(True, warn_only=True)" instead
_MESSAGE = (
    " does not have a deterministic implementation, but you set 'torch.use_deterministic_algorithms(True)'"
)
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
# torchrun's rank prefixes: "[rank1]: " (torch's own), "[default0]:" (torchrun --tee)
_RANK_PREFIX = re.compile(r"^\[(?P<rank>[A-Za-z_-]*\d+)\]: ?")
_HEADER = "Traceback (most recent call last):"
_CHAINED = (
    "During handling of the above exception, another exception occurred:",
    "The above exception was the direct cause of the following exception:",
)
_FRAME = re.compile(r'^\s+File "(?P<path>[^"]+)", line (?P<line>\d+)')
# A launcher's own failure that only reports a child's (the child's traceback comes before it).
_LAUNCHER_ERRORS = ("ChildFailedError", "CalledProcessError")
_STDLIB = re.compile(r"/lib(?:64)?/python\d(?:\.\d+)*/")
_LIBRARY_FOLDERS = frozenset({"site-packages", "dist-packages"})
_OWN_PACKAGE = Path(__file__).resolve().parent.as_posix()


@dataclass(frozen=True)
class OpFix:
    """The deterministic alternative to one op: `what` it is as users write it (when torch's kernel name
    does not say), `fix` a clause that starts with a verb."""

    fix: str
    what: str | None = None


# Keyed by the stem of torch's kernel name (lower case, leading underscores dropped); the longest stem
# that starts the name wins. Covers every op torch.use_deterministic_algorithms's docstring lists as
# throwing, and kthvalue and max_pool3d's backward, which throw too (the latter in torch 2.11 on CUDA).
FIXES: dict[str, OpFix] = {
    "avg_pool3d": OpFix(
        "when kernel_size equals stride k, reshape x to (n, c, d // k, k, h // k, k, w // k, k) and take "
        ".mean((3, 5, 7)), whose backward is deterministic, or run the pooling on CPU",
        "the backward of avg_pool3d / nn.AvgPool3d on CUDA",
    ),
    "adaptive_avg_pool2d": OpFix(
        "when the output is 1x1 use x.mean((-2, -1), keepdim=True), and when the output size divides "
        "the input size use F.avg_pool2d with kernel_size = stride = input // output; both have a "
        "deterministic backward",
        "the backward of adaptive_avg_pool2d / nn.AdaptiveAvgPool2d on CUDA",
    ),
    "adaptive_avg_pool3d": OpFix(
        "when the output is 1x1x1 use x.mean((-3, -2, -1), keepdim=True), and when the output size "
        "divides the input size reshape each dimension into (output, input // output) and take .mean over "
        "the inner ones; both have a deterministic backward",
        "the backward of adaptive_avg_pool3d / nn.AdaptiveAvgPool3d on CUDA",
    ),
    "adaptive_max_pool": OpFix(
        "when the output is 1x1 use x.amax((-2, -1), keepdim=True), and when the output size divides the "
        "input size use F.max_pool2d with kernel_size = stride = input // output; both have a "
        "deterministic backward",
        "the backward of adaptive_max_pool2d / nn.AdaptiveMaxPool2d on CUDA",
    ),
    "fractional_max_pool": OpFix(
        "use F.max_pool2d in 2-D, whose backward is deterministic, or run the pooling on CPU",
        "the backward of fractional_max_pool / nn.FractionalMaxPool on CUDA",
    ),
    "max_pool3d": OpFix(
        "when kernel_size equals stride k, reshape x to (n, c, d // k, k, h // k, k, w // k, k) and take "
        ".amax((3, 5, 7)), whose backward is deterministic, or run the pooling on CPU",
        "the backward of max_pool3d / nn.MaxPool3d on CUDA",
    ),
    "max_unpool": OpFix(
        "rebuild the unpooled tensor with scatter_ on flattened views, e.g. x.new_zeros(n, c, h * w)"
        ".scatter_(2, indices.flatten(2), pooled.flatten(2)).view(n, c, h, w), deterministic under this "
        "mode",
        "max_unpool1d/2d/3d, nn.MaxUnpool, on any device",
    ),
    "upsample": OpFix(
        "use F.interpolate(x, scale_factor=s, mode='nearest') or a ConvTranspose with fixed bilinear "
        "weights, both with a deterministic backward (the forward pass alone is deterministic)",
        "the backward of F.interpolate with mode linear, bilinear, bicubic or trilinear on CUDA",
    ),
    "reflection_pad": OpFix(
        "build the padding from flipped slices, torch.cat([x[..., 1:p + 1].flip(-1), x, "
        "x[..., -p - 1:-1].flip(-1)], -1) per padded dimension (the same values, with a deterministic "
        "backward), or pad with mode='replicate'",
        "the backward of reflection padding / nn.ReflectionPad on CUDA",
    ),
    "nll_loss": OpFix(
        "flatten to 2-D and use cross_entropy, F.cross_entropy(logits.movedim(1, -1).flatten(0, -2), "
        "target.flatten()), or take reduction='none' and .mean() the result",
        "nll_loss / cross_entropy over more than two dimensions on CUDA",
    ),
    "ctc_loss": OpFix(
        "compute the loss on CPU, F.ctc_loss(log_probs.cpu(), targets.cpu(), input_lengths.cpu(), "
        "target_lengths.cpu()), whose backward is deterministic",
        "the backward of ctc_loss / nn.CTCLoss on CUDA",
    ),
    "embedding_bag": OpFix(
        "use mode='sum' or 'mean', or an nn.Embedding lookup followed by .amax over the bag dimension, both "
        "with a deterministic backward",
        "the backward of EmbeddingBag with mode='max' on CUDA",
    ),
    "put_": OpFix(
        "use x.view(-1).index_put_((index,), source, accumulate=True) to add, or make the indices unique "
        "and write x.view(-1)[index] = source, both deterministic under this mode"
    ),
    "histc": OpFix(
        "compute it on CPU, torch.histc(x.cpu(), ...), or as torch.bincount(torch.bucketize(x, edges)) "
        "without weights, which is deterministic",
        "torch.histc on CUDA",
    ),
    "bincount": OpFix(
        "add the weights with torch.zeros(n, dtype=w.dtype, device=w.device).index_add_(0, x, w) or "
        "scatter_add_, which are deterministic under this mode, or count on CPU",
        "torch.bincount with weights on CUDA",
    ),
    "median": OpFix(
        "sort instead, values, order = x.sort(dim=dim, stable=True), and take position (n - 1) // 2 of both, "
        "which picks the same index every run (median without dim, which returns no index, is fine)",
        "torch.median with indices on CUDA",
    ),
    "kthvalue": OpFix(
        "sort instead, values, order = x.sort(dim=dim, stable=True), and take position k - 1 of both, which "
        "picks the same index every run",
        "torch.kthvalue on CUDA",
    ),
    "grid_sampler": OpFix(
        "run grid_sample on CPU, F.grid_sample(x.cpu(), grid.cpu(), ...), whose backward is deterministic, "
        "or detach its input and grid where no gradient needs to flow through it",
        "the backward of F.grid_sample on CUDA",
    ),
    "cudnn_grid_sampler": OpFix(
        "run grid_sample on CPU, F.grid_sample(x.cpu(), grid.cpu(), ...), whose backward is deterministic, "
        "or detach its input and grid where no gradient needs to flow through it",
        "the backward of F.grid_sample with cuDNN",
    ),
    "cumsum": OpFix(
        "compute it on CPU, x.cpu().cumsum(dim).to(x.device), or as a product with a lower-triangular "
        "matrix of ones (torch.ones(n, n, device=x.device).tril() @ x along dim 0), deterministic under "
        "this mode",
        "torch.cumsum of a floating-point CUDA tensor",
    ),
    "scatter_reduce": OpFix(
        "run it on CPU, or for positive values take .exp() of a scatter_reduce(..., reduce='sum') of the "
        ".log() values, which is deterministic under this mode",
        "scatter_reduce with reduce='prod' on CUDA",
    ),
    "quantized_resize": OpFix(
        "make a new quantized tensor of the wanted size (quantize a resized float tensor) instead of "
        "resizing this one in place",
        "resize_ of a quantized tensor",
    ),
}
_GENERIC = OpFix(
    "run that call on CPU (x.cpu(), then .to(device) on the result), where most ops have a deterministic "
    "kernel"
)


def explain_nondeterministic_op(
    log_tail: str,
    code_dirs: Sequence[str],
    *,
    job_file: str = "job.yaml",
    set_by_job_file: bool = True,
) -> str | None:
    """The clause for a log whose job died on an op torch has no deterministic kernel for; else None.

    `code_dirs` are the job's code folder as the job saw it (and any other path its files had): the line
    named is the innermost traceback frame inside one, shown relative to it. `set_by_job_file` says the
    mode came from the job file's determinism.algorithms, not from the job's own call.
    """
    error = _final_error(log_tail)
    if error is None:
        return None
    head, frames = error
    op = head.rsplit(": ", 1)[-1].strip()  # "RuntimeError: put_" -> "put_"
    if not op:
        return None
    fix = fix_for(op)
    what = f" ({fix.what})" if fix.what else ""
    site = _job_site(frames, code_dirs)
    where = f" at {site}" if site else ""
    if set_by_job_file:
        mode = "(the job file's determinism.algorithms)"
        way_out = f"set determinism: {{warn_only: true}} in {job_file}"
    else:
        mode = "(set by the job's own code)"
        way_out = "pass warn_only=True in that call"
    return (
        f"the job called {op}{what}{where}, which has no deterministic implementation, under "
        f"torch.use_deterministic_algorithms(True) {mode}: {fix.fix}; or {way_out} to let it run "
        "nondeterministically (then reprobox verify tells whether the result still reproduces, and "
        "reprobox audit lists every such op)"
    )


def fix_for(op: str) -> OpFix:
    """The fix for torch's kernel name `op`, by the longest known stem it starts with."""
    name = re.sub(r"\s+", "_", op.strip().lower()).lstrip("_")
    stems = [stem for stem in FIXES if name.startswith(stem)]
    return FIXES[max(stems, key=len)] if stems else _GENERIC


# --- the traceback that ends the log ----------------------------------------------------------------


@dataclass
class _Block:
    """One "Traceback (most recent call last):" with its frames and the exception line that ends it."""

    frames: list[tuple[str, int]] = field(default_factory=list)
    exception: str | None = None
    ignored: bool = False  # printed under "Exception ignored in ...": not how the process ended


@dataclass
class _Stream:
    """The lines of one process (a torchrun rank by its prefix, or everything unprefixed), parsed."""

    chains: list[list[_Block]] = field(default_factory=list)
    block: _Block | None = None  # the block whose frames are being read
    linked: bool = False  # a "During handling of the above exception" line: the next block chains on
    previous: str = ""  # the last non-blank line
    last: str = ""  # the last non-blank line outside a traceback's frames

    def feed(self, line: str) -> None:
        text = line.rstrip()
        if not text.strip():
            return
        if text.endswith(_HEADER):  # a progress bar (tqdm) may leave the line unfinished before it
            block = _Block(ignored=self.previous.startswith("Exception ignored"))
            if self.linked and self.chains:
                self.chains[-1].append(block)
            else:
                self.chains.append([block])
            self.block, self.linked = block, False
        elif self.block is not None and text[0].isspace():
            frame = _FRAME.match(text)
            if frame:
                self.block.frames.append((frame["path"], int(frame["line"])))
        elif text in _CHAINED:
            self.block, self.linked = None, True
        else:
            if self.block is not None:
                self.block.exception = text
                self.block = None
            else:
                self.linked = False
            self.last = text
        self.previous = text

    def final_error(self) -> tuple[str, list[tuple[str, int]]] | None:
        """The op error and its frames, when the last chain that ended the process holds it."""
        for chain in reversed(self.chains):
            final = chain[-1].exception or ""
            if chain[0].ignored or any(name in final.split(":", 1)[0] for name in _LAUNCHER_ERRORS):
                continue
            for block in reversed(chain):
                head = _head(block.exception or "")
                if head is not None:
                    return head, block.frames
            return None
        head = _head(self.last)  # no traceback at all: the job printed the error and exited
        return (head, []) if head is not None else None


def _final_error(log_tail: str) -> tuple[str, list[tuple[str, int]]] | None:
    """The op error that ended the job, from the first process (rank) whose log ends in it."""
    text = _ANSI.sub("", log_tail)
    if _MESSAGE not in text:
        return None
    streams: dict[str | None, _Stream] = {}
    for raw in re.split(r"\r\n|\r|\n", text):  # a progress bar's \r starts a line too
        prefix = _RANK_PREFIX.match(raw)
        key, line = (prefix["rank"], raw[prefix.end() :]) if prefix else (None, raw)
        streams.setdefault(key, _Stream()).feed(line)
    for stream in streams.values():  # in the order the processes first wrote
        error = stream.final_error()
        if error is not None:
            return error
    return None


def _head(line: str) -> str | None:
    """What comes before torch's message on the line ("RuntimeError: put_"), or None without one."""
    at = line.find(_MESSAGE)
    return line[:at] if at >= 0 else None


# --- the job's own line ------------------------------------------------------------------------------


def _job_site(frames: Sequence[tuple[str, int]], code_dirs: Iterable[str]) -> str | None:
    """`train.py:12`: the innermost frame in the job's code folder, relative to it; else the innermost
    frame outside libraries, the standard library and reprobox, as the traceback wrote it."""
    roots = [PurePosixPath(d) for d in code_dirs if d and PurePosixPath(d).is_absolute()]
    for path, line in reversed(frames):
        relative = _inside(path, roots)
        if relative is not None and not _is_library(relative):
            return f"{relative}:{line}"
    for path, line in reversed(frames):
        if not _is_library(path):
            return f"{path}:{line}"
    return None


def _inside(path: str, roots: Sequence[PurePosixPath]) -> str | None:
    if not path.startswith("/"):
        return path if roots and not path.startswith("<") else None  # relative: to the job's cwd, its code
    for root in roots:
        try:
            return PurePosixPath(path).relative_to(root).as_posix()
        except ValueError:
            continue
    return None


def _is_library(path: str) -> bool:
    """Code the job did not write: installed packages, the standard library, reprobox itself."""
    if path.startswith("<"):
        return path.startswith("<frozen ")  # <string>, <stdin>: code the job ran itself
    parts = PurePosixPath(path).parts
    if _LIBRARY_FOLDERS.intersection(parts):
        return True
    if path == _OWN_PACKAGE or path.startswith(_OWN_PACKAGE + "/") or "reprobox/guest/" in path:
        return True
    return _STDLIB.search(path) is not None
