"""The factors `verify --vary` can change, one at a time, each with a documented pair of values.

A factor is what differs between an author's machine and a reviewer's (thread count, time zone, host
name, ...). The baseline of every factor is the job exactly as `reprobox run` runs it: the baseline's
runs are what the attestation vouches for, so a reviewer's `reprobox reproduce` (a plain run) must be
able to match them, and nothing reprobox sets for the comparison may leak into them. Each factor says
its baseline value in words and how a run gets its varied value, as a `Change`: extra guest
environment (reaches the job on every runtime), `Variation` fields (need the runtime's help, see
`Runtime.variations`), or a change to the job's own settings (its environment's order, its world size).
A varied value must differ from the baseline's: where it depends on what the baseline run used (its
thread count), it is chosen after that run; where the job's own value is unknown (a worker count the
job file does not set), two values are tried, at least one of which differs.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace

from reprobox.errors import UsageError
from reprobox.forensics.variation.change import Change, Machine
from reprobox.guest import settings

WORKERS_VARIABLE = "REPROBOX_DATALOADER_WORKERS"  # documented: jobs may read their DataLoader workers here
VARIED_TZ = "RBX-5:30"  # UTC+05:30 as a POSIX TZ (no zoneinfo files needed): local times move by 5.5 h
IMAGE_TZ = "UTC"  # what the reprobox image sets (env/deterministic.env)
IMAGE_LOCALE = "C.UTF-8"
# Tried in this order where the job runs; the first installed there that is not the job's own wins.
# C and C.UTF-8 exist everywhere, so one always differs from the job's.
LOCALE_CANDIDATES = ("de_DE.UTF-8", "fr_FR.UTF-8", "en_US.UTF-8", "en_GB.UTF-8", "C.UTF-8", "C")
VARIED_WORKERS = ("0", "2")  # main-process loading vs two workers
VARIED_HOSTNAME = "reprobox-varied-host"
VARIED_UID = 4242
VARIED_USER = "reviewer"
VARIED_PATH_ROOT = "/tmp/reprobox-varied-root"  # noqa: S108 - a path the job sees, made by the runtime
VARIED_HOME = "/tmp/reprobox-varied-home"  # noqa: S108 - a path the job sees, made by the runtime
VARIED_UMASK = 0o077
VARIED_FILE_ORDER = "reversed"
VARIED_CLOCK_OFFSET = 90061.0  # one day, one hour, one minute and one second later
ALL = "all"
CONTAINER_HINT = "vary it with --runtime docker or podman"


@dataclass(frozen=True)
class Factor:
    """One way two machines differ: its values, how a run gets them, and what pins it."""

    name: str
    doc: str
    values: str  # the documented pair: "baseline vs varied"
    needs: tuple[str, ...]  # `Variation` fields the runtime must apply (none: the environment suffices)
    baseline: Callable[[Machine], str]  # the baseline's value (a plain run's), in words
    varied: Callable[[Machine], Change]
    pin: Callable[[Machine], str]  # what the job file can fix so the factor cannot matter
    applicable: Callable[[Machine], str | None] = lambda _m: None  # why it cannot apply to this job
    also: Callable[[Machine], tuple[Change, ...]] = lambda _m: ()  # further varied values to try
    after_baseline: bool = False  # its varied value depends on what the baseline run used

    def unsupported_reason(self, machine: Machine, runtime_name: str, applies: frozenset[str]) -> str | None:
        """Why this factor cannot be varied here, or None when it can."""
        missing = [name for name in self.needs if name not in applies]
        if missing:  # the container runtimes apply every `Variation` field (a unit test holds them to it)
            return f"unsupported on {runtime_name} ({CONTAINER_HINT})"
        return self.applicable(machine)

    def variants(self, machine: Machine) -> tuple[Change, ...]:
        """Every varied value this factor's row tries, the main one first."""
        return (self.varied(machine), *self.also(machine))


def threads_used(machine: Machine) -> int:
    """The baseline's thread count: the job's pin, else what torch picked in the baseline run."""
    return machine.job.determinism.threads or machine.threads_used or machine.cpus


def varied_threads(machine: Machine) -> int:
    """1, or where the baseline already used 1, the machine's core count (at least 2: torch is not
    capped by the cores, OpenMP is)."""
    return 1 if threads_used(machine) != 1 else max(machine.cpus, 2)


