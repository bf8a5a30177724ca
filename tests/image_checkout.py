"""A copy of this checkout's image files (Dockerfile, pyproject.toml, env/, reprobox/), free to change:
what the image tests build from and plan; and Python run inside an image they built."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from reprobox import image

ROOT = Path(__file__).resolve().parents[1]


def copy_image_files(root: Path) -> image.ProjectFiles:
    root.mkdir(parents=True, exist_ok=True)
    for name in ("Dockerfile", "pyproject.toml"):
        shutil.copy2(ROOT / name, root / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in ("env", "reprobox"):
        shutil.copytree(ROOT / name, root / name, ignore=ignore)
    return image.ProjectFiles.checkout(root)


def in_image(tag: str, code: str) -> str:
    """stdout of `python -c code` in the image, with no network, as the job user."""
    done = subprocess.run(
        [
            "docker",
            "run",
            "--rm",
            "--network",
            "none",
            "--entrypoint",
            "/opt/venv/bin/python",
            tag,
            "-c",
            code,
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()
