"""Attestations: built from verified runs, written atomically, signed, and refused when bad or tampered."""

from __future__ import annotations

import base64
import json
import stat
from pathlib import Path
from typing import Any

import pytest

from reprobox import attest, cli, codetree
from reprobox.errors import SpecError, UsageError
from reprobox.guest.hashing import file_sha256
from reprobox.records.manifest import RunRecord, write_record

CONTENT = "c" * 64
FILE_SHA = "f" * 64
STACK = "5" * 64


def make_code(root: Path) -> Path:
    code = root / "code"
    code.mkdir(parents=True)
    (code / "job.yaml").write_text("version: 1\nname: demo\ncommand: [python, train.py]\n")
    (code / "train.py").write_text("print('train')\n")
    return code


def make_run(
    runs: Path,
    code: Path,
    name: str,
    *,
    content: str = CONTENT,
    status: str = "succeeded",
    image: dict[str, Any] | None = None,
    checkpoints: list[dict[str, Any]] | None = None,
) -> RunRecord:
    tree = codetree.digest_tree(code)
    runtime: dict[str, Any] = {"name": "docker", "image": image} if image else {"name": "local"}
    data = {
        "run_id": name,
        "job_name": "demo",
        "status": status,
        "failure": None if status == "succeeded" else "exited with status 1",
        "started_at": f"2026-01-01T00:00:0{name[-1]}Z",
        "ended_at": f"2026-01-01T00:01:0{name[-1]}Z",
        "job_file": str(code / "job.yaml"),
        "job_file_sha256": file_sha256(code / "job.yaml"),
        "job": {
            "name": "demo",
            "seed": 3,
            "determinism": {"threads": None, "algorithms": True},
            "env": {"MODE": "fast", "API_TOKEN": "<redacted>"},
            "launcher": {"type": "none", "nproc_per_node": 1, "nnodes": 1},
            "trail": None,
        },
        "code": {"path": str(code), **tree.to_json()},
        "seed": 3,
        "runtime": runtime,
        "fingerprint": {
            "software": {
                "threads": {"torch_intra_op": 2, "torch_inter_op": 2, "OMP_NUM_THREADS": None},
                "distributed": {"world_size": 1},
            },
            "stack_digest": STACK,
        },
        "checkpoints": checkpoints
        if checkpoints is not None
        else [
            {
                "path": "model.pt",
                "format": "torch",
                "file_sha256": FILE_SHA if content == CONTENT else content,  # other weights, other bytes
                "content_sha256": content,
                "tensors": [{"name": "w", "dtype": "float32", "shape": [2], "sha256": content}],
            }
        ],
        "trail": None,
    }
    return write_record(runs / name, data)


@pytest.fixture
def verified(tmp_path: Path) -> tuple[Path, list[RunRecord]]:
    code = make_code(tmp_path)
    runs = tmp_path / "runs"
    return code, [make_run(runs, code, "run1"), make_run(runs, code, "run2")]


@pytest.fixture
def written(tmp_path: Path, verified: tuple[Path, list[RunRecord]]) -> Path:
    code, records = verified
    return attest.write_attestation(
        attest.attestation_path_for(code / "job.yaml"), attest.build_attestation(records)
    )


def test_statement_is_in_toto_v1_with_the_checkpoints_as_subject(verified) -> None:
    _code, records = verified
    statement = attest.build_attestation(records)
    assert statement["_type"] == "https://in-toto.io/Statement/v1"
    assert statement["subject"] == [{"name": "model.pt", "digest": {"sha256": FILE_SHA}}]
    assert statement["predicateType"] == attest.PREDICATE_TYPE
    assert statement["predicate"]["schema"] == "reprobox.attestation/1"


