"""The job's code, as reprobox identifies it: which files, their digests, and the copy runs run from.

- ``_select``: which files are the code (git's view in a work tree, else ``.reproboxignore``), never
  caches, environments, reprobox's runs and attestations, or this process's own redirected output;
- ``_tree``: per-file digests and ``tree_digest``, the contract attestations are checked against;
- ``_snapshot``: the read-only, content-addressed copy made once per verify;
- ``_data``: digests of the data sources, made once per verify.
"""

from __future__ import annotations

from reprobox.codetree._data import (
    DataDigest,
    digest_data,
)
from reprobox.codetree._digest import (
    digest_tree,
)
from reprobox.codetree._git import git_environment
from reprobox.codetree._select import (
    ATTESTATION_NAME,
    MODE_GIT,
    MODE_IGNORE_FILE,
    MODEL_SIGNATURE_NAME,
    is_reprobox_artefact,
    select_files,
)
from reprobox.codetree._snapshot import (
    SNAPSHOTS_DIR,
    CodeSnapshot,
    snapshot_code,
)
from reprobox.codetree._tree import (
    CODE_TREE_SCHEMA,
    CodeTree,
    GitFacts,
    changed_files,
    tree_digest,
)

__all__ = [
    "ATTESTATION_NAME",
    "CODE_TREE_SCHEMA",
    "MODEL_SIGNATURE_NAME",
    "MODE_GIT",
    "MODE_IGNORE_FILE",
    "SNAPSHOTS_DIR",
    "CodeSnapshot",
    "CodeTree",
    "DataDigest",
    "GitFacts",
    "changed_files",
    "digest_data",
    "digest_tree",
    "git_environment",
    "is_reprobox_artefact",
    "select_files",
    "snapshot_code",
    "tree_digest",
]
