"""Is this a reprobox in-toto Statement? Shape, schema version and internal consistency, all problems
collected before giving up, so a damaged or hand-edited attestation is named field by field."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from reprobox import codetree
from reprobox._version import __version__
from reprobox.attest._execution import check_execution, declared_env
from reprobox.attest._model import (
    PREDICATE_SCHEMA,
    PREDICATE_SCHEMA_PREFIX,
    PREDICATE_TYPE,
    PREDICATE_TYPE_PREFIX,
    STATEMENT_TYPE,
)
from reprobox.errors import Problem

_HEX64 = re.compile(r"^[0-9a-f]{64}$")


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
            check_execution(self, execution, declared_env(predicate.get("job"), self.path))
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
