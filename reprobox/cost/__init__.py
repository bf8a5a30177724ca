"""`reprobox cost`: what determinism costs this job, and the cheapest setting that is still bit-exact.

Each setting (the job's own, then one knob changed at a time: see `_settings`) runs the job twice for
its first K optimizer steps, with the trail on every step and the guest's step clock on. Two runs of a
setting whose trails agree bit for bit make it bit-exact; its step time is the median over both runs'
steps after the first (set-up and autotuning). Runs go one after another, never side by side, so no
run's time is another's load. The job's own settings run first: what they computed on (CPU or a GPU)
decides which settings are worth measuring. The recommendation combines every knob that was
bit-exact, keeps PyTorch's guarantee and was faster beyond the noise, and is itself run twice: a
recommendation is always a measured, bit-exact setting.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from typing import Any

from reprobox import progress
from reprobox.compare import IDENTICAL, compare_runs
from reprobox.cost._model import WARM_UP_STEPS, CostResult, Recommendation, SettingResult, relative_times
from reprobox.cost._settings import (
    CPU,
    CUDA,
    DEFAULT,
    Setting,
    candidate_settings,
    determinism_block,
)
from reprobox.errors import EXIT_JOB_FAILED, ReproboxError, UsageError
from reprobox.guest import settings as guest_settings
from reprobox.guest.determinism import Determinism
from reprobox.jobfile import JobSpec, Trail
from reprobox.records.manifest import RunRecord
from reprobox.records.steptimes import read_step_times
from reprobox.runinputs import RunInputs
from reprobox.runner import RunOptions, execute, prepare_inputs
from reprobox.runtimes.base import Runtime

__all__ = ["CostOptions", "CostResult", "JobFailedUnderOwnSettings", "measure_cost"]

COST_DIR = ".cost"  # under runs/<job>/, so that `latest` and run listings stay the job's own
MIN_STEPS = 3  # one warm-up step and at least two measured
NOISE_FLOOR = 0.03  # a setting must be at least 3 % faster (and beyond its runs' spread) to count


class JobFailedUnderOwnSettings(ReproboxError):
    """The job did not finish under its own settings: there is nothing to measure against."""

    exit_code = EXIT_JOB_FAILED


@dataclass(frozen=True)
class CostOptions:
    max_steps: int = 20
    runs: int = 2  # per setting
    only: tuple[str, ...] = ()  # setting names to measure besides the job's own (default: all)


def measure_cost(job: JobSpec, runtime: Runtime, run_options: RunOptions, options: CostOptions) -> CostResult:
    """Measure every setting worth measuring for `job` on `runtime` (each run reported as progress)."""
    _check(options)
    cpus = os.cpu_count() or 1
    on_cpu = candidate_settings(job.determinism, threads_used=None, cpus=cpus, gpu=False)
    on_gpu = candidate_settings(job.determinism, threads_used=None, cpus=cpus, gpu=True)
    unknown = sorted(set(options.only) - {row.name for row in on_gpu})
    if unknown:
        raise UsageError(
            f"--only {unknown[0]!r} is not a setting; name them as the table does: "
            + ", ".join(row.name for row in on_gpu[1:])
        )
    progress.say(
        f"cost of determinism for {job.name}: {options.runs} runs of up to {options.max_steps} steps per "
        f"setting; about {len(on_cpu)} settings ({len(on_cpu) * options.runs} runs) on a CPU, "
        f"{len(on_gpu)} ({len(on_gpu) * options.runs} runs) if the job computes on a GPU"
    )
    measurer = _Measurer(job, runtime, run_options, options, prepare_inputs(job, run_options))
    default = measurer.add(Setting(DEFAULT, {}, "the job's own settings"))
    measurer.run_once(default, "round 1: setting 1")
    if default.failure:
        raise JobFailedUnderOwnSettings(
            f"the job failed under its own settings ({default.failure}); fix it, then measure its cost"
            f" (run: {default.runs[-1]})"
        )
    if not any(default.step_times):
        raise UsageError(
            f"{job.job_file}: the job made no torch.optim optimizer step (run: {default.runs[-1]}); "
            "reprobox cost times a training job's optimizer steps"
        )
    device, device_name, threads_used, cpus = _what_ran(measurer.records[DEFAULT][0])
    rows = candidate_settings(job.determinism, threads_used=threads_used, cpus=cpus, gpu=device == CUDA)
    not_here = sorted(set(options.only) - {row.name for row in rows})
    rows = [row for row in rows[1:] if not options.only or row.name in options.only]
    progress.say(
        f"the job computes on {device_name} ({device}): {len(rows)} more settings, "
        f"{len(rows) * options.runs} runs"
    )
    results = [default, *(measurer.add(row) for row in rows)]
    measurer.run_rounds(results, first_done=1)
    relative_times(results)
    base = replace(job.determinism, threads=job.determinism.threads or threads_used)
    recommended = _recommend(results, base, measurer)
    relative_times(results)
    if recommended is not None and recommended.measured is not None:
        recommended.relative_time = recommended.measured.relative_time
    result = CostResult(
        job=job.name,
        device=device,
        device_name=device_name,
        max_steps=options.max_steps,
        runs_per_setting=options.runs,
        results=results,
        recommended=recommended,
    )
    if not_here:
        result.notes.append(
            f"--only {', '.join(not_here)}: not a setting for this job here (it computes on {device}, "
            f"with {cpus} cores); nothing was measured for it"
        )
    if not default.bit_exact:
        result.notes.append(
            "the job is not bit-exact under its own settings: see `reprobox verify` for where it differs"
        )
    return result


def _check(options: CostOptions) -> None:
    if options.max_steps < MIN_STEPS:
        raise UsageError(
            f"--max-steps must be at least {MIN_STEPS} (one warm-up step and two to time), "
            f"not {options.max_steps}; e.g. --max-steps 20"
        )
    if not 2 <= options.runs <= 10:
        raise UsageError(f"--runs must be from 2 to 10, not {options.runs}; two runs show bit-exactness")


class _Measurer:
    """Runs settings in rounds, one run of each setting per round, so that a machine whose speed
    drifts (another process, a warming GPU) slows every setting alike rather than the last ones."""

    def __init__(
        self, job: JobSpec, runtime: Runtime, run_options: RunOptions, options: CostOptions, inputs: RunInputs
    ) -> None:
        self.job = job.with_overrides(trail=Trail(every=1))
        self.runtime, self.options, self.inputs = runtime, options, inputs
        self.run_options = replace(
            run_options,
            runs_dir=run_options.runs_dir / job.name / COST_DIR,
            max_steps=options.max_steps,
            extra_env={**run_options.extra_env, guest_settings.STEP_TIMES: "1"},
            echo=None,
        )
        self.records: dict[str, list[RunRecord]] = {}
        self.series = progress.Series(None, "cost run")  # every run stops at max_steps: alike in length

    def add(self, setting: Setting) -> SettingResult:
        self.records[setting.name] = []
        return SettingResult(setting, setting.applied(self.job.determinism))

    def run_rounds(self, results: list[SettingResult], *, first_done: int = 0) -> None:
        """`options.runs` rounds over `results` (the first `first_done` already ran in round 1), then
        each setting judged from its runs."""
        for round_index in range(self.options.runs):
            for index, result in enumerate(results):
                if round_index == 0 and index < first_done:
                    continue
                label = f"round {round_index + 1}/{self.options.runs}: setting {index + 1}/{len(results)}"
                self.run_once(result, label)
        for result in results:
            self.judge(result)

    def run_once(self, result: SettingResult, label: str) -> None:
        """One more run of a setting that has not failed yet."""
        if result.failure:
            return
        progress.say(f"{label}: {result.setting.name}")
        job = self.job.with_overrides(determinism=result.determinism)
        seen = progress.RunLabel(f"cost {label}: {result.setting.name}", self.series)
        record = execute(job, self.runtime, self.run_options, inputs=self.inputs, label=seen)
        result.runs.append(str(record.run_dir))
        if not record.succeeded:
            result.failure = record.failure or record.status
            progress.say(f"{label}: {result.setting.name} failed ({result.failure})")
            return
        self.records[result.setting.name].append(record)
        times = read_step_times(record.run_dir)
        result.step_times.append([times[s] for s in sorted(times) if s > WARM_UP_STEPS])

    def judge(self, result: SettingResult) -> None:
        """Bit-exact when its runs agree; the same numbers as the job's own when its first run agrees
        with the job's own first run."""
        records = self.records[result.setting.name]
        if result.failure or len(records) < 2:
            return
        result.bit_exact = compare_runs(records, tensor_details=False).verdict == IDENTICAL
        own = self.records.get(DEFAULT) or []
        if result.setting.name != DEFAULT and own:
            pair = [own[0], records[0]]
            result.same_numbers_as_default = compare_runs(pair, tensor_details=False).verdict == IDENTICAL
        if not any(result.step_times):
            result.failure = "no optimizer step was timed: the job calls no torch.optim optimizer's step()"
        progress.say(f"{result.setting.name}: {_summary(result)}")


