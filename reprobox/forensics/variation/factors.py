"""The factors `verify --vary` can change, one at a time, each with a documented pair of values.

A factor is what differs between an author's machine and a reviewer's (thread count, time zone, host
name, ...). Each one says how a run gets its baseline value and its varied value, as a `Change`: extra
guest environment (reaches the job on every runtime), `Variation` fields (need the runtime's help, see
`Runtime.variations`), or a change to the job's own settings (its environment's order, its world size).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace

from reprobox.errors import UsageError
from reprobox.forensics.variation.change import Change, Machine
from reprobox.guest import settings

WORKERS_VARIABLE = "REPROBOX_DATALOADER_WORKERS"  # documented: jobs may read their DataLoader workers here
BASELINE_TZ = "UTC0"  # POSIX TZ strings need no zoneinfo files, so they work in any image
VARIED_TZ = "RBX-5:30"  # UTC+05:30: local times move by a non-whole number of hours
BASELINE_LOCALE = "C.UTF-8"
PREFERRED_LOCALES = ("de_DE.UTF-8", "fr_FR.UTF-8", "en_US.UTF-8", "en_GB.UTF-8")
FALLBACK_LOCALE = "C"
VARIED_WORKERS = "2"
VARIED_HOSTNAME = "reprobox-varied-host"
VARIED_UID = 4242
VARIED_USER = "reviewer"
VARIED_PATH_ROOT = "/tmp/reprobox-varied-root"  # noqa: S108 - a path the job sees, made by the runtime
VARIED_HOME = "/tmp/reprobox-varied-home"  # noqa: S108 - a path the job sees, made by the runtime
VARIED_UMASK = 0o077
VARIED_FILE_ORDER = "reversed"
VARIED_CLOCK_OFFSET = 90061.0  # one day, one hour, one minute and one second later
ALL = "all"


@dataclass(frozen=True)
class Factor:
    """One way two machines differ: its values, how a run gets them, and what pins it."""

    name: str
    doc: str
    values: str  # the documented pair: "baseline vs varied"
    needs: tuple[str, ...]  # `Variation` fields the runtime must apply (none: the environment suffices)
    baseline: Callable[[Machine], Change]
    varied: Callable[[Machine], Change]
    pin: Callable[[Machine], str]  # what the job file can fix so the factor cannot matter
    applicable: Callable[[Machine], str | None] = lambda _m: None  # why it cannot apply to this job

    def unsupported_reason(self, machine: Machine, runtime_name: str, applies: frozenset[str]) -> str | None:
        """Why this factor cannot be varied here, or None when it can."""
        missing = [name for name in self.needs if name not in applies]
        if missing:
            return f"unsupported on {runtime_name}"
        return self.applicable(machine)


def _job_env(machine: Machine, name: str, default: str | None) -> dict[str, str]:
    value = machine.job.env.get(name, default)
    return {} if value is None else {name: value}


def baseline_threads(machine: Machine) -> int:
    return machine.job.determinism.threads or 1


def varied_threads(machine: Machine) -> int:
    """The machine's core count; where that is the baseline, another count (torch is not capped)."""
    base = baseline_threads(machine)
    if machine.cpus != base:
        return machine.cpus
    return 1 if base != 1 else 2


def _threads(count: int, machine: Machine) -> Change:
    """Through the guest's determinism settings: OMP/MKL/OpenBLAS variables and torch.set_num_threads
    (intra-op) and set_num_interop_threads, in every process of the job."""
    det = replace(machine.job.determinism, threads=count)
    return Change(env={settings.DETERMINISM: json.dumps(asdict(det), sort_keys=True)})


def varied_locale(machine: Machine) -> str:
    """A locale this machine has that formats differently from C.UTF-8; C where it has none."""
    have = {name.lower().replace("utf-8", "utf8") for name in machine.locales}
    for name in PREFERRED_LOCALES:
        if name.lower().replace("utf-8", "utf8") in have:
            return name
    return FALLBACK_LOCALE


def _locale(value: str) -> Change:
    return Change(env={"LC_ALL": value, "LANG": value})


