"""One root exception; each subclass carries the data its message is built from and its exit code.

The CLI is the only place that turns these into text and exit codes; the library raises them.
"""

from __future__ import annotations

import errno
import os
from dataclasses import dataclass
from pathlib import Path

from reprobox.diskspace import DiskFullFact, is_full

EXIT_OK = 0
EXIT_NOT_REPRODUCIBLE = 1
EXIT_BAD_INPUT = 2
EXIT_JOB_FAILED = 3
EXIT_ENVIRONMENT = 4
EXIT_INTERNAL = 70  # EX_SOFTWARE: a bug in reprobox, never confused with a verdict or bad input
EXIT_INTERRUPTED = 130  # 128 + the signal: 130 SIGINT (Ctrl-C), 143 SIGTERM, 129 SIGHUP


class ReproboxError(Exception):
    """Root of every error reprobox raises on purpose."""

    exit_code: int = EXIT_BAD_INPUT

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def lines(self) -> list[str]:
        """The sentences to show the user, one per line."""
        return [self.message]


class UsageError(ReproboxError):
    """Bad arguments or a bad file given on the command line."""

    exit_code = EXIT_BAD_INPUT


@dataclass(frozen=True)
class Problem:
    """One thing wrong with an input file, located precisely enough to fix."""

    path: Path
    line: int | None
    field: str
    message: str

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}" if self.line else str(self.path)
        field = f" {self.field}:" if self.field else ""
        return f"{where}:{field} {self.message}"


class SpecError(ReproboxError):
    """An input file (job.yaml, attestation) has one or more problems; all are reported at once."""

    exit_code = EXIT_BAD_INPUT

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = problems
        super().__init__("; ".join(str(p) for p in problems))

    def lines(self) -> list[str]:
        return [str(p) for p in self.problems]


class EnvironmentProblem(ReproboxError):
    """The machine cannot do what was asked: no engine, image missing, build failed."""

    exit_code = EXIT_ENVIRONMENT

    def __init__(self, message: str, *, hint: str | None = None, log_tail: str = "") -> None:
        super().__init__(message, hint=hint)
        self.log_tail = log_tail


class DiskFull(EnvironmentProblem):
    """A disk (or a quota) ran out while reprobox or the job wrote on it: the machine's state, so exit 4
    (an environment problem), not 3 (the job failed) or 70 (a bug); `run_dir` is the run it failed,
    when it was recorded."""

    def __init__(self, fact: DiskFullFact, *, run_dir: Path | None = None) -> None:
        super().__init__(fact.sentence())
        self.fact = fact
        self.run_dir = run_dir

    @classmethod
    def from_error(cls, exc: BaseException) -> DiskFull | None:
        """The full disk an uncaught error was (named by the file it met), or None for any other error."""
        if not isinstance(exc, OSError) or not is_full(exc):
            return None
        if not isinstance(exc.filename, (str, bytes)):  # a write that names no file: which disk is unknown
            return cls(DiskFullFact("", None, quota=exc.errno == errno.EDQUOT))
        return cls(DiskFullFact.met(exc, Path(os.fsdecode(exc.filename)).absolute().parent))


class NotEnoughSpace(EnvironmentProblem):
    """A build refused before it starts because the engine's disk holds less than it would use."""

    def __init__(self, what: str, folder: Path, needed: int, free: int) -> None:
        super().__init__(
            f"{what} needs at least {needed / 1e9:.1f} GB free where the engine keeps its images ({folder}), "
            f"and {free / 1e9:.1f} GB are free there: free space (reprobox clean --images removes the images "
            "no run uses) and rerun"
        )
        self.folder = folder
        self.needed = needed
        self.free = free


class Interrupted(ReproboxError):
    """Ctrl-C or a termination signal; the run was stopped and recorded as interrupted.

    The exit code is 128 plus the signal's number, as a shell reports a process the signal ended.
    """

    exit_code = EXIT_INTERRUPTED

    def __init__(self, run_dir: Path | None = None, *, signal_number: int | None = None) -> None:
        what = "interrupted" if signal_number is None else f"interrupted by signal {signal_number}"
        super().__init__(f"{what}; the job's processes were stopped and the run recorded as interrupted")
        self.run_dir = run_dir
        self.signal_number = signal_number
        if signal_number is not None:
            self.exit_code = 128 + signal_number
