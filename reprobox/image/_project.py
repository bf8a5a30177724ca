"""The image files an image is built from (Dockerfile, env/, pyproject.toml) and the package it installs,
from a source checkout or from the copies a wheel carries; the base image the Dockerfile pins and the
deterministic environment it bakes in."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from reprobox.errors import EnvironmentProblem

DETERMINISTIC_ENV_FILE = "env/deterministic.env"
# Where a wheel carries the image files inside the package; the build backend puts them there from the
# checkout's top level (pyproject.toml, hatch_build.py), so the checkout stays their one source.
BUNDLED_IMAGE_FILES = "_image"
_ARG_BASE_IMAGE = re.compile(r"^ARG\s+BASE_IMAGE=(\S+)\s*$", re.MULTILINE)


@dataclass(frozen=True)
class ProjectFiles:
    """Where the image files live (`root`: Dockerfile, env/, pyproject.toml) and the package the image
    installs (`package_dir`): a checkout's root and its reprobox/, or an installed wheel's
    reprobox/_image/ and reprobox/."""

    root: Path
    package_dir: Path

    @classmethod
    def checkout(cls, root: Path) -> ProjectFiles:
        """A source checkout: the image files at its root, the package in root/reprobox."""
        return cls(root, root / "reprobox")

    @classmethod
    def bundled(cls, package_dir: Path) -> ProjectFiles:
        """An installed wheel: the image files in the package's own _image/ folder."""
        return cls(package_dir / BUNDLED_IMAGE_FILES, package_dir)

    @property
    def dockerfile(self) -> Path:
        return self.root / "Dockerfile"

    @property
    def env_dir(self) -> Path:
        return self.root / "env"

    @property
    def pyproject(self) -> Path:
        return self.root / "pyproject.toml"

    def missing(self) -> list[Path]:
        """The image files absent from `root` (none when an image can be built from here)."""
        return [p for p in (self.dockerfile, self.env_dir, self.pyproject) if not p.exists()]


def project_files(package_dir: Path | None = None) -> ProjectFiles:
    """The image files for the reprobox package at `package_dir` (this one by default): the checkout it
    sits in (an editable install), else the copies installed with it from a wheel."""
    # This module's own path, not reprobox.__file__: an editable install can present the package
    # as a namespace package without __file__.
    package = package_dir or Path(__file__).resolve().parents[1]
    candidates = (ProjectFiles.checkout(package.parent), ProjectFiles.bundled(package))
    for candidate in candidates:
        if not candidate.missing():
            return candidate
    where = "; ".join(
        f"{', '.join(p.name for p in candidate.missing())} missing in {candidate.root}"
        for candidate in candidates
    )
    raise EnvironmentProblem(
        f"reprobox is installed without its image files, so it cannot build an image ({where}); "
        "reinstall it from a wheel or a source checkout of reprobox (`pip install PATH_TO_REPROBOX`, or "
        "`pip install -e PATH_TO_REPROBOX` to edit it), or use a prebuilt image with `image: REFERENCE` in "
        "the job file"
    )


def deterministic_env(project: ProjectFiles | None = None) -> dict[str, str]:
    """The variables of env/deterministic.env, in file order (the image bakes them in as ENV)."""
    path = (project or project_files()).root / DETERMINISTIC_ENV_FILE
    values: dict[str, str] = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        key, sep, value = text.partition("=")
        if not sep or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
            raise EnvironmentProblem(f"{path}:{number}: expected KEY=VALUE, found {text!r}; fix the line")
        values[key] = value
    return values


def default_base_image(project: ProjectFiles | None = None) -> str:
    """The pinned base the Dockerfile names in `ARG BASE_IMAGE=...`."""
    project = project or project_files()
    match = _ARG_BASE_IMAGE.search(project.dockerfile.read_text(encoding="utf-8"))
    if match is None:
        raise EnvironmentProblem(f"{project.dockerfile} has no `ARG BASE_IMAGE=...` line; restore it")
    return match.group(1)
