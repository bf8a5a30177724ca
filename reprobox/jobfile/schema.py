"""The job's schema: what a validated job.yaml becomes (frozen dataclasses), and its JSON form.

`reprobox.jobfile` reads and validates files into these; everything else only reads them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from reprobox.guest.determinism import Determinism

SCHEMA_VERSION = 1
NAME_PATTERN = re.compile(r"^[a-z0-9][a-z0-9._-]*$")
ENV_NAME_PATTERN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
CUBLAS_WORKSPACE_CONFIGS = (":4096:8", ":16:8")
NCCL_ALGOS = ("Ring", "^NVLS", "Tree")
LAUNCHER_TYPES = ("none", "torchrun")
SECRET_PATTERN = re.compile(r"SECRET|TOKEN|PASSW|KEY|CREDENTIAL|AUTH|COOKIE|SESSION", re.IGNORECASE)
REDACTED = "<redacted>"
MAX_SEED = 2**32 - 1  # NumPy's legacy global RNG takes seeds below 2**32
MIN_SECRET_LENGTH = 4  # shorter secret values are redacted only where a whole value equals them

# Set by reprobox for every run; usable as ${...} in `command`, not settable in `env`.
ALWAYS_SET = ("REPROBOX_OUTPUT_DIR", "REPROBOX_SEED", "REPROBOX_RUN_ID")

TOP_LEVEL_KEYS = (
    "version",
    "name",
    "command",
    "code",
    "data",
    "checkpoints",
    "seed",
    "determinism",
    "env",
    "timeout",
    "image",
    "network",
    "resources",
    "trail",
    "launcher",
    "compare",
    "claims",
    "accept",
    "resume",
    "workdir",
    "cwd",
)
WORKDIR_CODE = "code"  # the job starts in its code folder, read-only; it writes to $REPROBOX_OUTPUT_DIR
WORKDIR_COPY = "copy"  # it starts in a writable copy of its code; what it writes or changes there is output
WORKDIRS = (WORKDIR_CODE, WORKDIR_COPY)
ACCEPT_LEVELS = ("bits", "claims")  # what `reproduce` exits 0 for on a different stack


@dataclass(frozen=True)
class DataMount:
    """A read-only input: `source` on the host, seen at `target` in a container."""

    source: Path
    target: str
    env: str | None = None  # variable set to where the job can read the data, on every runtime


@dataclass(frozen=True)
class ImageSpec:
    """Which image a container run uses: a prebuilt reference, or the reprobox image with extras."""

    reference: str | None = None  # use this image as is (tag or digest)
    base: str | None = None  # base image for the reprobox Dockerfile
    requirements: Path | None = None  # the job's extra hash-locked requirements
    wheelhouse: Path | None = None  # local wheels for offline installs


@dataclass(frozen=True)
class Resources:
    """Container limits; None means the engine's default."""

    gpus: str | tuple[int, ...] | None = None  # "all", or device indices; None or () for no GPU
    memory: str | None = None  # "8g"
    cpus: float | None = None
    shm_size: str | None = None
    pids: int = 4096


@dataclass(frozen=True)
class Trail:
    every: int = 1


RESUME_FRAMEWORKS = ("transformers", "lightning")


@dataclass(frozen=True)
class Resume:
    """Where the job writes resumable checkpoints, and how it is resumed from one and stopped after a step.

    `checkpoint` is a pattern relative to the outputs folder with `{step}` (the step it was saved after,
    as the job counts steps) and optionally `*` / `**` globs; it names a file or a folder.
    `resume_args` (with `{checkpoint}`) and `stop_args` (with `{stop}`) are appended to the command. A
    `framework` job is resumed and stopped through its Trainer instead, with no arguments.
    """

    checkpoint: str
    resume_args: tuple[str, ...] = ()
    stop_args: tuple[str, ...] = ()
    framework: str | None = None


@dataclass(frozen=True)
class Launcher:
    """How the command starts: as is, or under PyTorch's torchrun with N processes per node on M nodes."""

    type: str = "none"
    nproc_per_node: int = 1
    nnodes: int = 1

    @property
    def world_size(self) -> int:
        return self.nproc_per_node * self.nnodes


@dataclass(frozen=True)
class IgnoreRule:
    """Outputs the job knows to be volatile: a file glob, and optionally a glob over value names inside it."""

    file: str  # glob relative to the outputs folder ("*.log", "logs/**")
    key: str | None = None  # glob over dotted value or tensor names ("log_history.*.train_runtime")