def _threads(count: int, machine: Machine) -> Change:
    """Through the guest's determinism settings: OMP/MKL/OpenBLAS variables and torch.set_num_threads
    (intra-op) and set_num_interop_threads, in every process of the job."""
    det = replace(machine.job.determinism, threads=count)
    return Change(env={settings.DETERMINISM: json.dumps(asdict(det), sort_keys=True)})


def _job_locale(machine: Machine) -> str | None:
    return machine.job.env.get("LC_ALL") or machine.job.env.get("LANG")


def _varied_locale(_machine: Machine) -> Change:
    """Chosen by the guest where the job runs: the locales that exist are the image's or machine's."""
    return Change(env={settings.LOCALES: ":".join(LOCALE_CANDIDATES)})


def _workers(machine: Machine) -> Change:
    own = machine.job.env.get(WORKERS_VARIABLE)
    zero, two = VARIED_WORKERS
    return Change(env={WORKERS_VARIABLE: two if own == zero else zero})


def _more_workers(machine: Machine) -> tuple[Change, ...]:
    """Where the job file does not set the count, the job's own default is unknown: try 2 as well."""
    if WORKERS_VARIABLE in machine.job.env:
        return ()
    return (Change(env={WORKERS_VARIABLE: VARIED_WORKERS[1]}),)


def _reads_workers(machine: Machine) -> str | None:
    if WORKERS_VARIABLE in machine.mentioned:
        return None
    return f"not applicable (neither the job file nor its code reads ${WORKERS_VARIABLE})"


def _not_torchrun(machine: Machine) -> str | None:
    return (
        None if machine.job.launcher.type == "torchrun" else "not applicable (the job does not use torchrun)"
    )


def _field(name: str, value: object) -> Callable[[Machine], Change]:
    return lambda _m: Change(variation={name: value})


def _job_or(name: str, otherwise: str) -> Callable[[Machine], str]:
    return lambda m: f"{name}={m.job.env[name]}" if name in m.job.env else otherwise


def _pin_env(name: str, value: Callable[[Machine], str]) -> Callable[[Machine], str]:
    return lambda m: f"pin `env: {{{name}: {value(m)}}}` in the job file"


def _fixed(text: str) -> Callable[[Machine], str]:
    return lambda _m: text


