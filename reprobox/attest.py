"""The attestation an author publishes: verified runs -> one in-toto Statement a reviewer can replay.

The file is an in-toto Statement v1 (``_type: https://in-toto.io/Statement/v1``): its ``subject`` is
the checkpoints with their sha256, its ``predicate`` (type ``PREDICATE_TYPE``) what a reviewer needs to
run the same job again and judge the result: the job file's text and digest, the code tree's per-file
digests, the image with its lock digest and labels, the execution settings, the author's fingerprint
and stack digest, the number of verified runs and every checkpoint's file, content and tensor hashes.

Signing. A signed attestation is a DSSE envelope (the in-toto signing layer) around the Statement,
signed with Ed25519. DSSE rather than a detached ``.sig``: the author still publishes one file, the
signature covers the exact payload bytes (nothing has to be re-serialised to verify it, so no JSON
canonicalisation can disagree between signer and verifier), and in-toto, cosign and sigstore tooling
read DSSE as is. The payload is the Statement's canonical JSON: UTF-8, keys sorted at every level, no
insignificant whitespace (``separators=(",", ":")``), non-ASCII kept as is, NaN and infinities refused.
The signed bytes are DSSE's pre-authentication encoding of (``application/vnd.in-toto+json``,
payload). An unsigned attestation is the Statement itself, indented for people.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from reprobox import codetree
from reprobox._version import __version__
from reprobox.compare import IDENTICAL, compare_runs
from reprobox.errors import Problem, SpecError, UsageError
from reprobox.manifest import RunRecord, write_bytes_atomic, write_text_atomic

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE_PREFIX = "https://reprobox.dev/attestation/"
PREDICATE_TYPE = PREDICATE_TYPE_PREFIX + "v1"
PREDICATE_SCHEMA_PREFIX = "reprobox.attestation/"
PREDICATE_SCHEMA = PREDICATE_SCHEMA_PREFIX + "1"
DSSE_PAYLOAD_TYPE = "application/vnd.in-toto+json"
ATTESTATION_NAME = "reprobox.attestation.json"
MAX_ATTESTATION_BYTES = 64 << 20  # a hand-made giant file is bad input, not a reason to run out of memory
DEFAULT_KEY = Path("~/.config/reprobox/signing.key")
REPROBOX_ARTEFACTS = frozenset({ATTESTATION_NAME})  # never part of the attested code tree
_HEX64 = re.compile(r"^[0-9a-f]{64}$")


@dataclass(frozen=True)
class Attestation:
    """A read and validated attestation; `statement` is the in-toto Statement."""

    path: Path
    statement: dict[str, Any]
    signed: bool = False
    keyid: str | None = None
    signature_verified: bool = False

    @property
    def predicate(self) -> dict[str, Any]:
        return dict(self.statement["predicate"])

    @property
    def job(self) -> dict[str, Any]:
        return dict(self.predicate["job"])

    @property
    def code(self) -> dict[str, Any]:
        return dict(self.predicate["code"])

    @property
    def image(self) -> dict[str, Any] | None:
        image = self.predicate.get("image")
        return dict(image) if image else None

    @property
    def checkpoints(self) -> list[dict[str, Any]]:
        return [dict(c) for c in self.predicate["checkpoints"]]

    @property
    def fingerprint(self) -> dict[str, Any]:
        return dict(self.predicate["fingerprint"])

    @property
    def execution(self) -> dict[str, Any]:
        return dict(self.predicate["execution"])

    @property
    def runtime(self) -> str:
        return str(self.predicate["runtime"])

    @property
    def verified_runs(self) -> int:
        return int(self.predicate["runs"]["verified"])


def attestation_path_for(job_file: Path) -> Path:
    """Where an attestation goes by default: next to the job file, so it travels with the code."""
    return job_file.parent / ATTESTATION_NAME


def attested_tree(tree: codetree.CodeTree) -> codetree.CodeTree:
    """The code tree without reprobox's own artefacts (the attestation next to the job file)."""
    files = {p: d for p, d in tree.files.items() if Path(p).name not in REPROBOX_ARTEFACTS}
    return codetree.CodeTree(digest=codetree.tree_digest(files), files=files)


def locate_code(attestation: Attestation, cwd: Path | None = None) -> Path:
    """The code folder to check when none is given: the one around the attestation when it sits next
    to its job file (where `reprobox attest` puts it), else the current directory."""
    job = attestation.job
    here = attestation.path.absolute().parent
    candidate = here / Path(job["file"]).name
    if candidate.is_file() and hashlib.sha256(candidate.read_bytes()).hexdigest() == job["sha256"]:
        return Path(os.path.normpath(here / job["code"]))
    return (cwd or Path.cwd()).absolute()


