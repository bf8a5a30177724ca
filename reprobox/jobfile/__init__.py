"""The job file: its schema (`schema`: what a job.yaml may say) and its loader (`load`: reading and
validating one, every problem at once with file:line and a fix)."""

from reprobox.jobfile._resume import checkpoint_globs
from reprobox.jobfile.load import (
    load_job,
)
from reprobox.jobfile.schema import (
    MAX_SEED,
    REDACTED,
    SECRET_PATTERN,
    WORKDIR_CODE,
    WORKDIR_COPY,
    Claim,
    DataMount,
    ImageSpec,
    JobSpec,
    Launcher,
    Resources,
    Resume,
    Trail,
    redact_env,
    redact_text,
    redact_values,
)

__all__ = [
    "MAX_SEED",
    "REDACTED",
    "SECRET_PATTERN",
    "WORKDIR_CODE",
    "WORKDIR_COPY",
    "Claim",
    "DataMount",
    "ImageSpec",
    "JobSpec",
    "Launcher",
    "Resources",
    "Resume",
    "Trail",
    "checkpoint_globs",
    "load_job",
    "redact_env",
    "redact_text",
    "redact_values",
]
