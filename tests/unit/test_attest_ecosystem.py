"""reprobox's signatures as the ecosystem's own verifiers read them, and theirs as reprobox reads them.

The Statement goes through in-toto-attestation, the DSSE envelope through securesystemslib, the model's
signature through the `model_signing` CLI; envelopes and bundles those libraries signed go through
reprobox. One flipped byte in any signed file is refused by each. The runs are recorded ones with real
checkpoint files (no job runs here).
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from reprobox import attest, bundle, cli, codetree
from reprobox.attest._keys import legacy_key_id
from reprobox.errors import EnvironmentProblem, SpecError, UsageError
from reprobox.guest.hashing import file_sha256
from reprobox.records.manifest import RunRecord, write_record
from reprobox.reproduce import ReproduceOptions
from reprobox.reproduce._signature import signature_facts

pytest.importorskip("model_signing", reason="the signing extra: pip install -e '.[signing]'")
securesystemslib = pytest.importorskip("securesystemslib", reason="in the dev extra")
pytest.importorskip("in_toto_attestation", reason="in the dev extra")

CHECKPOINTS = {"model.pt": b"weights " * 64, "opt/state.pt": b"optimizer " * 32}


def make_run(runs: Path, code: Path, name: str) -> RunRecord:
    """A recorded run whose outputs hold real checkpoint files (and a log that is not a checkpoint)."""
    outputs = runs / name / "outputs"
    for path, data in CHECKPOINTS.items():
        (outputs / path).parent.mkdir(parents=True, exist_ok=True)
        (outputs / path).write_bytes(data)
    (outputs / "tb").mkdir()
    (outputs / "tb" / "events.log").write_text(f"written at a time of {name}'s own\n")
    (outputs / "train.log").write_text("loss 0.1\n")
    tree = codetree.digest_tree(code)
    content = "c" * 64
    data = {
        "run_id": name,
        "job_name": "demo",
        "status": "succeeded",
        "failure": None,
        "started_at": f"2026-01-01T00:00:0{name[-1]}Z",
        "ended_at": f"2026-01-01T00:01:0{name[-1]}Z",
        "job_file": str(code / "job.yaml"),
        "job_file_sha256": file_sha256(code / "job.yaml"),
        "job": {"name": "demo", "seed": 3, "determinism": {}, "env": {}, "trail": None},
        "code": {"path": str(code), **tree.to_json()},
        "seed": 3,
        "runtime": {"name": "local"},
        "fingerprint": {"software": {"threads": {}}, "stack_digest": "5" * 64},
        "checkpoints": [
            {
                "path": path,
                "format": "torch",
                "file_sha256": file_sha256(outputs / path),
                "content_sha256": content,
                "tensors": [],
            }
            for path in CHECKPOINTS
        ],
        "trail": None,
    }
    return write_record(runs / name, data)


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One verified pair of runs, attested and signed with an ECDSA key by the CLI, once per module."""
    root = tmp_path_factory.mktemp("published")
    code = root / "code"
    code.mkdir()
    (code / "job.yaml").write_text("version: 1\nname: demo\ncommand: [python, train.py]\n")
    (code / "train.py").write_text("print('train')\n")
    records = [make_run(root / "runs", code, "run1"), make_run(root / "runs", code, "run2")]
    key = root / "keys" / "author.key"
    assert cli.main(["keygen", "-o", str(key), "--quiet"]) == 0
    target = root / "paper" / attest.ATTESTATION_NAME
    target.parent.mkdir()
    argv = ["attest", *(str(r.run_dir) for r in records), "-o", str(target), "--sign", str(key)]
    assert cli.main(argv) == 0
    return {
        "root": root,
        "key": key,
        "pub": key.with_name("author.key.pub"),
        "attestation": target,
        "model_sig": attest.model_signature_path_for(target),
        "outputs": records[0].output_dir,
    }


def copy_of(path: Path, tmp_path: Path) -> Path:
    if path.is_dir():
        import shutil

        return Path(shutil.copytree(path, tmp_path / path.name))
    copy = tmp_path / path.name
    copy.write_bytes(path.read_bytes())
    return copy


def flip_a_byte(path: Path, offset: int = 0) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x01
    path.write_bytes(bytes(data))


def statement_of(envelope_path: Path) -> dict[str, Any]:
    envelope = json.loads(envelope_path.read_text())
    return json.loads(base64.b64decode(envelope["payload"]))


def model_signing_verify(model: Path, signature: Path, public_key: Path) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "model_signing", "verify", "key", str(model)]
    argv += ["--signature", str(signature), "--public_key", str(public_key)]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)