def test_predicate_holds_what_a_reviewer_replays(verified) -> None:
    code, records = verified
    predicate = attest.build_attestation(records)["predicate"]
    assert predicate["job"]["file"] == "job.yaml"
    assert predicate["job"]["code"] == "."
    assert predicate["job"]["text"] == (code / "job.yaml").read_text()
    assert predicate["job"]["sha256"] == file_sha256(code / "job.yaml")
    assert predicate["code"]["sha256"] == codetree.digest_tree(code).digest
    assert set(predicate["code"]["files"]) == {"job.yaml", "train.py"}
    assert predicate["runs"]["verified"] == 2
    assert predicate["runs"]["run_ids"] == ["run1", "run2"]
    assert predicate["stack_digest"] == STACK
    assert predicate["execution"]["seed"] == 3
    assert predicate["execution"]["threads"]["torch_intra_op"] == 2
    assert predicate["execution"]["world_size"] == 1
    assert predicate["execution"]["env"] == {"MODE": "fast", "API_TOKEN": "<redacted>"}
    assert predicate["checkpoints"][0]["content_sha256"] == CONTENT
    assert predicate["checkpoints"][0]["tensors"][0]["name"] == "w"
    assert predicate["image"] is None and predicate["runtime"] == "local"
    assert predicate["trail"] is None


def test_docker_runs_record_the_image_with_its_lock_digest_and_labels(tmp_path: Path) -> None:
    code = make_code(tmp_path)
    labels = {
        "io.reprobox.lock": "env/requirements-cpu.lock",
        "io.reprobox.lock-digest": "sha256:" + "1" * 64,
    }
    image = {"id": "sha256:" + "a" * 64, "repo_digest": None, "tags": ["reprobox/env:abc"], "labels": labels}
    record = make_run(tmp_path / "runs", code, "run1", image=image)
    entry = attest.build_attestation([record])["predicate"]["image"]
    assert entry["reference"] == image["id"]  # never pushed: the id
    assert entry["lock_digest"] == "sha256:" + "1" * 64
    assert entry["labels"] == labels
    pushed = make_run(
        tmp_path / "runs2", code, "run1", image={**image, "repo_digest": "reg/x@sha256:" + "b" * 64}
    )
    assert attest.build_attestation([pushed])["predicate"]["image"]["reference"] == "reg/x@sha256:" + "b" * 64


def test_the_attestation_is_not_part_of_the_attested_code(verified) -> None:
    code, records = verified
    (code / attest.ATTESTATION_NAME).write_text("{}")  # a previous attestation, committed with the code
    runs = code.parent / "again"
    again = [make_run(runs, code, "run1"), make_run(runs, code, "run2")]
    assert attest.ATTESTATION_NAME not in again[0].data["code"]["files"]  # runs leave it out too
    predicate = attest.build_attestation(again)["predicate"]
    assert attest.ATTESTATION_NAME not in predicate["code"]["files"]
    assert predicate["code"]["sha256"] == attest.build_attestation(records)["predicate"]["code"]["sha256"]


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"content": "d" * 64}, "not bit-identical"),
        ({"status": "failed"}, "attest only runs that succeeded"),
        ({"checkpoints": []}, "no checkpoints"),
    ],
)
def test_runs_that_cannot_be_attested_are_refused(tmp_path: Path, change: dict[str, Any], words: str) -> None:
    code = make_code(tmp_path)
    runs = tmp_path / "runs"
    records = [make_run(runs, code, "run1"), make_run(runs, code, "run2", **change)]
    with pytest.raises(UsageError, match=words):
        attest.build_attestation(records)


def test_a_job_file_changed_since_the_runs_is_refused(verified) -> None:
    code, records = verified
    (code / "job.yaml").write_text("version: 1\nname: demo\ncommand: [python, other.py]\n")
    with pytest.raises(UsageError, match="changed since run"):
        attest.build_attestation(records)


def test_no_runs_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="at least one run"):
        attest.build_attestation([])


def test_unsigned_round_trip_leaves_no_temporary_file(written: Path) -> None:
    loaded = attest.read_attestation(written)
    assert not loaded.signed and not loaded.signature_verified
    assert loaded.job["name"] == "demo" and loaded.verified_runs == 2
    assert sorted(p.name for p in written.parent.iterdir()) == [
        "job.yaml",
        attest.ATTESTATION_NAME,
        "train.py",
    ]


