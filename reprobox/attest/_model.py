"""What an attestation is: the in-toto and reprobox type names, where the file goes, the read form."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reprobox import codetree
from reprobox.errors import UsageError

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE_PREFIX = "https://reprobox.dev/attestation/"
PREDICATE_TYPE = PREDICATE_TYPE_PREFIX + "v1"
PREDICATE_SCHEMA_PREFIX = "reprobox.attestation/"
PREDICATE_SCHEMA = PREDICATE_SCHEMA_PREFIX + "1"
DSSE_PAYLOAD_TYPE = "application/vnd.in-toto+json"
ATTESTATION_NAME = codetree.ATTESTATION_NAME  # "reprobox.attestation.json"
MAX_ATTESTATION_BYTES = 64 << 20  # a hand-made giant file is bad input, not a reason to run out of memory
DEFAULT_KEY = Path("~/.config/reprobox/signing.key")
REPROBOX_ARTEFACTS = frozenset({ATTESTATION_NAME})  # and every "<job>.reprobox.attestation.json"
DEFAULT_JOB_STEM = "job"  # job.yaml's attestation keeps the plain name


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
    """Where an attestation goes by default: next to the job file, so it travels with the code.

    `job.yaml` gets `reprobox.attestation.json`; any other job file `<stem>.yaml` gets
    `<stem>.reprobox.attestation.json`, so two job files in one folder keep one attestation each.
    """
    stem = job_file.stem
    return job_file.parent / (ATTESTATION_NAME if stem == DEFAULT_JOB_STEM else f"{stem}.{ATTESTATION_NAME}")


def attestation_in(folder: Path) -> Path | None:
    """The attestation in a code folder (`reprobox reproduce .`): the plain one, else the only
    `<job>.reprobox.attestation.json`; several of those must be chosen by name."""
    plain = folder / ATTESTATION_NAME
    if plain.is_file():
        return plain
    found = sorted(p for p in folder.glob(f"*.{ATTESTATION_NAME}") if p.is_file())
    if len(found) > 1:
        names = ", ".join(p.name for p in found)
        raise UsageError(f"{folder} holds several attestations ({names}); pass the one to reproduce")
    return found[0] if found else None
