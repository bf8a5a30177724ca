"""Output folders paired by structure: names that differ while what lies under them pairs file for file are
run-specific names, listed as such, and the values that repeat them are excused by that pairing alone."""

from __future__ import annotations

import json
from pathlib import Path

from reprobox import compare
from reprobox.guest.hashing import hash_outputs
from reprobox.records.manifest import RunRecord
from reprobox.runspecific import NAME_PART, PAIRED_FOLDER, pair_by_structure

EXPERIMENTS = ("620747704030951529", "118254366004327714")  # MLflow: an experiment made by name
RUNS = ("8b1ddba06a1947bc8555232a1573b850", "219cd6ee86f742dd847c57de4e6992a9")


def mlflow_paths(run: int) -> list[str]:
    experiment, run_id = EXPERIMENTS[run], RUNS[run]
    inside = ("meta.yaml", "metrics/loss", "params/lr", "tags/mlflow.runName")
    return [f"mlruns/{experiment}/meta.yaml", *(f"mlruns/{experiment}/{run_id}/{p}" for p in inside)]


def test_nested_random_folders_pair_file_for_file() -> None:
    found = pair_by_structure(mlflow_paths(0), mlflow_paths(1))
    assert sorted(found.files) == sorted(zip(mlflow_paths(0), mlflow_paths(1), strict=True))
    assert [(f.a, f.b) for f in found.folders] == [
        (f"mlruns/{EXPERIMENTS[0]}", f"mlruns/{EXPERIMENTS[1]}"),
        (f"mlruns/{EXPERIMENTS[0]}/{RUNS[0]}", f"mlruns/{EXPERIMENTS[1]}/{RUNS[1]}"),
    ]
    assert found.name_parts(f"mlruns/{EXPERIMENTS[0]}/{RUNS[0]}/params/lr", 0) == (RUNS[0], EXPERIMENTS[0])
    assert found.name_parts(f"mlruns/{EXPERIMENTS[1]}/meta.yaml", 1) == (EXPERIMENTS[1],)


def test_the_differing_part_of_a_name_is_the_runs_own_inside_the_folder() -> None:
    """W&B: offline-run-<time>-<id>/ holds run-<id>.wandb; the id is the part that differs."""
    a = [
        "wandb/offline-run-<time>-2n5uba5i/run-2n5uba5i.wandb",
        "wandb/offline-run-<time>-2n5uba5i/logs/debug.log",
    ]
    b = [
        "wandb/offline-run-<time>-xn2yp0sq/run-xn2yp0sq.wandb",
        "wandb/offline-run-<time>-xn2yp0sq/logs/debug.log",
    ]
    found = pair_by_structure(a, b)
    assert sorted(found.files) == sorted(zip(a, b, strict=True))
    (folder,) = found.folders
    assert (folder.parts_a, folder.parts_b) == (("2n5uba5i",), ("xn2yp0sq",))


def test_folders_whose_contents_do_not_pair_stay_unpaired() -> None:
    assert not pair_by_structure(
        ["out/aaa111/model.pt"], ["out/bbb222/model.pt", "out/bbb222/extra.pt"]
    ).files
    assert not pair_by_structure(["out/aaa111/model.pt"], ["out/bbb222/other.pt"]).files


def test_two_candidate_folders_on_a_side_pair_nothing() -> None:
    found = pair_by_structure(["out/aaa/m.pt"], ["out/bbb/m.pt", "out/ccc/m.pt"])
    assert not found.files and not found.folders


def test_a_renamed_file_is_no_folder() -> None:
    assert not pair_by_structure(["model-1f3a.pt"], ["model-9c2e.pt"]).files


def test_unpaired_files_beside_a_paired_folder_are_left_out() -> None:
    found = pair_by_structure(["x/aaa111/m.pt", "only-a.txt"], ["x/bbb222/m.pt"])
    assert found.files == [("x/aaa111/m.pt", "x/bbb222/m.pt")]


# --- through hashing and compare ------------------------------------------------------------------


def make_run(root: Path, name: str, run: int, *, status: int = 3) -> RunRecord:
    run_dir = root / "runs" / "job" / name
    outputs = run_dir / "outputs"
    experiment, run_id = EXPERIMENTS[run], RUNS[run]
    folder = outputs / "mlruns" / experiment / run_id
    (folder / "metrics").mkdir(parents=True)
    (outputs / "mlruns" / experiment / "meta.yaml").write_text(
        f"experiment_id: '{experiment}'\nname: by-name\nartifact_location: file://{outputs}/mlruns/{experiment}\n"
    )
    (folder / "meta.yaml").write_text(
        f"run_id: {run_id}\nexperiment_id: '{experiment}'\n"
        f"artifact_uri: file://{outputs}/mlruns/{experiment}/{run_id}/artifacts\nstatus: {status}\n"
    )
    (folder / "metrics" / "loss").write_text("0 0.5 0\n")
    data = {
        "run_id": name,
        "status": "succeeded",
        "job": {},
        "checkpoints": [d.to_json() for d in hash_outputs(outputs, [])],
    }
    return RunRecord(run_dir.resolve(), data)


def test_an_mlflow_experiment_made_by_name_reproduces(tmp_path: Path) -> None:
    result = compare.compare_runs([make_run(tmp_path, "r1", 0), make_run(tmp_path, "r2", 1)])
    assert result.grade == compare.REPRODUCED, result.sentence
    files = [e for e in result.run_specific if e["name"] == "<file>"]
    assert len(files) == 3 and all(e["reason"] == f"file name: {PAIRED_FOLDER}" for e in files)
    assert {e["folder"]["a"] for e in files} == {
        f"mlruns/{EXPERIMENTS[0]}",
        f"mlruns/{EXPERIMENTS[0]}/{RUNS[0]}",
    }
    values = {(e["checkpoint"].rsplit("/", 1)[-1], e["name"]): e["reason"] for e in result.run_specific}
    for key in ("run_id", "experiment_id", "artifact_uri"):
        assert NAME_PART in values[("meta.yaml", key)], key
    assert json.dumps(result.to_json())


def test_a_real_difference_under_a_paired_folder_is_still_named(tmp_path: Path) -> None:
    result = compare.compare_runs([make_run(tmp_path, "r1", 0), make_run(tmp_path, "r2", 1, status=4)])
    assert result.grade == compare.NOT_REPRODUCIBLE
    assert [e["name"] for e in result.value_differences] == ["status"]


def test_a_containers_small_pid_in_a_file_name_pairs_only_by_the_runs_own_record() -> None:
    """In a container the job is pid 7 or 8: TensorBoard-style names then differ by it, and by the clock."""
    from reprobox.runspecific import RunContext, Window, mask_file_name

    def run(start: float, pids: frozenset[int]) -> RunContext:
        return RunContext(
            paths=(), run_id="r", hostname="reprobox", window=Window(start, start + 20), pids=pids
        )

    start_a, start_b = 1795840725.0, 1795840790.0
    name_a = f"runs/events.out.tfevents.{start_a + 0.34}.host.8.0"
    name_b = f"runs/events.out.tfevents.{start_b + 0.71}.host.7.0"
    masked_a, why = mask_file_name(name_a, run(start_a, frozenset({1, 8})))
    masked_b, _ = mask_file_name(name_b, run(start_b, frozenset({1, 7})))
    assert masked_a == masked_b and "a process id" in why
    # without the record, 8 and 7 are numbers like any other: the names stay apart
    unrecorded = mask_file_name(name_b, run(start_b, frozenset({1, 9})))[0]
    assert unrecorded != masked_a
