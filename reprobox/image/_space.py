"""The disk a build needs, known before it starts: an offline build that runs out of space fails minutes
in, at its last step, with the engine's "no space left on device"; its wheels say beforehand how much.

The builder unpacks the context (the wheels) and copies them into a layer, installs them in a builder
stage and copies the installed tree into the final image: the wheels twice and their contents twice,
a floor that leaves out the bytecode, the engine's own temporary copies and the context file reprobox
streams from. Measured here (docs/benchmarks.md): the CPU lock's build used 1.25 times its floor at its
peak, the CUDA lock's 1.55 times. A build refused for its floor could not have finished.
"""

from __future__ import annotations

import zipfile
from collections.abc import Iterable

from reprobox.image._context import ContextFile

MEASURED_PEAK_OVER_FLOOR = 1.55  # the CUDA lock's build: 23.7 GB at its peak for a floor of 15.3 GB


def build_space_floor(wheels: Iterable[ContextFile]) -> int:
    """The fewest bytes of free disk an offline build of these wheels uses where the engine keeps images."""
    return sum(2 * (wheel.size + _unpacked_bytes(wheel)) for wheel in wheels)


def _unpacked_bytes(wheel: ContextFile) -> int:
    """The sizes a wheel's zip directory gives its members (read without unpacking anything); its own
    size where it is no readable zip (pip will say so)."""
    if wheel.data is not None:
        return len(wheel.data)
    try:
        with zipfile.ZipFile(wheel.source) as archive:
            return sum(member.file_size for member in archive.infolist())
    except (OSError, zipfile.BadZipFile, ValueError):
        return wheel.size
