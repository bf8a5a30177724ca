"""job.yaml v1 -> a frozen JobSpec.

Load = parse (with line numbers) -> validate every field, collecting every problem -> complete
(resolve paths against the job file). Nothing is run or written here. The schema itself is in
`reprobox.jobfile`; its names are re-exported here for callers.
"""

from __future__ import annotations

import difflib
import math
import os
import posixpath
import re
import shlex
import stat
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path, PurePosixPath
from typing import Any

import yaml

from reprobox.errors import Problem, SpecError
from reprobox.guest.determinism import Determinism
from reprobox.guest.settings import expand_variables, referenced_variables
from reprobox.jobfile.schema import (
    ALWAYS_SET,
    CUBLAS_WORKSPACE_CONFIGS,
    ENV_NAME_PATTERN,
    LAUNCHER_TYPES,
    MAX_SEED,
    NAME_PATTERN,
    NCCL_ALGOS,
    REDACTED,
    SCHEMA_VERSION,
    SECRET_PATTERN,
    TOP_LEVEL_KEYS,
    CompareSpec,
    DataMount,
    IgnoreRule,
    ImageSpec,
    JobSpec,
    Launcher,
    Resources,
    Trail,
    redact_env,
)
from reprobox.jobfile.yamlsource import Located, load_yaml

MAX_NAME_LENGTH = 128  # the name goes into directory, container and Slurm job names
MAX_PATH_COMPONENT_BYTES = 255  # NAME_MAX on Linux, macOS and Windows file systems
MAX_PATH_BYTES = 4095  # PATH_MAX minus the terminating NUL
MAX_TIMEOUT = 366 * 24 * 3600.0  # a year: longer is a typo, and timers overflow far beyond
MIN_CPUS, MAX_CPUS = 0.01, 4096.0  # Docker refuses fewer than 0.01 CPUs
MIN_MEMORY = 6 * 1024**2  # Docker refuses a memory limit below 6 MiB
MAX_SIZE = 1024**5  # 1 PiB: more is a typo, and overflows what engines accept
MAX_PIDS = 4_194_304  # the kernel's PID_MAX_LIMIT
MAX_PROCESSES = 1024  # launcher.nproc_per_node and launcher.nnodes
MAX_THREADS = 4096  # determinism.threads
MAX_ARG_BYTES = 128 * 1024 - 1  # Linux's MAX_ARG_STRLEN: execve refuses a longer argument or KEY=value
RESERVED_TARGETS = ("/reprobox", "/proc", "/sys", "/dev")  # reprobox's own mounts and the kernel's
RESERVED_ENV = ("PYTHONHASHSEED",)  # plus every REPROBOX_* name
SIZE_UNITS = {"": 1, "b": 1, "k": 1024, "m": 1024**2, "g": 1024**3}

__all__ = [
    "ALWAYS_SET",
    "MAX_SEED",
    "REDACTED",
    "SECRET_PATTERN",
    "DataMount",
    "Determinism",
    "ImageSpec",
    "JobSpec",
    "Launcher",
    "Resources",
    "Trail",
    "load_job",
    "redact_env",
]


def load_job(path: Path | str, *, host_env: Mapping[str, str] | None = None) -> JobSpec:
    """Read and validate a job file; raises SpecError listing every problem found."""
    job_path = Path(path)
    try:
        if job_path.is_dir():
            job_path = job_path / "job.yaml"
    except OSError:
        pass  # an unusable path: reading it below says why, as a SpecError
    job_path = job_path.absolute()
    _check_file_type(job_path)
    try:
        located = load_yaml(job_path)
    except yaml.YAMLError as exc:  # one the loader let through (a character YAML does not allow)
        reason = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise SpecError(
            [Problem(job_path, None, "", f"is not valid YAML ({reason}); fix the syntax")]
        ) from None
    except (ValueError, TypeError, OverflowError) as exc:  # a tagged scalar that does not convert
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        problem = Problem(job_path, None, "", f"holds a value YAML cannot convert ({reason}); fix the value")
        raise SpecError([problem]) from None
    return _Validator(located, os.environ if host_env is None else host_env).spec()


