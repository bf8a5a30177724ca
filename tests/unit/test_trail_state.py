"""The trail's state digests (RNG streams, optimizers, schedulers, DataLoader generators): each changes
with its own state and nothing else, reading consumes nothing, a resumed run counts its steps on from
its checkpoint, and the trail's readers keep the digests and find the first step after a resume where
they differ. The guest runs for real (`python -m reprobox.guest -- python train.py`), side by side."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from reprobox.guest import settings
from reprobox.guest.tensorhash import bytes_digest as _bytes_digest
from reprobox.records.trail import (
    STOP_FILE,
    HashTrail,
    StepRecord,
    TrailHeader,
    decode_line,
    encode_line,
    read_trail,
)
from reprobox.trails import state_differences

STEPS = 10
RNG_KEYS = {"rng.torch", "rng.numpy", "rng.python", "rng.loader.0"}
KEYS = RNG_KEYS | {"optimizer.0", "scheduler.0"}

# Every stream the state covers feeds the training: a digest that consumed any would change parameters.
TRAIN = textwrap.dedent(
    f"""
    import os, random
    import numpy as np
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    TWEAKS = {{
        "rand": lambda: torch.rand(1),
        "numpy": lambda: np.random.seed(7),
        "gamma": lambda: setattr(scheduler, "gamma", 0.9),
        "loader": lambda: torch.rand(1, generator=generator),
    }}
    after = {{}}
    for item in filter(None, os.environ.get("TWEAKS", "").split(",")):
        name, step = item.split("@")
        after.setdefault(int(step), []).append(TWEAKS[name])

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Dropout(0.5), torch.nn.Linear(8, 1))
    optimizer = torch.optim.Adam(model.parameters(), lr=0.05)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=2, gamma=0.5)
    generator = torch.Generator().manual_seed(3)
    loader = DataLoader(
        TensorDataset(torch.randn(16, 4), torch.randn(16)), batch_size=4, shuffle=True, generator=generator
    )
    step = 0
    while step < {STEPS}:
        for x, y in loader:
            noise = torch.from_numpy(np.random.randn(*x.shape).astype("float32")) * 0.01
            optimizer.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x + noise).squeeze(-1), y) * (1 + random.random())
            loss.backward()
            optimizer.step()
            scheduler.step()
            step += 1
            for tweak in after.get(step, []):
                tweak()
            if step == {STEPS}:
                break
    """
)

# run name -> (environment beyond the run's own, TWEAKS for the script)
RUNS: dict[str, tuple[dict[str, str], str]] = {
    "state": ({settings.TRAIL_STATE: "1"}, ""),
    "again": ({settings.TRAIL_STATE: "1"}, ""),
    "plain": ({}, ""),
    "tweaked": ({settings.TRAIL_STATE: "1"}, "rand@2,numpy@4,gamma@6,loader@8"),
    "resumed": ({settings.TRAIL_STATE: "1", settings.RESUME_STEP: "5", settings.MAX_STEPS: "8"}, ""),
}


def _start(root: Path, name: str) -> subprocess.Popen[str]:
    """`python -m reprobox.guest -- python train.py` with the variables the controller gives a run."""
    extra, tweaks = RUNS[name]
    run_dir = root / name
    (run_dir / "outputs").mkdir(parents=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("REPROBOX_")}
    env.update(
        {
            settings.RUN_DIR: str(run_dir),
            settings.OUTPUT_DIR: str(run_dir / "outputs"),
            settings.SEED: "0",
            settings.DETERMINISM: json.dumps({"threads": 1}),
            settings.TRAIL_EVERY: "1",
            "TWEAKS": tweaks,
            **extra,
        }
    )
    command = [sys.executable, "-m", "reprobox.guest", "--", sys.executable, str(root / "train.py")]
    return subprocess.Popen(
        command, cwd=run_dir, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Each run's folder; the runs go side by side (most of each is importing torch)."""
    root = tmp_path_factory.mktemp("trail-state")
    (root / "train.py").write_text(TRAIN)
    started = {name: _start(root, name) for name in RUNS}
    for process in started.values():
        _, stderr = process.communicate(timeout=120)
        assert process.returncode == 0, stderr[-4000:]
    return {name: root / name for name in RUNS}


def _trail(run_dir: Path) -> HashTrail:
    return read_trail(run_dir / settings.TRAIL_FILE)


def _states(run_dir: Path) -> dict[int, dict[str, str]]:
    return {step: record.state for step, record in sorted(_trail(run_dir).steps.items())}


