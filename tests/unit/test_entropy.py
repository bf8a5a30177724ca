"""Entropy containment: generators created without a seed are seeded from the job seed, and stay plain."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from reprobox import cli
from reprobox.errors import SpecError
from reprobox.guest import entropy
from reprobox.jobfile import load_job

JOBS = Path(__file__).parents[1] / "jobs"
OPT_OUT = json.dumps({"seed_unseeded_generators": False})


# ---------------------------------------------------------------------------------------------------
# The derivation and the counters


def test_derive_seed_follows_the_documented_formula() -> None:
    origin = entropy.Origin(seed=7, rank=1, worker=None, kind="random.Random", site="__main__:<module>")
    text = "reprobox-unseeded/1 7 1 - random.Random __main__:<module> 3"
    digest = hashlib.sha256(f"{text} 0".encode()).digest()
    assert entropy.derive_seed(origin, 3, 128) == int.from_bytes(digest, "big") >> 128
    assert entropy.derive_seed(origin, 3, 256) == int.from_bytes(digest, "big")
    wide = digest + hashlib.sha256(f"{text} 1".encode()).digest()
    assert entropy.derive_seed(origin, 3, 512) == int.from_bytes(wide, "big")
    in_worker = entropy.Origin(seed=7, rank=1, worker=42, kind="random.Random", site="__main__:<module>")
    assert entropy.derive_seed(in_worker, 3, 128) != entropy.derive_seed(origin, 3, 128)


def _draw_here(stream: entropy.Stream, kind: str = "k") -> int | None:
    return stream.draw(kind, 64)


def _draw_elsewhere(stream: entropy.Stream) -> int | None:
    return stream.draw("k", 64)


def test_stream_counts_per_call_site_and_kind() -> None:
    stream = entropy.Stream({"REPROBOX_SEED": "5"})
    first = [_draw_here(stream), _draw_here(stream), _draw_elsewhere(stream), _draw_here(stream, "other")]
    assert len(set(first)) == 4
    site = f"{__name__}:_draw_here"
    assert first[1] == entropy.derive_seed(entropy.Origin(5, 0, None, "k", site), 1, 64)
    # Another site's draws in between do not move this site's count: the next is still n = 2.
    assert _draw_here(stream) == entropy.derive_seed(entropy.Origin(5, 0, None, "k", site), 2, 64)
    again = entropy.Stream({"REPROBOX_SEED": "5"})
    assert [_draw_here(again), _draw_here(again)] == first[:2]
    other_rank = entropy.Stream({"REPROBOX_SEED": "5", "RANK": "1"})
    assert _draw_here(other_rank) != first[0]


def test_stream_is_off_when_the_job_opts_out() -> None:
    stream = entropy.Stream({"REPROBOX_SEED": "5", "REPROBOX_DETERMINISM": OPT_OUT})
    assert not stream.enabled
    assert _draw_here(stream) is None


def test_tempfile_names_stay_truly_random() -> None:
    stream = entropy.Stream({"REPROBOX_SEED": "5"})
    scope = {"__name__": "tempfile", "stream": stream}
    exec("value = stream.draw('random.Random', 128, ('random',))", scope)  # a frame of module tempfile
    assert scope["value"] is None


def test_call_site_skips_the_generators_own_modules() -> None:
    scope: dict[str, Any] = {"__name__": "random", "call_site": entropy.call_site, "sys": sys}
    exec("def inner():\n    return call_site(sys._getframe(0), ('random',))\n", scope)
    assert scope["inner"]() == (__name__, "test_call_site_skips_the_generators_own_modules")


def _private_random() -> ModuleType:
    """A fresh copy of the `random` module, so containing it leaves this process's `random` alone."""
    import random

    spec = importlib.util.spec_from_file_location("random", random.__file__)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_contain_random_seeds_only_unseeded_generators() -> None:
    draws = []
    for _ in range(2):
        module = _private_random()
        entropy.contain_random(module, entropy.Stream({"REPROBOX_SEED": "5"}))
        generator = module.Random()
        assert type(generator) is module.Random
        module.seed()
        draws.append((generator.random(), module.Random(None).random(), module.random()))
    assert draws[0] == draws[1]
    assert len(set(draws[0])) == 3
    module = _private_random()
    entropy.contain_random(module, entropy.Stream({"REPROBOX_SEED": "5"}))
    assert module.Random(11).random() == _private_random().Random(11).random()  # explicit seeds untouched
    assert module.SystemRandom().random() != module.SystemRandom().random()


# ---------------------------------------------------------------------------------------------------
# In the job's processes, through the startup hook


@pytest.fixture(scope="module")
def boot() -> Iterator[Path]:
    from reprobox.guest.entrypoint import _make_boot_dir

    folder = _make_boot_dir()
    yield folder
    shutil.rmtree(folder)


def _hooked(boot: Path, script: str, **extra: str) -> Any:
    """What the script printed last, as JSON, run as a job's process would run it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("REPROBOX_")}
    env.update({"PYTHONPATH": str(boot), "REPROBOX_HOOK": "1", "REPROBOX_SEED": "3", **extra})
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.splitlines()[-1])


UNSEEDED = """
import json, os, pickle, random, uuid
import numpy as np
import torch

rng, seq, pcg, legacy, py = (
    np.random.default_rng(), np.random.SeedSequence(), np.random.PCG64(), np.random.RandomState(),
    random.Random(),
)
gen = torch.Generator()
gen_seed = gen.seed()
pickled = pickle.dumps([rng, seq, pcg, legacy, py, gen]).hex()
random.seed(); np.random.seed()
print(json.dumps({
    "pickled": pickled,
    "next": [
        rng.random(), float(pcg.random_raw()), legacy.rand(), py.random(), torch.rand(1, generator=gen).item()
    ],
    "entropy": str(seq.entropy),
    "gen_seed": gen_seed,
    "torch_seed": torch.seed(),
    "globals": [random.random(), float(np.random.rand()), torch.rand(1).item()],
    "truly_random": [os.urandom(8).hex(), uuid.uuid4().hex, random.SystemRandom().random()],
}))
"""

LOAD_PLAIN = """
import json, pickle, random, sys
import numpy as np
import torch

