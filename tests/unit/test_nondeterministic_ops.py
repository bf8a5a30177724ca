"""A run that died on an op with no deterministic kernel: its failure names the op, the line, the fix.

The messages are torch's own: raised on CPU where torch raises there (put_, max_unpool), and copied
literally for the CUDA kernels, inside tracebacks through installed libraries, chained exceptions and
torchrun's per-rank logs.
"""

from __future__ import annotations

import importlib.util
import re
import textwrap
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType, SimpleNamespace

import pytest
import torch

from reprobox import cli, recording
from reprobox.nondeterministic_ops import FIXES, explain_nondeterministic_op, fix_for
from reprobox.records.manifest import read_record
from reprobox.runner import list_runs
from reprobox.runtimes.base import RunOutcome

JOBS = Path(__file__).parents[1] / "jobs"
TAIL = (
    " does not have a deterministic implementation, but you set 'torch.use_deterministic_algorithms(True)'."
    " You can turn off determinism just for this operation, or you can use the 'warn_only=True' option, if "
    "that's acceptable for your application. You can also file an issue at "
    "https://github.com/pytorch/pytorch/issues to help us prioritize adding deterministic support for this "
    "operation."
)
SITE = "/usr/local/lib/python3.11/site-packages"


@pytest.fixture
def deterministic() -> Iterator[None]:
    torch.use_deterministic_algorithms(True)
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(False)


def _load(path: Path, source: str, name: str) -> ModuleType:
    """A module from `path` (written with `source`), so that its frames carry that path and its lines."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(source))
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _traceback(run: Callable[[], object]) -> str:
    try:
        run()
    except Exception as exc:  # noqa: BLE001 - the traceback is what the test is about
        return "".join(traceback.format_exception(exc))
    raise AssertionError("the call did not raise")


def _line_of(path: Path, text: str) -> int:
    return next(n for n, line in enumerate(path.read_text().splitlines(), 1) if text in line)


# --- real messages from torch on CPU ------------------------------------------------------------------

JOB_CODE = """\
import torch
import torch.nn.functional as F


def scatter(values):
    slots = torch.zeros(6)
    slots.put_(values, torch.ones(len(values)))
    return slots


def unpool(dims):
    pool = getattr(F, f"max_pool{dims}d")
    pooled, indices = pool(torch.randn(1, 1, *([4] * dims)), 2, return_indices=True)
    return getattr(F, f"max_unpool{dims}d")(pooled, indices, 2)


def main(fit, step):
    return fit(step)
"""
LIBRARY_CODE = """\
class TrainingError(RuntimeError):
    pass


def fit(step):
    return step()


def fit_wrapped(step):
    try:
        return step()
    except RuntimeError as exc:
        raise TrainingError("the training loop failed") from exc


def fit_handled(step):
    try:
        return step()
    except RuntimeError:
        raise TrainingError("the training loop failed")
