"""The parts of a `verify --vary` run that the guest applies to the user's command: umask, clock and
locale (and it checks the file order, which the startup hook applies: see file_order).

The runtime asks for them through environment variables (settings.UMASK, settings.CLOCK_OFFSET,
settings.LOCALES); the guest applies them to the command alone, so its own records (times, hashes) are
not varied with it. The locale is chosen here, where the job runs, because which locales exist is a
fact of the image or machine the job runs on, not of the controller's.
"""

from __future__ import annotations

import glob
import locale
import os
import subprocess
import sys
import time
from collections.abc import Mapping, MutableMapping
from pathlib import Path

from reprobox.guest import settings

LIBFAKETIME_PATTERNS = (
    "/usr/lib/*/faketime/libfaketime.so.1",  # Debian and Ubuntu: `apt-get install faketime`
    "/usr/lib/faketime/libfaketime.so.1",
    "/usr/lib64/faketime/libfaketime.so.1",
    "/usr/local/lib/faketime/libfaketime.so.1",
)


class VariationRefused(Exception):
    """A variation the guest was asked for cannot be applied here; the message says why and what to do."""


def parse_umask(text: str) -> int:
    """An octal umask such as "077"; VariationRefused when it is not one."""
    try:
        value = int(text, 8)
    except ValueError:
        raise VariationRefused(f"{settings.UMASK}={text!r} is not an octal umask such as 077") from None
    if not 0 <= value <= 0o777:
        raise VariationRefused(f"{settings.UMASK}={text!r} is outside 000..777")
    return value


def find_libfaketime(env: Mapping[str, str] | None = None) -> Path | None:
    """libfaketime's shared library: where settings.LIBFAKETIME says, else in a standard place."""
    env = os.environ if env is None else env
    named = env.get(settings.LIBFAKETIME)
    if named:
        return Path(named) if Path(named).is_file() else None
    for pattern in LIBFAKETIME_PATTERNS:
        found = sorted(glob.glob(pattern))  # noqa: PTH207 - patterns with a wildcard folder
        if found:
            return Path(found[0])
    return None


def faketime_offset(seconds: float) -> str:
    """libfaketime's relative FAKETIME value: "+3600" or "-1.5" (seconds)."""
    return f"{int(seconds):+d}" if float(seconds).is_integer() else f"{seconds:+}"


def choose_locale(candidates: str, env: Mapping[str, str]) -> str:
    """The first of the ":"-separated `candidates` installed here that is not the job's own locale."""
    own = {_normal(env.get(name) or "") for name in ("LC_ALL", "LANG")}
    for name in candidates.split(":"):
        if name and _normal(name) not in own and _installed(name):
            return name
    raise VariationRefused(
        f"none of the locales {candidates} other than the job's own is installed here; install one where "
        "the job runs (Debian: the locales package and locale-gen) or leave locale out of --vary"
    )


def _normal(name: str) -> str:
    return name.lower().replace("utf-8", "utf8")


def _installed(name: str) -> bool:
    saved = locale.setlocale(locale.LC_ALL)
    try:
        locale.setlocale(locale.LC_ALL, name)
    except locale.Error:
        return False
    finally:
        locale.setlocale(locale.LC_ALL, saved)
    return True


def apply(env: Mapping[str, str], child: MutableMapping[str, str]) -> None:
    """Apply the requested umask to this process (inherited by the command), and the clock offset and
    locale to the command's environment; VariationRefused when one cannot be applied."""
    candidates = env.get(settings.LOCALES)
    if candidates:
        child["LC_ALL"] = child["LANG"] = choose_locale(candidates, env)
    order = env.get(settings.FILE_ORDER)
    if order and order != "reversed":  # applied by the startup hook, in every Python process of the job
        raise VariationRefused(f"{settings.FILE_ORDER}={order!r} is not one this guest knows: reversed")
    umask = env.get(settings.UMASK)
    if umask:
        os.umask(parse_umask(umask))
    offset = env.get(settings.CLOCK_OFFSET)
    if offset:
        try:
            seconds = float(offset)
        except ValueError:
            raise VariationRefused(f"{settings.CLOCK_OFFSET}={offset!r} is not a number of seconds") from None
        library = find_libfaketime(env)
        if library is None:
            raise VariationRefused(
                "shifting the job's clock needs libfaketime (`apt-get install faketime`), which is not "
                f"installed here; or set {settings.LIBFAKETIME} to its libfaketime.so.1"
            )
        preload = child.get("LD_PRELOAD")
        child["LD_PRELOAD"] = str(library) + (f":{preload}" if preload else "")
        child["FAKETIME"] = faketime_offset(seconds)
        child["FAKETIME_DONT_FAKE_MONOTONIC"] = "1"  # timeouts and step timers keep real durations


CLOCK_PROBE = "import time; print(time.time())"


def check_clock(env: Mapping[str, str], child: Mapping[str, str]) -> None:
    """Prove the clock offset reaches a process started with the command's preload: where the library
    cannot be preloaded (another C library), the loader only warns and the run would go unvaried."""
    offset = env.get(settings.CLOCK_OFFSET)
    if not offset or float(offset) == 0:
        return
    names = ("PATH", "LD_PRELOAD", "FAKETIME", "FAKETIME_DONT_FAKE_MONOTONIC")
    probe_env = {name: child[name] for name in names if name in child}
    before = time.time()
    try:
        done = subprocess.run(
            [sys.executable, "-I", "-S", "-c", CLOCK_PROBE],
            env=probe_env,
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        seen = float(done.stdout.strip())
    except (OSError, ValueError, subprocess.SubprocessError) as exc:
        raise VariationRefused(f"could not check the shifted clock: {exc}") from None
    after = time.time()
    shift = seen - (before + after) / 2
    if abs(shift - float(offset)) > abs(float(offset)) / 2:
        raise VariationRefused(
            f"{child.get('LD_PRELOAD')} did not shift the clock here (moved {shift:+.0f} s, not "
            f"{float(offset):+.0f} s): this libfaketime does not load in this environment"
            + (f" ({done.stderr.strip()[:200]})" if done.stderr.strip() else "")
        )