def _first_change(a: dict[int, dict[str, str]], b: dict[int, dict[str, str]]) -> dict[str, int]:
    """For each state key, the first step at which the two runs' digests differ."""
    first: dict[str, int] = {}
    for step in sorted(a.keys() & b.keys()):
        for key in a[step].keys() | b[step].keys():
            if a[step].get(key) != b[step].get(key):
                first.setdefault(key, step)
    return first


def test_every_step_carries_every_state_and_two_runs_agree(runs: dict[str, Path]) -> None:
    states = _states(runs["state"])
    assert list(states) == list(range(1, STEPS + 1))
    assert all(set(state) - {"rng.cuda"} == KEYS for state in states.values())  # CUDA: once started
    assert _states(runs["again"]) == states
    assert len({state["optimizer.0"] for state in states.values()}) == STEPS  # Adam's moments move


def test_recording_state_consumes_nothing(runs: dict[str, Path]) -> None:
    plain, state = _trail(runs["plain"]), _trail(runs["state"])
    assert plain.steps.keys() == state.steps.keys()
    assert all(not record.state for record in plain.steps.values())
    for step, record in plain.steps.items():
        assert record.digests() == state.steps[step].digests(), step
        assert record.scalars == state.steps[step].scalars


def test_each_tweak_changes_its_own_state_from_the_next_step(runs: dict[str, Path]) -> None:
    first = _first_change(_states(runs["state"]), _states(runs["tweaked"]))
    assert {key: first.get(key) for key in RNG_KEYS | {"scheduler.0"}} == {
        "rng.torch": 3,  # an extra torch.rand after step 2
        "rng.numpy": 5,  # np.random.seed after step 4
        "scheduler.0": 7,  # gamma changed after step 6
        "rng.loader.0": 9,  # the loader's generator drawn from after step 8
        "rng.python": None,  # nothing drew from `random` more or less
    }
    assert first["optimizer.0"] == 4  # step 3's dropout differed, so did the moments it left


def test_state_differences_names_the_first_differing_step_after_a_resume(runs: dict[str, Path]) -> None:
    whole, tweaked = _trail(runs["state"]), _trail(runs["tweaked"])
    assert state_differences(whole, tweaked, 0) == (3, ["rng.torch"])
    assert state_differences(whole, tweaked, 4) == (5, ["rng.numpy", "rng.torch", "optimizer.0"])
    assert state_differences(whole, _trail(runs["again"]), 0) is None
    assert state_differences(whole, tweaked, STEPS) is None  # no common step after it


def test_a_resumed_run_counts_on_from_its_start_to_the_absolute_max_steps(runs: dict[str, Path]) -> None:
    run_dir = runs["resumed"]
    lines = (run_dir / settings.TRAIL_FILE).read_text().splitlines()
    header = decode_line(lines[0])
    assert isinstance(header, TrailHeader) and header.start == 5 and json.loads(lines[0])["start"] == 5
    assert sorted(_trail(run_dir).steps) == [6, 7, 8]  # stopped at --max-steps 8, not after 8 more
    stopped = json.loads((run_dir / settings.GUEST_STATE / STOP_FILE).read_text())
    assert stopped == {"reason": "max_steps", "step": 8}
    # Restarted from scratch, not from a checkpoint: its state going into step 6 is not the whole run's.
    found = state_differences(_trail(runs["state"]), _trail(run_dir), 5)
    assert found is not None and found[0] == 6 and {"scheduler.0", "optimizer.0"} <= set(found[1])


class Job:
    """A small training setup in this process, for the digests' own behaviour."""

    def __init__(self) -> None:
        torch.manual_seed(0)
        self.model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Dropout(0.5), torch.nn.Linear(8, 1))
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=0.1)
        self.scheduler = torch.optim.lr_scheduler.StepLR(self.optimizer, step_size=1, gamma=0.5)
        self.generator = torch.Generator().manual_seed(3)
        data = TensorDataset(torch.randn(16, 4), torch.randn(16))
        self.loader = DataLoader(data, batch_size=4, shuffle=True, generator=self.generator)

    def digests(self) -> dict[str, str]:
        from reprobox.guest.trail_state import state_digests

        return state_digests(
            torch,
            [self.optimizer],
            loaders=[self.loader],
            schedulers=[self.scheduler],
            tensor_digest=lambda t: _bytes_digest(torch, t),
        )


def changed(before: dict[str, str], after: dict[str, str]) -> set[str]:
    return {key for key in before.keys() | after.keys() if before.get(key) != after.get(key)}


