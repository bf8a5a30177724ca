"""`reprobox reproduce` on the local runtime: real jobs, attested, then reproduced from fresh copies.

The author's job is a NumPy one (publish-small-npz) wherever torch is not the point; threads-pinned's
thread count is torch's own."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from publishing import JOBS, edit_attestation, fresh_copy, publish

from reprobox import attest, cli, stackdiff
from reprobox.engine import ImageInfo
from reprobox.errors import EnvironmentProblem, SpecError, UsageError
from reprobox.records.manifest import RunRecord
from reprobox.reproduce import (
    BIT_IDENTICAL,
    CODE_MISMATCH,
    DIFFERENT_STACK,
    IMAGE_MISMATCH,
    NONDETERMINISTIC,
    SENTENCE_IDENTICAL,
    ReproduceOptions,
    reproduce,
)

THREAD_FIELDS = {"software.threads.torch_intra_op", "software.threads.torch_inter_op"}


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[RunRecord]]:
    return publish(JOBS / "publish-small-npz", tmp_path_factory.mktemp("author"), runs=2)


@pytest.fixture(scope="module")
def one_thread(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[RunRecord]]:
    """A tiny torch job pinned to one thread (examples/tiny-gpt's case is test_explain_runs.py's)."""
    return publish(JOBS / "threads-pinned", tmp_path_factory.mktemp("one-thread-author"), runs=1)


def test_a_fresh_copy_reproduces_bit_identically(small, tmp_path: Path, capsys) -> None:
    attestation = fresh_copy(small[0], tmp_path / "clone")
    runs = tmp_path / "reviewer-runs"
    capsys.readouterr()
    code = cli.main(
        ["reproduce", str(attestation), "--runtime", "local", "--runs-dir", str(runs), "--json", "-q"]
    )
    data = json.loads(capsys.readouterr().out)
    assert code == 0
    assert data["verdict"] == BIT_IDENTICAL and data["sentence"] == SENTENCE_IDENTICAL
    assert data["code_dir"] == str(tmp_path / "clone")  # found around the attestation
    assert data["settings"]["seed"] == 7 and data["settings"]["threads"]["used"] == 1
    assert data["comparison"]["verdict"] == "identical"
    reports = [Path(p) for p in data["reports"]]
    assert {p.name for p in reports} == {"report.md", "report.html", "result.json"}
    markdown = next(p for p in reports if p.suffix == ".md").read_text()
    assert f"**{SENTENCE_IDENTICAL}** (grade bit-identical; exit code 0)" in markdown
    assert "id='reproduction'" in next(p for p in reports if p.suffix == ".html").read_text()
    assert json.loads(next(p for p in reports if p.suffix == ".json").read_text())["verdict"] == BIT_IDENTICAL
    assert "not signed" in " ".join(data["notes"])


def test_one_changed_line_names_the_file_and_runs_nothing(small, tmp_path: Path) -> None:
    attestation = fresh_copy(small[0], tmp_path / "clone")
    train = tmp_path / "clone" / "train.py"
    train.write_text(train.read_text().replace("range(5)", "range(6)"))
    runs = tmp_path / "runs"
    result = reproduce(attestation, ReproduceOptions(runtime="local", runs_dir=runs))
    assert (result.verdict, result.exit_code) == (CODE_MISMATCH, 2)
    assert result.code_changes == {"added": [], "removed": [], "changed": ["train.py"]}
    assert "train.py" in result.sentence
    assert not runs.exists()


def test_an_extra_and_a_missing_file_are_named(small, tmp_path: Path, capsys) -> None:
    attestation = fresh_copy(small[0], tmp_path / "clone")
    (tmp_path / "clone" / "notes.txt").write_text("mine\n")
    (tmp_path / "clone" / "job.yaml").unlink()
    code = cli.main(
        ["reproduce", str(attestation), "--code", str(tmp_path / "clone"), "--runs-dir", str(tmp_path)]
    )
    out = capsys.readouterr().out
    assert code == 2
    assert "added: notes.txt" in out and "removed: job.yaml" in out


def test_the_code_folder_is_found_around_the_attestation_or_is_the_current_directory(
    small, tmp_path: Path
) -> None:
    attestation = attest.read_attestation(fresh_copy(small[0], tmp_path / "clone"))
    assert attest.locate_code(attestation, tmp_path) == tmp_path / "clone"
    alone = tmp_path / "downloads" / "paper.attestation.json"
    alone.parent.mkdir()
    shutil.copy(attestation.path, alone)
    assert attest.locate_code(attest.read_attestation(alone), tmp_path / "clone") == tmp_path / "clone"


def test_a_job_without_torch_on_another_thread_count_is_a_different_stack(tmp_path: Path) -> None:
    """Its fingerprint is taken outside the job's processes: what it records must still be the job's
    thread variables, or another count would pass for a real nondeterminism on the same stack."""
    attestation, records = publish(JOBS / "claims-follow-threads-numpy", tmp_path / "author", runs=1)
    assert records[0].fingerprint["software"]["threads"]["OMP_NUM_THREADS"] == "2"  # the job file's
    result = reproduce(attestation, ReproduceOptions(runtime="local", runs_dir=tmp_path / "runs", threads=1))
    assert (result.verdict, result.exit_code) == (DIFFERENT_STACK, 1), result.sentence
    assert result.settings["threads"] == {
        "used": 1, "author": 2, "overridden": True, "pinned_by_replay": None
    }  # fmt: skip
    assert "the author's runs used 2" in " ".join(result.notes)
    differing = {d["field"]: (d["author"], d["here"]) for d in result.stack_differences}
    assert differing["software.threads.OMP_NUM_THREADS"] == ("2", "1")


def test_another_thread_count_gives_the_different_stack_sentence(one_thread, tmp_path: Path) -> None:
    attestation, records = one_thread
    runs = tmp_path / "runs"
    result = reproduce(attestation, ReproduceOptions(runtime="local", runs_dir=runs, threads=2))
    assert (result.verdict, result.exit_code) == (DIFFERENT_STACK, 1)
    assert result.sentence.startswith("different stack: bitwise equality not expected; ")
    assert "torch intra-op threads" in result.sentence and "torch inter-op threads" in result.sentence
    assert "pass --published DIR" in result.sentence  # no numbers without the author's files
    numerics = {d["field"] for d in result.stack_differences if d["affects_numerics"]}
    assert numerics >= THREAD_FIELDS
    assert result.differing_tensors > 0 and result.max_abs_difference is None

    within = reproduce(
        attestation,
        ReproduceOptions(
            runtime="local", runs_dir=runs, threads=2, published=records[0].run_dir, tolerance=1.0
        ),
    )
    assert (within.verdict, within.exit_code) == (DIFFERENT_STACK, 0)
    assert within.max_abs_difference is not None and 0 < within.max_abs_difference <= 1.0
    assert (
        f"max difference {within.max_abs_difference:.3g} over {within.differing_tensors} tensors"
        in within.sentence
    )
    assert within.sentence.endswith("within --tolerance 1")
    assert "Differing tensors" in next(p for p in within.reports if p.suffix == ".md").read_text()

    outside = reproduce(
        attestation,
        ReproduceOptions(
            runtime="local", runs_dir=runs, threads=2, published=records[0].run_dir, tolerance=1e-12
        ),
    )
    assert (outside.verdict, outside.exit_code) == (DIFFERENT_STACK, 1)
    assert outside.sentence.endswith("outside --tolerance 1e-12")


def test_tolerance_without_the_authors_files_is_refused_before_running(small, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    with pytest.raises(UsageError, match="--tolerance needs the author's checkpoint files"):
        reproduce(small[0], ReproduceOptions(runtime="local", runs_dir=runs, tolerance=1e-3))
    assert not runs.exists()


def test_published_files_that_are_not_the_authors_are_refused(small, tmp_path: Path) -> None:
    fake = tmp_path / "fake"
    fake.mkdir()
    (fake / "model.npz").write_bytes(b"not the weights")
    with pytest.raises(SpecError, match="not the author's"):
        reproduce(small[0], ReproduceOptions(runtime="local", runs_dir=tmp_path / "runs", published=fake))
    assert not (tmp_path / "runs").exists()


def test_an_unseeded_job_on_the_same_stack_is_a_real_nondeterminism(tmp_path: Path) -> None:
    attestation, _records = publish(JOBS / "urandom-npz", tmp_path / "author", runs=1)
    result = reproduce(attestation, ReproduceOptions(runtime="local", runs_dir=tmp_path / "runs"))
    assert (result.verdict, result.exit_code) == (NONDETERMINISTIC, 1)
    assert result.sentence.startswith(stackdiff.SAME_STACK)
    assert not any(d["affects_numerics"] for d in result.stack_differences)


def test_a_different_gpu_in_the_authors_fingerprint_is_named(small, tmp_path: Path) -> None:
    attestation = fresh_copy(small[0], tmp_path / "clone")

    def on_an_h100(statement: dict[str, Any]) -> None:
        predicate = statement["predicate"]
        predicate["fingerprint"]["hardware"]["gpus"] = [
            {"name": "NVIDIA H100 80GB HBM3", "compute_capability": "9.0", "sm_count": 132}
        ]
        checkpoint = predicate["checkpoints"][0]
        checkpoint["content_sha256"] = "0" * 64  # the H100 gave other weights, so other file bytes
        checkpoint["file_sha256"] = "1" * 64
        subject = next(s for s in statement["subject"] if s["name"] == checkpoint["path"])
        subject["digest"]["sha256"] = "1" * 64
        checkpoint["tensors"][0]["sha256"] = "0" * 64

    edit_attestation(attestation, on_an_h100)
    result = reproduce(attestation, ReproduceOptions(runtime="local", runs_dir=tmp_path / "runs"))
    assert (result.verdict, result.exit_code) == (DIFFERENT_STACK, 1)
    assert "the stacks differ in GPUs" in result.sentence
    assert result.differing_tensors == 1


def sign_with_another_key(path: Path, keys: dict[str, Path]) -> None:
    attest.write_attestation(path, attest.read_attestation(path).statement, key=keys["other"])


@pytest.mark.parametrize(
    ("prepare", "words"),
    [
        (lambda path, keys: path.unlink(), "does not exist"),
        (lambda path, keys: path.write_text('{"_type": '), "is not a JSON attestation"),
        (
            lambda path, keys: edit_attestation(
                path, lambda s: s["predicate"].update(schema="reprobox.attestation/9")
            ),
            "does not read",
        ),
        (sign_with_another_key, "do not verify with the public key"),
    ],
    ids=["missing", "malformed", "wrong-schema-version", "signature-mismatch"],
)
def test_bad_attestations_are_refused_before_anything_runs(
    small, tmp_path: Path, prepare, words: str
) -> None:
    attestation = fresh_copy(small[0], tmp_path / "clone")
    _author_private, author_public = attest.generate_key(tmp_path / "keys" / "author.key")
    other_private, _other_public = attest.generate_key(tmp_path / "keys" / "other.key")
    prepare(attestation, {"other": other_private})
    runs = tmp_path / "runs"
    verify = author_public if prepare is sign_with_another_key else None
    with pytest.raises(SpecError, match=words) as caught:
        reproduce(attestation, ReproduceOptions(runtime="local", runs_dir=runs, verify_signature=verify))
    assert caught.value.exit_code == 2
    assert not runs.exists()


class ImagesOnly:
    """Stands in for an engine in the image checks, which only ask whether an image exists and what it is."""

    def __init__(self, images: dict[str, ImageInfo]) -> None:
        self.images = images

    def image_exists(self, ref: str) -> bool:
        return ref in self.images

    def inspect_image(self, ref: str) -> ImageInfo:
        return self.images[ref]


IMAGE_ID = "sha256:" + "a" * 64
LABELS = {
    "io.reprobox.lock": "env/requirements-cpu.lock",
    "io.reprobox.lock-digest": "sha256:" + "1" * 64,
    "io.reprobox.build-digest": "sha256:" + "2" * 64,
    "io.reprobox.base": "reprobox/offline-base:bookworm",
}


def as_docker_run(statement: dict[str, Any]) -> None:
    statement["predicate"]["runtime"] = "docker"
    statement["predicate"]["image"] = {
        "id": IMAGE_ID,
        "reference": IMAGE_ID,
        "repo_digest": None,
        "tags": ["reprobox/env:2222222222222222"],
        "labels": LABELS,
    }


def test_a_missing_image_that_cannot_be_rebuilt_is_an_environment_problem(
    small, tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.delenv("REPROBOX_WHEELHOUSE", raising=False)
    attestation = edit_attestation(fresh_copy(small[0], tmp_path / "clone"), as_docker_run)
    runs = tmp_path / "runs"
    with pytest.raises(EnvironmentProblem, match="cannot be rebuilt identically here") as caught:
        reproduce(attestation, ReproduceOptions(runs_dir=runs, engine=ImagesOnly({})))
    assert caught.value.exit_code == 4
    assert "reprobox pack" in caught.value.message
    assert not runs.exists()


def test_an_image_with_another_lock_is_an_image_mismatch(small, tmp_path: Path) -> None:
    attestation = edit_attestation(fresh_copy(small[0], tmp_path / "clone"), as_docker_run)
    other = {**LABELS, "io.reprobox.lock-digest": "sha256:" + "9" * 64}
    engine = ImagesOnly({IMAGE_ID: ImageInfo(id=IMAGE_ID, labels=other)})
    runs = tmp_path / "runs"
    result = reproduce(attestation, ReproduceOptions(runs_dir=runs, engine=engine))
    assert (result.verdict, result.exit_code) == (IMAGE_MISMATCH, 4)
    assert "io.reprobox.lock-digest" in result.sentence
    assert not runs.exists()


@pytest.mark.parametrize(
    ("flags", "words"),
    [(["--runs", "0"], "--runs must be at least 1"), (["--threads", "0"], "--threads must be a positive")],
)
def test_bad_flags_are_usage_errors(small, tmp_path: Path, capsys, flags: list[str], words: str) -> None:
    assert cli.main(["reproduce", str(small[0]), "--runs-dir", str(tmp_path / "runs"), *flags]) == 2
    assert words in capsys.readouterr().err
