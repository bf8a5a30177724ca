"""Means, sums and spreads of durations a run measured in a row, excused by its own record of its clocks.

scikit-learn's GridSearchCV times each fold with ``time.time()`` and keeps, per candidate, the mean and
standard deviation of its folds' fit and score times: in ``cv_results_`` (CSV cells, full digits) and as
arrays inside the joblib file. Each is found, to the digit, among the figures of the series of durations
the record holds; an array is excused element by element. Controls: numbers drawn from a seeded generator
or from the OS's entropy and named ``fit_time``, a rounded mean, and an array one of whose elements no
record explains, all stay real differences.
"""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from reprobox import compare
from reprobox.guest import hashing
from reprobox.records.manifest import RunRecord
from reprobox.runspecific import (
    DURATION_OF_CLOCK,
    SERIES_MEAN,
    SERIES_SPREAD,
    SERIES_SUM,
    RunContext,
    judge_elements,
    judge_value,
    mask,
)
from reprobox.runspecific._durations import explains
from reprobox.runspecific._names import names_computed, reason_by_key

CANDIDATES, FOLDS = 6, 5
SITES = ("_validation.py:834", "_validation.py:881", "_validation.py:885")  # start, fit end, score end


def search_readings(seed: int) -> tuple[dict[str, Any], np.ndarray, np.ndarray]:
    """A grid search's record: for every candidate and fold a reading where the fold starts, one after
    fit and one after score (times as a machine's clock gives them); and the fold times it computed."""
    jitter = np.random.default_rng(seed)
    t = 1_764_000_000.0 + seed
    values: list[float] = []
    sites: list[int] = []
    fit, score = np.zeros((CANDIDATES, FOLDS)), np.zeros((CANDIDATES, FOLDS))
    for candidate in range(CANDIDATES):
        for fold in range(FOLDS):
            start = t
            t += 0.008 + 0.004 * float(jitter.random())
            fitted = t
            fit[candidate, fold] = fitted - start  # fit_time = time.time() - start_time
            t += 0.004 + 0.001 * float(jitter.random())
            score[candidate, fold] = t - start - fit[candidate, fold]  # as _fit_and_score writes it
            values += [start, fitted, t]
            sites += [0, 1, 2]
            t += 0.0003
    entry = {"pid": 7, "clock": "time", "site_names": list(SITES), "sites": sites, "values": values}
    facts = {"clocks": [{**entry, "skipped": 0, "dropped": 0}], "draws": [], "memory": [], "dropped": 0}
    return facts, fit, score


