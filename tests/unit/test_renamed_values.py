"""Values whose names hold their run's own facts (tensorboardX's ``export_scalars_to_json`` keys each
series by its log folder, ``runs/<date>_<host>/...``) pair across runs by the runs' records, and their
contents are still compared: a real difference under such a name is named, and a name the records do
not explain stays present in one run only."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

from reprobox import compare
from reprobox.guest.hashing import hash_outputs
from reprobox.records.manifest import RunRecord
from reprobox.runspecific import TIMESTAMP

STARTS = (1795929818.0, 1795929905.0)  # two runs, a minute and a half apart
SERIES = ("xsinx", "xcosx")


def stamp(moment: float, layout: str) -> str:
    return datetime.fromtimestamp(moment, timezone.utc).strftime(layout)


def make_run(root: Path, run: int, scalars: dict[str, list[list[float]]]) -> RunRecord:
    run_dir = root / "runs" / "job" / f"r{run}"
    outputs = run_dir / "outputs"
    outputs.mkdir(parents=True)
    (outputs / "all_scalars.json").write_text(json.dumps(scalars))
    start = STARTS[run]
    data = {
        "run_id": f"r{run}",
        "status": "succeeded",
        "job": {},
        "started_at": stamp(start, "%Y-%m-%dT%H:%M:%SZ"),
        "ended_at": stamp(start + 30, "%Y-%m-%dT%H:%M:%SZ"),
        "checkpoints": [d.to_json() for d in hash_outputs(outputs, [])],
    }
    return RunRecord(run_dir.resolve(), data)


def exported(run: int, *, folder: str | None = None, value: float = 0.5) -> dict[str, list[list[float]]]:
    """tensorboardX's layout: {"runs/<date>_<host>/data/group/<series>": [[wall time, step, value], ...]}."""
    start = STARTS[run]
    logdir = folder or f"runs/{stamp(start + 1, '%b%d_%H-%M-%S')}_trainer"
    return {
        f"{logdir}/data/group/{name}": [[start + 2 + step / 10, step, value * step] for step in range(3)]
        for name in SERIES
    }


def test_values_under_the_runs_own_log_folder_pair_by_its_clock(tmp_path: Path) -> None:
    result = compare.compare_runs([make_run(tmp_path, 0, exported(0)), make_run(tmp_path, 1, exported(1))])
    assert result.grade == compare.REPRODUCED, result.sentence
    assert not result.value_differences
    assert len(result.run_specific) == 2 * 3  # each [wall time, step, value], under its renamed series
    reasons = {e["reason"] for e in result.run_specific}
    assert reasons == {f"value name: {TIMESTAMP}; its value: {TIMESTAMP}"}


def test_equal_values_under_renamed_names_are_listed_by_their_names(tmp_path: Path) -> None:
    """Without wall times, only the names differ: each value is listed once, with both its names."""
    a = {k: [row[1:] for row in rows] for k, rows in exported(0).items()}
    b = {k: [row[1:] for row in rows] for k, rows in exported(1).items()}
    result = compare.compare_runs([make_run(tmp_path, 0, a), make_run(tmp_path, 1, b)])
    assert result.grade == compare.REPRODUCED, result.sentence
    entry = result.run_specific[0]
    assert entry["reason"] == f"value name: {TIMESTAMP}"
    assert entry["a"] == entry["name"] and entry["b"] != entry["a"]


def test_a_real_difference_under_a_renamed_name_is_named(tmp_path: Path) -> None:
    result = compare.compare_runs(
        [make_run(tmp_path, 0, exported(0)), make_run(tmp_path, 1, exported(1, value=0.75))]
    )
    assert result.grade == compare.NOT_REPRODUCIBLE
    names = sorted(e["name"] for e in result.value_differences)
    assert len(names) == 2 * 2 and all(n.startswith("runs/") for n in names)  # steps 1 and 2 differ
    assert all("in the other run" in e["note"] for e in result.value_differences)


def test_a_name_the_records_do_not_explain_stays_in_one_run_only(tmp_path: Path) -> None:
    """A date outside the run's window (a seeded or a fixed one) names no run: nothing pairs."""
    stranger = f"runs/{stamp(STARTS[1] + 86400 * 40, '%b%d_%H-%M-%S')}_trainer"
    result = compare.compare_runs(
        [make_run(tmp_path, 0, exported(0)), make_run(tmp_path, 1, exported(1, folder=stranger))]
    )
    assert result.grade == compare.NOT_REPRODUCIBLE
    assert {e.get("note") for e in result.value_differences} == {"present in one run only"}


def test_names_that_mask_alike_within_a_run_pair_nothing(tmp_path: Path) -> None:
    """Two of run a's names mask to one: which of them is run b's is not known, so neither pairs."""
    a = exported(0)
    a.update(exported(0, folder=f"runs/{stamp(STARTS[0] + 3, '%b%d_%H-%M-%S')}_trainer"))
    result = compare.compare_runs([make_run(tmp_path, 0, a), make_run(tmp_path, 1, exported(1))])
    assert result.grade == compare.NOT_REPRODUCIBLE
    assert {e.get("note") for e in result.value_differences} == {"present in one run only"}