# -- reprobox's output, read by the ecosystem ---------------------------------------------------------


def test_keygen_writes_pem_keys_the_other_tools_load(published) -> None:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    private = serialization.load_pem_private_key(published["key"].read_bytes(), None)
    public = serialization.load_pem_public_key(published["pub"].read_bytes())
    assert isinstance(private, ec.EllipticCurvePrivateKey) and private.curve.name == "secp256r1"
    assert published["key"].read_bytes().startswith(b"-----BEGIN PRIVATE KEY-----")
    sslib = securesystemslib.signer.SSlibKey.from_crypto(public)
    assert attest.key_id(public) == sslib.keyid  # the id the ecosystem computes, not a private one
    assert sslib.scheme == "ecdsa-sha2-nistp256"


def test_in_toto_attestation_validates_the_statement(published) -> None:
    from google.protobuf import json_format
    from in_toto_attestation.v1 import statement, statement_pb2

    found = statement_of(published["attestation"])
    parsed = json_format.ParseDict(found, statement_pb2.Statement())
    statement.Statement.copy_from_pb(parsed).validate()  # raises ValueError when it is not one
    assert parsed.predicate_type == attest.PREDICATE_TYPE
    subjects = {s.name: s.digest["sha256"] for s in parsed.subject}
    assert subjects == {p: file_sha256(published["outputs"] / p) for p in CHECKPOINTS}


def test_securesystemslib_verifies_the_envelope_with_the_key_loaded_the_usual_way(
    published, tmp_path: Path
) -> None:
    from cryptography.hazmat.primitives import serialization
    from securesystemslib.dsse import Envelope
    from securesystemslib.exceptions import VerificationError
    from securesystemslib.signer import SSlibKey

    key = SSlibKey.from_crypto(serialization.load_pem_public_key(published["pub"].read_bytes()))
    envelope = Envelope.from_dict(json.loads(published["attestation"].read_text()))
    assert list(envelope.verify([key], 1)) == [key.keyid]
    tampered = copy_of(published["attestation"], tmp_path)
    document = json.loads(tampered.read_text())
    payload = bytearray(base64.b64decode(document["payload"]))
    payload[payload.index(b"sha256")] ^= 0x01  # one byte of the Statement
    document["payload"] = base64.b64encode(bytes(payload)).decode()
    tampered.write_text(json.dumps(document))
    with pytest.raises(VerificationError):
        Envelope.from_dict(json.loads(tampered.read_text())).verify([key], 1)


def test_securesystemslib_verifies_an_ed25519_envelope_too(published, tmp_path: Path) -> None:
    from cryptography.hazmat.primitives import serialization
    from securesystemslib.dsse import Envelope
    from securesystemslib.signer import SSlibKey

    private, public = attest.generate_key(tmp_path / "ed.key", key_type=attest.ED25519)
    statement = statement_of(published["attestation"])
    target = attest.write_attestation(tmp_path / "ed.json", statement, key=private)
    key = SSlibKey.from_crypto(serialization.load_pem_public_key(public.read_bytes()))
    assert list(Envelope.from_dict(json.loads(target.read_text())).verify([key], 1)) == [key.keyid]


def test_model_signing_cli_accepts_the_bundle_and_refuses_a_flipped_checkpoint_byte(
    published, tmp_path: Path
) -> None:
    bundle = json.loads(published["model_sig"].read_text())
    assert bundle["mediaType"] == "application/vnd.dev.sigstore.bundle.v0.3+json"
    done = model_signing_verify(published["outputs"], published["model_sig"], published["pub"])
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Verification succeeded" in done.stdout
    outputs = copy_of(published["outputs"], tmp_path)
    flip_a_byte(outputs / "opt" / "state.pt", offset=5)
    refused = model_signing_verify(outputs, published["model_sig"], published["pub"])
    assert refused.returncode != 0 and "state.pt" in refused.stdout + refused.stderr


def test_the_model_signature_names_the_attested_sha256(published) -> None:
    payload = json.loads(
        base64.b64decode(json.loads(published["model_sig"].read_text())["dsseEnvelope"]["payload"])
    )
    resources = {r["name"]: r["digest"] for r in payload["predicate"]["resources"]}
    subject = {s["name"]: s["digest"]["sha256"] for s in statement_of(published["attestation"])["subject"]}
    assert resources == subject  # only the checkpoints: logs and tb/ are left out of the signed manifest
    assert {"train.log", "tb"} <= set(payload["predicate"]["serialization"]["ignore_paths"])


