"""The public seeding helpers, and the startup hook's lazy reach into NumPy and torch."""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import torch

import reprobox


def test_seed_everything_seeds_all_three() -> None:
    reprobox.seed_everything(7)
    first = (random.random(), float(np.random.rand()), float(torch.rand(1)))
    reprobox.seed_everything(7)
    assert (random.random(), float(np.random.rand()), float(torch.rand(1))) == first


def test_generator_uses_the_job_seed_by_default(monkeypatch) -> None:
    monkeypatch.setenv("REPROBOX_SEED", "11")
    monkeypatch.setenv("RANK", "2")
    assert reprobox.generator().initial_seed() == 13  # seed + RANK
    assert reprobox.generator(5).initial_seed() == 5


def test_seed_worker_follows_torch_initial_seed() -> None:
    torch.manual_seed(123)
    reprobox.seed_worker(0)
    expected = random.random()
    random.seed(123)
    assert expected == random.random()


@pytest.fixture
def boot() -> Iterator[Path]:
    from reprobox.guest.entrypoint import _make_boot_dir

    folder = _make_boot_dir()
    yield folder
    shutil.rmtree(folder)


def test_hook_applies_flags_when_torch_is_imported_later(boot: Path) -> None:
    env = {
        **os.environ,
        "PYTHONPATH": str(boot),
        "REPROBOX_HOOK": "1",
        "REPROBOX_SEED": "3",
        "REPROBOX_DETERMINISM": json.dumps({"warn_only": True, "threads": 1}),
    }
    script = (
        "import sys, json; before = 'torch' in sys.modules\n"
        "import torch\n"
        "print(json.dumps({'before': before, 'det': torch.are_deterministic_algorithms_enabled(),"
        " 'warn': torch.is_deterministic_algorithms_warn_only_enabled(), 'threads': torch.get_num_threads(),"
        " 'seed': torch.initial_seed()}))"
    )
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == {"before": False, "det": True, "warn": True, "threads": 1, "seed": 3}


def test_inductor_is_made_deterministic_when_the_job_loads_it_and_not_loaded_before(boot: Path) -> None:
    """torch.use_deterministic_algorithms would import Inductor's config (about 800 modules) in every
    process; the hook sets torch's flag alone, and Inductor's when the job imports it (torch.compile)."""
    env = {**os.environ, "PYTHONPATH": str(boot), "REPROBOX_HOOK": "1", "REPROBOX_SEED": "0"}
    script = (
        "import sys, json\n"
        "import torch\n"
        "loaded = 'torch._inductor.config' in sys.modules\n"
        "import torch._inductor.config as config\n"
        "print(json.dumps({'loaded_with_torch': loaded, 'det': torch.are_deterministic_algorithms_enabled(),"
        " 'inductor': config.deterministic}))"
    )
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == {"loaded_with_torch": False, "det": True, "inductor": True}


def test_hook_is_inert_outside_a_job(boot: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("REPROBOX_")}
    env["PYTHONPATH"] = str(boot)
    script = "import torch; print(torch.are_deterministic_algorithms_enabled())"
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
