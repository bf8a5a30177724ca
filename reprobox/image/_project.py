"""The source checkout an image is built from: where its Dockerfile, env/ and package live, the base
image the Dockerfile pins and the deterministic environment it bakes in."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from reprobox.errors import EnvironmentProblem

DETERMINISTIC_ENV_FILE = "env/deterministic.env"
_ARG_BASE_IMAGE = re.compile(r"^ARG\s+BASE_IMAGE=(\S+)\s*$", re.MULTILINE)


@dataclass(frozen=True)
class ProjectFiles:
    """Where the Dockerfile, env/ and the package source live (a source checkout of reprobox)."""

    root: Path

    @property
    def dockerfile(self) -> Path:
        return self.root / "Dockerfile"

    @property
    def env_dir(self) -> Path:
        return self.root / "env"

    @property
    def package_dir(self) -> Path:
        return self.root / "reprobox"

    @property
    def pyproject(self) -> Path:
        return self.root / "pyproject.toml"


def project_files(root: Path | None = None) -> ProjectFiles:
    """The source checkout the image is built from: the directory above the reprobox package."""
    # This module's own path, not reprobox.__file__: an editable install can present the package
    # as a namespace package without __file__.
    project = ProjectFiles(root or Path(__file__).resolve().parents[2])
    missing = [p for p in (project.dockerfile, project.env_dir, project.pyproject) if not p.exists()]
    if missing:
        raise EnvironmentProblem(
            f"reprobox is installed without its image files ({', '.join(p.name for p in missing)} missing in "
            f"{project.root}); install it from a source checkout with `pip install -e PATH_TO_REPROBOX` "
            "to build images, or use a prebuilt image with `image: REFERENCE` in the job file"
        )
    return project


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
