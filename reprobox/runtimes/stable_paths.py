"""One fixed layout of absolute paths per job, so every local run sees the same paths as every other.

Jobs save paths into their outputs (a trainer's `output_dir`, a checkpoint callback's keys, a config's
work dir); when each run saw its own run directory, equal training still gave unequal files. A container
gets this for free (`/reprobox/run` in every run); the local runtime reproduces it with this layout,
either behind a private mount namespace or, where the kernel refuses one, for real with runs serialised.
Pure functions of their inputs, so the layout is the same on every machine and every Slurm node.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath
from typing import Any

from reprobox.errors import UsageError
from reprobox.guest import settings
from reprobox.jobfile import JobSpec
from reprobox.runtimes.base import OUTPUTS_SUBDIR, Variation

BASE_DIR = Path("/tmp")  # noqa: S108 - the same on every machine and node; per-user folders inside
DATA_SUBDIR = "mnt"  # data[].target /data is seen at <root>/mnt/data

MODE_NAMESPACE = "namespace"  # a private mount namespace binds the run's folders onto the layout
MODE_FIXED = "fixed"  # the layout's folders exist for real; runs of one job take turns
MODE_CONTAINER = "container"  # the container's own paths (docker, podman)

# Variables that would point a job back into the user's real home instead of the fresh one.
HOME_DERIVED = ("XDG_CACHE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "OLDPWD")
TEMP_ALIASES = ("TMP", "TEMP")  # read by some libraries instead of TMPDIR; overridden when set


@dataclass(frozen=True)
class StableLayout:
    """Where a job sees its code, run dir, outputs, HOME, TMPDIR and data, identical in every run."""

    root: Path
    code: Path
    run: Path
    home: Path
    tmp: Path
    data: dict[str, Path] = field(default_factory=dict)  # data[].target -> the fixed path seen by the job

    @property
    def outputs(self) -> Path:
        return self.run / OUTPUTS_SUBDIR

    def to_json(self, mode: str) -> dict[str, Any]:
        """The manifest's `runtime.paths`: what the job saw, and how it was arranged."""
        return paths_record(
            mode,
            code=str(self.code),
            run=str(self.run),
            home=str(self.home),
            tmp=str(self.tmp),
            data={target: str(path) for target, path in self.data.items()},
        )


def user_root(uid: int, base: Path = BASE_DIR) -> Path:
    """The per-user folder holding every job's layout (its own, so no other user can plant files in it)."""
    return base / f"reprobox-{uid}"


def layout_for(job: JobSpec, uid: int, base: Path = BASE_DIR) -> StableLayout:
    """The job's layout: <base>/reprobox-<uid>/<job-name>/{code,run,home,tmp,mnt/<data target>}."""
    root = user_root(uid, base) / job.name
    data = {
        mount.target: root / DATA_SUBDIR / PurePosixPath(mount.target).relative_to("/") for mount in job.data
    }
    return StableLayout(
        root=root, code=root / "code", run=root / "run", home=root / "home", tmp=root / "tmp", data=data
    )


def varied_layout(job: JobSpec, uid: int, base: Path, variation: Variation) -> StableLayout:
    """The job's layout as `verify --vary` moves it: under `path_root` instead of `base`, HOME elsewhere.

    A job that saves its cwd, HOME or output paths into a checkpoint shows the difference."""
    for name in ("path_root", "home"):
        value = getattr(variation, name)
        if value is not None and not PurePosixPath(value).is_absolute():
            raise UsageError(f"a varied {name} must be an absolute path, not {value!r}")
    layout = layout_for(job, uid, base=Path(variation.path_root) if variation.path_root else base)
    return replace(layout, home=Path(variation.home)) if variation.home else layout


def job_environment(base_env: Mapping[str, str], layout: StableLayout, job: JobSpec) -> dict[str, str]:
    """The job's environment with every variable that names a location pointing into the layout."""
    env = {name: value for name, value in base_env.items() if name not in HOME_DERIVED}
    env.update(
        {
            settings.OUTPUT_DIR: str(layout.outputs),
            settings.RUN_DIR: str(layout.run),
            settings.CODE_DIR: str(layout.code),
            "HOME": str(layout.home),
            "TMPDIR": str(layout.tmp),
            "PWD": str(layout.code),
        }
    )
    for alias in TEMP_ALIASES:
        if alias in env:
            env[alias] = str(layout.tmp)
    for mount in job.data:
        if mount.env:
            env[mount.env] = str(layout.data[mount.target])
    if env.get(settings.WORK_LINKS):  # data targets, as this layout shows them to the job
        links, seen_at = json.loads(env[settings.WORK_LINKS]), layout.data
        env[settings.WORK_LINKS] = json.dumps(
            {path: str(seen_at.get(target, target)) for path, target in links.items()}, sort_keys=True
        )
    return env


def paths_record(
    mode: str, *, code: str, run: str, home: str, tmp: str, data: Mapping[str, str]
) -> dict[str, Any]:
    """One shape for every runtime's `runtime.paths` in the manifest."""
    return {
        "mode": mode,
        "code": code,
        "run": run,
        "outputs": str(PurePosixPath(run) / OUTPUTS_SUBDIR),
        "home": home,
        "tmp": tmp,
        "data": dict(sorted(data.items())),
    }
