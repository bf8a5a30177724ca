"""Signing: a DSSE envelope around the Statement, signed with Ed25519, and the keys that do it.

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
import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from reprobox.errors import Problem, SpecError, UsageError
from reprobox.records.attestation import DSSE_PAYLOAD_TYPE
from reprobox.records.files import write_bytes_atomic

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey


def canonical_json(statement: Mapping[str, Any]) -> bytes:
    """The bytes that are signed: sorted keys, no whitespace, UTF-8, no NaN (see the module docstring)."""
    return json.dumps(
        statement, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode("utf-8")


def pae(payload_type: str, payload: bytes) -> bytes:
    """DSSE's pre-authentication encoding: what an Ed25519 signature of an envelope covers."""
    kind = payload_type.encode("utf-8")
    return b"DSSEv1 %d %s %d %s" % (len(kind), kind, len(payload), payload)


def signed_envelope(statement: Mapping[str, Any], key: Path) -> dict[str, Any]:
    """The DSSE envelope of `statement`, signed with the private key at `key`."""
    private = load_private_key(key)  # before anything is written: a bad key changes nothing
    payload = canonical_json(statement)
    signature = private.sign(pae(DSSE_PAYLOAD_TYPE, payload))
    return {
        "payloadType": DSSE_PAYLOAD_TYPE,
        "payload": base64.b64encode(payload).decode("ascii"),
        "signatures": [
            {"keyid": key_id(private.public_key()), "sig": base64.b64encode(signature).decode("ascii")}
        ],
    }


def open_envelope(envelope: dict[str, Any], path: Path) -> tuple[bytes, str | None, list[dict[str, Any]]]:
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
    envelope: dict[str, Any], payload: bytes, signatures: list[dict[str, Any]], key: Path, path: Path
) -> None:
    from cryptography.exceptions import InvalidSignature

    public = load_public_key(key)
    message = pae(str(envelope["payloadType"]), payload)
    for entry in signatures:
        try:
            signature = base64.b64decode(str(entry.get("sig", "")), validate=True)
            public.verify(signature, message)
        except (binascii.Error, ValueError, InvalidSignature):
            continue
        return
    raise SpecError(
        [
            Problem(
                path,
                None,
                "signatures",
                f"do not verify with the public key {key} (key id {key_id(public)[:16]}): the attestation "
                "was changed after it was signed, or signed with another key; "
                "get both files again from the author",
            )
        ]
    )


# -- keys -----------------------------------------------------------------------------------------


def key_id(public: Ed25519PublicKey) -> str:
    """sha256 of the raw 32-byte public key, in hex: names the key in the envelope."""
    from cryptography.hazmat.primitives import serialization

    raw = public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return hashlib.sha256(raw).hexdigest()


def generate_key(path: Path, *, force: bool = False) -> tuple[Path, Path]:
    """A new Ed25519 key pair: PATH (PKCS#8 PEM, mode 0600) and PATH.pub (PEM) to publish."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    public_path = path.with_name(path.name + ".pub")
    for existing in (path, public_path):
        if existing.exists() and not force:
            raise UsageError(f"{existing} already exists; pass --force to replace it or choose another path")
    private = Ed25519PrivateKey.generate()
    private_pem = private.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    public_pem = private.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    write_bytes_atomic(path, private_pem)  # created 0600 by the temp file and kept so
    write_bytes_atomic(public_path, public_pem)
    public_path.chmod(0o644)
    return path, public_path


def load_private_key(path: Path) -> Ed25519PrivateKey:
    """An Ed25519 private key from PEM (PKCS#8) or OpenSSH format, unencrypted."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    raw = _read_key(path)
    loaders = (serialization.load_pem_private_key, serialization.load_ssh_private_key)
    for load in loaders:
        try:
            key = load(raw, password=None)
        except TypeError:
            raise UsageError(
                f"key {path} is encrypted; reprobox signs with an unencrypted key: "
                "make one with `reprobox keygen`"
            ) from None
        except ValueError:
            continue
        if isinstance(key, Ed25519PrivateKey):
            return key
        raise UsageError(f"key {path} is not an Ed25519 key; make one with `reprobox keygen`")
    raise UsageError(
        f"{path} is not an Ed25519 private key in PEM or OpenSSH format; make one with `reprobox keygen`"
    )


def load_public_key(path: Path) -> Ed25519PublicKey:
    """An Ed25519 public key from PEM or OpenSSH (`ssh-ed25519 ...`) format."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    raw = _read_key(path)
    for load in (serialization.load_pem_public_key, serialization.load_ssh_public_key):
        try:
            key = load(raw)
        except (ValueError, TypeError):
            continue
        if isinstance(key, Ed25519PublicKey):
            return key
        raise UsageError(
            f"public key {path} is not an Ed25519 key; ask the author for the .pub of their signing key"
        )
    raise UsageError(
        f"{path} is not an Ed25519 public key in PEM or OpenSSH format; pass the author's .pub file "
        "(a private key is never needed to verify)"
    )


def _read_key(path: Path) -> bytes:
    try:
        return path.expanduser().read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read key {path} ({exc.strerror}); check the path") from None
