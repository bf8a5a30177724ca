"""The startup hook: runs at the start of every Python process of the job (via sitecustomize).

It seeds `random` at once, and arranges for NumPy and torch to be seeded and made deterministic the
moment the process imports them: a meta-path finder wraps their loaders, so a process that never
imports torch pays nothing for it (the way coverage.py reaches subprocesses, without a torch import).
Generators each library creates without a seed are given one derived from the job seed (`entropy`).
"""

from __future__ import annotations

import os
import sys

from reprobox.guest import settings

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
        del self.callbacks[fullname]  # fire once per process
        original_exec = loader.exec_module

        def exec_then_callback(module: ModuleType) -> None:
            try:
                original_exec(module)
            finally:
                # Leave the loader as it was so tools that inspect loaders see the real one.
                loader.__dict__.pop("exec_module", None)
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


def install() -> None:
    """Seed this process and watch for NumPy and torch; a no-op outside a reprobox job."""
    if os.environ.get(settings.HOOK_ACTIVE) != "1":
        return
    seed = settings.seed_for_process()
    import random

    random.seed(seed)
    from reprobox.guest import entropy

    entropy.contain_random(random)
    run_dir = os.environ.get(settings.RUN_DIR)
    if run_dir:  # the clock readings and entropy draws that excuse run-specific values
        from reprobox.guest import readings

        readings.install(run_dir)
    if os.environ.get(settings.FILE_ORDER):  # verify --vary file-order only: no import otherwise
        from reprobox.guest import file_order

        file_order.install_from_env(os.environ)
    when_imported("numpy.random", lambda module: _seed_numpy(module, seed))
    when_imported("matplotlib", _fixed_svg_ids)
    when_imported("torch", lambda module: _configure_torch(module, seed))
    if os.environ.get(settings.OBSERVE):  # reprobox init's short run only: no import otherwise
        from reprobox.guest import observe

        observe.install()
    if os.environ.get(settings.RESUME_FRAMEWORK):  # a framework job resumed or stopped: no import otherwise
        from reprobox.guest import frameworks

        frameworks.install(os.environ)


def _fixed_svg_ids(matplotlib: ModuleType) -> None:
    """matplotlib names the elements of an SVG from uuid4 unless `svg.hashsalt` is set (its documented
    way to reproducible SVGs; the date comes from SOURCE_DATE_EPOCH). A job's own setting wins."""
    params = getattr(matplotlib, "rcParams", None)
    if params is not None and "svg.hashsalt" in params and params["svg.hashsalt"] is None:
        params["svg.hashsalt"] = "reprobox"


def _seed_numpy(numpy_random: ModuleType, seed: int) -> None:
    numpy_random.seed(seed)
    from reprobox.guest import entropy

    entropy.contain_numpy(numpy_random)


def _configure_torch(torch: ModuleType, seed: int) -> None:
    """Apply the job's determinism settings the moment torch is importable."""
    from reprobox.guest import determinism, entropy

    determinism.apply_torch(torch, seed, determinism.settings_from_env())
    entropy.contain_torch(torch)
    determinism.after_torch_import(torch)
