"""Where an attestation goes: its file name next to the job file, and the default signing key.

The type names, versions and read form are the record's own (`reprobox.records.attestation`).
"""

from __future__ import annotations

from pathlib import Path

from reprobox import codetree
from reprobox.errors import UsageError

ATTESTATION_NAME = codetree.ATTESTATION_NAME  # "reprobox.attestation.json"
DEFAULT_KEY = Path("~/.config/reprobox/signing.key")
REPROBOX_ARTEFACTS = frozenset({ATTESTATION_NAME})  # and every "<job>.reprobox.attestation.json"
DEFAULT_JOB_STEM = "job"  # job.yaml's attestation keeps the plain name


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
