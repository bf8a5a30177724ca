"""One short observed run of the user's command, on the local runtime (their own environment, where the
command already works): in a writable copy of their folder, with what the code leaves out (data their
git ignores) linked in, stopped at its first checkpoint or when its time is up."""

from __future__ import annotations

import fnmatch
import json
import os
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from reprobox import codetree, runinputs, runner, saferead
from reprobox.guest import settings
from reprobox.guest.filehash import file_sha256
from reprobox.guest.watch import wall_limit
from reprobox.jobfile import JobSpec, load_job
from reprobox.records.manifest import STDOUT_LOG, RunRecord
from reprobox.records.observed import Observed, read_observed
from reprobox.runtimes.base import OUTPUTS_SUBDIR
from reprobox.runtimes.local import LocalRuntime
from reprobox.runtimes.stable_paths import MODE_NAMESPACE

LOG_TAIL = 4096
MAX_LISTED = 4096  # output files listed: a job that writes more is named by the first ones
NEVER_LINKED = frozenset({".git", ".hg", ".svn", "__pycache__", ".venv", "venv", "runs"})
# What earlier runs left (git ignores it too): never offered, so the short run starts fresh, as a run
# does (HF Trainer refuses a full output_dir, Lightning numbers its version_N after what it finds), and
# never finds its own output folder read-only.
EARLIER_OUTPUTS = frozenset(
    {
        "out", "outs", "output", "outputs", "checkpoint", "checkpoints", "ckpt", "ckpts", "logs", "log",
        "lightning_logs", "tb_logs", "tensorboard", "wandb", "mlruns", "multirun", ".hydra", "results",
        "saved_models", "save", "snapshots",
    }
)  # fmt: skip
EARLIER_OUTPUT_FILES = ("*.log", "events.out.tfevents.*", "*.ckpt", "nohup.out")
# What building or installing the repository's own package leaves (git ignores it): never data.
BUILD_LEFTOVERS = ("build", "dist", ".eggs", "*.egg-info", "*.dist-info", "__pycache__", ".tox", ".nox")


@dataclass
class Observation:
    """What the short run did: how it ended, what it wrote, read, looked up and imported."""

    job: JobSpec  # the provisional job it ran as
    record: RunRecord
    outputs: list[tuple[str, int]]  # relative path, size: what it wrote or changed
    left_out: dict[str, str]  # what the code leaves out, linked in: relative path -> the real path
    seen: Observed
    log_tail: str
    work_dir: str = ""  # the working copy's path as the job saw it
    layout: dict[str, str] = field(default_factory=dict)  # runtime.paths of the run

    @property
    def stopped_by_us(self) -> bool:
        return bool(self.seen.stop.get("reason"))


LEFT_OUT_TARGET = "/left-out"  # where the short run mounts what the code leaves out (read-only)
MAX_LEFT_OUT = 64  # entries offered; a folder with more loose files is offered its first ones


def provisional_job(
    folder: Path, name: str, command: list[str], seconds: float, scratch: Path, *, left_out: dict[str, str]
) -> JobSpec:
    """The job as reprobox would run it before anything is known: the folder's code in a working copy,
    and what the code leaves out mounted read-only as data (linked into the copy where it lay, so the
    script finds it and can never write through to the user's own files)."""
    data = [
        {"source": source, "target": f"{LEFT_OUT_TARGET}/{relative}"}
        for relative, source in sorted(left_out.items())[:MAX_LEFT_OUT]
    ]
    text = (
        "version: 1\n"
        f"name: {name}\n"
        f"command: {json.dumps(command)}\n"
        f"code: {json.dumps(str(folder))}\n"
        "workdir: copy\n"
        f"timeout: {wall_limit(seconds) + 120:g}\n"  # the watch stops it before
        f"data: {json.dumps(data)}\n"
    )
    path = scratch / "job.yaml"
    path.write_text(text, encoding="utf-8")
    return load_job(path)


