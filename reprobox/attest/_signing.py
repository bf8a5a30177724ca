"""Signing: a DSSE envelope around the Statement, signed with an ECDSA or Ed25519 key (see ``_keys``).

DSSE (the in-toto signing layer) rather than a detached ``.sig``: the author still publishes one file,
the signature covers the exact payload bytes (nothing has to be re-serialised to verify it, so no JSON
canonicalisation can disagree between signer and verifier), and in-toto, cosign and sigstore tooling
read DSSE as is. The payload is the Statement's canonical JSON: UTF-8, keys sorted at every level, no
insignificant whitespace (``separators=(",", ":")``), non-ASCII kept as is, NaN and infinities refused.
The signed bytes are DSSE's pre-authentication encoding of (``application/vnd.in-toto+json``,
payload).
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from reprobox.attest._keys import key_id, load_private_key, load_public_key, sign, verifies
from reprobox.errors import Problem, SpecError
from reprobox.records.attestation import DSSE_PAYLOAD_TYPE


def canonical_json(statement: Mapping[str, Any]) -> bytes:
    """The bytes that are signed: sorted keys, no whitespace, UTF-8, no NaN (see the module docstring)."""
    return json.dumps(
        statement, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode("utf-8")


def pae(payload_type: str, payload: bytes) -> bytes:
    """DSSE's pre-authentication encoding: what the signature of an envelope covers."""
    kind = payload_type.encode("utf-8")
    return b"DSSEv1 %d %s %d %s" % (len(kind), kind, len(payload), payload)


def signed_envelope(statement: Mapping[str, Any], key: Path) -> dict[str, Any]:
    """The DSSE envelope of `statement`, signed with the private key at `key`."""
    private = load_private_key(key)  # before anything is written: a bad key changes nothing
    payload = canonical_json(statement)
    signature = sign(private, pae(DSSE_PAYLOAD_TYPE, payload))
    return {
        "payloadType": DSSE_PAYLOAD_TYPE,
        "payload": base64.b64encode(payload).decode("ascii"),
        "signatures": [
            {"keyid": key_id(private.public_key()), "sig": base64.b64encode(signature).decode("ascii")}
        ],
    }


def open_envelope(envelope: Mapping[str, Any], path: Path) -> tuple[bytes, str | None, list[dict[str, Any]]]:
    """The payload, the first key id and the signatures of a DSSE envelope; SpecError when malformed."""
    if envelope.get("payloadType") != DSSE_PAYLOAD_TYPE:
        raise SpecError(
            [
                Problem(
                    path,
                    None,
                    "payloadType",
                    f"is {envelope.get('payloadType')!r}, expected {DSSE_PAYLOAD_TYPE!r}",
                )
            ]
        )
    try:
        payload = base64.b64decode(str(envelope.get("payload", "")), validate=True)
    except (binascii.Error, ValueError):
        raise SpecError([Problem(path, None, "payload", "is not base64; the file is damaged")]) from None
    signatures = envelope.get("signatures")
    if not isinstance(signatures, list) or not signatures or not all(isinstance(s, dict) for s in signatures):
        raise SpecError([Problem(path, None, "signatures", "must be a non-empty list of {keyid, sig}")])
    keyid = signatures[0].get("keyid")
    return payload, str(keyid) if keyid else None, signatures


def verify_envelope(
    envelope: Mapping[str, Any],
    payload: bytes,
    signatures: list[dict[str, Any]],
    key: Path,
    path: Path,
    *,
    what: str = "the attestation",
) -> None:
    """Return when one signature verifies with the public key at `key`, whatever key id it names."""
    public = load_public_key(key)
    message = pae(str(envelope["payloadType"]), payload)
    for entry in signatures:
        try:
            signature = base64.b64decode(str(entry.get("sig", "")), validate=True)
        except (binascii.Error, ValueError):
            continue
        if verifies(public, signature, message):
            return
    raise SpecError(
        [
            Problem(
                path,
                None,
                "signatures",
                f"do not verify with the public key {key} (key id {key_id(public)[:16]}): {what} "
                "was changed after it was signed, or signed with another key; "
                "get both files again from the author",
            )
        ]
    )
