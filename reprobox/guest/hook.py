"""The startup hook: runs at the start of every Python process of the job (via sitecustomize).

It seeds `random` at once, and arranges for NumPy and torch to be seeded and made deterministic the
moment the process imports them: a meta-path finder wraps their loaders, so a process that never
imports torch pays nothing for it (the way coverage.py reaches subprocesses, without a torch import).
Generators each library creates without a seed are given one derived from the job seed (`entropy`).
"""

from __future__ import annotations

import os

from reprobox.guest import settings
from reprobox.guest.post_import import when_imported

TYPE_CHECKING = False  # typing costs more than the rest of the hook together
if TYPE_CHECKING:
    from types import ModuleType


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
