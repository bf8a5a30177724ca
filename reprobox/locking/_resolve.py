"""A job's requirements resolved on top of the image's lock, and the lock file that records them.

uv resolves first (`_uv`: `uv pip compile --generate-hashes` for the image's Python and platform, in
seconds), with every pin of the image's lock as a constraint, so the job's packages fit the stack the
image installs. Where uv is absent or finds no resolution, pip resolves (`pip install --dry-run
--report`, wheels for the image's interpreter only): its resolution, or its failure told as a sentence.
Either names the wheel chosen for each package and its sha256; the packages the image's lock pins are
left out of the job's lock (the image installs them from its own), and each other one becomes
`name==version --hash=sha256:...` with the wheel's name as a comment, sorted by name.
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from reprobox import image, progress
from reprobox.errors import EnvironmentProblem
from reprobox.locking._base import BaseLock
from reprobox.locking._failures import resolution_failure
from reprobox.locking._inputs import RequirementSet
from reprobox.locking._pip import run_pip
from reprobox.locking._sources import IndexSettings
from reprobox.locking._target import Target
from reprobox.locking._uv import resolve_with_uv, uv_binary


@dataclass(frozen=True)
class LockedPackage:
    """One package of a resolution: its version and the one wheel the lock pins it to."""

    name: str  # normalized
    version: str
    wheel: str  # the wheel's file name
    sha256: str

    def to_json(self) -> dict[str, str]:
        return {"name": self.name, "version": self.version, "wheel": self.wheel, "sha256": self.sha256}


@dataclass(frozen=True)
class Resolution:
    """What pip would install for the requirements: the job's own packages, and those the image pins."""

    packages: tuple[LockedPackage, ...]  # sorted by name; what the job's lock pins
    left_out: tuple[LockedPackage, ...]  # pinned by the image's lock, installed from it


def resolve(
    requirements: RequirementSet, base: BaseLock, target: Target, settings: IndexSettings | None = None
) -> Resolution:
    """The resolution of `requirements` for `target`, constrained by every pin of `base`: uv's, in
    seconds, where uv is at hand and resolves them; else pip's, which also tells why it cannot.
    `settings`: pip's configuration, where the caller has read it already."""
    with tempfile.TemporaryDirectory(prefix="reprobox-lock-") as folder:
        scratch = Path(folder)
        wanted = scratch / "requirements.txt"
        wanted.write_text("".join(f"{item.text}\n" for item in requirements.requirements), encoding="utf-8")
        constraints = scratch / "constraints.txt"
        pins = [f"{name}=={version}" for name, version in sorted(base.pins.items())]
        lines = [*pins, *(item.text for item in requirements.constraints)]
        constraints.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
        uv = uv_binary()
        if uv is not None:
            what = f"{requirements.source} on top of {base.shown()} for {target.describe()}"
            progress.say(f"resolving {what} with uv ...")
            fast = resolve_with_uv(wanted, constraints, target, scratch, uv, settings=settings)
            if not fast.failure:
                chosen = [LockedPackage(p.name, p.version, p.wheel, p.sha256) for p in fast.packages]
                progress.say(f"resolved {len(chosen)} packages with uv in {fast.seconds:.1f} s")
                return _split(chosen, base)
            progress.say(
                f"uv found no resolution ({uv_reason(fast.failure)}); pip resolves them again, to name "
                "the requirement at fault and its fix ..."
            )
        progress.say(
            f"resolving {requirements.source} on top of {base.shown()} for {target.describe()} with pip ..."
        )
        report = scratch / "report.json"
        arguments = [
            "install",
            "--dry-run",
            "--ignore-installed",
            "--target",
            str(scratch / "target"),
            *target.wheel_flags(),
            *target.index_flags(),
            "--constraint",
            str(constraints),
            "--requirement",
            str(wanted),
            "--report",
            str(report),
        ]
        run = run_pip(arguments, scratch)
        if run.returncode != 0:
            everything = (*requirements.requirements, *requirements.constraints)
            raise resolution_failure(run, everything, base, target, requirements.source)
        installed = _installed(report)
    return _split([_package(item) for item in installed], base)


def uv_reason(failure: str, limit: int = 200) -> str:
    """uv's own reason in a few words: its `cause:` line, else its last line, without `error:`."""
    lines = [line.strip() for line in failure.splitlines() if line.strip()]
    cause = next((line for line in lines if line.startswith("cause:")), lines[-1] if lines else "")
    reason = cause.removeprefix("cause:").removeprefix("error:").strip().rstrip(".")
    return reason if len(reason) <= limit else reason[: limit - 3].rstrip() + "..."


def _split(chosen: list[LockedPackage], base: BaseLock) -> Resolution:
    """The job's own packages, and those the image's lock pins (installed from it)."""
    chosen = sorted(chosen, key=lambda package: package.name)
    return Resolution(
        packages=tuple(package for package in chosen if package.name not in base.pins),
        left_out=tuple(package for package in chosen if package.name in base.pins),
    )


def lock_text(resolution: Resolution, *, source: str, base: str, target: Target, command: str) -> str:
    """The job's lock: a header that says what it is and how to make it again, then one entry a package."""
    lines = [
        f"# Hash-locked extra requirements from {source}, installed on top of the image's {base}",
        f"# (whose pins it leaves out), for {target.describe()}. Regenerate with:",
        f"#   {command}",
    ]
    if not resolution.packages:
        lines.append("# Every package it needs is pinned by the image's lock: there is nothing to add.")
    for package in resolution.packages:
        lines += [
            f"{package.name}=={package.version} \\",
            f"    --hash=sha256:{package.sha256}",
            f"    # {package.wheel}",
        ]
    return "\n".join(lines) + "\n"


def _installed(report: Path) -> list[dict[str, Any]]:
    try:
        installed = json.loads(report.read_text(encoding="utf-8"))["install"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise EnvironmentProblem(
            f"pip's installation report could not be read ({exc}); upgrade pip "
            "(`python -m pip install --upgrade pip`) and lock again"
        ) from None
    if not isinstance(installed, list):
        raise EnvironmentProblem(
            "pip's installation report has no list of packages; upgrade pip and lock again"
        )
    return installed


def _package(item: dict[str, Any]) -> LockedPackage:
    """One entry of pip's report as a locked wheel; a package not from a wheel archive is refused."""
    metadata = item.get("metadata") or {}
    info = item.get("download_info") or {}
    name = image.normalize_name(str(metadata.get("name", "?")))
    archive = info.get("archive_info")
    url = str(info.get("url", ""))
    wheel = unquote(urlsplit(url).path.rsplit("/", 1)[-1])
    if not isinstance(archive, dict) or not wheel.endswith(".whl"):
        raise EnvironmentProblem(
            f"pip chose {name} from {url or 'no archive'}, which is not a wheel a lock can pin by hash; "
            "name it by version in the requirements"
        )
    hashes = archive.get("hashes") or {}
    digest = hashes.get("sha256") or str(archive.get("hash", "")).removeprefix("sha256=")
    if not digest or "=" in digest:
        raise EnvironmentProblem(f"pip's report gives no sha256 of {wheel}; upgrade pip and lock again")
    return LockedPackage(name, str(metadata.get("version", "?")), wheel, digest)