def _summary(result: SettingResult) -> str:
    seconds = result.step_seconds
    timing = f"{seconds * 1000:.3g} ms a step" if seconds else "no step timed"
    return f"{timing}, {'bit-exact' if result.bit_exact else 'not bit-exact'}"


def _what_ran(record: RunRecord) -> tuple[str, str, int | None, int]:
    """(cpu or cuda, the device's name, torch's intra-op threads, the machine's cores) of a run."""
    fingerprint: dict[str, Any] = record.fingerprint or {}
    software, hardware = fingerprint.get("software") or {}, fingerprint.get("hardware") or {}
    device = CUDA if (software.get("torch") or {}).get("compute_device") == CUDA else CPU
    cpu = hardware.get("cpu") or {}
    threads = (software.get("threads") or {}).get("torch_intra_op")
    cores = cpu.get("usable_cores") or cpu.get("logical_cores") or os.cpu_count() or 1
    name = str(cpu.get("model") or "the CPU")
    gpus = hardware.get("gpus")
    if device == CUDA and isinstance(gpus, list) and gpus and isinstance(gpus[0], dict):
        name = str(gpus[0].get("name") or "a GPU")
    return device, name, threads if isinstance(threads, int) else None, int(cores)


def _faster(result: SettingResult, default: SettingResult) -> bool:
    """Faster than the job's own settings by more than the noise of either row."""
    if not result.step_seconds or not default.step_seconds:
        return False
    margin = max(NOISE_FLOOR, 2 * (result.spread or 0), 2 * (default.spread or 0))
    return result.step_seconds < default.step_seconds * (1 - margin)


