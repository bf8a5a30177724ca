"""Run a callback the moment a module finishes importing: a meta-path finder that wraps the loader.

The startup hook seeds NumPy and torch this way, the determinism settings reach Inductor's config, and
framework patches reach Trainer and Lightning, each only in a process that imports them.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # typing and importlib.abc cost more than the rest of the hook together
if TYPE_CHECKING:
    import importlib.machinery
    from collections.abc import Callable, Sequence
    from types import ModuleType

if TYPE_CHECKING:
    PostImport = Callable[[ModuleType], None]


class _PostImportFinder:
    """Runs a callback right after a watched module has finished executing (a meta path finder)."""

    def __init__(self, callbacks: dict[str, PostImport]) -> None:
        self.callbacks = callbacks
        self.busy: set[str] = set()

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        callback = self.callbacks.get(fullname)
        if callback is None or fullname in self.busy:
            return None
        self.busy.add(fullname)
        try:
            spec = _find_with_others(self, fullname, path, target)
        finally:
            self.busy.discard(fullname)
        loader = spec.loader if spec is not None else None
        if spec is None or loader is None or isinstance(loader, type) or not hasattr(loader, "__dict__"):
            return spec  # a built-in or frozen module: nothing we watch is one
        original_exec = loader.exec_module

        def exec_then_callback(module: ModuleType) -> None:
            try:
                original_exec(module)
            finally:
                # Leave the loader as it was so tools that inspect loaders see the real one.
                loader.__dict__.pop("exec_module", None)
            # Once per process, when the module has run: a spec found only to ask whether the module is
            # installed (`importlib.util.find_spec`, as transformers and datasets ask about torch) is
            # never executed, and must not use the callback up.
            if self.callbacks.pop(fullname, None) is callback:
                callback(module)

        loader.exec_module = exec_then_callback  # type: ignore[method-assign]
        return spec


def _find_with_others(
    finder: _PostImportFinder,
    fullname: str,
    path: Sequence[str] | None,
    target: ModuleType | None,
) -> importlib.machinery.ModuleSpec | None:
    for other in sys.meta_path:
        if other is finder or not hasattr(other, "find_spec"):
            continue
        spec = other.find_spec(fullname, path, target)
        if spec is not None:
            return spec
    return None


def when_imported(name: str, callback: PostImport) -> None:
    """Call `callback(module)` once `name` is imported (at once if it already is)."""
    module = sys.modules.get(name)
    if module is not None:
        callback(module)
        return
    for finder in sys.meta_path:
        if isinstance(finder, _PostImportFinder):
            finder.callbacks[name] = callback
            return
    sys.meta_path.insert(0, _PostImportFinder({name: callback}))
