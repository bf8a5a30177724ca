"""An imported module of the job: its __file__ is a path the job can save, like any config's."""

from __future__ import annotations

from pathlib import Path


def where() -> str:
    return str(Path(__file__).absolute())
