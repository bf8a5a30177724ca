"""Fingerprint a machine on demand: here (a fresh interpreter that imports torch) or inside the image."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from reprobox.runtimes.base import ImageChoice


def fingerprint(
    runtime: str, *, image: str | None, choice: ImageChoice, progress: Callable[[str], None]
) -> dict[str, Any]:
    if runtime == "local":
        return local_fingerprint()
    from reprobox import engine

    if runtime == "auto" and not engine.engine_available():
        progress("no Docker engine answers; fingerprinting this machine instead")
        return local_fingerprint()
    from reprobox.runtimes.docker import image_fingerprint

    return image_fingerprint(
        image=image,
        base_image=choice.base_image,
        wheelhouse=choice.wheelhouse,
        lock=choice.lock,
        progress=progress,
    )


def local_fingerprint() -> dict[str, Any]:
    """Probe in a new interpreter, so the controller never imports torch itself."""
    from reprobox.guest.fingerprint import collect_in_new_process

    return collect_in_new_process()