def test_the_predicate_validates_against_its_published_schema(published) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    schema = attest.predicate_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    predicate = statement_of(published["attestation"])["predicate"]
    jsonschema.Draft202012Validator(schema).validate(predicate)
    broken = {**predicate, "checkpoints": [{**predicate["checkpoints"][0], "file_sha256": "xyz"}]}
    assert list(jsonschema.Draft202012Validator(schema).iter_errors(broken))
    docs = Path(__file__).resolve().parents[2] / "docs" / "predicate-v1.schema.json"
    assert json.loads(docs.read_text()) == schema  # the docs publish the schema the package ships


# -- the ecosystem's output, read by reprobox ---------------------------------------------------------


def test_reprobox_verifies_an_envelope_securesystemslib_signed(published, tmp_path: Path) -> None:
    from cryptography.hazmat.primitives import serialization
    from securesystemslib.dsse import Envelope
    from securesystemslib.signer import CryptoSigner

    signer = CryptoSigner(serialization.load_pem_private_key(published["key"].read_bytes(), None))
    payload = attest.canonical_json(statement_of(published["attestation"]))
    envelope = Envelope(payload, "application/vnd.in-toto+json", {})
    envelope.sign(signer)
    theirs = tmp_path / "theirs.json"
    theirs.write_text(json.dumps(envelope.to_dict()))
    loaded = attest.read_attestation(theirs, verify_signature=published["pub"])
    assert loaded.signature_verified and loaded.keyid == signer.public_key.keyid == attest.key_id(
        attest.load_public_key(published["pub"])
    )
    document = envelope.to_dict()
    document["payload"] = base64.b64encode(payload.replace(b'"verified":2', b'"verified":3')).decode()
    theirs.write_text(json.dumps(document))
    with pytest.raises(SpecError, match="changed after it was signed"):
        attest.read_attestation(theirs, verify_signature=published["pub"])


def test_reprobox_checks_a_bundle_the_model_signing_cli_signed(published, tmp_path: Path) -> None:
    model = tmp_path / "model"
    for path in CHECKPOINTS:
        (model / path).parent.mkdir(parents=True, exist_ok=True)
        (model / path).write_bytes((published["outputs"] / path).read_bytes())
    signature = tmp_path / "theirs.sig"
    argv = [sys.executable, "-m", "model_signing", "sign", "key", str(model)]
    argv += ["--signature", str(signature), "--private_key", str(published["key"])]
    subprocess.run(argv, capture_output=True, check=True, timeout=120)
    statement = statement_of(published["attestation"])
    facts = attest.check_model_signature(signature, statement, published["pub"], checkpoints=model)
    assert facts["verified"] and facts["files"] == sorted(CHECKPOINTS)
    flip_a_byte(model / "model.pt", offset=3)
    with pytest.raises(SpecError, match="does not verify the checkpoint files"):
        attest.check_model_signature(signature, statement, published["pub"], checkpoints=model)


# -- reprobox's own checks ---------------------------------------------------------------------------


def test_reproduce_verify_signature_checks_both_and_the_files(published, tmp_path: Path) -> None:
    loaded = attest.read_attestation(published["attestation"], verify_signature=published["pub"])
    options = ReproduceOptions(verify_signature=published["pub"])
    notes: list[str] = []
    facts = signature_facts(loaded, options, published["outputs"].parent, notes)
    assert facts["verified"] and facts["model"]["verified"]
    assert facts["model"]["checkpoints_verified"] == str(published["outputs"])
    outputs = copy_of(published["outputs"], tmp_path)
    flip_a_byte(outputs / "model.pt")
    with pytest.raises(SpecError, match="does not verify the checkpoint files"):
        signature_facts(loaded, options, outputs, [])


def test_a_model_signature_changed_or_by_another_key_is_refused(published, tmp_path: Path) -> None:
    statement = statement_of(published["attestation"])
    _other, other_pub = attest.generate_key(tmp_path / "other.key")
    with pytest.raises(SpecError, match="model's signature was changed after it was signed"):
        attest.check_model_signature(published["model_sig"], statement, other_pub)
    bundle = json.loads(published["model_sig"].read_text())
    payload = bytearray(base64.b64decode(bundle["dsseEnvelope"]["payload"]))
    payload[payload.index(b'"digest"') + 12] ^= 0x01
    bundle["dsseEnvelope"]["payload"] = base64.b64encode(bytes(payload)).decode()
    tampered = tmp_path / "tampered.sig"
    tampered.write_text(json.dumps(bundle))
    with pytest.raises(SpecError, match="changed after it was signed"):
        attest.check_model_signature(tampered, statement, published["pub"])
    assert model_signing_verify(published["outputs"], tampered, published["pub"]).returncode != 0
    _ed, ed_pub = attest.generate_key(tmp_path / "ed.key", key_type=attest.ED25519)
    with pytest.raises(SpecError, match="Ed25519 key"):
        attest.check_model_signature(published["model_sig"], statement, ed_pub)


