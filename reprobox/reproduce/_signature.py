"""What the author's signatures say: the attestation's DSSE signature (checked as it is read) and the
checkpoints' OpenSSF model signature beside it, both with the author's public key."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from reprobox import attest
from reprobox.reproduce._model import ReproduceOptions


def signature_facts(
    attestation: attest.Attestation, options: ReproduceOptions, published: Path | None, notes: list[str]
) -> dict[str, Any]:
    """The signature facts of the report; with --verify-signature the model's signature is checked too
    (SpecError when it does not verify), over the author's checkpoint files when they are at hand."""
    if attestation.signed and not attestation.signature_verified:
        notes.append(
            f"the attestation is signed (key id {str(attestation.keyid)[:16]}) but the signature was not "
            "checked: pass --verify-signature AUTHOR.pub"
        )
    elif not attestation.signed:
        notes.append("the attestation is not signed: anyone could have written it; ask the author to sign it")
    facts: dict[str, Any] = {
        "signed": attestation.signed,
        "keyid": attestation.keyid,
        "verified": attestation.signature_verified,
        "model": None,
    }
    key = options.verify_signature
    if key is None or not attestation.signature_verified:
        return facts
    model = attest.model_signature_path_for(attestation.path)
    if not model.is_file():
        notes.append(
            f"no model signature ({model.name}) beside the attestation: the checkpoints' sha256 are "
            "covered by the attestation's signature alone"
        )
        return facts
    if not attest.is_ecdsa_key(key):
        notes.append(
            f"{model.name} beside the attestation was not checked: OpenSSF model signatures are made with "
            f"ECDSA keys, and {key.name} is an Ed25519 key"
        )
        return facts
    facts["model"] = attest.check_model_signature(
        model, attestation.statement, key, checkpoints=_outputs(published)
    )
    return facts


def _outputs(published: Path | None) -> Path | None:
    """The folder holding the author's checkpoint files: a run directory's outputs/, or the folder."""
    if published is None or not published.is_dir():
        return None
    outputs = published / "outputs"
    return outputs if outputs.is_dir() else published
