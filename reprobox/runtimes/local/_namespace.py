"""The local runtime's private mount namespace: whether this machine allows one, and what it binds where.

The guest enters it itself (`reprobox.guest.namespace`, `python -m reprobox.guest --namespace SPEC`);
whether this machine allows one is probed once per interpreter and boot, by the same module run as a
plain script, and remembered in the user's stable root.
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from reprobox.guest import namespace
from reprobox.runtimes.base import RunPlan
from reprobox.runtimes.stable_paths import StableLayout

PROBE_TIMEOUT = 30.0


def guest_command(python: str, spec: Path, command: Sequence[str]) -> list[str]:
    """The guest, entering the namespace that ``spec`` describes before it runs ``command``."""
    return [python, "-m", "reprobox.guest", "--namespace", str(spec), "--", *command]


def probe_command(python: str) -> list[str]:
    """The namespace module as a plain script in isolated mode without `site` (it needs only the
    standard library): a full interpreter start with site-packages would cost every probe more."""
    return [python, "-I", "-S", str(Path(namespace.__file__))]


def namespace_spec(layout: StableLayout, plan: RunPlan, scratch: Path) -> dict[str, Any]:
    """What the guest binds where: code and data read-only, the real run dir, a fresh HOME and TMPDIR."""
    (scratch / "home").mkdir()
    (scratch / "tmp").mkdir()
    mounts = [
        {"source": str(plan.job.code), "target": str(layout.code), "read_only": True},
        {"source": str(plan.run_dir), "target": str(layout.run), "read_only": False},
        {"source": str(scratch / "home"), "target": str(layout.home), "read_only": False},
        {"source": str(scratch / "tmp"), "target": str(layout.tmp), "read_only": False},
    ]
    mounts += [
        {"source": str(mount.source), "target": str(layout.data[mount.target]), "read_only": True}
        for mount in plan.job.data
    ]
    spec: dict[str, Any] = {"root": str(layout.root), "cwd": str(layout.code), "mounts": mounts}
    if not layout.home.is_relative_to(layout.root):  # a HOME moved elsewhere by a variation
        spec["extra_roots"] = [str(layout.home)]
    if plan.variation.hostname is not None:
        spec["hostname"] = plan.variation.hostname
    return spec


@contextlib.contextmanager
def scratch_folder(job_name: str) -> Iterator[Path]:
    """A host folder for one run's HOME and TMPDIR, removed after the run whatever happened."""
    folder = Path(tempfile.mkdtemp(prefix=f"reprobox-{job_name}-"))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


PROBE_CACHE = ".namespace-works"  # in the user's stable root: "<boot id> <python>" lines that passed


def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def namespace_works(python: str, root: Path) -> bool:
    """Whether `python` can enter a private mount namespace and bind folders there.

    A short trial run, remembered until the machine reboots (a probe is a process start every command
    would otherwise pay); `forget_namespace_probe` drops the memory when a launch is refused after all.
    """
    cache = root.parent / PROBE_CACHE
    key = f"{_boot_id()} {python}"
    try:
        if _boot_id() and key in cache.read_text(encoding="utf-8").splitlines():
            return True
    except OSError:
        pass
    if not _probe(python, root):
        return False
    with contextlib.suppress(OSError), cache.open("a", encoding="utf-8") as remembered:
        remembered.write(key + "\n")
    return True


def forget_namespace_probe(root: Path) -> None:
    (root.parent / PROBE_CACHE).unlink(missing_ok=True)


def _probe(python: str, root: Path) -> bool:
    try:
        probe = subprocess.run(
            [*probe_command(python), "--probe", str(root)],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=PROBE_TIMEOUT,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return probe.returncode == 0
