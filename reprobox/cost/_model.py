"""What `reprobox cost` found: one result per setting, the recommendation, shaped like --json."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from reprobox.cost._settings import Setting
from reprobox.guest.determinism import Determinism

WARM_UP_STEPS = 1  # the first step includes the job's set-up, cuDNN's autotuning and lazy allocations


@dataclass
class SettingResult:
    """One setting measured: its runs, whether they agree bit for bit, and what a step took."""

    setting: Setting
    determinism: Determinism
    runs: list[str] = field(default_factory=list)
    step_times: list[list[float]] = field(default_factory=list)  # per run, the steps after warm-up
    bit_exact: bool | None = None  # None: a run failed, nothing to compare
    same_numbers_as_default: bool | None = None
    failure: str | None = None
    relative_time: float | None = None  # step time / the fastest setting's

    @property
    def step_seconds(self) -> float | None:
        """The fastest run's median step time: other load on the machine only ever adds time, so the
        least disturbed run is the closest to what the setting costs."""
        medians = [statistics.median(run) for run in self.step_times if run]
        return min(medians) if medians else None

    @property
    def spread(self) -> float | None:
        """How far the runs' own medians lie apart, relative to their mean: the noise of this row."""
        medians = [statistics.median(run) for run in self.step_times if run]
        if len(medians) < 2 or not sum(medians):
            return None
        return (max(medians) - min(medians)) / statistics.mean(medians)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.setting.name,
            "doc": self.setting.doc,
            "changes": _plain(dict(self.setting.changes)),
            "values": _plain(asdict(self.determinism)),
            "guaranteed": self.setting.guaranteed,
            "device": self.setting.device,
            "bit_exact": self.bit_exact,
            "same_numbers_as_default": self.same_numbers_as_default,
            "step_seconds": self.step_seconds,
            "spread": self.spread,
            "relative_time": self.relative_time,
            "steps_measured": sum(len(run) for run in self.step_times),
            "runs": self.runs,
            "failure": self.failure,
        }


@dataclass
class Recommendation:
    """The cheapest setting that was bit-exact and keeps the guarantee, as a ready job-file block."""

    name: str
    determinism: Determinism
    block: str
    relative_time: float | None
    speedup: float | None  # the job's own step time / this one's
    measured: SettingResult | None = None  # the combination's own runs, when one was tried

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "values": _plain(asdict(self.determinism)),
            "block": self.block,
            "relative_time": self.relative_time,
            "speedup_over_default": self.speedup,
            "combination": self.measured.to_json() if self.measured else None,
        }


@dataclass
class CostResult:
    job: str
    device: str  # cpu or cuda, as the job's own run computed
    device_name: str
    max_steps: int
    runs_per_setting: int
    results: list[SettingResult]
    recommended: Recommendation | None = None
    notes: list[str] = field(default_factory=list)

    def fast_not_bit_exact(self) -> list[SettingResult]:
        """Settings faster than the recommendation that were not bit-exact run to run."""
        best = self.recommended.relative_time if self.recommended else None
        return [
            r
            for r in self.results
            if r.bit_exact is False
            and r.relative_time is not None
            and (best is None or r.relative_time < best)
        ]

    def unguaranteed(self) -> list[SettingResult]:
        """Settings that were bit-exact here without PyTorch's guarantee (never recommended)."""
        return [r for r in self.results if r.bit_exact and not r.setting.guaranteed]

    def to_json(self) -> dict[str, Any]:
        return {
            "job": self.job,
            "device": self.device,
            "device_name": self.device_name,
            "max_steps": self.max_steps,
            "runs_per_setting": self.runs_per_setting,
            "settings": [r.to_json() for r in self.results],
            "recommended": self.recommended.to_json() if self.recommended else None,
            "fast_not_bit_exact": [r.setting.name for r in self.fast_not_bit_exact()],
            "bit_exact_without_guarantee": [r.setting.name for r in self.unguaranteed()],
            "notes": self.notes,
        }


def _plain(values: dict[str, Any]) -> dict[str, Any]:
    return {k: list(v) if isinstance(v, tuple) else v for k, v in values.items()}


def relative_times(results: Sequence[SettingResult]) -> None:
    """Each measured setting's step time relative to the fastest one's."""
    times = [r.step_seconds for r in results if r.step_seconds]
    fastest = min(times) if times else None
    for result in results:
        seconds = result.step_seconds
        result.relative_time = seconds / fastest if seconds and fastest else None
