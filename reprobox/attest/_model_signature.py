"""The model's signature in the OpenSSF model-signing format, made and checked by `model_signing` itself.

`model_signing` (the OpenSSF library and CLI) writes a sigstore bundle v0.3: a DSSE envelope around an
in-toto Statement whose subject is a digest over the model files' digests and whose predicate lists
every file with its sha256, the same per-file sha256 that the attestation's subject names. The model
here is a run's outputs folder; outputs that are not checkpoints are listed as ignored paths in the
signed manifest, so `model_signing verify key OUTPUTS ...` checks exactly the attested checkpoints.
The library signs with ECDSA keys only (or keyless with sigstore, outside reprobox), so an Ed25519
key signs the attestation alone.

The signed manifest must name the attestation's checkpoints with their attested sha256: a checkpoint
changed since its run, or a signature over other files, is refused by name.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from reprobox import codetree
from reprobox.attest._keys import is_ecdsa, load_private_key, load_public_key
from reprobox.attest._signing import open_envelope, verify_envelope
from reprobox.errors import EnvironmentProblem, Problem, SpecError, UsageError
from reprobox.fileio import loads_bounded
from reprobox.guest.filehash import file_sha256

OMS_PREDICATE_TYPE = "https://model_signing/signature/v1.0"
MAX_MODEL_SIGNATURE_BYTES = 64 << 20
_INSTALL = "install it with: pip install 'reprobox[signing]'"


def model_signature_path_for(attestation: Path) -> Path:
    """Where the model's signature goes: beside the attestation, `[<job>.]reprobox.attestation.json` ->
    `[<job>.]reprobox.model.sig`, `<name>.json` -> `<name>.reprobox.model.sig` (never part of the code)."""
    name = attestation.name
    if name.endswith(codetree.ATTESTATION_NAME):
        return attestation.with_name(name[: -len(codetree.ATTESTATION_NAME)] + codetree.MODEL_SIGNATURE_NAME)
    return attestation.with_name(f"{attestation.stem}.{codetree.MODEL_SIGNATURE_NAME}")


def signs_models(key: Path) -> bool:
    """Whether OpenSSF model signing can sign with the private key at `key` (ECDSA keys only)."""
    return is_ecdsa(load_private_key(key).public_key())


def attested_files(statement: Mapping[str, Any]) -> dict[str, str]:
    """Checkpoint path -> file sha256, as the Statement's subject names them."""
    return {str(s["name"]): str(s["digest"]["sha256"]) for s in statement["subject"]}


def sign_checkpoints(outputs: Path, statement: Mapping[str, Any], key: Path, target: Path) -> Path:
    """Sign the checkpoints in `outputs` with `model_signing` into a temporary file beside `target`.

    Returns the temporary file (the caller moves it into place once the attestation is written).
    UsageError when a checkpoint is missing or changed since its run; nothing is left behind then.
    """
    expected = attested_files(statement)
    missing = sorted(name for name in expected if not (outputs / name).is_file())
    if missing:
        raise UsageError(
            f"cannot sign the model: {', '.join(missing)} not in {outputs}; sign on the machine that holds "
            "the runs' outputs (a key from `reprobox keygen --type ed25519` signs the attestation alone)"
        )
    model_signing = _model_signing()
    ignored = _not_checkpoints(outputs, set(expected))
    hashing = model_signing.hashing.Config().set_ignored_paths(paths=ignored, ignore_git_paths=False)
    # named like the signature (`.tmp-XXXX.reprobox.model.sig`), so that a crash leaves no file the code
    # tree would count
    handle, temporary = tempfile.mkstemp(prefix=".tmp-", suffix=f".{target.name}", dir=target.parent)
    os.close(handle)
    made = Path(temporary)
    try:
        try:
            config = model_signing.signing.Config().use_elliptic_key_signer(private_key=key)
            config.set_hashing_config(hashing).sign(outputs, made)
        except (ValueError, OSError) as exc:
            raise UsageError(f"cannot sign the checkpoints in {outputs} ({exc})") from None
        signed = signed_files(_read_bundle(made), made)
        if signed != expected:
            raise UsageError(
                f"cannot sign the model: {_difference(signed, expected)} in {outputs}; the outputs changed "
                "since the runs: run `reprobox verify` again and sign those runs"
            )
    except BaseException:
        made.unlink(missing_ok=True)
        raise
    return made


