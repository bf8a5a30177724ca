"""The environment variables through which the controller tells the guest what to enforce.

One place defines the names so the controller (which writes them) and the guest (which reads them in
every process of the job) cannot drift apart.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

# The run dir's names are the records' own; the guest's modules take them from here.
from reprobox.records import layout

SEED = "REPROBOX_SEED"
RUN_ID = "REPROBOX_RUN_ID"
OUTPUT_DIR = "REPROBOX_OUTPUT_DIR"
RUN_DIR = "REPROBOX_RUN_DIR"
CODE_DIR = "REPROBOX_CODE_DIR"
CHECKPOINTS = "REPROBOX_CHECKPOINTS"  # JSON list of globs
ENV_ORDER = "REPROBOX_ENV_ORDER"  # JSON list: the job file's `env:` names, in the order the job sees them
DETERMINISM = "REPROBOX_DETERMINISM"  # JSON object of job.Determinism fields
TRAIL_EVERY = "REPROBOX_TRAIL_EVERY"
MAX_STEPS = "REPROBOX_MAX_STEPS"
AUDIT = "REPROBOX_AUDIT"  # "1": record nondeterministic-op warnings to AUDIT_FILE in the guest state folder
REFERENCE_TRAIL = "REPROBOX_REFERENCE_TRAIL"  # a reference trail.jsonl to stop at the first divergence
OPLOG_STEPS = "REPROBOX_OPLOG_STEPS"  # "6,7": record every operation of these optimizer steps (a replay)
TRAIL_STATE = "REPROBOX_TRAIL_STATE"  # "1": trail records also digest RNG, optimizer and scheduler state
RESUME_STEP = "REPROBOX_RESUME_STEP"  # the optimizer step the resumed checkpoint was saved after
RESUME_CHECKPOINT = "REPROBOX_RESUME_CHECKPOINT"  # that checkpoint, relative to the outputs folder
RESUME_FROM = "REPROBOX_RESUME_FROM"  # the same as the job sees it (absolute); set by the entrypoint
STOP_AT = "REPROBOX_STOP_AT"  # stop after this optimizer step, saving a checkpoint there
RESUME_INPUT = ".reprobox-resume"  # in the outputs folder: the checkpoint a run starts from (not an output)
RESUME_FRAMEWORK = "REPROBOX_RESUME_FRAMEWORK"  # "transformers" or "lightning": resumed and stopped by hooks
OBSERVE = "REPROBOX_OBSERVE"  # "1": `reprobox init`'s short run, watched (guest/observe.py)
OBSERVE_SECONDS = "REPROBOX_OBSERVE_SECONDS"  # its time budget; it also ends at its first checkpoint
WORK_LINKS = "REPROBOX_WORK_LINKS"  # JSON {path in the working copy: what it links to} (workdir: copy)
CWD = "REPROBOX_CWD"  # the job file's `cwd`: the folder of the code (or its copy) the command starts in
WORKDIR = "REPROBOX_WORKDIR"  # "copy": the job starts in a writable copy of its code in the outputs folder
STEP_TIMES = "REPROBOX_STEP_TIMES"  # "1": the trail's step hook times each optimizer step (reprobox cost)
GUEST_STATE = layout.GUEST_STATE  # hidden folder in the run dir for the guest's own files
GUEST_RESULT = layout.GUEST_RESULT
HOOK_ACTIVE = "REPROBOX_HOOK"  # set by the entrypoint; the startup hook does nothing without it

TRAIL_FILE = "trail.jsonl"
AUDIT_FILE = "audit.jsonl"


def seed_for_process(env: Mapping[str, str] | None = None) -> int:
    """The job seed, offset by the distributed rank: seed + RANK (mod 2**32), documented for users."""
    env = os.environ if env is None else env
    seed = int(env.get(SEED, "0"))
    rank = int(env.get("RANK", "0") or 0)
    return (seed + rank) % 2**32


VARIABLE_PATTERN = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|\$)")


def expand_variables(text: str, values: Mapping[str, str]) -> str:
    """Replace ${NAME} with its value and $$ with a literal $; an unknown NAME raises KeyError."""

    def replace(match: re.Match[str]) -> str:
        name = match.group(1)
        return "$" if name is None else values[name]

    return VARIABLE_PATTERN.sub(replace, text)


def referenced_variables(text: str) -> list[str]:
    return [m.group(1) for m in VARIABLE_PATTERN.finditer(text) if m.group(1)]


# Set by the runtime for one run of `verify --vary`; applied by the entrypoint to the user's command only.
UMASK = "REPROBOX_UMASK"  # octal, e.g. "077"
LOCALES = "REPROBOX_LOCALES"  # ":"-separated: the job gets the first installed here other than its own
CLOCK_OFFSET = "REPROBOX_CLOCK_OFFSET"  # seconds added to the job's wall clock (through libfaketime)
LIBFAKETIME = "REPROBOX_LIBFAKETIME"  # where libfaketime is, when not in a standard place
FILE_ORDER = "REPROBOX_FILE_ORDER"  # "reversed": the job's listings of its code and data folders reversed
FILE_ORDER_ROOTS = "REPROBOX_FILE_ORDER_ROOTS"  # those folders, os.pathsep-separated (default: CODE_DIR)
