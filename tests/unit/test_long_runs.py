"""Long runs end to end on the local runtime: exact resume (`verify --resume-at`), segment spot-checks
(`spot-check`), and a reviewer's segments (`reproduce --segments`), on tests/jobs/resume (12 steps, a
resumable checkpoint every 4), with faults planted the way they happen: a checkpoint that forgets
state, a checkpoint fabricated after the fact, a checkpoint altered on disk.

Checks whose outcome depends on torch (its RNG state digested by the trail) run the torch job; spot-checks,
reproduced segments and resume arguments the job mishandles run its NumPy twin, tests/jobs/resume-numpy."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from reprobox import cli
from reprobox.errors import SpecError
from reprobox.guest.hashing import hash_checkpoint
from reprobox.jobfile import load_job
from reprobox.jobfile.checkpoint_patterns import FRAMEWORK_PATTERNS, find_resumable
from reprobox.records.manifest import read_record, write_record
from reprobox.resume import spot

JOB = Path(__file__).parents[1] / "jobs" / "resume"
NUMPY_JOB = Path(__file__).parents[1] / "jobs" / "resume-numpy"


def command(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any]]:
    """Exit code and JSON of a command (an error's too: {"exit_code", "lines"})."""
    capsys.readouterr()
    code = cli.main([*args, "--json", "-q"])
    return code, json.loads(capsys.readouterr().out)


def job_copy(tmp_path: Path, forget: str = "", *, accumulate: int = 1, source: Path = JOB) -> Path:
    job = tmp_path / f"job-{forget or 'exact'}"
    shutil.copytree(source, job)
    text = (job / "job.yaml").read_text().replace('FORGET: ""', f'FORGET: "{forget}"')
    text = text.replace('--width, "16"]', f'--width, "16", --accumulate, "{accumulate}"]')
    (job / "job.yaml").write_text(text)
    return job / "job.yaml"


@pytest.fixture(scope="module")
def verified(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One verify of the NumPy job (two bit-identical runs and their attestation), shared below."""
    root = tmp_path_factory.mktemp("long-run")
    job = root / "job"
    shutil.copytree(NUMPY_JOB, job)
    runs, attestation = root / "runs", root / "att.json"
    code = cli.main(
        [
            "verify",
            str(job),
            "--runtime",
            "local",
            "--runs-dir",
            str(runs),
            "--attestation",
            str(attestation),
            "-q",
        ]
    )
    assert code == 0
    run = sorted(p for p in (runs / "resume-numpy").iterdir() if p.name[0].isdigit())[0]
    return {"job": job, "runs": runs, "attestation": attestation, "run": run}


def bad_resume(tmp_path: Path, section: str) -> str:
    job = tmp_path / "job.yaml"
    (tmp_path / "train.py").write_text("")
    job.write_text(f"version: 1\nname: r\ncommand: [python, train.py]\nresume:\n{section}")
    with pytest.raises(SpecError) as caught:
        load_job(job)
    return str(caught.value.problems[0])


@pytest.mark.parametrize(
    ("section", "field", "says"),
    [
        (
            "  checkpoint: ckpt/last.pt\n  from: [--resume, '{checkpoint}']\n  stop: [--stop, '{stop}']\n",
            "resume.checkpoint",
            "{step} exactly once",
        ),
        (
            "  checkpoint: ckpt/{step}.pt\n  from: [--resume]\n  stop: [--stop, '{stop}']\n",
            "resume.from",
            "{checkpoint}",
        ),
        (
            "  checkpoint: ckpt/{step}.pt\n  from: [--resume, '{checkpoint}']\n  stop: [--max-steps]\n",
            "resume.stop",
            "{stop}",
        ),
        ("  checkpoint: ckpt/{step}.pt\n  from: [--resume, '{checkpoint}']\n", "resume.stop", "is missing"),
        (
            "  checkpoint: ../{step}.pt\n  from: [--r, '{checkpoint}']\n  stop: [--s, '{stop}']\n",
            "resume.checkpoint",
            "outside the outputs folder",
        ),
        (
            "  checkpoint: ckpt/{step}-{epoch}.pt\n  from: [--r, '{checkpoint}']\n  stop: [--s, '{stop}']\n",
            "resume.checkpoint",
            "{epoch}",
        ),
        ("  framework: keras\n", "resume.framework", "transformers, lightning"),
        ("  framework: transformers\n  from: [--r, '{checkpoint}']\n", "resume.from", "not used"),
    ],
)
def test_a_bad_resume_section_names_its_field(tmp_path: Path, section: str, field: str, says: str) -> None:
    problem = bad_resume(tmp_path, section)
    assert f" {field}:" in problem and says in problem, problem


def test_framework_jobs_need_no_arguments(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text("")
    (tmp_path / "job.yaml").write_text(
        "version: 1\nname: r\ncommand: [python, train.py]\nresume: {framework: lightning}\n"
    )
    resume = load_job(tmp_path / "job.yaml").resume
    assert (
        resume is not None and resume.checkpoint == FRAMEWORK_PATTERNS["lightning"] and not resume.resume_args
    )


def test_resumable_checkpoints_are_files_or_folders() -> None:
    files = ["ckpt/step-10.pt", "ckpt/step-2.pt", "model.pt", "ckpt/step-x.pt"]
    assert [(c.step, c.path) for c in find_resumable(files, "ckpt/step-{step}.pt")] == [
        (2, "ckpt/step-2.pt"),
        (10, "ckpt/step-10.pt"),
    ]
    hf = ["hf/checkpoint-5/model.safetensors", "hf/checkpoint-5/optimizer.pt", "hf/model.safetensors"]
    (found,) = find_resumable(hf, FRAMEWORK_PATTERNS["transformers"])
    assert (found.step, found.path, found.is_folder, len(found.files)) == (5, "hf/checkpoint-5", True, 2)
    lightning = ["logs/version_0/checkpoints/epoch=1-step=28.ckpt", "logs/version_0/metrics.csv"]
    (found,) = find_resumable(lightning, FRAMEWORK_PATTERNS["lightning"])
    assert found.step == 28


def test_spot_check_replays_drawn_segments_and_records_them(verified: dict[str, Path], capsys) -> None:
    run, runs = verified["run"], verified["runs"]
    code, data = command(
        capsys, "spot-check", str(run), "--segments", "2", "--parallel", "2", "--runs-dir", str(runs)
    )
    assert code == 0, data["sentence"]
    assert data["verdict"] == "identical" and data["segments_total"] == 3  # 0-4, 4-8, 8-12
    assert [s["match"] for s in data["segments"]] == [True, True]
    assert data["seed_source"] == "checkpoint hashes" and 0 < data["replayed_share"] <= 1
    # the draw is the run's, not the checker's: planned again, the same segments come out
    check, chosen = spot.plan_spot_check(read_record(run), 2, None)
    assert [(s.start, s.end) for s in chosen] == [(s["start"], s["end"]) for s in data["segments"]]
    assert check.seed == data["seed"]
    # kept in the run, shown by its report, and published by an attestation of it
    assert json.loads((run / "spot-check.json").read_text())["verdict"] == "identical"
    report = run.parent / "report.md"
    assert cli.main(["report", str(run), "--markdown", str(report), "-q"]) == 0
    assert "Spot-check of run" in report.read_text()
    attested = run.parent / "again.json"
    assert cli.main(["attest", str(run), "-o", str(attested), "-q"]) == 0
    predicate = json.loads(attested.read_text())["predicate"]
    assert [c["step"] for c in predicate["resumable"]] == [4, 8, 12]
    assert predicate["spot_check"]["segments"][0]["match"] is True


def fabricate(run: Path, step: int) -> Path:
    """A copy of the run whose step-`step` checkpoint was replaced after training, its record rehashed
    to match (what a made-up result looks like: consistent with itself, not with its training)."""
    fake = run.parent / f"{run.name}-fabricated-{step}"
    shutil.copytree(run, fake, symlinks=True)
    path = fake / "outputs" / "ckpt" / f"step-{step}.npz"
    with np.load(path) as saved:
        state = dict(saved)
    state["model.0.weight"] += 1e-3
    np.savez(path, **state)
    record = read_record(fake)
    entry = hash_checkpoint(path, relative_to=fake / "outputs").to_json()
    checkpoints = [entry if c["path"] == entry["path"] else c for c in record.checkpoints]
    write_record(fake, {**record.data, "checkpoints": checkpoints})
    return fake


def test_a_fabricated_segment_is_caught_and_an_altered_checkpoint_is_not_replayed(
    verified: dict[str, Path], capsys
) -> None:
    runs = verified["runs"]
    fake = fabricate(verified["run"], 8)
    segments, _total = spot.segments_of(read_record(fake))
    seed = next(s for s in range(100) if [x.start for x in spot.choose(segments, 1, s)] == [4])
    code, data = command(
        capsys, "spot-check", str(fake), "--segments", "1", "--seed", str(seed), "--runs-dir", str(runs)
    )
    assert code == 1 and data["verdict"] == "different"
    (segment,) = data["segments"]
    assert (segment["start"], segment["end"], segment["match"]) == (4, 8, False)
    assert "model.0.weight" in segment["sentence"] and "ckpt/step-8.npz" in segment["sentence"]

    altered = fabricate(verified["run"], 4)
    (altered / "outputs" / "ckpt" / "step-8.npz").write_bytes(b"not the recorded checkpoint")
    seed = next(s for s in range(100) if [x.start for x in spot.choose(segments, 1, s)] == [8])
    replayed = runs / "resume-numpy" / spot.REPLAYS_DIR / "resume-numpy"
    replays = len(list(replayed.iterdir()))
    code, data = command(
        capsys, "spot-check", str(altered), "--segments", "1", "--seed", str(seed), "--runs-dir", str(runs)
    )
    assert code == 1
    (segment,) = data["segments"]
    assert segment["outcome"] == "altered" and "ckpt/step-8.npz" in segment["sentence"]
    assert len(list(replayed.iterdir())) == replays  # nothing ran


def test_reproduce_segments_from_the_published_checkpoints(verified: dict[str, Path], capsys) -> None:
    code, data = command(
        capsys,
        "reproduce",
        str(verified["attestation"]),
        *("--code", str(verified["job"]), "--published", str(verified["run"]), "--runtime", "local"),
        *("--segments", "1", "--segments-seed", "3", "--runs-dir", str(verified["runs"])),
    )
    assert code == 0, data["sentence"]
    assert data["verdict"] == "segments-reproduced" and len(data["segments"]["segments"]) == 1
    assert data["segments"]["seed_source"] == "--seed"
    assert "segments" in Path(data["reports"][0]).read_text().lower()


def test_no_resumable_checkpoints_is_bad_input(verified: dict[str, Path], capsys) -> None:
    """A run whose job's pattern matches none of its files (here: its record rewritten to say so)."""
    run = verified["run"].parent / "no-resumable"
    shutil.copytree(verified["run"], run, symlinks=True)
    record = read_record(run)
    job = {**record.job_spec, "resume": {**record.job_spec["resume"], "checkpoint": "none/{step}.pt"}}
    write_record(run, {**record.data, "job": job})
    code, data = command(capsys, "spot-check", str(run), "--segments", "1")
    assert code == 2
    assert "has no resumable checkpoints" in " ".join(data["error"]["lines"])


def resume_at(
    capsys: pytest.CaptureFixture[str], job: Path, tmp_path: Path, step: int
) -> tuple[int, dict[str, Any]]:
    runs = tmp_path / "runs"
    return command(
        capsys,
        "verify",
        str(job),
        "--resume-at",
        str(step),
        "--parallel",
        "2",
        "--runtime",
        "local",
        "--runs-dir",
        str(runs),
    )


def test_an_exact_resume_passes(tmp_path: Path, capsys) -> None:
    code, data = resume_at(capsys, job_copy(tmp_path), tmp_path, 4)
    assert code == 0, data["sentence"]
    assert data["resume"]["exact"] is True and data["resume"]["state_differs"] == []
    assert data["sentence"].startswith("exact resume: stopped after step 4")
    resumed = read_record(data["resume"]["resumed_run"])
    assert resumed.resumed_at == 4
    paths = {c["path"] for c in data["checkpoints"]}
    assert paths == {"ckpt/step-8.pt", "ckpt/step-12.pt", "model.pt"}  # after step 4 only


def test_a_checkpoint_that_forgets_the_torch_rng_is_named(tmp_path: Path, capsys) -> None:
    code, data = resume_at(capsys, job_copy(tmp_path, "torch-rng"), tmp_path, 4)
    assert code == 1
    assert data["resume"]["exact"] is False and data["resume"]["first_differing_step"] == 5
    assert [s["key"] for s in data["resume"]["state_differs"]] == ["rng.torch"]
    assert "torch RNG state differs" in data["sentence"] and "torch.get_rng_state()" in data["sentence"]


def test_checkpoints_numbered_by_micro_batch_line_up_by_optimizer_step(tmp_path: Path, capsys) -> None:
    """Gradient accumulation: the job counts micro-batches (checkpoint step-8.pt after 4 optimizer steps).
    The resumed run's trail goes on from optimizer step 4, so the forgotten RNG is named alone."""
    code, data = resume_at(capsys, job_copy(tmp_path, "torch-rng", accumulate=2), tmp_path, 8)
    assert code == 1
    assert data["resume"]["optimizer_step"] == 4 and data["resume"]["first_differing_step"] == 5
    assert [s["key"] for s in data["resume"]["state_differs"]] == ["rng.torch"]
    assert "after resuming at step 8 the torch RNG state differs" in data["sentence"]
    assert "differ from optimizer step 5" in data["sentence"]


def test_a_stop_argument_the_job_ignores_is_bad_input(tmp_path: Path, capsys) -> None:
    code, data = resume_at(capsys, job_copy(tmp_path, "max-steps", source=NUMPY_JOB), tmp_path, 4)
    assert code == 2
    text = " ".join(data["error"]["lines"])
    assert "resume.stop did not stop the job after step 4" in text and "checkpoint of step 8" in text


def test_no_checkpoint_at_the_step_lists_the_saved_ones(tmp_path: Path, capsys) -> None:
    code, data = resume_at(capsys, job_copy(tmp_path, "stop-checkpoint", source=NUMPY_JOB), tmp_path, 6)
    assert code == 2
    text = " ".join(data["error"]["lines"])
    assert "no resumable checkpoint at step 6" in text and "steps 4 up to there" in text
