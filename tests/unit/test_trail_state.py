"""The trail's state digests (RNG streams, optimizers, schedulers, DataLoader generators) read in this
process: each changes with its own state and nothing else, reading consumes nothing, and the trail's
readers keep them and find the first step after a resume where they differ."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from reprobox.guest.trail import _digest
from reprobox.records.trail import HashTrail, StepRecord, TrailHeader, decode_line, encode_line
from reprobox.trails import state_differences


class Job:
    """A small training setup whose every kind of state the digests cover."""

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
            tensor_digest=lambda t: str(_digest(torch, t)[0]),
        )

    def step(self) -> None:
        x, y = next(iter(self.loader))
        self.optimizer.zero_grad()
        torch.nn.functional.mse_loss(self.model(x).squeeze(-1), y).backward()
        self.optimizer.step()
        self.scheduler.step()


def changed(before: dict[str, str], after: dict[str, str]) -> set[str]:
    return {key for key in before.keys() | after.keys() if before.get(key) != after.get(key)}


def test_each_state_changes_its_own_digest_alone() -> None:
    job = Job()
    first = job.digests()
    assert {"rng.torch", "rng.numpy", "rng.python", "rng.loader.0", "optimizer.0", "scheduler.0"} <= set(
        first
    )
    assert job.digests() == first  # reading consumes nothing
    torch.rand(1)
    assert changed(first, second := job.digests()) == {"rng.torch"}
    np.random.seed(5)
    assert changed(second, third := job.digests()) == {"rng.numpy"}
    random.random()
    assert changed(third, fourth := job.digests()) == {"rng.python"}
    job.generator.manual_seed(9)
    assert changed(fourth, fifth := job.digests()) == {"rng.loader.0"}
    job.scheduler.last_epoch += 1
    assert changed(fifth, job.digests()) == {"scheduler.0"}


def test_a_training_step_changes_the_optimizer_and_reading_changes_no_rng() -> None:
    job = Job()
    before = job.digests()
    state = torch.get_rng_state()
    job.digests()
    assert torch.equal(torch.get_rng_state(), state)
    job.step()
    assert {"optimizer.0", "scheduler.0", "rng.torch", "rng.loader.0"} <= changed(before, job.digests())


def test_the_constructors_are_watched_for_loaders_and_schedulers(monkeypatch: pytest.MonkeyPatch) -> None:
    from reprobox.guest import trail_state

    monkeypatch.setattr(DataLoader, "__init__", DataLoader.__init__)
    monkeypatch.setattr(
        torch.optim.lr_scheduler.LRScheduler, "__init__", torch.optim.lr_scheduler.LRScheduler.__init__
    )
    monkeypatch.setattr(trail_state, "_SCHEDULERS", [])
    trail_state.watch_constructors(torch)
    job = Job()
    assert job.loader in trail_state.live_loaders()
    assert trail_state.live_schedulers() == [job.scheduler]


def test_state_round_trips_and_a_malformed_state_is_no_record() -> None:
    record = StepRecord(3, {"w": ["d", 0.0, 0.0]}, "m", {}, {"rng.torch": "abc"})
    assert decode_line(encode_line(record)) == record
    assert decode_line('{"step": 3, "params": {"w": ["d", 0, 0]}, "state": {"rng.torch": 1}}') is None
    header = TrailHeader(1, None, 7, start=4)
    assert decode_line(encode_line(header)) == header and '"start":4' in encode_line(header)


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
