"""reprobox: run a PyTorch training job bit for bit reproducibly, and prove it.

The helpers below are for job code that wants explicit control; a job run by reprobox is already
seeded and made deterministic by the guest's startup hook without any change to its code.
Imports are lazy so that `import reprobox` (which every job process does at start-up) costs nothing.
"""

from __future__ import annotations

from reprobox._version import __version__

TYPE_CHECKING = False  # not typing's: every job process imports this package, and typing costs ~4 ms
if TYPE_CHECKING:
    from typing import Any

    from reprobox.guest import trail
    from reprobox.guest.seeding import generator, seed_everything, seed_worker

__all__ = ["__version__", "generator", "seed_everything", "seed_worker", "trail"]


def __getattr__(name: str) -> Any:
    if name in ("seed_everything", "seed_worker", "generator"):
        from reprobox.guest import seeding

        return getattr(seeding, name)
    if name == "trail":
        from reprobox.guest import trail

        return trail
    raise AttributeError(f"module 'reprobox' has no attribute {name!r}")
