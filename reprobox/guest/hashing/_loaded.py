"""Which libraries this process has imported, without importing one just to ask.

Files are hashed on a thread pool, and a worker may be importing NumPy (reading a tensor's bytes) while
another thread asks whether a value is an array. ``sys.modules`` holds a module from the moment its import
starts, so a bare ``sys.modules.get("numpy").ndarray`` can meet a half-initialised NumPy and fail. A module
still being imported has built no object yet, so it counts as not imported.
"""

from __future__ import annotations

import sys
from types import ModuleType


def loaded(name: str) -> ModuleType | None:
    """The module if its import has finished in this process, else None."""
    module = sys.modules.get(name)
    if module is None or getattr(getattr(module, "__spec__", None), "_initializing", False):
        return None
    return module