"""


@dataclass(frozen=True)
class Job:
    code: Path  # the code folder
    train: ModuleType  # its train.py
    library: ModuleType  # a training library installed in a site-packages beside it

    def line(self, text: str) -> int:
        return _line_of(self.code / "train.py", text)


@pytest.fixture
def job(tmp_path: Path) -> Job:
    code = tmp_path / "code"
    train = _load(code / "train.py", JOB_CODE, "nd_train")
    library = _load(tmp_path / "venv/lib/python3.11/site-packages/trainer/loop.py", LIBRARY_CODE, "nd_loop")
    return Job(code, train, library)


def test_put_names_the_op_the_line_and_the_fixes(job: Job, deterministic: None) -> None:
    log = "epoch 1\nloss 0.25\n" + _traceback(lambda: job.train.scatter(torch.tensor([0, 1, 1])))
    line = job.line("slots.put_(")
    sentence = explain_nondeterministic_op(log, [str(job.code)])
    assert sentence == (
        f"the job called put_ at train.py:{line}, which has no deterministic implementation, under "
        "torch.use_deterministic_algorithms(True) (the job file's determinism.algorithms): use "
        "x.view(-1).index_put_((index,), source, accumulate=True) to add, or make the indices unique and "
        "write x.view(-1)[index] = source, both deterministic under this mode; or set determinism: "
        "{warn_only: true} in job.yaml to let it run nondeterministically (then reprobox verify tells "
        "whether the result still reproduces, and reprobox audit lists every such op)"
    )


def test_the_suggested_put_replacements_run_under_deterministic_algorithms(deterministic: None) -> None:
    index, source = torch.tensor([0, 1, 1]), torch.ones(3)
    added = torch.zeros(4)
    added.view(-1).index_put_((index,), source, accumulate=True)
    written = torch.zeros(4)
    written.view(-1)[index.unique()] = torch.ones(2)
    assert added.tolist() == [1, 2, 0, 0] and written.tolist() == [1, 1, 0, 0]


@pytest.mark.parametrize(
    ("dims", "kernel"), [(1, "max_unpooling2d"), (2, "max_unpooling2d"), (3, "max_unpooling3d")]
)
def test_max_unpool_through_a_library_names_the_jobs_line(
    job: Job, deterministic: None, dims: int, kernel: str
) -> None:
    log = _traceback(lambda: job.train.main(job.library.fit, lambda: job.train.unpool(dims)))
    assert f"RuntimeError: {kernel}_forward_out does not have a deterministic implementation" in log
    assert "site-packages/torch/nn/functional.py" in log  # torch's own frame is the innermost Python one
    line = job.line('getattr(F, f"max_unpool{dims}d")')
    sentence = explain_nondeterministic_op(log, [str(job.code)])
    assert sentence is not None
    assert sentence.startswith(f"the job called {kernel}_forward_out (max_unpool1d/2d/3d, nn.MaxUnpool, ")
    assert f" at train.py:{line}, " in sentence
    assert ".scatter_(2, indices.flatten(2), pooled.flatten(2))" in sentence


def test_the_suggested_unpool_replacement_matches_and_runs(deterministic: None) -> None:
    x = torch.randn(2, 3, 4, 4)
    pooled, indices = torch.nn.functional.max_pool2d(x, 2, return_indices=True)
    n, c, h, w = x.shape
    rebuilt = x.new_zeros(n, c, h * w).scatter_(2, indices.flatten(2), pooled.flatten(2)).view(n, c, h, w)
    torch.use_deterministic_algorithms(False)
    assert torch.equal(rebuilt, torch.nn.functional.max_unpool2d(pooled, indices, 2))


@pytest.mark.parametrize("wrapper", ["fit_wrapped", "fit_handled"])
def test_a_wrapped_error_uses_the_frames_of_the_traceback_that_ends_with_it(
    job: Job, deterministic: None, wrapper: str
) -> None:
    log = _traceback(
        lambda: job.train.main(getattr(job.library, wrapper), lambda: job.train.scatter(torch.tensor([1, 1])))
    )
    separator = "direct cause" if wrapper == "fit_wrapped" else "During handling of the above exception"
    assert separator in log and log.rstrip().endswith("TrainingError: the training loop failed")
    sentence = explain_nondeterministic_op(log, [str(job.code)])
    assert sentence is not None
    assert sentence.startswith(f"the job called put_ at train.py:{job.line('slots.put_(')}, ")


def test_a_later_failure_of_another_kind_is_not_explained(job: Job, deterministic: None) -> None:
    caught = _traceback(lambda: job.train.scatter(torch.tensor([1, 1])))
    log = f"{caught}falling back\n" + _traceback(lambda: int("nan"))
    assert explain_nondeterministic_op(log, [str(job.code)]) is None


def test_an_ignored_exception_at_exit_does_not_hide_the_error(job: Job, deterministic: None) -> None:
    log = (
        _traceback(lambda: job.train.scatter(torch.tensor([1, 1])))
        + "Exception ignored in: <function _MultiProcessingDataLoaderIter.__del__ at 0x7f>\n"
        + 'Traceback (most recent call last):\n  File "/x/site-packages/torch/utils/data/dataloader.py", '
        + "line 1477, in __del__\nAttributeError: '_MultiProcessingDataLoaderIter' object has no attribute\n"
    )
    sentence = explain_nondeterministic_op(log, [str(job.code)])
    assert sentence is not None and " at train.py:" in sentence


# --- torchrun: every rank prints it, then the launcher its summary ------------------------------------

LAUNCHER = f"""\
E1126 05:00:57.279000 15548 torch/distributed/elastic/multiprocessing/api.py:1002] failed (exitcode: 1) \
local_rank: 0 (pid: 15586) of binary: /usr/local/bin/python
Traceback (most recent call last):
  File "/usr/local/bin/torchrun", line 6, in <module>
    sys.exit(main())
             ^^^^^^
  File "{SITE}/torch/distributed/run.py", line 1019, in run
    elastic_launch(
  File "{SITE}/torch/distributed/launcher/api.py", line 383, in launch_agent
    raise ChildFailedError(
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
============================================================
train.py FAILED
------------------------------------------------------------
Failures:
[1]:
  rank      : 1 (local_rank: 1)
  exitcode  : 1 (pid: 15587)
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  rank      : 0 (local_rank: 0)
  exitcode  : 1 (pid: 15586)
  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html
============================================================
"""


def _rank_traceback(code: str, op: str) -> str:
    return (
        "Traceback (most recent call last):\n"
        f'  File "{code}/train.py", line 12, in <module>\n'
        "    step(torch.zeros(6))\n"
        f'  File "{code}/train.py", line 9, in step\n'
        "    return x.put_(torch.tensor([1, 1]), torch.tensor([1.0, 2.0]))\n"
        "           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\n"
        f"RuntimeError: {op}{TAIL}\n"
    )


def test_torchrun_ranks_printing_the_same_error_interleaved() -> None:
    code = "/tmp/reprobox-1000/ddp/code"
    ranks = [
        [f"[rank{rank}]: {line}" for line in _rank_traceback(code, "put_").splitlines()] for rank in (1, 0)
    ]
    interleaved = [line for pair in zip(*ranks, strict=True) for line in pair]
    log = "W1126 torch/distributed/run.py:874] *****\n" + "\n".join(interleaved) + "\n" + LAUNCHER
    sentence = explain_nondeterministic_op(log, [code])
    assert sentence is not None and sentence.startswith("the job called put_ at train.py:9, ")


def test_torchrun_ranks_without_prefixes() -> None:
    code = "/reprobox/code"
    log = _rank_traceback(code, "put_") + _rank_traceback(code, "put_") + LAUNCHER
    sentence = explain_nondeterministic_op(log, [code])
    assert sentence is not None and sentence.startswith("the job called put_ at train.py:9, ")


# --- CUDA kernels, as torch names them ------------------------------------------------------------------


def _backward_log(code: str, kernel: str) -> str:
    return (
        "step 3 loss 0.7182\n"
        "Traceback (most recent call last):\n"
        f'  File "{code}/train.py", line 41, in <module>\n'
        "    main()\n"
        f'  File "{code}/train.py", line 37, in main\n'
        "    loss.backward()\n"
        f'  File "{SITE}/torch/_tensor.py", line 648, in backward\n'
        "    torch.autograd.backward(\n"
        f'  File "{SITE}/torch/autograd/__init__.py", line 353, in backward\n'
        "    _engine_run_backward(\n"
        f'  File "{SITE}/torch/autograd/graph.py", line 824, in _engine_run_backward\n'
        "    return Variable._execution_engine.run_backward(  # Calls into the C++ engine\n"
        "           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\n"
        f"RuntimeError: {kernel}{TAIL}\n"
    )


@pytest.mark.parametrize(
    ("kernel", "fix"),
    [
        ("adaptive_avg_pool2d_backward_cuda", "x.mean((-2, -1), keepdim=True)"),
        ("adaptive_avg_pool3d_backward_out_cuda", "x.mean((-3, -2, -1), keepdim=True)"),
        ("adaptive_max_pool2d_backward_out_cuda", "x.amax((-2, -1), keepdim=True)"),
        ("avg_pool3d_backward_cuda", ".mean((3, 5, 7))"),
        ("fractional_max_pool2d_backward_cuda", "F.max_pool2d"),
        ("fractional_max_pool3d_backward_out_cuda", "run the pooling on CPU"),
        ("max_pool3d_with_indices_backward_cuda", ".amax((3, 5, 7))"),
        ("upsample_bilinear2d_backward_out_cuda", "mode='nearest'"),
        ("upsample_linear1d_backward_out_cuda", "mode='nearest'"),
        ("upsample_bicubic2d_backward_out_cuda", "mode='nearest'"),
        ("upsample_bilinear2d_aa_backward_out_cuda", "mode='nearest'"),
        ("upsample_trilinear3d_backward_out_cuda", "mode='nearest'"),
        ("grid_sampler_2d_backward_cuda", "F.grid_sample(x.cpu(), grid.cpu(), ...)"),
        ("grid_sampler_3d_backward_cuda", "F.grid_sample(x.cpu(), grid.cpu(), ...)"),
        ("reflection_pad1d_backward_out_cuda", ".flip(-1)"),
        ("reflection_pad2d_backward_cuda", "mode='replicate'"),
        ("reflection_pad3d_backward_out_cuda", "mode='replicate'"),
        ("ctc_loss_backward_gpu", "F.ctc_loss(log_probs.cpu()"),
        ("embedding_bag_backward_cuda_max", "mode='sum' or 'mean'"),
        ("nll_loss2d_forward_out_cuda_template", "F.cross_entropy(logits.movedim(1, -1).flatten(0, -2)"),
        ("histc_cuda", "torch.bincount(torch.bucketize(x, edges)) without weights"),
        ("_histc_cuda with floating point input", "torch.histc(x.cpu(), ...)"),
        ("_bincount_cuda", "index_add_(0, x, w)"),
        ("kthvalue CUDA", "position k - 1"),
        ("median CUDA with indices output", "x.sort(dim=dim, stable=True)"),
        ("scatter_reduce_cuda_kernel", "reduce='sum'"),
        ("scatter_reduce_cuda_prod_", ".log() values"),
        ("cumsum_cuda_kernel", "x.cpu().cumsum(dim)"),
        ("put_", "index_put_((index,), source, accumulate=True)"),
        ("quantized_resize_cpu_", "make a new quantized tensor"),
    ],
)
def test_cuda_kernels_are_matched_by_their_stem(kernel: str, fix: str) -> None:
    sentence = explain_nondeterministic_op(_backward_log("/reprobox/code", kernel), ["/reprobox/code"])
    assert sentence is not None
    assert sentence.startswith(f"the job called {kernel} (") or kernel == "put_"
    assert " at train.py:37, which has no deterministic implementation" in sentence
    assert fix in sentence
    assert "determinism: {warn_only: true} in job.yaml" in sentence


def _throwing_ops_in_torchs_docstring() -> list[str]:
    doc = torch.use_deterministic_algorithms.__doc__ or ""
    throwing = doc.split("operations will throw a", 1)[1].split("In addition", 1)[0]
    return sorted(set(re.findall(r"^\s*\* :(?:class|func):`([\w.]+)`", throwing, re.MULTILINE)))


# What torch calls each op it lists as throwing, by the kernel that raises.
KERNELS = {
    "torch.Tensor.put_": "put_",
    "torch.Tensor.resize_": "quantized_resize_cpu_",
    "torch.Tensor.scatter_reduce": "scatter_reduce_cuda",
    "torch.bincount": "_bincount_cuda",
    "torch.cumsum": "cumsum_cuda_kernel",
    "torch.histc": "_histc_cuda",
    "torch.median": "median CUDA with indices output",
    "torch.nn.AdaptiveAvgPool2d": "adaptive_avg_pool2d_backward_cuda",
    "torch.nn.AdaptiveAvgPool3d": "adaptive_avg_pool3d_backward_cuda",
    "torch.nn.AdaptiveMaxPool2d": "adaptive_max_pool2d_backward_cuda",
    "torch.nn.AvgPool3d": "avg_pool3d_backward_cuda",
    "torch.nn.CTCLoss": "ctc_loss_backward_gpu",
    "torch.nn.EmbeddingBag": "embedding_bag_backward_cuda_max",
    "torch.nn.FractionalMaxPool2d": "fractional_max_pool2d_backward_cuda",
    "torch.nn.FractionalMaxPool3d": "fractional_max_pool3d_backward_cuda",
    "torch.nn.MaxUnpool1d": "max_unpooling2d_forward_out",
    "torch.nn.MaxUnpool2d": "max_unpooling2d_forward_out",
    "torch.nn.MaxUnpool3d": "max_unpooling3d_forward_out",
    "torch.nn.NLLLoss": "nll_loss2d_forward_out_cuda_template",
    "torch.nn.ReflectionPad1d": "reflection_pad1d_backward_cuda",
    "torch.nn.ReflectionPad2d": "reflection_pad2d_backward_cuda",
    "torch.nn.ReflectionPad3d": "reflection_pad3d_backward_out_cuda",
    "torch.nn.functional.grid_sample": "grid_sampler_2d_backward_cuda",
    "torch.nn.functional.interpolate": "upsample_bilinear2d_backward_out_cuda",
}


def test_every_op_torch_lists_as_throwing_has_its_own_fix() -> None:
    listed = _throwing_ops_in_torchs_docstring()
    assert len(listed) >= 20
    assert sorted(set(listed) - set(KERNELS)) == []  # a new op in torch's list needs a fix here
    generic = fix_for("some_new_kernel_cuda")
    assert all(fix_for(KERNELS[name]) is not generic for name in listed)
    assert all(FIXES[stem] is fix_for(stem) for stem in FIXES)


# --- where the job's line is ----------------------------------------------------------------------------


def test_a_file_in_a_subfolder_is_shown_relative_to_the_code_folder() -> None:
    log = _backward_log("/reprobox/code", "histc_cuda").replace(
        '/reprobox/code/train.py", line 37', '/reprobox/code/src/model/losses.py", line 88'
    )
    sentence = explain_nondeterministic_op(log, ["/tmp/reprobox-0/j/code", "/reprobox/code/"])
    assert sentence is not None and " at src/model/losses.py:88, " in sentence


def test_with_the_code_folder_unknown_the_innermost_frame_outside_libraries_counts() -> None:
    log = _backward_log("/home/ada/project", "histc_cuda").replace(
        f'{SITE}/torch/_tensor.py", line 648', '/usr/lib/python3.11/contextlib.py", line 81'
    )
    sentence = explain_nondeterministic_op(log, [])
    assert sentence is not None and " at /home/ada/project/train.py:37, " in sentence


def test_frames_of_reprobox_itself_are_not_the_jobs_line() -> None:
    guest = str(Path(__file__).parents[2] / "reprobox" / "guest" / "oplog.py")
    log = _backward_log("/work/code", "cumsum_cuda_kernel").replace(
        f'{SITE}/torch/autograd/graph.py", line 824', f'{guest}", line 120'
    )
    sentence = explain_nondeterministic_op(log, [])
    assert sentence is not None and " at /work/code/train.py:37, " in sentence


def test_a_traceback_after_an_unfinished_progress_bar_line() -> None:
    log = _backward_log("/c", "cumsum_cuda_kernel").replace(
        "step 3 loss 0.7182\nTraceback",
        "\r 10%|#         | 1/10 [00:01<00:09]\r 20%|##        | 2/10Traceback",
    )
    sentence = explain_nondeterministic_op(log, ["/c"])
    assert sentence is not None and " at train.py:37, " in sentence


def test_an_unknown_kernel_gets_the_generic_fix() -> None:
    sentence = explain_nondeterministic_op(_backward_log("/c", "index_reduce_cuda"), ["/c"])
    assert sentence is not None
    assert "the job called index_reduce_cuda at train.py:37" in sentence
    assert "run that call on CPU (x.cpu(), then .to(device) on the result)" in sentence


def test_the_error_printed_without_a_traceback_names_no_line() -> None:
    sentence = explain_nondeterministic_op(f"step 1\nerror: histc_cuda{TAIL}\n", ["/c"])
    assert sentence is not None and sentence.startswith(
        "the job called histc_cuda (torch.histc on CUDA), which has no deterministic implementation"
    )


def test_the_mode_set_by_the_job_itself_points_at_its_own_call() -> None:
    sentence = explain_nondeterministic_op(
        _backward_log("/c", "histc_cuda"), ["/c"], job_file="exp.yaml", set_by_job_file=False
    )
    assert sentence is not None
    assert "(set by the job's own code)" in sentence and "pass warn_only=True in that call" in sentence
    assert "exp.yaml" not in sentence


@pytest.mark.parametrize(
    "log",
    [
        "",
        'Traceback (most recent call last):\n  File "/c/train.py", line 3, in <module>\nValueError: bad\n',
        # the warning torch gives under warn_only is no failure
        "/c/train.py:8: UserWarning: put_ does not have a deterministic implementation, but you set "
        "'torch.use_deterministic_algorithms(True, warn_only=True)'. You can file an issue\n"
        "Traceback (most recent call last):\n  File \"/c/train.py\", line 9, in <module>\nKeyError: 'x'\n",
    ],
)
def test_other_logs_are_not_explained(log: str) -> None:
    assert explain_nondeterministic_op(log, ["/c"]) is None


# --- end to end: the recorded failure --------------------------------------------------------------------


def test_a_run_that_calls_put_records_the_op_its_line_and_warn_only(tmp_path: Path) -> None:
    job = JOBS / "nondeterministic-op"
    code = cli.main(["run", str(job), "--runtime", "local", "--runs-dir", str(tmp_path), "-q"])
    assert code == 3
    (run_dir,) = list_runs(tmp_path, "nondeterministic-op")
    failure = read_record(run_dir).failure or ""
    line = _line_of(job / "train.py", ".put_(")
    assert failure.startswith(f"exited with status 1; the job called put_ at train.py:{line}, ")
    assert "index_put_" in failure and "determinism: {warn_only: true} in job.yaml" in failure


def test_a_log_the_job_replaced_with_a_link_is_not_read(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    secret = tmp_path / "elsewhere.log"
    secret.write_text(_backward_log("/c", "put_"))
    (run_dir / "stdout.log").symlink_to(secret)
    job = SimpleNamespace(code=Path("/c"), job_file=Path("job.yaml"), determinism=SimpleNamespace())
    prepared = SimpleNamespace(plan=SimpleNamespace(run_dir=run_dir, job=job), job=job)
    outcome = RunOutcome(exit_code=1, runtime={"paths": {"code": "/c"}})
    assert recording._nondeterministic_op(prepared, outcome) is None  # type: ignore[arg-type]