def _check_file_type(path: Path) -> None:
    """Refuse a directory, pipe or device before it is opened: reading a FIFO would block forever."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return  # missing or unreadable: load_yaml says which
    if stat.S_ISDIR(mode):
        message = "is a directory, not a job file; pass the job file or the folder that holds job.yaml"
    elif not stat.S_ISREG(mode):
        message = "is not a regular file (a pipe or a device); pass the job file itself"
    else:
        return
    raise SpecError([Problem(path, None, "", message)])


class _Validator:
    """Checks one parsed job file, collecting every problem before giving up."""

    def __init__(self, located: Located, host_env: Mapping[str, str]) -> None:
        self.doc = located
        self.host_env = host_env
        self.problems: list[Problem] = []
        self.base_dir = located.path.parent

    def fail(self, dotted: str, message: str) -> None:
        self.problems.append(self.doc.problem(dotted, message))

    def spec(self) -> JobSpec:
        raw = self.doc.data
        if not isinstance(raw, dict):
            kind = "empty" if raw is None else f"a {type(raw).__name__}"
            self.fail(
                "", f"is {kind}, but a job file must be a mapping with at least version, name and command"
            )
            raise SpecError(self.problems)
        for dotted, line in self.doc.duplicates:
            self.problems.append(Problem(self.doc.path, line, dotted, "appears twice; keep one"))
        self.check_nul_bytes(raw)
        if self.problems:
            raise SpecError(sorted(self.problems, key=lambda p: p.line or 0))
        self.secrets: list[str] = []
        self.check_keys(raw, TOP_LEVEL_KEYS, "")
        self.check_version(raw)
        name = self.check_name(raw)
        env = self.check_env(raw.get("env"))
        data = self.check_data(raw.get("data"))
        command = self.check_command(raw, env, data)
        code = self.check_code(raw)
        spec = JobSpec(
            job_file=self.doc.path,
            name=name,
            command=command,
            code=code,
            data=data,
            checkpoints=self.check_checkpoints(raw.get("checkpoints")),
            seed=self.check_seed(raw.get("seed", 0)),
            determinism=self.check_determinism(raw.get("determinism")),
            env=env,
            timeout=self.check_timeout(raw.get("timeout")),
            image=self.check_image(raw.get("image")),
            network=self.check_bool(raw.get("network", False), "network"),
            resources=self.check_resources(raw.get("resources")),
            trail=self.check_trail(raw.get("trail")),
            launcher=self.check_launcher(raw.get("launcher")),
            compare=self.check_compare(raw.get("compare")),
            secrets=tuple(sorted(set(self.secrets))),
        )
        if self.problems:
            raise SpecError(sorted(self.problems, key=lambda p: p.line or 0))
        return spec

    # -- helpers -------------------------------------------------------------------------------------

    def check_keys(self, mapping: Mapping[str, Any], allowed: tuple[str, ...], prefix: str) -> None:
        for key in mapping:
            if key in allowed:
                continue
            dotted = f"{prefix}.{key}" if prefix else str(key)
            close = difflib.get_close_matches(str(key), allowed, n=1, cutoff=0.6)
            hint = f"did you mean '{close[0]}'?" if close else f"known keys: {', '.join(allowed)}"
            self.fail(dotted, f"unknown key '{key}'; {hint}")

    def check_nul_bytes(self, raw: Any) -> None:
        """A NUL byte (a "\\0" escape) in any key or value would be cut short by the OS; refuse it first."""
        stack: list[tuple[str, Any]] = [("", raw)]
        while stack:  # no recursion: depth is bounded by the YAML loader, not the stack
            dotted, value = stack.pop()
            if isinstance(value, str) and "\0" in value:
                self.fail(dotted, "contains a NUL byte (\\0); remove it")
            elif isinstance(value, dict):
                for key, item in value.items():
                    child = f"{dotted}.{key}" if dotted else str(key)
                    if isinstance(key, str) and "\0" in key:
                        self.fail(child, "has a NUL byte (\\0) in its key; remove it")
                        continue
                    stack.append((child, item))
            elif isinstance(value, list):
                stack.extend((f"{dotted}.{i}" if dotted else str(i), item) for i, item in enumerate(value))

    def check_path_length(self, value: str, dotted: str) -> bool:
        """Whether every component of `value` fits the file system; reports the problem if not."""
        encoded = os.fsencode(value)
        if len(encoded) > MAX_PATH_BYTES:
            self.fail(dotted, f"is {len(encoded)} bytes long, more than {MAX_PATH_BYTES}; shorten the path")
            return False
        for part in encoded.split(b"/"):
            if len(part) > MAX_PATH_COMPONENT_BYTES:
                self.fail(
                    dotted,
                    f"has a name of {len(part)} bytes, more than the {MAX_PATH_COMPONENT_BYTES} a file "
                    "system allows; shorten it",
                )
                return False
        return True

    def mapping(self, value: Any, dotted: str) -> dict[str, Any] | None:
        if value is None:
            return None
        if not isinstance(value, dict):
            self.fail(dotted, f"must be a mapping, not {_describe(value)}")
            return None
        return value

    def check_bool(self, value: Any, dotted: str) -> bool:
        if not isinstance(value, bool):
            self.fail(dotted, f"must be true or false, not {_describe(value)}")
            return False
        return value

    def relative_path(self, value: Any, dotted: str, *, must_be_dir: bool) -> Path | None:
        if not isinstance(value, str) or not value:
            self.fail(dotted, f"must be a path (a string), not {_describe(value)}")
            return None
        if not self.check_path_length(value, dotted):
            return None
        try:
            resolved = (self.base_dir / Path(value).expanduser()).resolve()
            is_dir, exists = resolved.is_dir(), resolved.exists()
        except (OSError, RuntimeError) as exc:  # too long once resolved, a link loop, no such user
            reason = exc.strerror if isinstance(exc, OSError) else str(exc)
            self.fail(dotted, f"'{value}' cannot be resolved ({reason}); fix the path")
            return None
        if must_be_dir and not is_dir:
            self.fail(
                dotted,
                f"directory '{value}' does not exist (resolved to {resolved}); create it or fix the path",
            )
        elif not must_be_dir and not exists:
            self.fail(dotted, f"'{value}' does not exist (resolved to {resolved}); fix the path")
        return resolved

    # -- fields --------------------------------------------------------------------------------------

    def check_version(self, raw: Mapping[str, Any]) -> None:
        if "version" not in raw:
            self.fail("version", "is missing; add 'version: 1' at the top of the file")
        elif raw["version"] != SCHEMA_VERSION or isinstance(raw["version"], bool):
            self.fail(
                "version",
                f"{raw['version']!r} is not a job file version this reprobox understands; use 'version: 1'",
            )

    def check_name(self, raw: Mapping[str, Any]) -> str:
        name = raw.get("name")
        if name is None:
            self.fail("name", "is missing; add a name such as 'name: tiny-mlp'")
            return ""
        if not isinstance(name, str) or not NAME_PATTERN.match(name):
            self.fail(
                "name",
                f"{_shorten(name)!r} is not a valid name; use lowercase letters, digits, '.', '_' or '-', "
                "starting with a letter or digit",
            )
            return ""
        if len(name) > MAX_NAME_LENGTH:
            self.fail("name", f"is {len(name)} characters long; use at most {MAX_NAME_LENGTH}")
            return ""
        return name

    def check_command(
        self, raw: Mapping[str, Any], env: Mapping[str, str], data: tuple[DataMount, ...]
    ) -> tuple[str, ...]:
        command = raw.get("command")
        if command is None:
            self.fail("command", "is missing; add the command to run, e.g. 'command: [python, train.py]'")
            return ()
        if isinstance(command, str):
            try:
                parts = shlex.split(command)
            except ValueError as exc:
                self.fail("command", f"cannot be split like a shell command ({exc}); fix the quoting")
                return ()
        elif isinstance(command, list) and all(isinstance(p, str | int | float) for p in command):
            parts = [str(p) for p in command]
        else:
            self.fail("command", "must be a list of strings or one string, e.g. [python, train.py]")
            return ()
        if not parts:
            self.fail("command", "is empty; give the program to run, e.g. [python, train.py]")
            return ()
        for index, part in enumerate(parts):
            if len(os.fsencode(part)) > MAX_ARG_BYTES:
                dotted = f"command.{index}" if isinstance(command, list) else "command"
                self.fail(
                    dotted, f"has an argument longer than {MAX_ARG_BYTES} bytes; pass long values in a file"
                )
                return ()
        data_env = {mount.env for mount in data if mount.env}
        known = set(env) | set(ALWAYS_SET) | data_env
        for index, part in enumerate(parts):
            for name in referenced_variables(part):
                if name not in known:
                    dotted = f"command.{index}" if isinstance(command, list) else "command"
                    self.fail(
                        dotted,
                        f"uses ${{{name}}}, which is not set; define it under 'env', name it as a "
                        f"data entry's 'env', or use one of {', '.join(ALWAYS_SET)}",
                    )
        return tuple(parts)

    def check_code(self, raw: Mapping[str, Any]) -> Path:
        if "code" not in raw:
            return self.base_dir.resolve()
        return self.relative_path(raw["code"], "code", must_be_dir=True) or self.base_dir

    def check_data(self, value: Any) -> tuple[DataMount, ...]:
        if value is None:
            return ()
        if not isinstance(value, list):
            self.fail("data", "must be a list of {source, target} mappings")
            return ()
        mounts: list[DataMount] = []
        targets: set[str] = set()
        for index, item in enumerate(value):
            dotted = f"data.{index}"
            entry = self.mapping(item, dotted)
            if entry is None:
                continue
            self.check_keys(entry, ("source", "target", "env"), dotted)
            source = self.relative_path(entry.get("source"), f"{dotted}.source", must_be_dir=False)
            target = entry.get("target")
            if not isinstance(target, str) or not target.startswith("/"):
                self.fail(f"{dotted}.target", "must be an absolute path inside the container, e.g. /data")
                continue
            if not self.check_path_length(target, f"{dotted}.target"):
                continue
            normalized = "/" + posixpath.normpath(target).lstrip("/")  # '/data/../x' is '/x'
            if normalized in targets:
                self.fail(f"{dotted}.target", f"'{target}' is used by two data entries; give each its own")
            if normalized == "/" or any(
                normalized == reserved or normalized.startswith(reserved + "/")
                for reserved in RESERVED_TARGETS
            ):
                self.fail(
                    f"{dotted}.target",
                    f"'{target}' is {normalized}, which reprobox or the kernel uses; choose another path "
                    "such as /data",
                )
            targets.add(normalized)
            env_name = entry.get("env")
            if env_name is not None and (
                not isinstance(env_name, str) or not ENV_NAME_PATTERN.match(env_name)
            ):
                self.fail(f"{dotted}.env", f"{_shorten(env_name)!r} is not a valid environment variable name")
                env_name = None
            elif env_name is not None and (env_name.startswith("REPROBOX_") or env_name in RESERVED_ENV):
                self.fail(
                    f"{dotted}.env", f"'{env_name}' is set by reprobox; choose another name such as DATA_DIR"
                )
                env_name = None
            if source is not None:
                mounts.append(DataMount(source=source, target=normalized, env=env_name))
        return tuple(mounts)

    def check_checkpoints(self, value: Any) -> tuple[str, ...]:
        if value is None:
            return ()
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not all(isinstance(p, str) and p for p in value):
            self.fail("checkpoints", "must be a list of glob patterns such as ['*.pt']")
            return ()
        for index, pattern in enumerate(value):
            parts = PurePosixPath(pattern).parts
            if pattern.startswith("/") or ".." in parts or "\\" in pattern:
                self.fail(
                    f"checkpoints.{index}",
                    f"'{pattern}' points outside the output directory; use a pattern relative to it, "
                    "e.g. 'model/*.pt'",
                )
        return tuple(value)

    def check_seed(self, value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_SEED:
            self.fail("seed", f"must be an integer from 0 to {MAX_SEED}, not {_describe(value)}")
            return 0
        return value

    def check_determinism(self, value: Any) -> Determinism:
        entry = self.mapping(value, "determinism")
        if entry is None:
            return Determinism()
        allowed = tuple(Determinism.__dataclass_fields__)
        self.check_keys(entry, allowed, "determinism")
        defaults = Determinism()
        values: dict[str, Any] = {}
        for key in allowed:
            if key not in entry:
                continue
            dotted = f"determinism.{key}"
            item = entry[key]
            if key == "cublas_workspace_config":
                if item not in CUBLAS_WORKSPACE_CONFIGS:
                    self.fail(dotted, f"{item!r} is not allowed; use ':4096:8' (default) or ':16:8'")
                    continue
            elif key == "nccl_algo":
                if item not in NCCL_ALGOS:
                    self.fail(dotted, f"{item!r} is not allowed; use 'Ring' (default), '^NVLS' or 'Tree'")
                    continue
            elif key == "threads":
                if item is not None and (
                    isinstance(item, bool) or not isinstance(item, int) or not 1 <= item <= MAX_THREADS
                ):
                    self.fail(
                        dotted,
                        f"must be a positive integer or null, not {_describe(item)}; "
                        f"use at most {MAX_THREADS}",
                    )
                    continue
            else:
                self.check_bool(item, dotted)
                if not isinstance(item, bool):
                    continue
            values[key] = item
        return Determinism(**{**asdict(defaults), **values})

    def check_env(self, value: Any) -> dict[str, str]:
        entry = self.mapping(value, "env")
        if entry is None:
            return {}
        env: dict[str, str] = {}
        for key, item in entry.items():
            dotted = f"env.{key}"
            if not isinstance(key, str) or not ENV_NAME_PATTERN.match(key):
                self.fail(dotted, f"{key!r} is not a valid environment variable name")
                continue
            if key.startswith("REPROBOX_") or key == "PYTHONHASHSEED":
                self.fail(dotted, f"'{key}' is set by reprobox; use 'seed' or 'determinism' instead")
                continue
            if isinstance(item, bool):
                text = "1" if item else "0"
            elif isinstance(item, str | int | float):
                text = str(item)
            else:
                self.fail(dotted, f"must be a string or number, not {_describe(item)}")
                continue
            try:
                env[key] = expand_variables(text, self.host_env)
            except KeyError as exc:
                self.fail(dotted, f"uses ${{{exc.args[0]}}}, which is not set in your environment; export it")
                continue
            if len(os.fsencode(f"{key}={env[key]}")) > MAX_ARG_BYTES:
                self.fail(
                    dotted, f"is longer than the {MAX_ARG_BYTES} bytes a process can be given; shorten it"
                )
                continue
            # A secret stays one under any name: redacted by value wherever it lands.
            self.secrets += [
                self.host_env[name]
                for name in referenced_variables(text)
                if SECRET_PATTERN.search(name) and self.host_env.get(name)
            ]
            if SECRET_PATTERN.search(key) and env[key]:
                self.secrets.append(env[key])
        return env

    def check_timeout(self, value: Any) -> float | None:
        if value is None:
            return None
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not 0 < value <= MAX_TIMEOUT  # also refuses .nan
        ):
            self.fail(
                "timeout",
                f"must be a positive number of seconds, not {_describe(value)}; "
                f"use at most {MAX_TIMEOUT:.0f} (a year)",
            )
            return None
        return float(value)

    def check_image(self, value: Any) -> ImageSpec:
        if value is None:
            return ImageSpec()
        if isinstance(value, str):
            if not value.strip() or any(c.isspace() for c in value):
                self.fail(
                    "image", f"{value!r} is not an image reference; use e.g. 'registry/name:tag@sha256:...'"
                )
            return ImageSpec(reference=value)
        entry = self.mapping(value, "image")
        if entry is None:
            return ImageSpec()
        self.check_keys(entry, ("base", "requirements", "wheelhouse"), "image")
        base = entry.get("base")
        if base is not None and (not isinstance(base, str) or not base.strip()):
            self.fail("image.base", "must be an image reference such as 'debian:bookworm'")
            base = None
        requirements = wheelhouse = None
        if "requirements" in entry:
            requirements = self.relative_path(entry["requirements"], "image.requirements", must_be_dir=False)
        if "wheelhouse" in entry:
            wheelhouse = self.relative_path(entry["wheelhouse"], "image.wheelhouse", must_be_dir=True)
        return ImageSpec(base=base, requirements=requirements, wheelhouse=wheelhouse)

    def check_resources(self, value: Any) -> Resources:
        entry = self.mapping(value, "resources")
        if entry is None:
            return Resources()
        self.check_keys(entry, tuple(Resources.__dataclass_fields__), "resources")
        gpus = self.check_gpus(entry.get("gpus"))
        memory = self.check_size(entry.get("memory"), "resources.memory", minimum=MIN_MEMORY)
        shm_size = self.check_size(entry.get("shm_size"), "resources.shm_size", minimum=1)
        cpus = entry.get("cpus")
        if cpus is not None and (
            isinstance(cpus, bool) or not isinstance(cpus, int | float) or not MIN_CPUS <= cpus <= MAX_CPUS
        ):
            self.fail(
                "resources.cpus",
                f"must be a number of CPUs from {MIN_CPUS:g} to {MAX_CPUS:g}, not {_describe(cpus)}",
            )
            cpus = None
        pids = entry.get("pids", Resources.pids)
        if isinstance(pids, bool) or not isinstance(pids, int) or not 16 <= pids <= MAX_PIDS:
            self.fail("resources.pids", f"must be an integer from 16 to {MAX_PIDS}, not {_describe(pids)}")
            pids = Resources.pids
        return Resources(
            gpus=gpus,
            memory=memory,
            cpus=float(cpus) if cpus is not None else None,
            shm_size=shm_size,
            pids=pids,
        )

    def check_gpus(self, value: Any) -> str | tuple[int, ...] | None:
        if value is None or value == 0:
            return None if value is None else ()
        if value == "all":
            return "all"
        if isinstance(value, list) and all(
            isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in value
        ):
            return tuple(value)
        self.fail(
            "resources.gpus", f"must be 0, 'all', or a list of GPU indices such as [0, 1], not {value!r}"
        )
        return None

    def check_size(self, value: Any, dotted: str, *, minimum: int) -> str | None:
        if value is None:
            return None
        text = str(value).strip().lower() if isinstance(value, str | int | float) else ""
        match = re.fullmatch(r"(\d+(?:\.\d+)?)([bkmg]?)", text)
        if isinstance(value, bool) or match is None:
            self.fail(dotted, f"{_shorten(value)!r} is not a size; use e.g. '512m' or '8g'")
            return None
        size = float(match.group(1)) * SIZE_UNITS[match.group(2)]
        if not minimum <= size <= MAX_SIZE:
            self.fail(
                dotted,
                f"{text} is outside {_size_text(minimum)} to {_size_text(MAX_SIZE)}; use e.g. '512m' or '8g'",
            )
            return None
        return text

    def check_trail(self, value: Any) -> Trail | None:
        entry = self.mapping(value, "trail")
        if entry is None:
            return None
        self.check_keys(entry, ("every",), "trail")
        every = entry.get("every", 1)
        if isinstance(every, bool) or not isinstance(every, int) or every < 1:
            self.fail("trail.every", f"must be a positive number of optimizer steps, not {_describe(every)}")
            return None
        return Trail(every=every)

    def check_compare(self, value: Any) -> CompareSpec:
        entry = self.mapping(value, "compare")
        if entry is None:
            return CompareSpec()
        self.check_keys(entry, ("ignore",), "compare")
        rules = entry.get("ignore", [])
        if not isinstance(rules, list):
            self.fail(
                "compare.ignore",
                f"must be a list of file globs or {{file, key}} mappings, not {_describe(rules)}",
            )
            return CompareSpec()
        found = []
        for index, given in enumerate(rules):
            dotted = f"compare.ignore.{index}"
            rule = {"file": given} if isinstance(given, str) else given
            if not isinstance(rule, dict):
                self.fail(dotted, f"must be a file glob or a {{file, key}} mapping, not {_describe(rule)}")
                continue
            self.check_keys(rule, ("file", "key"), dotted)
            file_glob, key_glob = rule.get("file"), rule.get("key")
            if (
                not isinstance(file_glob, str)
                or not file_glob
                or file_glob.startswith("/")
                or ".." in file_glob.split("/")
            ):
                self.fail(
                    f"{dotted}.file",
                    "must be a glob relative to the outputs folder such as '*.log' (no leading '/' or '..')",
                )
                continue
            if key_glob is not None and (not isinstance(key_glob, str) or not key_glob):
                self.fail(
                    f"{dotted}.key", "must be a glob over value names such as 'log_history.*.train_runtime'"
                )
                continue
            found.append(IgnoreRule(file=file_glob, key=key_glob))
        return CompareSpec(ignore=tuple(found))

    def check_launcher(self, value: Any) -> Launcher:
        entry = self.mapping(value, "launcher")
        if entry is None:
            return Launcher()
        self.check_keys(entry, ("type", "nproc_per_node", "nnodes"), "launcher")
        kind = entry.get("type", "none")
        if kind not in LAUNCHER_TYPES:
            self.fail("launcher.type", f"{kind!r} is not a launcher; use 'torchrun' or 'none'")
            kind = "none"
        counts = {}
        for key in ("nproc_per_node", "nnodes"):
            number = entry.get(key, 1)
            if isinstance(number, bool) or not isinstance(number, int) or not 1 <= number <= MAX_PROCESSES:
                self.fail(
                    f"launcher.{key}",
                    f"must be an integer from 1 to {MAX_PROCESSES}, not {_describe(number)}",
                )
                number = 1
            counts[key] = number
        return Launcher(type=kind, **counts)


def _describe(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f"the string {_shorten(value)!r}"
    if isinstance(value, int | float):
        return _number(value)
    return f"a {type(value).__name__}"


def _number(value: float) -> str:
    """A number as YAML spells it; a huge integer by its length, not its thousands of digits."""
    if isinstance(value, float) and not math.isfinite(value):
        return {"nan": ".nan", "inf": ".inf", "-inf": "-.inf"}[repr(value)]
    if isinstance(value, int) and value.bit_length() > 64:
        return f"an integer of {len(str(abs(value)))} digits"
    return repr(value)


def _shorten(value: Any, limit: int = 80) -> Any:
    """Long strings are cut in messages: an error names the field, it does not echo a whole file."""
    if isinstance(value, str) and len(value) > limit:
        return value[:limit] + "..."
    return value


def _size_text(size: int) -> str:
    for unit in ("g", "m", "k"):
        if size >= SIZE_UNITS[unit] and size % SIZE_UNITS[unit] == 0:
            return f"{size // SIZE_UNITS[unit]}{unit}"
    return f"{size}b"
