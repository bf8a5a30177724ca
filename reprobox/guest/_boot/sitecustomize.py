"""Imported by Python at start-up because the guest put this folder first on PYTHONPATH.

Installs the reprobox startup hook, then runs whichever sitecustomize would have run without us,
so distributions that ship their own keep working.
"""

import importlib.machinery
import importlib.util
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))

try:
    from reprobox.guest import hook as _hook

    _hook.install()
except Exception as _exc:  # noqa: BLE001 - never break the user's interpreter
    sys.stderr.write(f"reprobox: startup hook not installed: {_exc}\n")


def _chain() -> None:
    others = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", others)
    if spec is None or spec.loader is None:
        return
    spec.loader.exec_module(importlib.util.module_from_spec(spec))


_chain()
