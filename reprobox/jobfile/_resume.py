"""The `resume:` section: where the job saves resumable checkpoints, and how it resumes and stops; and
what it changes in every run of the job (`checkpoint_globs`: each resumable checkpoint is hashed)."""

from __future__ import annotations

from typing import Any

from reprobox.jobfile._checker import Checker, describe
from reprobox.jobfile.checkpoint_patterns import (
    CHECKPOINT,
    FRAMEWORK_PATTERNS,
    STOP,
    hash_globs,
    pattern_problem,
)
from reprobox.jobfile.schema import RESUME_FRAMEWORKS, JobSpec, Resume

RESUME_KEYS = ("checkpoint", "from", "stop", "framework")


def check_resume(c: Checker, value: Any) -> Resume | None:
    entry = c.mapping(value, "resume")
    if entry is None:
        return None
    c.check_keys(entry, RESUME_KEYS, "resume")
    framework = entry.get("framework")
    if framework is not None and framework not in RESUME_FRAMEWORKS:
        c.fail(
            "resume.framework",
            f"must be one of {', '.join(RESUME_FRAMEWORKS)}, not {describe(framework)}; or leave it out and "
            "give 'from' and 'stop'",
        )
        return None
    pattern = _pattern(c, entry.get("checkpoint", FRAMEWORK_PATTERNS.get(framework or "")))
    if pattern is None:
        return None
    if framework is not None:
        for key in ("from", "stop"):
            if key in entry:
                c.fail(
                    f"resume.{key}",
                    f"is not used with 'framework: {framework}' (reprobox resumes and stops it through its "
                    "Trainer); remove it",
                )
        return Resume(checkpoint=pattern, framework=framework)
    resume_args = _arguments(c, entry.get("from"), "from", CHECKPOINT, '[--resume, "{checkpoint}"]')
    stop_args = _arguments(c, entry.get("stop"), "stop", STOP, '[--max-steps, "{stop}"]')
    if resume_args is None or stop_args is None:
        return None
    return Resume(checkpoint=pattern, resume_args=resume_args, stop_args=stop_args)


def _arguments(c: Checker, value: Any, key: str, placeholder: str, example: str) -> tuple[str, ...] | None:
    dotted = f"resume.{key}"
    if value is None:
        c.fail(dotted, f"is missing; give the arguments appended to the command, e.g. {key}: {example}")
        return None
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not value or not all(isinstance(a, str | int) for a in value):
        c.fail(dotted, f"must be a list of arguments such as {example}, not {describe(value)}")
        return None
    arguments = tuple(str(a) for a in value)
    if not any(placeholder in a for a in arguments):
        c.fail(dotted, f"must use {placeholder} in one of its arguments, e.g. {example}")
        return None
    return arguments


def _pattern(c: Checker, pattern: Any) -> str | None:
    if pattern is None:
        c.fail(
            "resume.checkpoint",
            "is missing; say where the job saves the checkpoint of each step, e.g. 'ckpt/step-{step}.pt'",
        )
        return None
    if not isinstance(pattern, str) or not pattern:
        c.fail(
            "resume.checkpoint",
            f"must be a path pattern such as 'ckpt/step-{{step}}.pt', not {describe(pattern)}",
        )
        return None
    problem = pattern_problem(pattern)
    if problem:
        c.fail("resume.checkpoint", problem)
        return None
    return pattern


def checkpoint_globs(job: JobSpec) -> tuple[str, ...]:
    """The job's `checkpoints:` globs, widened to every resumable checkpoint's files (for spot-checks)."""
    if job.resume is None or not job.checkpoints:
        return job.checkpoints  # no globs: every output file is hashed already
    return tuple(dict.fromkeys((*job.checkpoints, *hash_globs(job.resume.checkpoint))))
