"""Signing keys: ECDSA P-256 (the default) or Ed25519, in the PEM files other tools read as they are.

ECDSA P-256 because OpenSSF model signing (the format the model's signature takes) signs with NIST
curves only, so one key signs both the attestation and the model; Ed25519 keys made before keep
signing and verifying attestations. A key is named by the id securesystemslib (under in-toto and TUF)
computes for it: the sha256 of the canonical JSON of its keytype, scheme and public value, so that
library's `Envelope.verify` finds reprobox's signatures with a key loaded the usual way
(`SSlibKey.from_crypto`). Envelopes signed before carry the sha256 of the raw Ed25519 key as their
key id; the verifier here tries every signature whatever its key id, so they keep verifying.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from reprobox.errors import UsageError
from reprobox.fileio import write_bytes_atomic

if TYPE_CHECKING:
    from typing import TypeAlias

    from cryptography.hazmat.primitives.asymmetric.ec import EllipticCurvePrivateKey, EllipticCurvePublicKey
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
    from cryptography.hazmat.primitives.hashes import HashAlgorithm

    PrivateKey: TypeAlias = Ed25519PrivateKey | EllipticCurvePrivateKey
    PublicKey: TypeAlias = Ed25519PublicKey | EllipticCurvePublicKey

ECDSA_P256 = "ecdsa-p256"
ED25519 = "ed25519"
KEY_TYPES = (ECDSA_P256, ED25519)
# curve -> (securesystemslib scheme, hash bits): the schemes the in-toto ecosystem names these keys by
_EC_SCHEMES = {
    "secp256r1": ("ecdsa-sha2-nistp256", 256),
    "secp384r1": ("ecdsa-sha2-nistp384", 384),
    "secp521r1": ("ecdsa-sha2-nistp521", 512),
}
_MAKE_ONE = "make one with `reprobox keygen`"


@dataclass(frozen=True)
class KeyFacts:
    """What the ecosystem calls a public key: securesystemslib's keytype, scheme and public value."""

    keytype: str
    scheme: str
    public: str

    @property
    def keyid(self) -> str:
        key = {"keytype": self.keytype, "scheme": self.scheme, "keyval": {"public": self.public}}
        return hashlib.sha256(_olpc_canonical(key)).hexdigest()


def key_facts(public: PublicKey) -> KeyFacts:
    """Keytype, scheme and public value as `SSlibKey.from_crypto` derives them."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ec import EllipticCurvePublicKey

    if isinstance(public, EllipticCurvePublicKey):
        pem = public.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        return KeyFacts("ecdsa", _EC_SCHEMES[public.curve.name][0], pem.decode("ascii"))
    raw = public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return KeyFacts("ed25519", "ed25519", raw.hex())


def key_id(public: PublicKey) -> str:
    """The key id securesystemslib computes for this key: names the key in the envelope."""
    return key_facts(public).keyid


def legacy_key_id(public: PublicKey) -> str | None:
    """The id envelopes signed with an Ed25519 key carried before: sha256 of the raw key."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    if not isinstance(public, Ed25519PublicKey):
        return None
    raw = public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return hashlib.sha256(raw).hexdigest()


def is_ecdsa(public: PublicKey) -> bool:
    from cryptography.hazmat.primitives.asymmetric.ec import EllipticCurvePublicKey

    return isinstance(public, EllipticCurvePublicKey)


def is_ecdsa_key(path: Path) -> bool:
    """Whether the public key file at `path` holds an ECDSA key (the kind model signatures are made with)."""
    return is_ecdsa(load_public_key(path))


def sign(private: PrivateKey, message: bytes) -> bytes:
    """An Ed25519 signature, or a DER-encoded ECDSA one over the curve's own hash (as DSSE tools expect)."""
    from cryptography.hazmat.primitives.asymmetric import ec

    if isinstance(private, ec.EllipticCurvePrivateKey):
        return private.sign(message, ec.ECDSA(_hash_for(private.public_key())))
    return private.sign(message)