FACTORS: tuple[Factor, ...] = (
    Factor(
        "threads",
        "intra- and inter-op CPU threads (OMP/MKL/OpenBLAS and torch.set_num_threads)",
        "the job's count (determinism.threads, else torch's default where it runs) vs 1 "
        "(the machine's core count, at least 2, when the job uses 1)",
        (),
        lambda m: f"threads={threads_used(m)}",
        lambda m: _threads(varied_threads(m), m),
        lambda m: f"pin `determinism.threads: {threads_used(m)}` in the job file",
        after_baseline=True,
    ),
    Factor(
        "cpu-isa",
        "the CPU instruction set PyTorch dispatches to (ATEN_CPU_CAPABILITY)",
        "the job's ATEN_CPU_CAPABILITY (else the best this CPU has) vs `default` (no vector ISA)",
        (),
        _job_or("ATEN_CPU_CAPABILITY", "the best this CPU has"),
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
        f"the job's {WORKERS_VARIABLE} vs 0 (2 when the job uses 0); where the job file does not set it, "
        "vs both 0 and 2",
        (),
        _job_or(WORKERS_VARIABLE, "the job's own count"),
        _workers,
        lambda m: (
            f"pin `env: {{{WORKERS_VARIABLE}: {m.job.env[WORKERS_VARIABLE]}}}` in the job file"
            if WORKERS_VARIABLE in m.job.env
            else f"set `env: {{{WORKERS_VARIABLE}: N}}` in the job file to the count the job ran with"
        ),
        _reads_workers,
        also=_more_workers,
    ),
    Factor(
        "tz",
        "the time zone (TZ): local times in logs, names and saved configs",
        f"the job's TZ (else the runtime's: {IMAGE_TZ} in the image, the host's locally) vs {VARIED_TZ} "
        "(UTC+05:30)",
        (),
        _job_or("TZ", "the runtime's TZ"),
        lambda _m: Change(env={"TZ": VARIED_TZ}),
        _pin_env("TZ", lambda m: m.job.env.get("TZ", IMAGE_TZ)),
    ),
    Factor(
        "locale",
        "the locale (LC_ALL, LANG): number and date formatting, sort order",
        f"the job's locale (else the runtime's: {IMAGE_LOCALE} in the image, the host's locally) vs the "
        f"first of {', '.join(LOCALE_CANDIDATES)} installed where the job runs that differs from it",
        (),
        lambda m: f"LC_ALL={_job_locale(m)}" if _job_locale(m) else "the runtime's locale",
        _varied_locale,
        _pin_env("LC_ALL", lambda m: _job_locale(m) or IMAGE_LOCALE),
    ),
    Factor(
        "env-order",
        "the order of the job's environment variables (os.environ iteration)",
        "the job file's order vs reversed",
        (),
        _fixed("the job file's order"),
        lambda _m: Change(reverse_env=True),
        _fixed("do not depend on the order of os.environ (sort it)"),
    ),
    Factor(
        "hostname",
        "the host name",
        f"the runtime's own vs {VARIED_HOSTNAME}",
        ("hostname",),
        _fixed("the runtime's host name"),
        _field("hostname", VARIED_HOSTNAME),
        _fixed("keep the host name out of outputs and seeds"),
    ),
    Factor(
        "user",
        "the user id and name",
        f"the runtime's own vs uid {VARIED_UID} ({VARIED_USER})",
        ("uid", "user_name"),
        _fixed("the runtime's user"),
        lambda _m: Change(variation={"uid": VARIED_UID, "user_name": VARIED_USER}),
        _fixed("keep the user name and id out of outputs and seeds"),
    ),
    Factor(
        "cwd",
        "the absolute paths of the code, outputs and data (the working directory)",
        f"the runtime's stable paths vs the same under {VARIED_PATH_ROOT}",
        ("path_root",),
        _fixed("the runtime's stable paths"),
        _field("path_root", VARIED_PATH_ROOT),
        _fixed("save relative paths, not absolute ones"),
    ),
    Factor(
        "home",
        "the home directory (HOME)",
        f"the runtime's HOME vs {VARIED_HOME}",
        ("home",),
        _fixed("the runtime's HOME"),
        _field("home", VARIED_HOME),
        _fixed("keep HOME out of outputs (caches and configs under ~)"),
    ),
    Factor(
        "umask",
        "the file creation mask",
        f"the runtime's (usually 0022) vs {VARIED_UMASK:04o}",
        ("umask",),
        _fixed("the runtime's umask"),
        _field("umask", VARIED_UMASK),
        _fixed("do not record file modes in outputs"),
    ),
    Factor(
        "file-order",
        "directory listing order of the code and data folders, as Python lists them (os.listdir, "
        "os.scandir, os.walk, glob, pathlib; not a C extension's readdir)",
        f"the file system's order vs that order {VARIED_FILE_ORDER}",
        ("file_order",),
        _fixed("the file system's order"),
        _field("file_order", VARIED_FILE_ORDER),
        _fixed("sort directory listings (sorted(os.listdir(...)), sorted(glob(...)))"),
    ),
    Factor(
        "time",
        "the wall clock (time.time, datetime.now)",
        f"now vs {int(VARIED_CLOCK_OFFSET)} s later (1 day 1 h 1 min 1 s)",
        ("clock_offset",),
        _fixed("the real clock"),
        _field("clock_offset", VARIED_CLOCK_OFFSET),
        _fixed("keep the clock out of outputs and seeds"),
    ),
    Factor(
        "world-size",
        "torchrun's world size; compares the files the job writes (under DDP rank 0's state_dict is "
        "the full state), naming per-rank files that only one world size writes",
        "the job's nproc_per_node vs twice that",
        (),
        lambda m: f"nproc_per_node={m.job.launcher.nproc_per_node}",
        lambda m: Change(nproc_per_node=2 * m.job.launcher.nproc_per_node),
        lambda m: (
            f"pin `launcher.nproc_per_node: {m.job.launcher.nproc_per_node}` in the job file "
            f"(the author's world size was {m.job.launcher.world_size})"
        ),
        _not_torchrun,
    ),
)

BY_NAME: dict[str, Factor] = {factor.name: factor for factor in FACTORS}
WATCHED = (WORKERS_VARIABLE,)  # variables whose mention in the job decides whether a factor applies


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
