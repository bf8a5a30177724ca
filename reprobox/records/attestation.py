"""The attestation's shape: an in-toto Statement v1 whose predicate (reprobox.attestation/1) holds what
a reviewer needs to run the same job again.

This module owns the type names and versions, the read form (`Attestation`, one typed property per
field the code uses) and the check of every field's presence and type, all problems collected before
giving up so that a damaged or hand-edited file is named field by field. What a replay may take from
the execution settings, and whether the parts that restate each other agree, is checked on top of
this by `reprobox.attest` (it needs the job file's YAML and the code tree's digest).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reprobox.errors import Problem
from reprobox.records._shape import unknown_version

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE_PREFIX = "https://reprobox.dev/attestation/"
PREDICATE_TYPE = PREDICATE_TYPE_PREFIX + "v1"
PREDICATE_SCHEMA_PREFIX = "reprobox.attestation/"
PREDICATE_SCHEMA = PREDICATE_SCHEMA_PREFIX + "1"
DSSE_PAYLOAD_TYPE = "application/vnd.in-toto+json"
MAX_ATTESTATION_BYTES = 64 << 20  # a hand-made giant file is bad input, not a reason to run out of memory
_HEX64 = re.compile(r"^[0-9a-f]{64}$")
VARIATION_NOT_APPLICABLE = "not applicable"
# `verify --vary`'s verdict per factor, as `predicate.variation.factors[].status` records it
VARIATION_STATUSES = ("invariant", "sensitive", "unsupported", VARIATION_NOT_APPLICABLE, "failed")
_VERSION_TODO = "install the reprobox version the author used"
_STRANGER = "is this a reprobox attestation?"


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
        """name, file (relative to the code folder), code (relative to the job file), sha256, text, spec."""
        return dict(self.predicate["job"])

    @property
    def job_spec(self) -> dict[str, Any]:
        """The job as it ran, as the author's run record had it."""
        return dict(self.job.get("spec") or {})

    @property
    def code(self) -> dict[str, Any]:
        return dict(self.predicate["code"])

    @property
    def image(self) -> dict[str, Any] | None:
        image = self.predicate.get("image")
        return dict(image) if image else None

    @property
    def image_id(self) -> str | None:
        return str(self.image["id"]) if self.image else None

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

    @property
    def runs_started_at(self) -> str:
        return str(self.predicate["runs"].get("started_at") or "")

    @property
    def runs_ended_at(self) -> str:
        return str(self.predicate["runs"].get("ended_at") or "")

    @property
    def variation(self) -> dict[str, Any] | None:
        """The author's variation matrix (`verify --vary`), when the attestation came from one."""
        variation = self.predicate.get("variation")
        return dict(variation) if variation else None

    @property
    def claims(self) -> list[dict[str, Any]]:
        """The claimed numbers the verified runs produced (`predicate.claims`); none in older attestations."""
        found = self.predicate.get("claims")
        return [dict(c) for c in found if isinstance(c, dict)] if isinstance(found, list) else []

    @property
    def seeds(self) -> dict[str, Any] | None:
        """The seed spread `verify --seeds` recorded: {seeds, runs_per_seed, claims, checkpoints}."""
        seeds = self.predicate.get("seeds")
        return dict(seeds) if isinstance(seeds, dict) else None

    @property
    def resumable(self) -> list[dict[str, Any]]:
        """The author's resumable checkpoints: {step, path, content_sha256, files}; empty without any."""
        found = self.predicate.get("resumable")
        return [dict(c) for c in found if isinstance(c, dict)] if isinstance(found, list) else []

    def factors_with_status(self, status: str) -> list[str]:
        """The factors the author's matrix gave this status, in the matrix's order."""
        rows = (self.variation or {}).get("factors") or []
        return [str(row["factor"]) for row in rows if row.get("status") == status]

    @property
    def trail_sha256(self) -> str | None:
        """The digest of the author's trail, when the runs recorded one."""
        digest = (self.predicate.get("trail") or {}).get("sha256")
        return str(digest) if digest else None