def verifies(public: PublicKey, signature: bytes, message: bytes) -> bool:
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.asymmetric import ec

    try:
        if isinstance(public, ec.EllipticCurvePublicKey):
            public.verify(signature, message, ec.ECDSA(_hash_for(public)))
        else:
            public.verify(signature, message)
    except (InvalidSignature, ValueError):
        return False
    return True


def _hash_for(public: EllipticCurvePublicKey) -> HashAlgorithm:
    from cryptography.hazmat.primitives import hashes

    bits = _EC_SCHEMES[public.curve.name][1]
    return {256: hashes.SHA256(), 384: hashes.SHA384(), 512: hashes.SHA512()}[bits]


def generate_key(path: Path, *, key_type: str = ECDSA_P256, force: bool = False) -> tuple[Path, Path]:
    """A new key pair: PATH (PKCS#8 PEM, mode 0600) and PATH.pub (SubjectPublicKeyInfo PEM) to publish."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    if key_type not in KEY_TYPES:
        raise UsageError(f"--type must be one of {', '.join(KEY_TYPES)}, not {key_type!r}")
    public_path = path.with_name(path.name + ".pub")
    for existing in (path, public_path):
        if existing.exists() and not force:
            raise UsageError(f"{existing} already exists; pass --force to replace it or choose another path")
    private: PrivateKey = (
        ec.generate_private_key(ec.SECP256R1()) if key_type == ECDSA_P256 else Ed25519PrivateKey.generate()
    )
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


def load_private_key(path: Path) -> PrivateKey:
    """An ECDSA (P-256/384/521) or Ed25519 private key: PEM (PKCS#8, SEC1) or OpenSSH, unencrypted."""
    from cryptography.hazmat.primitives import serialization

    raw = _read_key(path)
    for load in (serialization.load_pem_private_key, serialization.load_ssh_private_key):
        try:
            key = load(raw, password=None)
        except TypeError:
            raise UsageError(
                f"key {path} is encrypted; reprobox signs with an unencrypted key: {_MAKE_ONE}"
            ) from None
        except ValueError:
            continue
        if _supported(key.public_key()):
            return key  # type: ignore[return-value]
        raise UsageError(f"key {path} is neither an ECDSA (P-256, P-384, P-521) nor Ed25519 key; {_MAKE_ONE}")
    raise UsageError(f"{path} is not an ECDSA or Ed25519 private key in PEM or OpenSSH format; {_MAKE_ONE}")


def load_public_key(path: Path) -> PublicKey:
    """An ECDSA or Ed25519 public key from PEM or OpenSSH (`ssh-ed25519 ...`, `ecdsa-sha2-...`) format."""
    from cryptography.hazmat.primitives import serialization

    raw = _read_key(path)
    for load in (serialization.load_pem_public_key, serialization.load_ssh_public_key):
        try:
            key = load(raw)
        except (ValueError, TypeError):
            continue
        if _supported(key):
            return key  # type: ignore[return-value]
        raise UsageError(
            f"public key {path} is neither an ECDSA nor an Ed25519 key; "
            "ask the author for the .pub of their signing key"
        )
    raise UsageError(
        f"{path} is not an ECDSA or Ed25519 public key in PEM or OpenSSH format; pass the author's .pub "
        "file (a private key is never needed to verify)"
    )


def _supported(public: object) -> bool:
    from cryptography.hazmat.primitives.asymmetric.ec import EllipticCurvePublicKey
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    if isinstance(public, EllipticCurvePublicKey):
        return public.curve.name in _EC_SCHEMES
    return isinstance(public, Ed25519PublicKey)


def _read_key(path: Path) -> bytes:
    try:
        return path.expanduser().read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read key {path} ({exc.strerror}); check the path") from None


def _olpc_canonical(value: Mapping[str, object]) -> bytes:
    """OLPC canonical JSON (securesystemslib's `encode_canonical`) of a dict of strings and dicts:
    sorted keys, no whitespace, strings with only backslash and double quote escaped."""
    parts = []
    for name in sorted(value):
        item = value[name]
        text = _olpc_canonical(item).decode("utf-8") if isinstance(item, Mapping) else _olpc_string(str(item))
        parts.append(f"{_olpc_string(name)}:{text}")
    return ("{" + ",".join(parts) + "}").encode("utf-8")


def _olpc_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
