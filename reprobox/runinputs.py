"""What one run starts from: made by the runner, read by the recording that writes its manifest."""

from __future__ import annotations

from dataclasses import dataclass

from reprobox import codetree
from reprobox.jobfile import JobSpec
from reprobox.runtimes.base import RunPlan


@dataclass(frozen=True)
class RunInputs:
    """What runs start from: the code's snapshot and the data's digests, made once for all runs of a
    verify, so that an edit in the code folder while it runs changes nothing and data is read once."""

    code: codetree.CodeSnapshot
    data: tuple[codetree.DataDigest, ...]


@dataclass(frozen=True)
class PreparedRun:
    """A run whose directory exists and whose inputs are digested, ready for a runtime.

    `job` is the job as written; `plan.job` is the same job with the code snapshot as its code folder.
    """

    plan: RunPlan
    inputs: RunInputs
    job: JobSpec