def _baseline_locale(machine: Machine) -> Change:
    return _locale(machine.job.env.get("LC_ALL") or machine.job.env.get("LANG") or BASELINE_LOCALE)


def _not_torchrun(machine: Machine) -> str | None:
    return (
        None if machine.job.launcher.type == "torchrun" else "not applicable (the job does not use torchrun)"
    )


def _field(name: str, value: object) -> Callable[[Machine], Change]:
    return lambda _m: Change(variation={name: value})


def _nothing(_machine: Machine) -> Change:
    return Change()


def _pin_env(name: str, value: Callable[[Machine], str]) -> Callable[[Machine], str]:
    return lambda m: f"pin `env: {{{name}: {value(m)}}}` in the job file"


def _fixed(text: str) -> Callable[[Machine], str]:
    return lambda _m: text


FACTORS: tuple[Factor, ...] = (
    Factor(
        "threads",
        "intra- and inter-op CPU threads (OMP/MKL/OpenBLAS and torch.set_num_threads)",
        "the job's determinism.threads (else 1) vs this machine's core count",
        (),
        lambda m: _threads(baseline_threads(m), m),
        lambda m: _threads(varied_threads(m), m),
        lambda m: f"pin `determinism.threads: {baseline_threads(m)}` in the job file",
    ),
    Factor(
        "cpu-isa",
        "the CPU instruction set PyTorch dispatches to (ATEN_CPU_CAPABILITY)",
        "the job's ATEN_CPU_CAPABILITY (else the best this CPU has) vs `default` (no vector ISA)",
        (),
        lambda m: Change(env=_job_env(m, "ATEN_CPU_CAPABILITY", None)),
        lambda m: Change(
            env={
                "ATEN_CPU_CAPABILITY": "default" if m.job.env.get("ATEN_CPU_CAPABILITY") != "default" else ""
            }
        ),
        _pin_env("ATEN_CPU_CAPABILITY", lambda _m: "default"),
    ),
    Factor(
        "workers",
        f"DataLoader worker count, for jobs that read it from ${WORKERS_VARIABLE}",
        f"the job's {WORKERS_VARIABLE} (else 0) vs {VARIED_WORKERS}",
        (),
        lambda m: Change(env=_job_env(m, WORKERS_VARIABLE, "0")),
        lambda m: Change(
            env={
                WORKERS_VARIABLE: "1" if m.job.env.get(WORKERS_VARIABLE) == VARIED_WORKERS else VARIED_WORKERS
            }
        ),
        _pin_env(WORKERS_VARIABLE, lambda m: m.job.env.get(WORKERS_VARIABLE, "0")),
    ),
    Factor(
        "tz",
        "the time zone (TZ): local times in logs, names and saved configs",
        f"the job's TZ (else {BASELINE_TZ}) vs {VARIED_TZ} (UTC+05:30)",
        (),
        lambda m: Change(env=_job_env(m, "TZ", BASELINE_TZ)),
        lambda _m: Change(env={"TZ": VARIED_TZ}),
        _pin_env("TZ", lambda m: m.job.env.get("TZ", BASELINE_TZ)),
    ),
    Factor(
        "locale",
        "the locale (LC_ALL, LANG): number and date formatting, sort order",
        f"the job's locale (else {BASELINE_LOCALE}) vs the first this machine has of "
        f"{', '.join(PREFERRED_LOCALES)} (else {FALLBACK_LOCALE})",
        (),
        _baseline_locale,
        lambda m: _locale(varied_locale(m)),
        _pin_env("LC_ALL", lambda m: m.job.env.get("LC_ALL") or BASELINE_LOCALE),
    ),
    Factor(
        "env-order",
        "the order of the job's environment variables (os.environ iteration)",
        "the job file's order vs reversed",
        (),
        _nothing,
        lambda _m: Change(reverse_env=True),
        _fixed("do not depend on the order of os.environ (sort it)"),
    ),
    Factor(
        "hostname",
        "the host name",
        f"the runtime's own vs {VARIED_HOSTNAME}",
        ("hostname",),
        _nothing,
        _field("hostname", VARIED_HOSTNAME),
        _fixed("keep the host name out of outputs and seeds"),
    ),
    Factor(
        "user",
        "the user id and name",
        f"the runtime's own vs uid {VARIED_UID} ({VARIED_USER})",
        ("uid", "user_name"),
        _nothing,
        lambda _m: Change(variation={"uid": VARIED_UID, "user_name": VARIED_USER}),
        _fixed("keep the user name and id out of outputs and seeds"),
    ),
    Factor(
        "cwd",
        "the absolute paths of the code, outputs and data (the working directory)",
        f"the runtime's stable paths vs the same under {VARIED_PATH_ROOT}",
        ("path_root",),
        _nothing,
        _field("path_root", VARIED_PATH_ROOT),
        _fixed("save relative paths, not absolute ones"),
    ),
    Factor(
        "home",
        "the home directory (HOME)",
        f"the runtime's HOME vs {VARIED_HOME}",
        ("home",),
        _nothing,
        _field("home", VARIED_HOME),
        _fixed("keep HOME out of outputs (caches and configs under ~)"),
    ),
    Factor(
        "umask",
        "the file creation mask",
        f"the runtime's (usually 0022) vs {VARIED_UMASK:04o}",
        ("umask",),
        _nothing,
        _field("umask", VARIED_UMASK),
        _fixed("do not record file modes in outputs"),
    ),
    Factor(
        "file-order",
        "directory listing order of the code and data folders, as Python lists them (os.listdir, "
        "os.scandir, os.walk, glob, pathlib; not a C extension's readdir)",
        f"the file system's order vs that order {VARIED_FILE_ORDER}",
        ("file_order",),
        _nothing,
        _field("file_order", VARIED_FILE_ORDER),
        _fixed("sort directory listings (sorted(os.listdir(...)), sorted(glob(...)))"),
    ),
    Factor(
        "time",
        "the wall clock (time.time, datetime.now)",
        f"now vs {int(VARIED_CLOCK_OFFSET)} s later (1 day 1 h 1 min 1 s)",
        ("clock_offset",),
        _nothing,
        _field("clock_offset", VARIED_CLOCK_OFFSET),
        _fixed("keep the clock out of outputs and seeds"),
    ),
    Factor(
        "world-size",
        "torchrun's world size; compares the files the job writes (under DDP rank 0's state_dict is "
        "the full state), naming per-rank files that only one world size writes",
        "the job's nproc_per_node vs twice that",
        (),
        lambda m: Change(nproc_per_node=m.job.launcher.nproc_per_node),
        lambda m: Change(nproc_per_node=2 * m.job.launcher.nproc_per_node),
        lambda m: (
            f"pin `launcher.nproc_per_node: {m.job.launcher.nproc_per_node}` in the job file "
            f"(the author's world size was {m.job.launcher.world_size})"
        ),
        _not_torchrun,
    ),
)

