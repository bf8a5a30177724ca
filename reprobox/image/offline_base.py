"""The offline base image: Debian bookworm with python3, from debootstrap, for machines that cannot pull.

The recipe (``offline_base.sh``) ships inside the package, beside the Dockerfile's copies, so an
installed reprobox builds its own base with no checkout: ``reprobox offline-base``. It packs the rootfs
with sorted names, numeric owners and clamped mtimes and loads it with a fixed config, so the same
rootfs always gives the same image id; the rootfs is cached under ``$REPROBOX_CACHE/offline-base``.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from reprobox.errors import EnvironmentProblem
from reprobox.offline import OFFLINE_BASE_TAG

RECIPE = Path(__file__).with_name("offline_base.sh")
DEFAULT_TAG = OFFLINE_BASE_TAG
"""The tag it is loaded as unless told otherwise (``REPROBOX_OFFLINE_BASE`` or ``--tag``)."""


def offline_base_command(tag: str | None = None, *, force: bool = False, refresh: bool = False) -> list[str]:
    """The command that builds (or reuses) the offline base image; it reports its progress itself.

    Its exit status: 0 built or already there, 2 bad arguments, 4 no engine, no debootstrap or no root.
    """
    bash = shutil.which("bash")
    if bash is None:
        raise EnvironmentProblem("building the offline base needs bash, which is not on PATH; install it")
    if not RECIPE.is_file():
        raise EnvironmentProblem(
            f"the offline base recipe {RECIPE} is missing from this installation; reinstall reprobox"
        )
    command = [bash, str(RECIPE)]
    if tag is not None:
        command += ["--tag", tag]
    if force:
        command.append("--force")
    if refresh:
        command.append("--refresh")
    return command
