"""Building an image where no registry and no package index answer: the two variables such a build
reads, and the commands that fill them, told in the same words by every message about a missing base
image or a missing wheel.

An offline build needs a base image it does not pull (`reprobox offline-base` loads one, named by
REPROBOX_BASE_IMAGE) and a wheelhouse holding every wheel the locks pin (`reprobox lock --wheelhouse DIR`
fills it where the index answers, named by REPROBOX_WHEELHOUSE). Forgetting either fails the build; the
message then names both, so the second is not found missing only after the first is fixed.
"""

from __future__ import annotations

from collections.abc import Sequence

BASE_IMAGE_VARIABLE = "REPROBOX_BASE_IMAGE"
WHEELHOUSE_VARIABLE = "REPROBOX_WHEELHOUSE"
OFFLINE_BASE_TAG = "reprobox/offline-base:bookworm"
BUILD_BASE_COMMAND = "reprobox offline-base"
OFFLINE_LOCK = "cpu"  # the lock the offline base installs: no CUDA base under it


def fill_command(
    wheelhouse: object = "DIR", locked: Sequence[object] = (), base: str | None = OFFLINE_LOCK
) -> str:
    """The `reprobox lock` that fills `wheelhouse` with the wheels of the image's lock `base` (cpu, cuda
    or a lock file; None: not the image's) and of each lock in `locked`."""
    words = ["reprobox", "lock"]
    if base is not None:
        words += ["--base", base] + (["--image-lock"] if locked else [])
    words += ["--wheelhouse", str(wheelhouse)]
    for lock in locked:
        words += ["--locked", str(lock)]
    return " ".join(words)


def offline_path(
    wheelhouse: object = "DIR", locked: Sequence[object] = (), base: str | None = OFFLINE_LOCK
) -> str:
    """The clause each such message ends with: both variables, each with the command that fills it
    (the wheelhouse's: `fill_command` of the same arguments)."""
    return (
        f"a build with no registry takes {BASE_IMAGE_VARIABLE}={OFFLINE_BASE_TAG} (made by "
        f"`{BUILD_BASE_COMMAND}`) and {WHEELHOUSE_VARIABLE}={wheelhouse} (filled by "
        f"`{fill_command(wheelhouse, locked, base)}` where the package index answers)"
    )