BY_NAME: dict[str, Factor] = {factor.name: factor for factor in FACTORS}


def parse_factors(text: str) -> tuple[Factor, ...]:
    """`threads,tz` or `all` -> the factors, in registry order; unknown names are refused up front."""
    names = [part.strip() for part in text.split(",") if part.strip()]
    if not names:
        raise UsageError(
            "--vary needs a factor", hint=f"e.g. --vary threads,tz or --vary all; {factor_list()}"
        )
    if ALL in names:
        return FACTORS
    unknown = [name for name in names if name not in BY_NAME]
    if unknown:
        raise UsageError(
            f"unknown --vary factor {', '.join(unknown)}",
            hint=f"known: {', '.join(BY_NAME)}, or all (see reprobox verify --vary list)",
        )
    return tuple(factor for factor in FACTORS if factor.name in names)


def factor_list() -> str:
    return "factors: " + ", ".join(BY_NAME)


def factor_table() -> list[dict[str, str]]:
    """Every factor with its doc, its pair of values and what it needs, for `--vary list` and --help."""
    return [
        {
            "name": factor.name,
            "doc": factor.doc,
            "values": factor.values,
            "needs": "any runtime" if not factor.needs else "a runtime applying " + ", ".join(factor.needs),
        }
        for factor in FACTORS
    ]
