"""A reader's function or sentence named by its module, imported the first time it is used: the table of
readers (``_readers``) names every format, and a file loads only the reader of its own."""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Named:
    """A function or sentence of one of this package's modules, by the module's name and its own: the
    module is imported the first time it is used, and looked up anew each time (a test may replace it)."""

    module: str  # "_sqlite", a module of reprobox.guest.hashing
    name: str

    def get(self) -> Any:
        return getattr(importlib.import_module(f"reprobox.guest.hashing.{self.module}"), self.name)

    def __call__(self, *args: Any) -> Any:
        return self.get()(*args)

    def __str__(self) -> str:
        return str(self.get())
