"""The attestation file: written atomically (plain or signed), read back and checked."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from reprobox.attest._model import ATTESTATION_NAME
from reprobox.attest._model_signature import model_signature_path_for, sign_checkpoints, signs_models
from reprobox.attest._signing import open_envelope, signed_envelope, verify_envelope
from reprobox.attest._validate import validate_statement
from reprobox.errors import Problem, SpecError
from reprobox.fileio import JsonTooDeep, loads_bounded, write_text_atomic
from reprobox.records.attestation import MAX_ATTESTATION_BYTES, Attestation


def check_statement(statement: dict[str, Any], path: Path = Path(ATTESTATION_NAME)) -> None:
    """Raise SpecError unless the statement is one `read_attestation` would accept."""
    problems = validate_statement(statement, path)
    if problems:
        raise SpecError(problems)


def write_attestation(
    path: Path, statement: dict[str, Any], *, key: Path | None = None, checkpoints: Path | None = None
) -> Path:
    """Write the statement atomically: as is, or signed with `key` inside a DSSE envelope.

    With an ECDSA `key` and `checkpoints` (the folder holding the run's checkpoint files, its outputs)
    the model's OpenSSF signature is written beside it too (`model_signature_path_for`); a checkpoint
    missing or changed since its run is refused before anything is written.
    """
    check_statement(statement, path)
    if key is None:
        write_text_atomic(path, json.dumps(statement, indent=2, sort_keys=True, ensure_ascii=False) + "\n")
        return path
    envelope = signed_envelope(statement, key)  # before anything is written: a bad key changes nothing
    model = None
    if checkpoints is not None and signs_models(key):
        path.parent.mkdir(parents=True, exist_ok=True)
        model = sign_checkpoints(checkpoints, statement, key, model_signature_path_for(path))
    try:
        write_text_atomic(path, json.dumps(envelope, indent=2) + "\n")
    except BaseException:
        if model is not None:
            model.unlink(missing_ok=True)
        raise
    if model is not None:
        model.replace(model_signature_path_for(path))
    return path


def read_attestation(path: Path, *, verify_signature: Path | None = None) -> Attestation:
    """Read and check an attestation; SpecError names the file and field of every problem found.

    With `verify_signature` (the author's public key) the file must be a DSSE envelope whose signature
    verifies with that key; a changed payload or another signer is refused.
    """
    document = _load_json(path)
    signed, keyid, verified = False, None, False
    if isinstance(document, dict) and "payloadType" in document:
        signed = True
        payload, keyid, signatures = open_envelope(document, path)
        if verify_signature is not None:
            verify_envelope(document, payload, signatures, verify_signature, path)
            verified = True
        try:
            document = loads_bounded(payload.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as exc:
            raise SpecError([Problem(path, None, "payload", f"is not a JSON Statement ({exc})")]) from None
    elif verify_signature is not None:
        raise SpecError(
            [
                Problem(
                    path,
                    None,
                    "",
                    "is not signed, so --verify-signature cannot check it; ask the author for the signed "
                    "attestation (reprobox attest --sign KEY) or drop --verify-signature",
                )
            ]
        )
    problems = validate_statement(document, path)
    if problems:
        raise SpecError(problems)
    return Attestation(path=path, statement=document, signed=signed, keyid=keyid, signature_verified=verified)


def _load_json(path: Path) -> Any:
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        raise SpecError(
            [Problem(path, None, "", f"does not exist; pass the {ATTESTATION_NAME} the author published")]
        ) from None
    except OSError as exc:
        raise SpecError([Problem(path, None, "", f"cannot be read ({exc.strerror})")]) from None
    if size > MAX_ATTESTATION_BYTES:
        raise SpecError([Problem(path, None, "", f"is {size} bytes, too large for an attestation")])
    try:
        return loads_bounded(path.read_text(encoding="utf-8"))
    except JsonTooDeep as exc:
        raise SpecError(
            [
                Problem(
                    path,
                    None,
                    "",
                    f"{exc}, far deeper than an attestation; get the file again from the author",
                )
            ]
        ) from None
    except IsADirectoryError:
        raise SpecError(
            [Problem(path, None, "", f"is a directory; pass the {ATTESTATION_NAME} file in it")]
        ) from None
    except (OSError, ValueError) as exc:
        raise SpecError(
            [
                Problem(
                    path, None, "", f"is not a JSON attestation ({exc}); get the file again from the author"
                )
            ]
        ) from None