def left_out_of_code(folder: Path, runs_dir: Path) -> dict[str, str]:
    """The folder's files and folders that are not code (git ignores them, .reproboxignore drops them):
    linked into the short run's copy, so that a script that reads them still runs, and what it reads of
    them becomes data. Folders that hold no code at all are linked whole."""
    selection = codetree.select_files(folder, exclude=(runs_dir,))
    code = set(selection.files)
    holds_code = {str(Path(f).parent) for f in code} | {
        str(parent) for f in code for parent in Path(f).parents
    }
    links: dict[str, str] = {}
    for current, dirnames, filenames in os.walk(folder):
        here = Path(current)
        relative_dir = here.relative_to(folder)
        for name in sorted(dirnames):
            relative = (relative_dir / name).as_posix()
            leftover = any(fnmatch.fnmatch(name, pattern) for pattern in BUILD_LEFTOVERS)
            if (
                name in NEVER_LINKED | EARLIER_OUTPUTS
                or leftover
                or (here / name).resolve() == runs_dir.resolve()
            ):
                dirnames.remove(name)
            elif relative not in holds_code:
                links[relative] = str(here / name)
                dirnames.remove(name)
        for name in filenames:
            relative = (relative_dir / name).as_posix()
            earlier = any(fnmatch.fnmatch(name, pattern) for pattern in EARLIER_OUTPUT_FILES)
            if relative not in code and not earlier and not name.endswith((".pyc", ".pyo")):
                links[relative] = str(here / name)
    return links


def observe(job: JobSpec, seconds: float, runs_dir: Path) -> Observation:
    """Run `job` once, watched, on the local runtime in a private mount namespace (its data read-only);
    nothing is written outside `runs_dir`. The data is not digested: this run proves nothing."""
    extra = {settings.OBSERVE: "1", settings.OBSERVE_SECONDS: f"{seconds:g}"}
    runtime = LocalRuntime(isolation=MODE_NAMESPACE if job.data else None)
    options = runner.RunOptions(runs_dir=runs_dir, extra_env=extra)
    store = runs_dir / job.name / codetree.SNAPSHOTS_DIR
    code = codetree.snapshot_code(job.code, store, exclude=(runs_dir,))
    inputs = runinputs.RunInputs(code=code, data=())
    record = runner.execute(job, runtime, options, inputs=inputs)
    outputs_dir = record.run_dir / OUTPUTS_SUBDIR
    paths = record.runtime_paths
    left_out = {Path(m.target).relative_to(LEFT_OUT_TARGET).as_posix(): str(m.source) for m in job.data}
    return Observation(
        job=job,
        record=record,
        outputs=_outputs(outputs_dir, code.tree.files),
        left_out=left_out,
        seen=read_observed(record.run_dir),
        log_tail=_log_tail(record.run_dir),
        work_dir=str(paths.get("outputs") or outputs_dir),
        layout={k: v for k, v in paths.items() if isinstance(v, str)},
    )


def _outputs(folder: Path, code: Mapping[str, str]) -> list[tuple[str, int]]:
    """What the job wrote or changed: the files of its working copy but for the code's own files left
    as they were (a run cut short may leave its whole copy behind)."""
    found: list[tuple[str, int]] = []
    for current, dirnames, filenames in os.walk(folder):
        dirnames.sort()
        for name in sorted(filenames):
            path = Path(current) / name
            if path.is_symlink() or not path.is_file():
                continue
            relative = path.relative_to(folder).as_posix()
            if relative in code and _unchanged(path, code[relative]):
                continue
            found.append((relative, path.stat().st_size))
            if len(found) >= MAX_LISTED:
                return found
    return found


def _unchanged(path: Path, entry: str) -> bool:
    """Whether a file holds what the code's file held (its tree entry: sha256, `+x` when executable)."""
    try:
        return file_sha256(path) == entry.removesuffix("+x")
    except OSError:
        return False


def _log_tail(run_dir: Path) -> str:
    try:
        tail = saferead.read_tail(run_dir / STDOUT_LOG, LOG_TAIL, root=run_dir)
    except (OSError, saferead.UnsafeFile):
        return ""
    return tail.decode("utf-8", errors="replace")


def discard(runs_dir: Path) -> None:
    shutil.rmtree(runs_dir, ignore_errors=True)
