"""job.yaml v1 -> a frozen JobSpec.

Load = parse (with line numbers) -> validate every field, collecting every problem -> complete
(resolve paths against the job file). Nothing is run or written here. What a job file may say is
`schema`; each section's validator is a function of one shared `Checker`: `_program` (what runs),
`_environment` (what the job sees), `_machine` (what it runs on), `_outputs` (what it leaves); the
bounds of every field are in `_limits`.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from pathlib import Path

import yaml

from reprobox.errors import Problem, SpecError
from reprobox.jobfile._checker import Checker
from reprobox.jobfile._claims import check_accept, check_claims
from reprobox.jobfile._environment import check_data, check_determinism, check_env
from reprobox.jobfile._machine import check_image, check_launcher, check_resources
from reprobox.jobfile._outputs import check_checkpoints, check_compare, check_trail
from reprobox.jobfile._program import (
    check_code,
    check_command,
    check_cwd,
    check_name,
    check_seed,
    check_timeout,
    check_version,
    check_workdir,
)
from reprobox.jobfile._resume import check_resume
from reprobox.jobfile.schema import TOP_LEVEL_KEYS, JobSpec
from reprobox.yamlsource import load_yaml


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
    return _validate(Checker(located, os.environ if host_env is None else host_env))


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


def _validate(c: Checker) -> JobSpec:
    """Every section checked, every problem collected; raises SpecError listing them all."""
    raw = c.doc.data
    if not isinstance(raw, dict):
        kind = "empty" if raw is None else f"a {type(raw).__name__}"
        c.fail("", f"is {kind}, but a job file must be a mapping with at least version, name and command")
        raise SpecError(c.problems)
    for dotted, line in c.doc.duplicates:
        c.problems.append(Problem(c.doc.path, line, dotted, "appears twice; keep one"))
    c.check_nul_bytes(raw)
    if c.problems:
        raise SpecError(sorted(c.problems, key=lambda p: p.line or 0))
    c.check_keys(raw, TOP_LEVEL_KEYS, "")
    check_version(c, raw)
    name = check_name(c, raw)
    env = check_env(c, raw.get("env"))
    data = check_data(c, raw.get("data"))
    command = check_command(c, raw, env, data)
    code = check_code(c, raw)
    spec = JobSpec(
        job_file=c.doc.path,
        name=name,
        command=command,
        code=code,
        data=data,
        checkpoints=check_checkpoints(c, raw.get("checkpoints")),
        seed=check_seed(c, raw.get("seed", 0)),
        determinism=check_determinism(c, raw.get("determinism")),
        env=env,
        timeout=check_timeout(c, raw.get("timeout")),
        image=check_image(c, raw.get("image")),
        network=c.check_bool(raw.get("network", False), "network"),
        resources=check_resources(c, raw.get("resources")),
        trail=check_trail(c, raw.get("trail")),
        launcher=check_launcher(c, raw.get("launcher")),
        compare=check_compare(c, raw.get("compare")),
        claims=check_claims(c, raw.get("claims")),
        accept=check_accept(c, raw.get("accept")),
        resume=check_resume(c, raw.get("resume")),
        workdir=check_workdir(c, raw.get("workdir")),
        cwd=check_cwd(c, raw.get("cwd"), code),
        secrets=tuple(sorted(set(c.secrets))),
    )
    if c.problems:
        raise SpecError(sorted(c.problems, key=lambda p: p.line or 0))
    return spec