@dataclass(frozen=True)
class CompareSpec:
    """The `compare:` section: what a verdict leaves out, and says it left out."""

    ignore: tuple[IgnoreRule, ...] = ()


@dataclass(frozen=True)
class Claim:
    """A number the paper reports, where the job writes it, and how close a reproduction must come.

    `file` is relative to the outputs folder (JSON, JSON lines, YAML or CSV by its suffix, any other
    file read as text) or `stdout` (the job's log); `key` is a key path (`a.b.0.c`, `-1` for a list's
    last item), a CSV column, or for text a regex whose one group is the number (its last match).
    """

    name: str
    file: str
    key: str
    tolerance: float | None = None  # |reproduced - published| allowed; a fraction of |published| if relative
    relative: bool = False
    at_least: float | None = None  # the value must be at least this (a paper's "above 97%")
    at_most: float | None = None


@dataclass(frozen=True)
class JobSpec:
    """A validated job: paths absolute, defaults filled in."""

    job_file: Path
    name: str
    command: tuple[str, ...]
    code: Path
    data: tuple[DataMount, ...] = ()
    checkpoints: tuple[str, ...] = ()
    seed: int = 0
    determinism: Determinism = field(default_factory=Determinism)
    env: dict[str, str] = field(default_factory=dict, repr=False)  # may hold secrets: see to_json
    timeout: float | None = None
    image: ImageSpec = field(default_factory=ImageSpec)
    network: bool = False
    resources: Resources = field(default_factory=Resources)
    trail: Trail | None = None
    launcher: Launcher = field(default_factory=Launcher)
    compare: CompareSpec = field(default_factory=CompareSpec)
    claims: tuple[Claim, ...] = ()
    accept: str = "bits"  # "claims": reproduce exits 0 when every claim holds on a different stack
    resume: Resume | None = None  # resumable checkpoints: verify --resume-at, spot-check
    workdir: str = WORKDIR_CODE  # where the job starts: its read-only code, or a writable copy of it
    cwd: str | None = None  # the folder of the code (or of its copy) it starts in, when not the top
    # Values that must never be written anywhere: host variables with secret-looking names expanded into
    # `env`, and the values of secret-looking `env` keys. Kept out of to_json and repr.
    secrets: tuple[str, ...] = field(default=(), repr=False, compare=False)

    def to_json(self) -> dict[str, Any]:
        """The resolved spec for the manifest; secret values are redacted by key and by value."""
        data = asdict(self)
        del data["secrets"]
        data["env"] = redact_env(self.env, self.secrets)
        resolved: dict[str, Any] = redact_values(_jsonable(data), self.secrets)
        return resolved

    def with_overrides(self, **changes: Any) -> JobSpec:
        """A copy with some fields replaced (used by CLI flags such as --trail)."""
        values = {f: getattr(self, f) for f in self.__dataclass_fields__}
        values.update(changes)
        return JobSpec(**values)


def redact_env(env: Mapping[str, str], secrets: Sequence[str] = ()) -> dict[str, str]:
    """Secrets never land in manifests: values of secret-looking keys and known secret values are replaced."""
    return {
        key: (REDACTED if SECRET_PATTERN.search(key) else redact_text(value, secrets))
        for key, value in env.items()
    }


def redact_text(text: str, secrets: Sequence[str]) -> str:
    """`text` with every known secret value replaced: whole values always, substrings when long enough.

    A secret may be copied under an innocent name (`DB_URL: ${AWS_SECRET_ACCESS_KEY}`) or spliced
    into a longer value or a command argument, so redaction goes by value, not only by key.
    """
    for secret in sorted(set(secrets), key=len, reverse=True):
        if not secret:
            continue
        if text == secret:
            return REDACTED
        if len(secret) >= MIN_SECRET_LENGTH and secret in text:
            text = text.replace(secret, REDACTED)
    return text


def redact_values(value: Any, secrets: Sequence[str]) -> Any:
    """A copy of a JSON-like structure with every string (keys included) passed through redact_text."""
    if not secrets:
        return value
    if isinstance(value, str):
        return redact_text(value, secrets)
    if isinstance(value, dict):
        return {redact_values(k, secrets): redact_values(v, secrets) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact_values(v, secrets) for v in value]
    return value


def _jsonable(value: Any) -> Any:
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return value