def cv_results(times: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean and standard deviation per candidate, as GridSearchCV's ``_store`` computes them."""
    means = np.average(times, axis=1)
    return means, np.sqrt(np.average((times - means[:, np.newaxis]) ** 2, axis=1))


def context(facts: dict[str, Any]) -> RunContext:
    return RunContext.from_record("/runs/j/r1", {"run_facts": {"readings": facts}})


@pytest.fixture(scope="module")
def runs() -> list[tuple[RunContext, np.ndarray, np.ndarray]]:
    found = []
    for seed in (1, 2):
        facts, fit, score = search_readings(seed)
        found.append((context(facts), fit, score))
    return found


def test_fold_time_means_and_spreads_are_figures_of_the_record(runs) -> None:
    run, fit, score = runs[0]
    assert run.clock is not None
    for times in (fit, score):
        means, spreads = cv_results(times)
        assert {explains(run.clock, float(m), "mean_fit_time") for m in means} == {SERIES_MEAN}
        assert {explains(run.clock, float(s), "std_fit_time") for s in spreads} == {SERIES_SPREAD}
    total = float(fit[0].sum())
    assert explains(run.clock, total * 1000, "fit_ms") == SERIES_SUM  # a sum of them, in ms
    assert explains(run.clock, float(fit[2, 3]), "fit_time") == DURATION_OF_CLOCK  # one fold's own


def test_a_mean_is_explained_in_its_own_run_only(runs) -> None:
    (run_a, fit_a, _), (run_b, fit_b, _) = runs
    mean_a, mean_b = float(cv_results(fit_a)[0][0]), float(cv_results(fit_b)[0][0])
    excuse = judge_value("0.mean_fit_time", mean_a, mean_b, run_a, run_b)
    assert excuse is not None and excuse.reason == SERIES_MEAN and excuse.evidence == "the run's own record"
    assert judge_value("0.mean_fit_time", mean_b, mean_a, run_a, run_b) is None  # each from the other run


def test_a_cell_of_a_table_is_masked_with_its_exponent(runs) -> None:
    run, _, score = runs[0]
    spread = float(cv_results(score)[1][1])
    cell = format(spread, ".16e")  # 1.2345...e-03: the exponent is part of the number
    assert mask(f"0,{cell} s", run) == ("0,<duration> s", {SERIES_SPREAD})


def test_seeded_and_entropy_numbers_named_fit_time_are_never_excused(runs) -> None:
    """The controls: whatever they are named, numbers the record does not hold to the digit are real."""
    (run_a, fit_a, _), (run_b, _, _) = runs
    assert run_a.clock is not None
    seeded = np.random.default_rng(0).random(CANDIDATES) * 0.01  # the fold times' own range
    assert {explains(run_a.clock, float(v), "mean_fit_time") for v in seeded} == {None}
    other = np.random.default_rng(1).random(CANDIDATES) * 0.01
    pairs = list(zip(seeded.tolist(), other.tolist(), strict=True))
    assert judge_elements("cv_results_.mean_fit_time", pairs, run_a, run_b) is None
    drawn = [int.from_bytes(os.urandom(2), "little") / 1000 for _ in range(2)]
    assert judge_value("fit_time", drawn[0], drawn[1] + 0.5, run_a, run_b) is None
    rounded = round(float(cv_results(fit_a)[0][0]), 3)  # a mean, rounded: any number is near some mean
    assert explains(run_a.clock, rounded, "mean_fit_time") not in (SERIES_MEAN, SERIES_SUM, SERIES_SPREAD)


def test_an_array_is_excused_only_when_every_differing_element_is(runs) -> None:
    (run_a, fit_a, _), (run_b, fit_b, _) = runs
    means_a, means_b = cv_results(fit_a)[0].tolist(), cv_results(fit_b)[0].tolist()
    pairs = list(zip(means_a, means_b, strict=True))
    excuse = judge_elements("cv_results_.mean_fit_time", pairs, run_a, run_b)
    assert excuse is not None and SERIES_MEAN in excuse.reason and "6 differing elements" in excuse.reason
    assert judge_elements("cv_results_.mean_fit_time", [*pairs[:-1], (0.0123, 0.0124)], run_a, run_b) is None
    assert judge_elements("cv_results_.mean_test_score", pairs, run_a, run_b) is None  # a computed score


def test_the_time_a_score_took_is_a_duration_not_a_score() -> None:
    assert not names_computed("cv_results_.mean_score_time") and names_computed("mean_test_score")
    assert reason_by_key("3.std_score_time") is not None and reason_by_key("val_loss") is None


def make_run(root: Path, run_id: str, facts: dict[str, Any], arrays: dict[str, np.ndarray]) -> RunRecord:
    run_dir = root / "runs" / "job" / run_id
    outputs = run_dir / "outputs"
    outputs.mkdir(parents=True)
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    (outputs / "search.npz").write_bytes(buffer.getvalue())
    record = {
        "run_id": run_id,
        "status": "succeeded",
        "job": {},
        "run_facts": {"readings": facts},
        "checkpoints": [d.to_json() for d in hashing.hash_outputs(outputs, [])],
    }
    return RunRecord(run_dir.resolve(), record)


def test_a_checkpoints_arrays_of_fold_times_are_excused_element_by_element(tmp_path: Path) -> None:
    pytest.importorskip("torch")  # arrays are read back for comparison as torch reads them
    built = []
    for seed in (1, 2):
        facts, fit, score = search_readings(seed)
        weights = np.linspace(0.0, 1.0, 12)
        arrays = {"mean_fit_time": cv_results(fit)[0], "std_score_time": cv_results(score)[1], "w": weights}
        built.append((facts, arrays))
    runs = [make_run(tmp_path, f"r{i}", facts, arrays) for i, (facts, arrays) in enumerate(built)]
    result = compare.compare_runs(runs)
    assert result.grade == compare.REPRODUCED, result.sentence
    reasons = {e["name"]: e["reason"] for e in result.run_specific}
    assert SERIES_MEAN in reasons["mean_fit_time"] and SERIES_SPREAD in reasons["std_score_time"]

    # the control: the same names, but one run's array drawn from a seeded generator
    facts, arrays = built[1]
    control = {**arrays, "mean_fit_time": np.random.default_rng(5).random(CANDIDATES) * 0.01}
    runs = [runs[0], make_run(tmp_path, "r-control", facts, control)]
    result = compare.compare_runs(runs)
    assert result.grade == compare.NOT_REPRODUCIBLE
    assert [d["name"] for d in result.differences] == ["mean_fit_time"]