def test_signed_attestation_is_a_dsse_envelope_that_verifies(tmp_path: Path, verified) -> None:
    _code, records = verified
    private, public = attest.generate_key(tmp_path / "keys" / "author.key")
    statement = attest.build_attestation(records)
    path = attest.write_attestation(tmp_path / "signed.json", statement, key=private)
    envelope = json.loads(path.read_text())
    assert envelope["payloadType"] == "application/vnd.in-toto+json"
    payload = base64.b64decode(envelope["payload"])
    assert payload == attest.canonical_json(statement)  # the canonical form is what is signed
    assert envelope["signatures"][0]["keyid"] == attest.key_id(attest.load_public_key(public))
    loaded = attest.read_attestation(path, verify_signature=public)
    assert loaded.signed and loaded.signature_verified and loaded.statement == statement


def test_canonical_json_is_sorted_compact_utf8() -> None:
    assert attest.canonical_json({"b": 1, "a": {"é": [1, 2]}}) == '{"a":{"é":[1,2]},"b":1}'.encode()
    with pytest.raises(ValueError, match="Out of range float"):
        attest.canonical_json({"x": float("nan")})


def test_a_signature_by_another_key_is_refused(tmp_path: Path, verified) -> None:
    _code, records = verified
    private, _public = attest.generate_key(tmp_path / "author.key")
    _other_private, other_public = attest.generate_key(tmp_path / "other.key")
    path = attest.write_attestation(tmp_path / "signed.json", attest.build_attestation(records), key=private)
    with pytest.raises(SpecError, match="do not verify with the public key") as caught:
        attest.read_attestation(path, verify_signature=other_public)
    assert caught.value.exit_code == 2


def test_a_payload_changed_after_signing_is_refused(tmp_path: Path, verified) -> None:
    _code, records = verified
    private, public = attest.generate_key(tmp_path / "author.key")
    path = attest.write_attestation(tmp_path / "signed.json", attest.build_attestation(records), key=private)
    envelope = json.loads(path.read_text())
    statement = json.loads(base64.b64decode(envelope["payload"]))
    statement["predicate"]["execution"]["seed"] = 4  # a consistent, plausible edit
    envelope["payload"] = base64.b64encode(attest.canonical_json(statement)).decode()
    path.write_text(json.dumps(envelope))
    with pytest.raises(SpecError, match="changed after it was signed"):
        attest.read_attestation(path, verify_signature=public)
    assert attest.read_attestation(path).signed  # without the key the edit cannot be seen; reproduce says so


def test_verify_signature_on_an_unsigned_file_is_refused(tmp_path: Path, written: Path) -> None:
    _private, public = attest.generate_key(tmp_path / "author.key")
    with pytest.raises(SpecError, match="is not signed"):
        attest.read_attestation(written, verify_signature=public)


@pytest.mark.parametrize(
    ("content", "words"),
    [
        (None, "does not exist"),
        ("{not json", "is not a JSON attestation"),
        ("[1, 2]", "is not a JSON object"),
    ],
)
def test_missing_or_malformed_attestations_name_the_file(
    tmp_path: Path, content: str | None, words: str
) -> None:
    path = tmp_path / "reprobox.attestation.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(SpecError, match=words) as caught:
        attest.read_attestation(path)
    assert str(path) in str(caught.value)


def edit(path: Path, change: Any) -> Path:
    statement = json.loads(path.read_text())
    change(statement)
    path.write_text(json.dumps(statement))
    return path


@pytest.mark.parametrize(
    ("change", "field", "words"),
    [
        (lambda s: s.update(_type="https://in-toto.io/Statement/v0.1"), "_type", "in-toto v1"),
        (
            lambda s: s.update(predicateType=attest.PREDICATE_TYPE_PREFIX + "v2"),
            "predicateType",
            "does not read",
        ),
        (
            lambda s: s["predicate"].update(schema="reprobox.attestation/2"),
            "predicate.schema",
            "does not read",
        ),
        (
            lambda s: s.update(predicateType="https://slsa.dev/provenance/v1"),
            "predicateType",
            "reprobox attestation",
        ),
        (lambda s: s["predicate"]["code"].pop("sha256"), "predicate.code.sha256", "is missing"),
        (lambda s: s["predicate"]["runs"].update(verified="2"), "predicate.runs.verified", "must be int"),
        (
            lambda s: s["predicate"]["checkpoints"][0].update(content_sha256="xyz"),
            "content_sha256",
            "sha256 digest",
        ),
    ],
)
def test_wrong_schema_or_missing_fields_name_the_field(
    written: Path, change: Any, field: str, words: str
) -> None:
    edit(written, change)
    with pytest.raises(SpecError) as caught:
        attest.read_attestation(written)
    assert field in str(caught.value) and words in str(caught.value)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda s: s["subject"][0]["digest"].update(sha256="e" * 64), "subject"),
        (lambda s: s["predicate"]["code"]["files"].update({"train.py": "0" * 64}), "predicate.code.sha256"),
        (lambda s: s["predicate"]["job"].update(text="version: 1\n"), "predicate.job.text"),
    ],
)
def test_hand_edits_that_break_consistency_are_refused(written: Path, change: Any, field: str) -> None:
    edit(written, change)
    with pytest.raises(SpecError, match="edited after it was made") as caught:
        attest.read_attestation(written)
    assert field in str(caught.value)