def version_problem(statement: Any, path: Path) -> Problem | None:
    """Whether this is a reprobox Statement of a version this reprobox reads; None when it is."""
    if not isinstance(statement, dict):
        return Problem(path, None, "", "is not a JSON object, so it is not an in-toto Statement")
    if statement.get("_type") != STATEMENT_TYPE:
        found = statement.get("_type")
        return Problem(path, None, "_type", f"is {found!r}, expected {STATEMENT_TYPE!r} (in-toto v1)")
    kind = statement.get("predicateType")
    if kind != PREDICATE_TYPE:
        sentence = unknown_version(kind, PREDICATE_TYPE, PREDICATE_TYPE_PREFIX, _VERSION_TODO, _STRANGER)
        return Problem(path, None, "predicateType", f"is {sentence}")
    predicate = statement.get("predicate")
    if not isinstance(predicate, dict):
        return Problem(path, None, "predicate", "is missing or not an object")
    schema = predicate.get("schema")
    if schema != PREDICATE_SCHEMA:
        sentence = unknown_version(
            schema, PREDICATE_SCHEMA, PREDICATE_SCHEMA_PREFIX, _VERSION_TODO, _STRANGER
        )
        return Problem(path, None, "predicate.schema", f"is {sentence}")
    return None


class FieldChecker:
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

    def check_predicate(
        self, predicate: Mapping[str, Any], execution: Callable[[FieldChecker, Mapping[str, Any]], None]
    ) -> None:
        """Every field; `execution` checks the execution settings' values (what a replay takes)."""
        self.check_job_and_code(predicate)
        self.get(predicate, "runtime", str, "predicate.runtime")
        self.check_image(predicate.get("image"))
        settings = self.get(predicate, "execution", dict, "predicate.execution")
        if settings is not None:
            execution(self, settings)
        self.get(predicate, "fingerprint", dict, "predicate.fingerprint")
        runs = self.get(predicate, "runs", dict, "predicate.runs")
        if runs is not None:
            verified = self.get(runs, "verified", int, "predicate.runs.verified")
            if verified is not None and verified < 1:
                self.fail("predicate.runs.verified", f"must be at least 1, not {verified}")
        self.check_checkpoints(predicate)
        self.check_variation(predicate.get("variation"))

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
            self.check_git(code.get("git"))

    def check_git(self, git: Any) -> None:
        """Optional (older attestations lack it): {commit: hex or null, dirty: bool}."""
        if git is None:
            return
        if not isinstance(git, dict):
            self.fail("predicate.code.git", f"must be an object or null, not {type(git).__name__}")
            return
        if git.get("commit") is not None and not isinstance(git.get("commit"), str):
            self.fail("predicate.code.git.commit", "must be a commit id or null")
        self.get(git, "dirty", bool, "predicate.code.git.dirty")

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

    def check_variation(self, variation: Any) -> None:
        """Optional (only `verify --vary` writes it): {runtime, factors: [{factor, status, values, ...}]}."""
        if variation is None:
            return
        if not isinstance(variation, dict):
            self.fail("predicate.variation", f"must be an object or null, not {type(variation).__name__}")
            return
        self.get(variation, "runtime", str, "predicate.variation.runtime")
        factors = self.get(variation, "factors", list, "predicate.variation.factors")
        for index, row in enumerate(factors or []):
            field = f"predicate.variation.factors.{index}"
            if not isinstance(row, dict):
                self.fail(field, "must be an object")
                continue
            for key in ("factor", "values", "baseline", "varied"):
                self.get(row, key, str, f"{field}.{key}")
            status = self.get(row, "status", str, f"{field}.status")
            if status is not None and status not in VARIATION_STATUSES:
                self.fail(
                    f"{field}.status", f"is {status!r}, expected one of {', '.join(VARIATION_STATUSES)}"
                )
