"""Claims end to end on the local runtime: recorded by `run` and `verify`, attested, and graded by
`reproduce` on the author's stack and on another one (another thread count)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from publishing import EXAMPLES, JOBS, edit_attestation, fresh_copy, publish

from reprobox import attest, cli
from reprobox.records.manifest import RunRecord
from reprobox.reproduce import ReproduceOptions, reproduce


@pytest.fixture(scope="module")
def paper(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[RunRecord]]:
    """paper-claims' claims in NumPy, for what happens on the author's own stack."""
    return publish(JOBS / "claims-seeds", tmp_path_factory.mktemp("author"), runs=2)


def other_thread_count(records: list[RunRecord]) -> int:
    used = records[0].fingerprint["software"]["threads"]["torch_intra_op"]
    return 1 if used != 1 else 2


def reproduce_json(attestation: Path, runs: Path, *flags: str, capsys: Any) -> tuple[int, dict[str, Any]]:
    code = cli.main(
        ["reproduce", str(attestation), "--runtime", "local", "--runs-dir", str(runs), "--json", "-q", *flags]
    )
    return code, json.loads(capsys.readouterr().out)


def test_verify_records_and_attests_every_claim(paper) -> None:
    attestation, records = paper
    for record in records:
        assert [c["name"] for c in record.claims] == ["val_acc", "val_loss", "logged_acc"]
        assert all(c["error"] is None for c in record.claims)
    claims = attest.read_attestation(attestation).claims
    assert [(c["name"], c["value"], c["file"]) for c in claims] == [
        (c["name"], c["value"], c["file"]) for c in records[0].claims
    ]
    assert claims[0]["value"] == records[0].claim("logged_acc")["value"]  # type: ignore[index]


def test_on_the_authors_stack_the_grade_is_bit_identical_and_every_claim_holds(
    paper, tmp_path: Path, capsys
) -> None:
    code, data = reproduce_json(fresh_copy(paper[0], tmp_path / "clone"), tmp_path / "runs", capsys=capsys)
    assert code == 0
    assert data["grade"] == "bit-identical"
    assert data["grades"]["claims-hold"] is True
    assert [c["holds"] for c in data["claims"]] == [True, True, True]
    assert "every claim holds (val_acc" in data["sentence"]
    report = Path(next(r for r in data["reports"] if r.endswith(".md"))).read_text()
    assert "| claim | published | reproduced | difference | allowed | verdict |" in report


def test_on_another_stack_the_claims_hold_while_the_bits_do_not(tmp_path: Path, capsys) -> None:
    """paper-claims itself: its weights' last bits follow torch's thread count, which the fingerprint
    records, so another count is another stack."""
    attestation, records = publish(EXAMPLES / "paper-claims", tmp_path / "author", runs=1)
    clone = fresh_copy(attestation, tmp_path / "clone")
    threads = str(other_thread_count(records))
    code, data = reproduce_json(clone, tmp_path / "runs", "--threads", threads, capsys=capsys)
    assert code == 1  # by default the exit code follows the bits
    assert data["verdict"] == "different-stack"
    assert data["grade"] == "claims-hold"
    assert data["grades"] == {
        "bit-identical": False,
        "tensors-equal": False,
        "within-tolerance": None,
        "claims-hold": True,
    }
    assert data["sentence"].startswith("every claim holds (val_acc, ")
    assert "but the bits differ: different stack" in data["sentence"]
    assert any("--accept claims" in note for note in data["notes"])

    code, data = reproduce_json(
        clone, tmp_path / "runs", "--threads", threads, "--accept", "claims", capsys=capsys
    )
    assert code == 0
    assert data["grade"] == "claims-hold"
    assert "the bits differ" in data["sentence"]  # said plainly, even when accepted


def test_accept_claims_in_the_job_file(tmp_path: Path, capsys) -> None:
    source = tmp_path / "source"
    shutil.copytree(EXAMPLES / "paper-claims", source)
    job = source / "job.yaml"
    job.write_text(job.read_text() + "accept: claims\n")
    attestation, records = publish(source, tmp_path / "author", runs=1)
    code, data = reproduce_json(
        attestation, tmp_path / "runs", "--threads", str(other_thread_count(records)), capsys=capsys
    )
    assert (code, data["grade"]) == (0, "claims-hold")
    code, data = reproduce_json(
        attestation,
        tmp_path / "runs",
        *("--threads", str(other_thread_count(records)), "--accept", "bits"),
        capsys=capsys,
    )
    assert code == 1  # the reviewer's --accept wins over the job file's


def test_a_claim_that_fails_elsewhere_is_not_reproduced_whatever_is_accepted(tmp_path: Path, capsys) -> None:
    attestation, records = publish(JOBS / "claims-follow-threads", tmp_path / "author", runs=1)
    threads = str(other_thread_count(records))
    code, data = reproduce_json(
        attestation, tmp_path / "runs", "--threads", threads, "--accept", "claims", capsys=capsys
    )
    assert code == 1
    assert data["grade"] == "not-reproduced"
    assert data["grades"]["claims-hold"] is False
    assert data["sentence"].startswith("not reproduced: val_acc ")
    assert "more than 0.01" in data["sentence"]
    (failing,) = data["claims"]
    assert failing["holds"] is False
    assert abs(failing["difference"]) >= 0.05 - 1e-9


def test_an_edited_claim_value_is_caught_when_read(paper, tmp_path: Path) -> None:
    clone = fresh_copy(paper[0], tmp_path / "clone")
    edit_attestation(clone, lambda s: s["predicate"]["claims"][0].update(value=0.999))
    code = cli.main(["reproduce", str(clone), "--runtime", "local", "--runs-dir", str(tmp_path / "runs")])
    assert code == 2
    assert not (tmp_path / "runs").exists()


def test_an_edited_claim_with_its_evidence_is_caught_by_the_reproduction(paper, tmp_path: Path) -> None:
    clone = fresh_copy(paper[0], tmp_path / "clone")

    def inflate(statement: dict[str, Any]) -> None:
        statement["predicate"]["claims"][0].update(value=0.999, evidence="0.999")

    edit_attestation(clone, inflate)
    result = reproduce(clone, ReproduceOptions(runtime="local", runs_dir=tmp_path / "runs"))
    assert result.exit_code == 1
    assert result.grade == "not-reproduced"
    assert "the recorded claim was edited after the runs" in result.sentence
    assert result.verdict != "bit-identical"  # the checkpoints match, a value the job saved does not


def test_an_attestation_from_before_claims_still_reproduces(paper, tmp_path: Path) -> None:
    clone = fresh_copy(paper[0], tmp_path / "clone")
    edit_attestation(clone, lambda s: s["predicate"].pop("claims"))
    result = reproduce(clone, ReproduceOptions(runtime="local", runs_dir=tmp_path / "runs"))
    assert (result.exit_code, result.grade, result.claims) == (0, "bit-identical", [])
    assert any("the attestation records none" in note for note in result.notes)


def test_a_claimed_number_that_varies_makes_verify_say_not_reproducible(tmp_path: Path, capsys) -> None:
    """The weights are equal, the reported number is not: the runs do not reproduce."""
    job = tmp_path / "job"
    job.mkdir()
    (job / "train.py").write_text(
        "import json, os, numpy\n"
        "out = os.environ['REPROBOX_OUTPUT_DIR']\n"
        "numpy.save(out + '/model.npy', numpy.zeros(2))\n"
        "json.dump({'acc': int.from_bytes(os.urandom(2), 'big') / 65536}, open(out + '/m.json', 'w'))\n"
    )
    (job / "job.yaml").write_text(
        "version: 1\nname: noisy-claim\ncommand: [python, train.py]\ncheckpoints: ['*.npy']\n"
        "claims:\n  - {name: acc, file: m.json, key: acc, tolerance: 0.5}\n"
    )
    code = cli.main(
        [
            "verify",
            str(job / "job.yaml"),
            "--runtime",
            "local",
            "--runs-dir",
            str(tmp_path / "runs"),
            "--json",
            "-q",
        ]
    )
    data = json.loads(capsys.readouterr().out)
    assert code == 1
    assert data["verdict"] == "different"
    assert [(d["checkpoint"], d["name"]) for d in data["value_differences"]] == [("claims", "acc")]
    assert not (job / attest.ATTESTATION_NAME).exists()


def test_a_claim_the_job_did_not_write_fails_the_run(tmp_path: Path, capsys) -> None:
    source = tmp_path / "job"
    shutil.copytree(JOBS / "claims-seeds", source)  # paper-claims' claims, in NumPy
    job = source / "job.yaml"
    job.write_text(job.read_text().replace("key: val_acc\n", "key: test_acc\n"))
    code = cli.main(
        ["run", str(job), "--runtime", "local", "--runs-dir", str(tmp_path / "runs"), "--json", "-q"]
    )
    data = json.loads(capsys.readouterr().out)
    assert code == 3
    assert data["status"] == "failed"
    assert data["failure"] == "claim val_acc: metrics.json has no key 'test_acc'"
