"""Is this a reprobox in-toto Statement? The shape and version of every field (see
`reprobox.records.attestation`), the execution settings a replay takes, and internal consistency, all
problems collected before giving up, so a damaged or hand-edited attestation is named field by field."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from reprobox import codetree
from reprobox.attest._claims import check_claims
from reprobox.attest._execution import check_execution, declared_env
from reprobox.attest._seeds import check_seeds
from reprobox.errors import Problem
from reprobox.records.attestation import FieldChecker, version_problem


def validate_statement(statement: Any, path: Path) -> list[Problem]:
    """Every problem with a Statement's shape, schema version and internal consistency."""
    problem = version_problem(statement, path)
    if problem is not None:
        return [problem]
    predicate = statement["predicate"]
    checker = FieldChecker(path)
    checker.check_predicate(
        predicate,
        lambda c, execution: check_execution(c, execution, declared_env(predicate.get("job"), path)),
    )
    check_claims(checker, predicate.get("claims"))
    check_seeds(checker, predicate.get("seeds"))
    if not checker.problems:
        _check_consistency(checker, statement, predicate)
    return checker.problems


def _check_consistency(
    checker: FieldChecker, statement: Mapping[str, Any], predicate: Mapping[str, Any]
) -> None:
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
        checker.fail(
            "subject",
            "does not list the checkpoints of predicate.checkpoints with their file sha256; "
            "the file was edited after it was made: get it again from the author",
        )
    code = predicate["code"]
    if codetree.tree_digest(code["files"]) != code["sha256"]:
        checker.fail(
            "predicate.code.sha256",
            "does not match predicate.code.files; the file was edited after it was made: "
            "get it again from the author",
        )
    job = predicate["job"]
    if hashlib.sha256(job["text"].encode("utf-8")).hexdigest() != job["sha256"]:
        checker.fail(
            "predicate.job.text",
            "does not match predicate.job.sha256; the file was edited after it was made: "
            "get it again from the author",
        )