def check_model_signature(
    signature: Path,
    statement: Mapping[str, Any],
    public_key: Path,
    *,
    checkpoints: Path | None = None,
) -> dict[str, Any]:
    """Check the model's signature: signed by `public_key`, over the attested checkpoints' sha256.

    With `checkpoints` (a folder holding them), `model_signing` also checks the files themselves.
    SpecError names the signature file and what is wrong; the facts checked are returned.
    """
    if not is_ecdsa(load_public_key(public_key)):
        raise SpecError(
            [
                _problem(
                    signature,
                    f"is an OpenSSF model signature, made with an ECDSA key, and {public_key} is an "
                    "Ed25519 key; pass the author's ECDSA .pub",
                )
            ]
        )
    bundle = _read_bundle(signature)
    envelope = bundle.get("dsseEnvelope")
    if not isinstance(envelope, dict):
        raise SpecError([_problem(signature, "holds no dsseEnvelope; get it again from the author")])
    payload, _keyid, signatures = open_envelope(envelope, signature)
    verify_envelope(envelope, payload, signatures, public_key, signature, what="the model's signature")
    signed = _resources(payload, signature)
    expected = attested_files(statement)
    if signed != expected:
        raise SpecError(
            [
                _problem(
                    signature,
                    f"signs other checkpoints than the attestation names ({_difference(signed, expected)}); "
                    "get both files again from the author",
                )
            ]
        )
    facts: dict[str, Any] = {"path": str(signature), "verified": True, "files": sorted(signed)}
    if checkpoints is not None:
        model_signing = _model_signing()
        config = model_signing.verifying.Config().use_elliptic_key_verifier(public_key=public_key)
        try:
            config.set_ignore_unsigned_files(True).verify(checkpoints, signature)
        except (ValueError, OSError) as exc:
            found = {n: file_sha256(checkpoints / n) for n in signed if (checkpoints / n).is_file()}
            detail = _difference(found, signed, "signed") or str(exc)[:300]
            raise SpecError(
                [
                    _problem(
                        signature,
                        f"does not verify the checkpoint files in {checkpoints} ({detail}): "
                        "they are not the files the author signed",
                    )
                ]
            ) from None
        facts["checkpoints_verified"] = str(checkpoints)
    return facts


def signed_files(bundle: Mapping[str, Any], path: Path) -> dict[str, str]:
    """File -> sha256 of the manifest a bundle signs (its signature unchecked: see check_model_signature)."""
    envelope = bundle.get("dsseEnvelope")
    if not isinstance(envelope, dict):
        raise SpecError([_problem(path, "holds no dsseEnvelope")])
    payload, _keyid, _signatures = open_envelope(envelope, path)
    return _resources(payload, path)


def _resources(payload: bytes, path: Path) -> dict[str, str]:
    try:
        statement = loads_bounded(payload.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise SpecError([_problem(path, "holds a payload that is not a JSON Statement")]) from None
    if not isinstance(statement, dict) or statement.get("predicateType") != OMS_PREDICATE_TYPE:
        raise SpecError([_problem(path, f"is not an OpenSSF model signature ({OMS_PREDICATE_TYPE})")])
    resources = (statement.get("predicate") or {}).get("resources")
    if not isinstance(resources, list):
        resources = []
    found: dict[str, str] = {}
    for item in resources:
        if isinstance(item, dict) and item.get("algorithm") == "sha256":
            found[str(item.get("name"))] = str(item.get("digest"))
    if not found or len(found) != len(resources):
        raise SpecError([_problem(path, "does not list the signed files with their sha256")])
    return found


def _read_bundle(path: Path) -> dict[str, Any]:
    try:
        if path.stat().st_size > MAX_MODEL_SIGNATURE_BYTES:
            raise SpecError([_problem(path, "is too large for a model signature")])
        bundle = loads_bounded(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SpecError([_problem(path, "does not exist")]) from None
    except (OSError, ValueError) as exc:
        raise SpecError([_problem(path, f"is not a sigstore bundle ({exc}); get it again")]) from None
    if not isinstance(bundle, dict):
        raise SpecError([_problem(path, "is not a sigstore bundle (a JSON object)")])
    return bundle


def _not_checkpoints(outputs: Path, checkpoints: set[str]) -> list[str]:
    """The outputs to leave out of the signature: whole folders holding no checkpoint, other files."""
    keep_dirs = {Path(name).parent.as_posix() for name in checkpoints}
    keep_dirs |= {p.as_posix() for name in checkpoints for p in Path(name).parents}
    ignored: list[str] = []
    for root, dirs, files in os.walk(outputs):
        relative = Path(root).relative_to(outputs)
        for name in sorted(dirs):
            sub = (relative / name).as_posix()
            if sub not in keep_dirs:
                ignored.append(sub)
        dirs[:] = sorted(d for d in dirs if (relative / d).as_posix() in keep_dirs)
        ignored += sorted(
            (relative / f).as_posix() for f in files if (relative / f).as_posix() not in checkpoints
        )
    return ignored


def _difference(found: Mapping[str, str], expected: Mapping[str, str], what: str = "attested") -> str:
    """What differs between files found and files expected: changed, missing or extra, by name."""
    changed = sorted(n for n in expected if n in found and found[n] != expected[n])
    missing = sorted(set(expected) - set(found))
    extra = sorted(set(found) - set(expected))
    absent = "is missing" if what == "signed" else "is not signed"
    parts = [f"{n} differs from its {what} sha256" for n in changed]
    parts += [f"{n} {absent}" for n in missing] + [f"{n} is not {what}" for n in extra]
    return "; ".join(parts[:4]) + ("; ..." if len(parts) > 4 else "")


def _model_signing() -> Any:
    try:
        import model_signing
    except ImportError as exc:
        raise EnvironmentProblem(
            f"the model's signature needs the `model_signing` package ({exc.name} is missing); {_INSTALL}"
        ) from None
    return model_signing


def _problem(path: Path, message: str) -> Problem:
    return Problem(path, None, "", message)