def _recommend(results: list[SettingResult], base: Determinism, measurer: _Measurer) -> Recommendation | None:
    """The cheapest bit-exact setting that keeps the guarantee; several such knobs are combined and the
    combination measured (kept only when it too is bit-exact and faster than the best knob alone)."""
    default = results[0]
    if not default.bit_exact:
        return None
    knobs = sorted(
        (r for r in results[1:] if r.bit_exact and r.setting.guaranteed and _faster(r, default)),
        key=lambda r: r.step_seconds or 0.0,
    )
    best_per_field: dict[tuple[str, ...], SettingResult] = {}
    for knob in knobs:  # fastest first: of two thread counts or two attention choices, keep the faster
        best_per_field.setdefault(tuple(sorted(knob.setting.changes)), knob)
    chosen = list(best_per_field.values())
    if not chosen:
        return _recommendation(DEFAULT, base, default, default)
    best = chosen[0]
    if len(chosen) == 1:
        return _recommendation(best.setting.name, _pinned(best, base), best, default)
    changes = {k: v for knob in chosen for k, v in knob.setting.changes.items()}
    name = " + ".join(knob.setting.name for knob in chosen)
    combined = measurer.add(Setting(name, changes, "the faster bit-exact knobs together"))
    measurer.run_rounds([combined])
    results.append(combined)  # a row of the table like any other
    if combined.bit_exact and _faster(combined, best):
        recommendation = _recommendation(name, _pinned(combined, base), combined, default)
        recommendation.measured = combined
        return recommendation
    return _recommendation(best.setting.name, _pinned(best, base), best, default)


def _pinned(result: SettingResult, base: Determinism) -> Determinism:
    """The setting's values with the thread count pinned to what its runs used."""
    det = result.determinism
    return replace(det, threads=det.threads or base.threads)


def _recommendation(
    name: str, det: Determinism, result: SettingResult, default: SettingResult
) -> Recommendation:
    speedup = (
        default.step_seconds / result.step_seconds if default.step_seconds and result.step_seconds else None
    )
    return Recommendation(name, det, determinism_block(det), result.relative_time, speedup)