rng, seq, pcg, legacy, py, gen = pickle.loads(bytes.fromhex(sys.stdin.read()))
types = [type(rng) is np.random.Generator, type(seq) is np.random.SeedSequence,
         type(pcg) is np.random.PCG64, type(legacy) is np.random.RandomState,
         type(py) is random.Random, type(gen) is torch.Generator]
print(json.dumps({
    "types": types,
    "next": [
        rng.random(), float(pcg.random_raw()), legacy.rand(), py.random(), torch.rand(1, generator=gen).item()
    ],
    "hooked": "reprobox" in sys.modules,
}))
"""


@pytest.fixture(scope="module")
def contained(boot: Path) -> tuple[Any, Any]:
    """Two runs of the same script: torch takes seconds to import, so tests share them."""
    return _hooked(boot, UNSEEDED), _hooked(boot, UNSEEDED)


def test_unseeded_generators_repeat_in_every_process(
    contained: tuple[Any, Any],
) -> None:
    first, second = contained
    for key in ("next", "entropy", "gen_seed", "torch_seed", "globals"):  # pickles hold storage ids
        assert first[key] == second[key], key
    pairs = zip(first["truly_random"], second["truly_random"], strict=True)
    assert all(a != b for a, b in pairs)
    assert first["gen_seed"] != first["torch_seed"]


def test_opting_out_leaves_unseeded_generators_to_the_os(boot: Path, contained: tuple[Any, Any]) -> None:
    opted_out = _hooked(boot, UNSEEDED, REPROBOX_DETERMINISM=OPT_OUT)
    first, _ = contained
    for key in ("entropy", "gen_seed", "torch_seed"):
        assert opted_out[key] != first[key], key
    next_pairs = zip(opted_out["next"], first["next"], strict=True)
    assert all(a != b for a, b in next_pairs)


def test_pickled_generators_load_without_reprobox(
    contained: tuple[Any, Any],
) -> None:
    hooked, _ = contained
    env = {k: v for k, v in os.environ.items() if not k.startswith("REPROBOX_") and k != "PYTHONPATH"}
    out = subprocess.run(
        [sys.executable, "-c", LOAD_PLAIN],
        input=str(hooked["pickled"]),
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    plain = json.loads(out.stdout)
    assert plain["types"] == [True] * 6
    assert plain["next"] == hooked["next"]  # the same state, drawn on in a plain interpreter
    assert not plain["hooked"]


WORKERS = """
import json, random
import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, get_worker_info

class Draws(Dataset):
    def __len__(self):
        return 2
    def __getitem__(self, index):
        gen = torch.Generator()
        return [get_worker_info().id, np.random.default_rng().random(), random.Random().random(), gen.seed()]

loader = DataLoader(Draws(), batch_size=None, num_workers=2)
print(json.dumps([[float(x) for x in item] for item in loader]))
"""


def test_dataloader_workers_draw_different_streams_every_run(boot: Path) -> None:
    first, second = _hooked(boot, WORKERS), _hooked(boot, WORKERS)
    assert first == second
    (worker_a, *draws_a), (worker_b, *draws_b) = first
    assert worker_a != worker_b
    assert all(a != b for a, b in zip(draws_a, draws_b, strict=True))


def test_hook_stays_off_numpy_and_torch_until_imported(boot: Path) -> None:
    script = (
        "import json, random, sys\n"
        "print(json.dumps([random.Random().random(), 'numpy' in sys.modules, 'torch' in sys.modules]))"
    )
    first, second = _hooked(boot, script), _hooked(boot, script)
    assert first == second
    assert first[1:] == [False, False]


# ---------------------------------------------------------------------------------------------------
# The job file field and whole jobs


def _job_with(tmp_path: Path, determinism: str) -> Path:
    job = tmp_path / "job"
    shutil.copytree(JOBS / "unseeded-generators", job)
    with (job / "job.yaml").open("a", encoding="utf-8") as handle:
        handle.write(f"determinism: {determinism}\n")
    return job


def test_job_file_accepts_the_opt_out(tmp_path: Path) -> None:
    job = _job_with(tmp_path, "{seed_unseeded_generators: false}")
    assert load_job(job / "job.yaml").determinism.seed_unseeded_generators is False
    assert load_job(JOBS / "unseeded-generators" / "job.yaml").determinism.seed_unseeded_generators
    bad = _job_with(tmp_path / "bad", "{seed_unseeded_generators: sometimes}")
    with pytest.raises(SpecError, match="seed_unseeded_generators"):
        load_job(bad / "job.yaml")


def test_job_with_unseeded_generators_verifies(tmp_path: Path) -> None:
    job = JOBS / "unseeded-generators"
    args = ["verify", str(job), "--runtime", "local", "--runs-dir", str(tmp_path), "--runs", "2", "-q"]
    assert cli.main([*args, "--no-attestation"]) == 0  # an attestation would land in the test tree


def test_job_with_unseeded_generators_differs_when_opted_out(tmp_path: Path) -> None:
    job = _job_with(tmp_path, "{seed_unseeded_generators: false}")
    runs = tmp_path / "runs"
    args = ["verify", str(job), "--runtime", "local", "--runs-dir", str(runs), "--runs", "2", "-q"]
    assert cli.main(args) == 1
