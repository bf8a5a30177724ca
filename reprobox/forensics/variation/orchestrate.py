"""`verify --vary`: a baseline run twice, then one run per factor with only that factor changed.

The baseline is the job as a plain `reprobox run` runs it. The inputs (code snapshot, data digests) are
made once and shared by every run. The baseline runs twice: a job that differs from itself cannot have
its differences blamed on any factor. Factors whose varied value depends on what the baseline used
(threads) run once it has finished; the others run beside it. Each varied run is compared with the
first baseline run; when several factors were varied and none alone
changes the result, one run with all of them varied is tried, and if it differs the set is bisected
to a smallest combination that does.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from functools import partial

from reprobox import progress
from reprobox.compare import IDENTICAL, compare_runs
from reprobox.errors import UsageError
from reprobox.forensics.variation import matrix
from reprobox.forensics.variation.bisect import smallest_combination
from reprobox.forensics.variation.change import Change, Machine, apply_change
from reprobox.forensics.variation.factors import WATCHED, Factor
from reprobox.jobfile import JobSpec
from reprobox.records.manifest import RunRecord
from reprobox.runinputs import RunInputs
from reprobox.runner import RunOptions, finish, prepare, prepare_inputs
from reprobox.runtimes.base import Runtime


@dataclass(frozen=True)
class VaryOptions:
    factors: tuple[Factor, ...]
    parallel: int = 1  # runs side by side
    bisect: bool = True  # look for a combination when no single factor matters
    tensor_details: bool = True


def runtime_variations(runtime: Runtime) -> frozenset[str]:
    """The `Variation` fields this runtime applies; none where it does not say."""
    names: frozenset[str] = getattr(runtime, "variations", frozenset())
    return frozenset(str(name) for name in names)


class _Runner:
    """Runs changes of the baseline, each distinct change once, sharing the inputs."""

    def __init__(
        self, job: JobSpec, runtime: Runtime, options: RunOptions, inputs: RunInputs, quiet: bool
    ) -> None:
        self.job, self.runtime, self.inputs = job, runtime, inputs
        self.options = replace(options, echo=None) if quiet else options
        self.stop = threading.Event()
        self.done: dict[tuple[object, ...], RunRecord] = {}
        self.series = progress.Series(None, "vary run")  # the job as it is, each time one thing changed

    def run(self, change: Change, label: str) -> RunRecord:
        job, options = apply_change(self.job, self.options, change)
        progress.say(f"{label}: {change.describe()}")
        record = finish(
            prepare(job, options, self.inputs),
            self.runtime,
            options,
            stop=self.stop,
            label=progress.RunLabel(label, self.series),
        )
        progress.say(f"{label}: {record.status}" + (f" ({record.failure})" if record.failure else ""))
        return record

    def cached(self, change: Change, label: str) -> RunRecord:
        key = _key(change)
        if key not in self.done:
            self.done[key] = self.run(change, label)
        return self.done[key]


def _key(change: Change) -> tuple[object, ...]:
    return (
        tuple(sorted(change.env.items())),
        tuple(sorted((k, repr(v)) for k, v in change.variation.items())),
        change.reverse_env,
        change.nproc_per_node,
    )


def vary(
    job: JobSpec, runtime: Runtime, run_options: RunOptions, options: VaryOptions
) -> matrix.VariationResult:
    """The variation matrix of `job` on `runtime` (each run reported to the current progress reporter)."""
    if options.parallel < 1:
        raise UsageError(f"--parallel must be at least 1, not {options.parallel}")
    machine = Machine.probe(job, WATCHED)
    applies = runtime_variations(runtime)
    rows: dict[str, matrix.FactorResult] = {}
    tried: list[Factor] = []
    for factor in options.factors:
        reason = factor.unsupported_reason(machine, runtime.name, applies)
        row = matrix.FactorResult(
            factor.name, matrix.UNSUPPORTED if reason else "", factor.values, reason=reason or ""
        )
        row.applicable = factor.applicable(machine) is None
        rows[factor.name] = row
        if reason is None:
            tried.append(factor)
    baseline = Change()  # every factor's baseline is the job as a plain run runs it
    runner = _Runner(job, runtime, run_options, prepare_inputs(job, run_options), quiet=options.parallel > 1)

    def variant_runs(factors: Sequence[Factor], known: Machine) -> list[tuple[str, Callable[[], RunRecord]]]:
        runs: list[tuple[str, Callable[[], RunRecord]]] = []
        for factor in factors:
            variants = factor.variants(known)
            for index, change in enumerate(variants):
                label = f"vary {factor.name}" + (
                    f" ({index + 1}/{len(variants)})" if len(variants) > 1 else ""
                )
                runs.append((f"{factor.name}#{index}", partial(runner.cached, change, label)))
        return runs

    jobs: list[tuple[str, Callable[[], RunRecord]]] = [
        ("baseline 1/2", partial(runner.run, baseline, "baseline 1/2")),
        ("baseline 2/2", partial(runner.run, baseline, "baseline 2/2")),
    ]
    records = _run_all(
        jobs + variant_runs([f for f in tried if not f.after_baseline], machine),
        options.parallel,
        runner.stop,
    )
    reference = records["baseline 1/2"]
    self_check = compare_runs([reference, records["baseline 2/2"]], tensor_details=options.tensor_details)
    machine = machine.after_baseline(reference.fingerprint)
    later = [f for f in tried if f.after_baseline]
    if self_check.verdict == IDENTICAL and later:
        records.update(_run_all(variant_runs(later, machine), options.parallel, runner.stop))
    for factor in options.factors:
        rows[factor.name].baseline = factor.baseline(machine)
        rows[factor.name].varied = " | ".join(change.describe() for change in factor.variants(machine))
    result = matrix.VariationResult(
        baseline_runs=[str(reference.run_dir), str(records["baseline 2/2"].run_dir)],
        baseline=self_check,
        rows=[rows[f.name] for f in options.factors],
        runtime=runtime.name,
    )
    if self_check.verdict != IDENTICAL:
        for factor in tried:  # nothing can be attributed to a factor: the sentence says why
            rows[factor.name].status = matrix.UNDECIDED
        return result
    noise = matrix.excused(self_check)
    for factor in tried:
        rows[factor.name].pin = factor.pin(machine)
        varied_records = [records[f"{factor.name}#{i}"] for i in range(len(factor.variants(machine)))]
        _judge_variants(rows[factor.name], reference, varied_records, noise, options.tensor_details)

    def varied(factors: Sequence[Factor]) -> Change:
        change = baseline
        for factor in factors:
            change = change.merged(factor.varied(machine))
        return change

    if options.bisect and len(tried) > 1 and not result.sensitive and not result.failed:
        _find_combination(
            result,
            tried,
            reference,
            runner,
            varied,
            machine=machine,
            tensor_details=options.tensor_details,
            noise=noise,
        )
    return result


def _judge_variants(
    row: matrix.FactorResult,
    reference: RunRecord,
    varied_records: Sequence[RunRecord],
    noise: frozenset[tuple[str, str]],
    tensor_details: bool,
) -> None:
    """The row from its varied runs: the first that failed or differs decides; invariant when none."""
    for record in varied_records:
        row.run = str(record.run_dir)
        matrix.judge(row, compare_runs([reference, record], tensor_details=tensor_details), noise)
        if row.status != matrix.INVARIANT:
            return


def _find_combination(
    result: matrix.VariationResult,
    tried: list[Factor],
    reference: RunRecord,
    runner: _Runner,
    varied: Callable[[Sequence[Factor]], Change],
    *,
    machine: Machine,
    tensor_details: bool,
    noise: frozenset[tuple[str, str]],
) -> None:
    """Every factor at once; if that differs, bisect to a smallest combination that still does."""
    rows: dict[tuple[str, ...], matrix.FactorResult] = {}

    def differs(subset: tuple[Factor, ...]) -> bool:
        names = tuple(f.name for f in subset)
        change = varied(subset)
        record = runner.cached(change, "vary " + "+".join(names))
        row = matrix.FactorResult(
            "+".join(names), "", "combined", varied=change.describe(), run=str(record.run_dir)
        )
        rows[names] = matrix.judge(
            row, compare_runs([reference, record], tensor_details=tensor_details), noise
        )
        return row.status == matrix.SENSITIVE

    if not differs(tuple(tried)):
        return
    smallest = smallest_combination(tried, differs)
    names = tuple(f.name for f in smallest)
    result.combination = list(names)
    row = rows[names]
    row.pin = "; ".join(f.pin(machine) for f in smallest)
    result.combination_row = row


def _run_all(
    jobs: list[tuple[str, Callable[[], RunRecord]]], parallel: int, stop: threading.Event
) -> dict[str, RunRecord]:
    """Every run, `parallel` at a time, each in a copy of this context (progress reaches one reporter)."""
    if parallel <= 1:
        return {name: run() for name, run in jobs}
    progress.say(f"{len(jobs)} runs, {parallel} at a time")
    with ThreadPoolExecutor(max_workers=parallel) as pool:
        futures = {name: pool.submit(contextvars.copy_context().run, run) for name, run in jobs}
        try:
            return {name: future.result() for name, future in futures.items()}
        except BaseException:
            stop.set()  # a Ctrl-C or an error: stop the runs still going, then let it through
            raise
