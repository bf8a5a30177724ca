"""Starting a run from a resumable checkpoint: the files put in its outputs folder (each checked against
the hash its run recorded), and the arguments and variables that make the job resume and stop.

`ResumePlan` is all of it for one run, handed to the runner in `RunOptions.start`: the runner applies
it (`reprobox.runner.StartPlan`) and knows nothing of checkpoints."""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reprobox.errors import EXIT_NOT_REPRODUCIBLE, ReproboxError
from reprobox.guest import settings
from reprobox.guest.filehash import file_sha256
from reprobox.jobfile import JobSpec
from reprobox.jobfile.checkpoint_patterns import CHECKPOINT, STOP, fill


class CheckpointAltered(ReproboxError):
    """A checkpoint's bytes are not those its run recorded: it is evidence of nothing, so never replayed."""

    exit_code = EXIT_NOT_REPRODUCIBLE

    def __init__(self, message: str, *, files: list[str]) -> None:
        super().__init__(message)
        self.files = files


@dataclass(frozen=True)
class ResumeFrom:
    """The checkpoint a run starts from: saved after `step`, at `checkpoint` in the outputs folder of
    the run it comes from (`source`). Its files (`files`, relative to `source`) are copied into the new
    run's outputs under `.reprobox-resume/` (an input the guest removes before hashing, kept apart so
    that a framework's own folders, a logger's version count, are as in a run from the start), and
    each must still have the sha256 recorded for it.
    """

    step: int
    checkpoint: str
    source: Path
    files: Mapping[str, str] = field(default_factory=dict)  # relative path -> recorded file sha256
    source_run: Path | None = None
    # the optimizer steps made before it was saved, where the job numbers its checkpoints by something
    # else (epochs, micro-batches): the resumed run's trail goes on counting from there
    optimizer_step: int | None = None

    def to_json(self) -> dict[str, object]:
        return {
            "step": self.step,
            "checkpoint": self.checkpoint,
            "from_run": str(self.source_run) if self.source_run else None,
            "files": dict(sorted(self.files.items())),
        }


def place(start: ResumeFrom, outputs: Path) -> None:
    """Copy the checkpoint's files into a new run's outputs folder, then check each copy's sha256.

    The copy is what the job reads, so it is the copy that is checked: a file changed after the check
    cannot slip in. Raises CheckpointAltered naming every file whose bytes differ or that is missing.
    """
    altered = []
    for relative, recorded in sorted(start.files.items()):
        source, target = start.source / relative, outputs / settings.RESUME_INPUT / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            if source.is_symlink() or not source.is_file():
                raise FileNotFoundError(relative)
            shutil.copyfile(source, target)
        except OSError:
            altered.append(f"{relative} (missing)")
            continue
        if file_sha256(target) != recorded:
            altered.append(relative)
    if altered:
        shown = ", ".join(altered[:5]) + (f" and {len(altered) - 5} more" if len(altered) > 5 else "")
        raise CheckpointAltered(
            f"the checkpoint of step {start.step} ({start.checkpoint}) is not what its run recorded: {shown} "
            "differ from the recorded sha256; it was not replayed",
            files=altered,
        )


def placed(start: ResumeFrom) -> str:
    """Where the checkpoint lies in the new run's outputs folder."""
    return f"{settings.RESUME_INPUT}/{start.checkpoint}"


@dataclass(frozen=True)
class ResumePlan:
    """A run that starts from a checkpoint (`start`), stops after a step (`stop_at`), or both."""

    start: ResumeFrom | None = None
    stop_at: int | None = None  # stop after this step through the job's own `resume.stop`

    def arguments(self, job: JobSpec) -> tuple[str, ...]:
        """What is appended to the command (nothing for a framework job, which its Trainer's hooks resume)."""
        resume = job.resume
        if resume is None or resume.framework is not None:
            return ()
        extra: tuple[str, ...] = ()
        if self.start is not None:
            where = "${" + settings.OUTPUT_DIR + "}/" + placed(self.start).replace("$", "$$")
            extra += fill(resume.resume_args, CHECKPOINT, where)
        if self.stop_at is not None:
            extra += fill(resume.stop_args, STOP, str(self.stop_at))
        return extra

    def environment(self, job: JobSpec) -> dict[str, str]:
        """The variables the guest (and scripts that read the environment) resume and stop by."""
        resume = job.resume
        if resume is None:
            return {}
        env: dict[str, str] = {}
        if self.start is not None:
            steps = self.start.optimizer_step if self.start.optimizer_step is not None else self.start.step
            env[settings.RESUME_STEP] = str(steps)
            env[settings.RESUME_CHECKPOINT] = placed(self.start)
        if self.stop_at is not None:
            env[settings.STOP_AT] = str(self.stop_at)
        if resume.framework is not None and (self.start is not None or self.stop_at is not None):
            env[settings.RESUME_FRAMEWORK] = resume.framework
        return env

    def place(self, outputs: Path) -> None:
        """The checkpoint's files into the new run's outputs folder, checked (see `place`)."""
        if self.start is not None:
            place(self.start, outputs)

    def to_json(self) -> dict[str, Any]:
        """What the manifest says of the run: where it started from, where it stopped."""
        return {"from": self.start.to_json() if self.start else None, "stop_at": self.stop_at}