def test_signing_a_checkpoint_changed_since_its_run_writes_nothing(published, tmp_path: Path) -> None:
    outputs = copy_of(published["outputs"], tmp_path)
    flip_a_byte(outputs / "model.pt")
    statement = statement_of(published["attestation"])
    target = tmp_path / "out" / attest.ATTESTATION_NAME
    target.parent.mkdir()
    with pytest.raises(UsageError, match=r"model\.pt differs from its attested sha256"):
        attest.write_attestation(target, statement, key=published["key"], checkpoints=outputs)
    assert list(target.parent.iterdir()) == []


def test_keys_and_envelopes_made_before_keep_verifying(tmp_path: Path, published) -> None:
    """An Ed25519 envelope whose key id is the sha256 of the raw key (as written before) still verifies."""
    private, public = attest.generate_key(tmp_path / "old.key", key_type=attest.ED25519)
    statement = statement_of(published["attestation"])
    target = attest.write_attestation(tmp_path / "old.json", statement, key=private)
    envelope = json.loads(target.read_text())
    old_id = legacy_key_id(attest.load_public_key(public))
    envelope["signatures"][0]["keyid"] = old_id
    target.write_text(json.dumps(envelope))
    assert attest.read_attestation(target, verify_signature=public).signature_verified


@pytest.mark.parametrize(
    ("attestation", "signature"),
    [
        ("reprobox.attestation.json", "reprobox.model.sig"),
        ("job-2threads.reprobox.attestation.json", "job-2threads.reprobox.model.sig"),
        ("paper.json", "paper.reprobox.model.sig"),
    ],
)
def test_the_model_signature_sits_beside_the_attestation_and_outside_the_code(
    attestation: str, signature: str
) -> None:
    assert attest.model_signature_path_for(Path("paper") / attestation) == Path("paper") / signature
    assert codetree.is_reprobox_artefact(signature)  # writing it beside the job file changes no code digest


def test_an_ed25519_key_leaves_the_model_signature_unchecked_with_a_note(published, tmp_path: Path) -> None:
    """An author who signs the attestation with an Ed25519 key cannot have made the model signature."""
    private, public = attest.generate_key(tmp_path / "ed.key", key_type=attest.ED25519)
    target = tmp_path / attest.ATTESTATION_NAME
    attest.write_attestation(
        target, statement_of(published["attestation"]), key=private, checkpoints=published["outputs"]
    )
    assert not attest.model_signature_path_for(target).exists()
    attest.model_signature_path_for(target).write_bytes(published["model_sig"].read_bytes())
    loaded = attest.read_attestation(target, verify_signature=public)
    notes: list[str] = []
    facts = signature_facts(loaded, ReproduceOptions(verify_signature=public), None, notes)
    assert facts["verified"] and facts["model"] is None
    assert any("is an Ed25519 key" in note for note in notes)


def test_without_model_signing_an_ecdsa_signature_says_what_to_install(
    published, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "model_signing", None)  # as if the signing extra were not installed
    target = tmp_path / attest.ATTESTATION_NAME
    with pytest.raises(EnvironmentProblem, match=r"pip install 'reprobox\[signing\]'"):
        attest.write_attestation(
            target,
            statement_of(published["attestation"]),
            key=published["key"],
            checkpoints=published["outputs"],
        )
    assert list(tmp_path.iterdir()) == []


def test_a_packed_bundle_carries_the_model_signature_beside_its_attestation(
    published, tmp_path: Path
) -> None:
    """A reviewer given only the bundle checks both signatures, as with the published files."""
    out = tmp_path / "paper.tar"
    assert (
        cli.main(
            [
                "pack",
                str(published["attestation"]),
                "--code",
                str(published["root"] / "code"),
                "-o",
                str(out),
                "-q",
            ]
        )
        == 0
    )
    opened = bundle.open_bundle(out, tmp_path / "opened")
    carried = attest.model_signature_path_for(opened.attestation)
    assert carried.read_bytes() == published["model_sig"].read_bytes()
    loaded = attest.read_attestation(opened.attestation, verify_signature=published["pub"])
    facts = signature_facts(loaded, ReproduceOptions(verify_signature=published["pub"]), None, [])
    assert facts["verified"] and facts["model"]["verified"]
