"""`reprobox init -- COMMAND...`: a job file for the command a researcher already types, learnt from one
short observed run of it in their own folder, right the first time.

The run (`_observe`) goes on the local runtime, in a writable copy of the folder with what the code
leaves out mounted read-only where it lay, and ends at its first checkpoint or when its time is up.
What it wrote, read, looked up and imported (`_classify`) becomes the job file (`_jobtext`), each choice
with a comment saying why. Nothing is written in the folder unless the whole of it succeeds.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reprobox import progress
from reprobox.errors import EXIT_JOB_FAILED, EnvironmentProblem, ReproboxError, UsageError
from reprobox.fileio import write_text_atomic
from reprobox.guest.watch import wall_limit
from reprobox.jobfile import load_job
from reprobox.scaffold._classify import Findings, classify
from reprobox.scaffold._joblog import last_lines
from reprobox.scaffold._jobtext import job_name, job_text, outputs_summary, shown_path
from reprobox.scaffold._observe import Observation, left_out_of_code, observe, provisional_job

__all__ = ["InitFailed", "InitOptions", "InitResult", "init_job"]

MIN_SECONDS, MAX_SECONDS = 5.0, 3600.0
LOG_LINES = 12  # of a failed run's output, shown in the sentence


class InitFailed(ReproboxError):
    """The short run failed or wrote nothing: there is no job file to learn from it."""

    exit_code = EXIT_JOB_FAILED


@dataclass(frozen=True)
class InitOptions:
    command: tuple[str, ...]
    folder: Path
    job_file: Path
    seconds: float = 60.0
    force: bool = False


@dataclass
class InitResult:
    job_file: Path
    text: str
    findings: Findings
    how: str
    written: list[Path] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        findings = self.findings
        return {
            "job_file": str(self.job_file),
            "written": [str(p) for p in self.written],
            "run": self.how,
            "outputs": outputs_summary(findings.outputs),
            "ignored": [rule for rule, _why in findings.ignore],
            "data": [source for source, _why in findings.data],
            "env": [name for name, _value, _secret in findings.env],
            "missing_packages": findings.missing,
            "framework": findings.framework,
            "job": self.text,
        }


def init_job(options: InitOptions) -> InitResult:
    """Observe the command once and write its job file (and the packages the image lacks)."""
    _check(options)
    folder = options.folder.resolve()
    name = job_name(folder)
    with tempfile.TemporaryDirectory(prefix="reprobox-init-") as scratch_name:
        scratch = Path(scratch_name)
        runs = scratch / "runs"
        progress.say(
            f"init: running {' '.join(options.command)} in a copy of {folder} until the first checkpoint "
            f"it writes, for at most {options.seconds:g} s of its CPU time (and at most "
            f"{wall_limit(options.seconds):g} s by the clock)"
        )
        seen = _observe(folder, name, options, scratch, runs)
        how = _how(seen)
        progress.say(f"init: {how}")
        _check_usable(seen, options)
        findings = classify(seen, folder, os.environ)
    written: list[Path] = []
    lock, lock_problem = None, None
    requirements = _requirements_file(folder, "requirements.in") if findings.missing else None
    try:
        if requirements:
            lock, lock_problem = _lock(folder, requirements, findings, written)
        text = job_text(
            name, options.command, findings, folder=folder, how=how, requirements=requirements, lock=lock
        )
        if lock_problem:
            text += f"# the packages could not be locked here: {lock_problem}\n"
        _check_loads(text, options.job_file)
        write_text_atomic(options.job_file, text)
    except BaseException:
        for path in written:  # all or nothing: the requirements go with the job file
            path.unlink(missing_ok=True)
        raise
    return InitResult(options.job_file, text, findings, how, [options.job_file, *written])


def _check(options: InitOptions) -> None:
    if not options.command:
        raise UsageError("init needs the command to observe after --, e.g. reprobox init -- python train.py")
    if options.job_file.exists() and not options.force:
        raise UsageError(
            f"{options.job_file} exists; pass --force to write over it, or --job-file NEW.yaml for another"
        )
    if not options.job_file.parent.is_dir() or not os.access(options.job_file.parent, os.W_OK):
        raise UsageError(f"{options.job_file.parent} is not a folder you can write; run init in your repo")
    if not MIN_SECONDS <= options.seconds <= MAX_SECONDS:
        raise UsageError(
            f"--seconds must be from {MIN_SECONDS:g} to {MAX_SECONDS:g}, not {options.seconds:g}; "
            "e.g. --seconds 60"
        )
    program = options.command[0]
    found = (options.folder / program).exists() if "/" in program else shutil.which(program) is not None
    if not found:
        raise UsageError(
            f"{program}: no such command"
            + ("" if "/" in program else " on PATH")
            + "; pass the command you run the training with, e.g. reprobox init -- python train.py"
        )


def _observe(folder: Path, name: str, options: InitOptions, scratch: Path, runs: Path) -> Observation:
    left_out = left_out_of_code(folder, runs)
    job = provisional_job(folder, name, list(options.command), options.seconds, scratch, left_out=left_out)
    try:
        return observe(job, options.seconds, runs)
    except EnvironmentProblem:
        if not left_out:
            raise
        # No private mount namespace here: what the code leaves out cannot be offered read-only, so
        # it is not offered at all (a script that needs it fails, and says which file it missed).
        progress.say("init: no private mount namespace here; running without the files the code leaves out")
        bare = provisional_job(folder, name, list(options.command), options.seconds, scratch, left_out={})
        return observe(bare, options.seconds, runs)


def _how(seen: Observation) -> str:
    stop = seen.seen.stop
    seconds = stop.get("seconds")
    if stop.get("reason") == "checkpoint":
        return f"stopped after {seconds} s, at its first checkpoint, {shown_path(str(stop.get('file')))}"
    if stop.get("reason") == "budget":
        cpu = stop.get("cpu_seconds")
        used = f"{cpu:g} s of CPU time in " if isinstance(cpu, int | float) else ""
        return (
            f"stopped when its budget was spent: {used}{seconds:g} s"
            if isinstance(seconds, int | float)
            else "stopped"
        )
    return f"it ran to its end: {seen.record.status}" + (
        f" ({seen.record.failure})" if seen.record.failure else ""
    )


def _check_usable(seen: Observation, options: InitOptions) -> None:
    record = seen.record
    lines = last_lines(seen.log_tail, LOG_LINES, interrupted=seen.stopped_by_us)
    shown = "\n  ".join(lines) or "(it printed nothing)"
    if not record.succeeded and not seen.stopped_by_us:
        raise InitFailed(
            f"{' '.join(options.command)} failed in its short run ({record.failure}); nothing was written. "
            f"Its last lines:\n  {shown}"
        )
    if not seen.outputs:
        more = (
            f"give it a larger budget with --seconds {min(options.seconds * 4, MAX_SECONDS):g}"
            if seen.seen.stop.get("reason") == "budget"
            else "make it save its model"
        )
        raise InitFailed(
            f"{' '.join(options.command)} wrote no file in its short run ({_how(seen)}): reprobox compares "
            f"what a job writes; {more}; nothing was written. Its last lines:\n  {shown}"
        )


def _requirements_file(folder: Path, name: str) -> str:
    """`name`, or a name of our own where the repository already has a file of that name."""
    return name if not (folder / name).exists() else f"reprobox-{name}"


def _lock(
    folder: Path, requirements: str, findings: Findings, written: list[Path]
) -> tuple[str | None, str | None]:
    """Write the requirements the image lacks and lock them (`reprobox lock`); (the lock's name, or
    None and why it could not be made here: no network, no wheel for the image's platform)."""
    from reprobox import locking

    source = folder / requirements
    header = "# what the job imports that the reprobox image lacks (found by reprobox init)\n"
    lines = [
        f"{n}=={v}" + (f"  # {findings.why[n]}" if n in findings.why else "")
        for n, v in findings.missing.items()
    ]
    write_text_atomic(source, header + "".join(f"{line}\n" for line in lines))
    written.append(source)
    lock = _requirements_file(folder, "requirements.lock")
    progress.say(f"init: locking {', '.join(findings.missing)} for the image ({requirements} -> {lock})")
    # the image builds offline from $REPROBOX_WHEELHOUSE where one is set: it gets these wheels too
    wheelhouse = locking.shared_wheelhouse(os.environ)
    try:
        locking.run_lock(
            locking.LockOptions(requirements=source, output=folder / lock, wheelhouse=wheelhouse)
        )
    except ReproboxError as exc:
        return None, exc.message
    written.append(folder / lock)
    return lock, None


def _check_loads(text: str, job_file: Path) -> None:
    """The file must load as a job where it will lie (its data sources are relative to it); one that
    does not is our bug, and is never left behind."""
    probe = job_file.parent / f".{job_file.name}.reprobox-init"
    try:
        probe.write_text(text, encoding="utf-8")
        load_job(probe)
    finally:
        probe.unlink(missing_ok=True)