def test_each_state_changes_its_own_digest_alone() -> None:
    job = Job()
    first = job.digests()
    assert set(first) >= KEYS
    assert job.digests() == first
    torch.rand(1)
    assert changed(first, second := job.digests()) == {"rng.torch"}
    np.random.seed(5)
    assert changed(second, third := job.digests()) == {"rng.numpy"}
    random.random()
    assert changed(third, fourth := job.digests()) == {"rng.python"}
    job.generator.manual_seed(9)
    assert changed(fourth, fifth := job.digests()) == {"rng.loader.0"}
    job.scheduler.last_epoch += 1
    assert changed(fifth, sixth := job.digests()) == {"scheduler.0"}
    job.optimizer.param_groups[0]["lr"] = 0.3
    assert changed(sixth, job.digests()) == {"optimizer.0"}


def test_a_freed_optimizer_keeps_the_indices_of_the_others() -> None:
    from reprobox.guest.trail_state import state_digests

    job = Job()
    keys = state_digests(
        torch,
        [None, job.optimizer],
        loaders=[],
        schedulers=[],
        tensor_digest=lambda t: _bytes_digest(torch, t),
    )
    assert "optimizer.1" in keys and "optimizer.0" not in keys


def test_an_unreadable_scheduler_is_recorded_not_raised() -> None:
    from reprobox.guest.trail_state import state_digests

    class Broken:
        def state_dict(self) -> dict[str, object]:
            raise RuntimeError("no state")

    found = state_digests(torch, [], loaders=[], schedulers=[Broken()], tensor_digest=str)
    assert found["scheduler.0"] == "unreadable:RuntimeError"


def test_the_constructors_are_watched_in_the_order_made(monkeypatch: pytest.MonkeyPatch) -> None:
    from torch.optim import lr_scheduler

    from reprobox.guest import trail_state

    for cls in (DataLoader, lr_scheduler.LRScheduler, lr_scheduler.ReduceLROnPlateau):
        monkeypatch.setattr(cls, "__init__", cls.__init__)  # put back as it was after the test
    monkeypatch.setattr(trail_state, "_LOADERS", trail_state._Made())
    monkeypatch.setattr(trail_state, "_SCHEDULERS", trail_state._Made())
    trail_state.watch_constructors(torch)
    job = Job()
    plateau = lr_scheduler.ReduceLROnPlateau(job.optimizer)  # its __init__ is not LRScheduler's
    second = DataLoader(TensorDataset(torch.zeros(2)))
    assert trail_state.live_loaders() == [job.loader, second]
    assert trail_state.live_schedulers() == [job.scheduler, plateau]
    del second
    assert trail_state.live_loaders() == [job.loader]


def test_state_round_trips_and_a_malformed_state_is_no_record() -> None:
    record = StepRecord(3, {"w": ["d", 0.0, 0.0]}, "m", {}, {"rng.torch": "abc"})
    assert decode_line(encode_line(record)) == record
    plain = StepRecord(3, {"w": ["d", 0.0, 0.0]}, "m")
    assert "state" not in encode_line(plain) and decode_line(encode_line(plain)) == plain
    for state in ('{"rng.torch": 1}', "[]", '"x"', "null"):
        assert decode_line(f'{{"step": 3, "params": {{"w": ["d", 0, 0]}}, "state": {state}}}') is None
    header = TrailHeader(1, None, 7, start=4)
    assert decode_line(encode_line(header)) == header and '"start":4' in encode_line(header)
    assert "start" not in encode_line(TrailHeader(1, None, 7))


def trail(states: dict[int, dict[str, str]]) -> HashTrail:
    found = HashTrail()
    for step, state in states.items():
        found.add(StepRecord(step, {"w": ["d", 0.0, 0.0]}, "m", {}, state))
    return found


def test_state_differences_after_a_resume_names_the_likelier_cause_first() -> None:
    whole = trail({4: {"rng.torch": "a"}, 5: {"rng.torch": "b", "optimizer.0": "o", "scheduler.0": "s"}})
    resumed = trail({5: {"rng.torch": "b", "optimizer.0": "O", "scheduler.0": "S"}})
    assert state_differences(whole, resumed, 4) == (5, ["scheduler.0", "optimizer.0"])
    assert state_differences(whole, whole, 4) is None
    assert state_differences(whole, trail({5: {}}), 4) is None  # a step without state is no evidence
    assert state_differences(whole, trail({5: {"rng.torch": "b"}}), 4) == (5, ["scheduler.0", "optimizer.0"])
