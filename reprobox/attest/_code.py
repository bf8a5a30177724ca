"""The attested code tree against a folder on this machine: where the code is and what changed."""

from __future__ import annotations

import os
from pathlib import Path

from reprobox import codetree
from reprobox.errors import UsageError
from reprobox.guest.filehash import file_sha256
from reprobox.records.attestation import Attestation


def attested_tree(tree: codetree.CodeTree) -> codetree.CodeTree:
    """The code tree without reprobox's own artefacts (the attestations next to job files); runs made
    by older versions recorded them."""
    files = {p: d for p, d in tree.files.items() if not codetree.is_reprobox_artefact(Path(p).name)}
    return codetree.CodeTree(
        digest=codetree.tree_digest(files), files=files, git=tree.git, selection=tree.selection
    )


def locate_code(attestation: Attestation, cwd: Path | None = None) -> Path:
    """The code folder to check when none is given: the one around the attestation when it sits next
    to its job file (where `reprobox attest` puts it), else the current directory."""
    job = attestation.job
    here = attestation.path.absolute().parent
    candidate = here / Path(job["file"]).name
    if candidate.is_file() and file_sha256(candidate) == job["sha256"]:
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