def code_changes(
    attestation: Attestation, code_dir: Path, *, exclude: tuple[Path, ...] = ()
) -> dict[str, list[str]] | None:
    """None when `code_dir` holds exactly the attested tree, else the added, removed and changed files."""
    if not code_dir.is_dir():
        raise UsageError(f"code folder {code_dir} does not exist; pass --code DIR with the paper's code")
    tree = attested_tree(codetree.digest_tree(code_dir, exclude=exclude))
    expected = attestation.code
    if tree.digest == expected["sha256"]:
        return None
    return codetree.changed_files(dict(expected["files"]), tree.files)


def job_file_in(attestation: Attestation, code_dir: Path) -> Path:
    """Where the job file sits relative to the code folder, as it did on the author's machine."""
    return Path(os.path.normpath(code_dir / attestation.job["file"]))


# -- building -------------------------------------------------------------------------------------


def build_attestation(records: Sequence[RunRecord]) -> dict[str, Any]:
    """The in-toto Statement for runs that finished with bit-identical checkpoints.

    Raises UsageError when the runs cannot be attested: none given, one failed or was only a prefix
    check, they ran different jobs, code or images, their checkpoints differ, or the job file changed.
    """
    if not records:
        raise UsageError("give at least one run directory to attest, e.g. runs/<job>/<run-id>")
    _check_attestable(records)
    first = records[0]
    data = first.data
    job_file = Path(str(data.get("job_file") or data["job"]["job_file"]))
    code = data.get("code") or {}
    code_dir = Path(str(code.get("path") or data["job"]["code"]))
    job_text = _job_text(job_file, str(data.get("job_file_sha256")), first.run_dir)
    tree = attested_tree(codetree.CodeTree(digest=str(code["sha256"]), files=dict(code["files"])))
    fingerprint = first.fingerprint
    checkpoints = [
        _checkpoint_entry(c, records) for c in sorted(first.checkpoints, key=lambda c: str(c["path"]))
    ]
    predicate: dict[str, Any] = {
        "schema": PREDICATE_SCHEMA,
        "reprobox_version": __version__,
        "job": {
            "name": str(data.get("job_name", "")),
            "file": Path(os.path.relpath(job_file, code_dir)).as_posix(),
            "code": Path(os.path.relpath(code_dir, job_file.parent)).as_posix(),
            "sha256": str(data["job_file_sha256"]),
            "text": job_text,
            "spec": data.get("job", {}),
        },
        "code": {
            "schema": codetree.CODE_TREE_SCHEMA,
            "sha256": tree.digest,
            "files": tree.files,
            "run_sha256": str(code["sha256"]),
        },
        "runtime": str((data.get("runtime") or {}).get("name", "local")),
        "image": _image_entry(data),
        "execution": _execution(data, fingerprint),
        "fingerprint": fingerprint,
        "stack_digest": fingerprint.get("stack_digest"),
        "runs": {
            "verified": len(records),
            "run_ids": [r.run_id for r in records],
            "stack_digests": sorted({str(r.fingerprint.get("stack_digest")) for r in records}),
            "started_at": min(str(r.data.get("started_at", "")) for r in records),
            "ended_at": max(str(r.data.get("ended_at", "")) for r in records),
        },
        "checkpoints": checkpoints,
        "trail": _trail_entry(first),
    }
    return {
        "_type": STATEMENT_TYPE,
        "subject": [{"name": c["path"], "digest": {"sha256": c["file_sha256"]}} for c in checkpoints],
        "predicateType": PREDICATE_TYPE,
        "predicate": predicate,
    }


