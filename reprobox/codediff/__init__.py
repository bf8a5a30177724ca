"""Numerics between two versions of the code: run the job at both, compare, and name the change.

- ``_revisions``: the git work tree, revisions, and a revision's code as a snapshot;
- ``_hunks``: git's hunks between the versions, a line's place in the other version, the commit;
- ``_cache``: runs of a fixed commit kept for the next diff against it;
- ``_flow``: the diff itself (`diff_versions`).
"""

from reprobox.codediff._flow import DIFF_DIR, CodeDiff, DiffOptions, Side, diff_versions
from reprobox.codediff._hunks import Changes, Hunk, parse_diff
from reprobox.codediff._revisions import WORKING_TREE, Revision

__all__ = [
    "DIFF_DIR",
    "WORKING_TREE",
    "Changes",
    "CodeDiff",
    "DiffOptions",
    "Hunk",
    "Revision",
    "Side",
    "diff_versions",
    "parse_diff",
]