def test_a_bad_signing_key_writes_nothing(tmp_path: Path, verified) -> None:
    _code, records = verified
    key = tmp_path / "not-a-key"
    key.write_text("hello")
    target = tmp_path / "out" / "att.json"
    with pytest.raises(UsageError, match="not an ECDSA or Ed25519 private key"):
        attest.write_attestation(target, attest.build_attestation(records), key=key)
    assert not target.exists() and not (tmp_path / "out").exists()


def test_keygen_writes_a_private_and_a_public_key_and_never_overwrites(tmp_path: Path) -> None:
    private, public = attest.generate_key(tmp_path / "k" / "signing.key")
    assert stat.S_IMODE(private.stat().st_mode) == 0o600
    assert stat.S_IMODE(public.stat().st_mode) == 0o644
    assert public.name == "signing.key.pub"
    assert b"BEGIN PRIVATE KEY" in private.read_bytes() and b"BEGIN PUBLIC KEY" in public.read_bytes()
    before = private.read_bytes()
    with pytest.raises(UsageError, match="already exists"):
        attest.generate_key(private)
    assert private.read_bytes() == before


def test_an_openssh_public_key_is_accepted(tmp_path: Path) -> None:
    from cryptography.hazmat.primitives import serialization

    private, public = attest.generate_key(tmp_path / "signing.key")
    ssh = tmp_path / "author.pub"
    ssh.write_bytes(
        attest.load_public_key(public).public_bytes(
            serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
        )
    )
    assert attest.key_id(attest.load_public_key(ssh)) == attest.key_id(
        attest.load_private_key(private).public_key()
    )


def test_attestation_goes_next_to_the_job_file(tmp_path: Path) -> None:
    assert (
        attest.attestation_path_for(tmp_path / "paper" / "job.yaml")
        == tmp_path / "paper" / attest.ATTESTATION_NAME
    )


def test_attest_command_writes_next_to_the_job_file_and_prints_json(verified, capsys) -> None:
    code, records = verified
    assert cli.main(["attest", *(str(r.run_dir) for r in records), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    target = code / attest.ATTESTATION_NAME
    assert data["attestation"] == str(target) and data["verified_runs"] == 2
    assert attest.read_attestation(target).statement["subject"][0]["name"] == "model.pt"


def test_attest_command_signs_with_an_ed25519_key(tmp_path: Path, verified, capsys) -> None:
    _code, records = verified
    assert cli.main(["keygen", "--type", "ed25519", "-o", str(tmp_path / "my.key"), "--json"]) == 0
    keys = json.loads(capsys.readouterr().out)
    target = tmp_path / "att.json"
    assert (
        cli.main(["attest", str(records[0].run_dir), "-o", str(target), "--sign", keys["private_key"]]) == 0
    )
    said = capsys.readouterr().out
    assert "one run proves nothing" in said and "OpenSSF model signing takes ECDSA keys" in said
    assert not attest.model_signature_path_for(target).exists()  # the model is signed by ECDSA keys only
    assert attest.read_attestation(target, verify_signature=Path(keys["public_key"])).signature_verified


def test_attest_command_on_a_failed_run_exits_2(tmp_path: Path, capsys) -> None:
    code = make_code(tmp_path)
    record = make_run(tmp_path / "runs", code, "run1", status="failed")
    assert cli.main(["attest", str(record.run_dir)]) == 2
    assert "attest only runs that succeeded" in capsys.readouterr().err
    assert not (code / attest.ATTESTATION_NAME).exists()