def _check_attestable(records: Sequence[RunRecord]) -> None:
    for record in records:
        if not record.succeeded:
            raise UsageError(
                f"run {record.run_dir} {record.status} ({record.failure or 'no reason recorded'}); "
                "attest only runs that succeeded"
            )
        if record.data.get("prefix_check") or record.data.get("stopped_early"):
            raise UsageError(
                f"run {record.run_dir} stopped early (a prefix check); "
                "attest complete runs, made without --max-steps"
            )
        if not record.checkpoints:
            raise UsageError(
                f"run {record.run_dir} recorded no checkpoints, so there is nothing to attest; "
                "write them to $REPROBOX_OUTPUT_DIR and list them under 'checkpoints' in the job file"
            )
    first = records[0].data
    for record in records[1:]:
        for key, what in (
            ("job_file_sha256", "job file"),
            ("seed", "seed"),
            ("job_name", "job"),
        ):
            if record.data.get(key) != first.get(key):
                raise UsageError(
                    f"runs {records[0].run_dir} and {record.run_dir} have different {what}s; "
                    "attest runs of one job, e.g. the runs of one `reprobox verify`"
                )
        if (record.data.get("code") or {}).get("sha256") != (first.get("code") or {}).get("sha256"):
            raise UsageError(
                f"runs {records[0].run_dir} and {record.run_dir} ran different code trees; "
                "attest runs of one job, e.g. the runs of one `reprobox verify`"
            )
        if _image_id(record.data) != _image_id(first):
            raise UsageError(
                f"runs {records[0].run_dir} and {record.run_dir} ran in different images; "
                "attest runs of one image, e.g. the runs of one `reprobox verify`"
            )
    if len(records) > 1:
        comparison = compare_runs(records, tensor_details=False)
        if comparison.verdict != IDENTICAL:
            differing = [c["path"] for c in comparison.checkpoints if not c["identical"]]
            raise UsageError(
                f"the runs' checkpoints are not bit-identical ({', '.join(differing) or comparison.verdict});"
                " "
                "only reproducible results can be attested: see `reprobox compare` for why they differ"
            )


def _job_text(job_file: Path, expected: str, run_dir: Path) -> str:
    try:
        raw = job_file.read_bytes()
    except OSError as exc:
        raise UsageError(
            f"cannot read the job file {job_file} recorded by run {run_dir} ({exc.strerror}); "
            "attest on the machine and checkout that made the runs"
        ) from None
    if hashlib.sha256(raw).hexdigest() != expected:
        raise UsageError(
            f"job file {job_file} changed since run {run_dir}; "
            "run `reprobox verify` again and attest those runs"
        )
    return raw.decode("utf-8")


def _image_id(data: Mapping[str, Any]) -> str | None:
    image = (data.get("runtime") or {}).get("image") or {}
    return str(image["id"]) if image.get("id") else None


def _image_entry(data: Mapping[str, Any]) -> dict[str, Any] | None:
    """The image as a reviewer finds it: by digest when it was pushed, else by id; lock and labels."""
    image = (data.get("runtime") or {}).get("image") or {}
    if not image.get("id"):
        return None
    labels = {str(k): str(v) for k, v in (image.get("labels") or {}).items()}
    repo_digest = image.get("repo_digest")
    return {
        "reference": repo_digest or image["id"],
        "id": image["id"],
        "repo_digest": repo_digest,
        "tags": list(image.get("tags") or []),
        "labels": labels,
        "lock": labels.get("io.reprobox.lock"),
        "lock_digest": labels.get("io.reprobox.lock-digest"),
        "build_digest": labels.get("io.reprobox.build-digest"),
    }


def _execution(data: Mapping[str, Any], fingerprint: Mapping[str, Any]) -> dict[str, Any]:
    """The settings a reviewer replays: seed, determinism, the effective thread counts, world size, env."""
    job = data.get("job") or {}
    software = fingerprint.get("software") or {}
    launcher = job.get("launcher") or {}
    world_size = (software.get("distributed") or {}).get("world_size")
    if not isinstance(world_size, int):
        world_size = int(launcher.get("nproc_per_node", 1)) * int(launcher.get("nnodes", 1))
    return {
        "seed": data.get("seed", job.get("seed", 0)),
        "determinism": job.get("determinism") or {},
        "threads": software.get("threads") or {},
        "world_size": world_size,
        "launcher": launcher,
        "env": job.get("env") or {},
        "trail_every": (job.get("trail") or {}).get("every"),
    }


def _checkpoint_entry(entry: Mapping[str, Any], records: Sequence[RunRecord]) -> dict[str, Any]:
    """The first run's hashes, and every run's file sha256: equal weights may be saved in other bytes."""
    keep = ("path", "format", "file_sha256", "content_sha256", "tensors", "metadata")
    result = {key: entry[key] for key in keep if key in entry}
    runs = [(r.checkpoint(str(entry["path"])) or {}).get("file_sha256") for r in records]
    result["file_sha256_runs"] = sorted({str(h) for h in runs if h})
    return result


def _trail_entry(record: RunRecord) -> dict[str, Any] | None:
    name = record.data.get("trail")
    if not name:
        return None
    path = record.run_dir / str(name)
    digest = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None
    every = ((record.data.get("job") or {}).get("trail") or {}).get("every")
    return {"file": str(name), "sha256": digest, "every": every}


# -- writing --------------------------------------------------------------------------------------


def canonical_json(statement: Mapping[str, Any]) -> bytes:
    """The bytes that are signed: sorted keys, no whitespace, UTF-8, no NaN (see the module docstring)."""
    return json.dumps(
        statement, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode("utf-8")


def pae(payload_type: str, payload: bytes) -> bytes:
    """DSSE's pre-authentication encoding: what an Ed25519 signature of an envelope covers."""
    kind = payload_type.encode("utf-8")
    return b"DSSEv1 %d %s %d %s" % (len(kind), kind, len(payload), payload)


def write_attestation(path: Path, statement: dict[str, Any], *, key: Path | None = None) -> Path:
    """Write the statement atomically: as is, or signed with `key` inside a DSSE envelope."""
    problems = validate_statement(statement, path)
    if problems:
        raise SpecError(problems)
    if key is None:
        write_text_atomic(path, json.dumps(statement, indent=2, sort_keys=True, ensure_ascii=False) + "\n")
        return path
    private = load_private_key(key)  # before anything is written: a bad key changes nothing
    payload = canonical_json(statement)
    signature = private.sign(pae(DSSE_PAYLOAD_TYPE, payload))
    envelope = {
        "payloadType": DSSE_PAYLOAD_TYPE,
        "payload": base64.b64encode(payload).decode("ascii"),
        "signatures": [
            {"keyid": key_id(private.public_key()), "sig": base64.b64encode(signature).decode("ascii")}
        ],
    }
    write_text_atomic(path, json.dumps(envelope, indent=2) + "\n")
    return path


# -- reading --------------------------------------------------------------------------------------


def read_attestation(path: Path, *, verify_signature: Path | None = None) -> Attestation:
    """Read and check an attestation; SpecError names the file and field of every problem found.

    With `verify_signature` (the author's public key) the file must be a DSSE envelope whose signature
    verifies with that key; a changed payload or another signer is refused.
    """
    document = _load_json(path)
    signed, keyid, verified = False, None, False
    if isinstance(document, dict) and "payloadType" in document:
        signed = True
        payload, keyid, signatures = _open_envelope(document, path)
        if verify_signature is not None:
            _verify_envelope(document, payload, signatures, verify_signature, path)
            verified = True
        try:
            document = json.loads(payload.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
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
        return json.loads(path.read_text(encoding="utf-8"))
    except IsADirectoryError:
        raise SpecError(
            [Problem(path, None, "", f"is a directory; pass the {ATTESTATION_NAME} file in it")]
        ) from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise SpecError(
            [
                Problem(
                    path, None, "", f"is not a JSON attestation ({exc}); get the file again from the author"
                )
            ]
        ) from None


def _open_envelope(envelope: dict[str, Any], path: Path) -> tuple[bytes, str | None, list[dict[str, Any]]]:
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


def _verify_envelope(
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


def validate_statement(statement: Any, path: Path) -> list[Problem]:
    """Every problem with a Statement's shape, schema version and internal consistency."""
    if not isinstance(statement, dict):
        return [Problem(path, None, "", "is not a JSON object, so it is not an in-toto Statement")]
    if statement.get("_type") != STATEMENT_TYPE:
        return [
            Problem(
                path,
                None,
                "_type",
                f"is {statement.get('_type')!r}, expected {STATEMENT_TYPE!r} (in-toto v1)",
            )
        ]
    kind = statement.get("predicateType")
    if kind != PREDICATE_TYPE:
        return [
            Problem(
                path, None, "predicateType", _version_message(kind, PREDICATE_TYPE, PREDICATE_TYPE_PREFIX)
            )
        ]
    predicate = statement.get("predicate")
    if not isinstance(predicate, dict):
        return [Problem(path, None, "predicate", "is missing or not an object")]
    schema = predicate.get("schema")
    if schema != PREDICATE_SCHEMA:
        return [
            Problem(
                path,
                None,
                "predicate.schema",
                _version_message(schema, PREDICATE_SCHEMA, PREDICATE_SCHEMA_PREFIX),
            )
        ]
    checker = _Checker(path)
    checker.check_predicate(predicate)
    if not checker.problems:
        checker.check_consistency(statement, predicate)
    return checker.problems


def _version_message(found: Any, expected: str, prefix: str) -> str:
    if isinstance(found, str) and found.startswith(prefix):
        return (
            f"is {found!r}, a version this reprobox ({__version__}) does not read (it reads {expected!r}); "
            "install the reprobox version the author used"
        )
    return f"is {found!r}, expected {expected!r}; is this a reprobox attestation?"


class _Checker:
    """Collects every missing or mistyped field of a predicate before giving up."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.problems: list[Problem] = []

    def fail(self, field: str, message: str) -> None:
        self.problems.append(Problem(self.path, None, field, message))

    def get(self, mapping: Mapping[str, Any], key: str, kind: type | tuple[type, ...], field: str) -> Any:
        value = mapping.get(key)
        if key not in mapping:
            self.fail(field, "is missing; the attestation is incomplete, get it again from the author")
        elif not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
            names = " or ".join(k.__name__ for k in (kind if isinstance(kind, tuple) else (kind,)))
            self.fail(field, f"must be {names}, not {type(value).__name__}")
        else:
            return value
        return None

    def digest(self, mapping: Mapping[str, Any], key: str, field: str) -> None:
        value = self.get(mapping, key, str, field)
        if value is not None and not _HEX64.match(value):
            self.fail(field, "must be a sha256 digest (64 lowercase hex digits)")

    def check_predicate(self, predicate: Mapping[str, Any]) -> None:
        self.check_job_and_code(predicate)
        self.get(predicate, "runtime", str, "predicate.runtime")
        self.check_image(predicate.get("image"))
        execution = self.get(predicate, "execution", dict, "predicate.execution")
        if execution is not None:
            self.get(execution, "seed", int, "predicate.execution.seed")
            for key in ("determinism", "threads", "env"):
                self.get(execution, key, dict, f"predicate.execution.{key}")
        self.get(predicate, "fingerprint", dict, "predicate.fingerprint")
        runs = self.get(predicate, "runs", dict, "predicate.runs")
        if runs is not None:
            verified = self.get(runs, "verified", int, "predicate.runs.verified")
            if verified is not None and verified < 1:
                self.fail("predicate.runs.verified", f"must be at least 1, not {verified}")
        self.check_checkpoints(predicate)

    def check_job_and_code(self, predicate: Mapping[str, Any]) -> None:
        job = self.get(predicate, "job", dict, "predicate.job")
        if job is not None:
            for key in ("name", "file", "code", "text"):
                self.get(job, key, str, f"predicate.job.{key}")
            self.digest(job, "sha256", "predicate.job.sha256")
        code = self.get(predicate, "code", dict, "predicate.code")
        if code is not None:
            self.digest(code, "sha256", "predicate.code.sha256")
            files = self.get(code, "files", dict, "predicate.code.files")
            if files is not None and not all(isinstance(v, str) for v in files.values()):
                self.fail("predicate.code.files", "must map each path to its digest")

    def check_image(self, image: Any) -> None:
        if image is not None:
            if not isinstance(image, dict):
                self.fail("predicate.image", f"must be an object or null, not {type(image).__name__}")
            else:
                self.get(image, "id", str, "predicate.image.id")
                self.get(image, "labels", dict, "predicate.image.labels")

    def check_checkpoints(self, predicate: Mapping[str, Any]) -> None:
        checkpoints = self.get(predicate, "checkpoints", list, "predicate.checkpoints")
        if checkpoints is not None:
            if not checkpoints:
                self.fail(
                    "predicate.checkpoints", "is empty; an attestation vouches for at least one checkpoint"
                )
            for index, entry in enumerate(checkpoints):
                field = f"predicate.checkpoints.{index}"
                if not isinstance(entry, dict):
                    self.fail(field, "must be an object")
                    continue
                self.get(entry, "path", str, f"{field}.path")
                self.digest(entry, "file_sha256", f"{field}.file_sha256")
                self.digest(entry, "content_sha256", f"{field}.content_sha256")

    def check_consistency(self, statement: Mapping[str, Any], predicate: Mapping[str, Any]) -> None:
        """Parts that restate each other must agree: a hand edit of one of them is tampering."""
        expected = sorted((c["path"], c["file_sha256"]) for c in predicate["checkpoints"])
        subject = statement.get("subject")
        found: list[tuple[str, str]] = []
        if isinstance(subject, list):
            for item in subject:
                digest = item.get("digest") if isinstance(item, dict) else None
                if isinstance(digest, dict):
                    found.append((str(item.get("name")), str(digest.get("sha256"))))
        if sorted(found) != expected:
            self.fail(
                "subject",
                "does not list the checkpoints of predicate.checkpoints with their file sha256; "
                "the file was edited after it was made: get it again from the author",
            )
        code = predicate["code"]
        if codetree.tree_digest(code["files"]) != code["sha256"]:
            self.fail(
                "predicate.code.sha256",
                "does not match predicate.code.files; the file was edited after it was made: "
                "get it again from the author",
            )
        job = predicate["job"]
        if hashlib.sha256(job["text"].encode("utf-8")).hexdigest() != job["sha256"]:
            self.fail(
                "predicate.job.text",
                "does not match predicate.job.sha256; the file was edited after it was made: "
                "get it again from the author",
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
