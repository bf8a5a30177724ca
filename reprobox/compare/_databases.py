"""Output files that are parts of another file's content: an OCDBT database's data files.

TensorStore's OCDBT database (Orbax's checkpoints) keeps its values in data files named by random ids
(``d/<32 hex digits>``) and packed as its asynchronous writes happen; its ``manifest.ocdbt`` is read as
the database's keys and values (``reprobox.guest.hashing._ocdbt``), and each data file's record names
the manifests that read it (``part_of``) and says which of its bytes they reached. Such a file is no
output of its own: its name, its number and its packing are the database's layout, and what it holds is
compared where its manifests' keys are. So it is left out of the pairing of files by name, in each run,
when its bytes were all accounted for by its databases (none that no database reached) and a manifest
that read it is in the run's record as a database read. Any other file under ``d/`` (one no database
reached, or with bytes none read) is paired, and compared, as any file is.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reprobox.records.manifest import RunRecord

DATABASE_FORMAT = "ocdbt"


def database_parts(record: RunRecord) -> set[str]:
    """The run's files that are wholly parts of a database read in the same run."""
    read = {
        str(entry.get("path"))
        for entry in record.checkpoints
        if entry.get("format") == DATABASE_FORMAT and not entry.get("part_of")
    }
    return {str(entry.get("path")) for entry in record.checkpoints if _part_of(entry, read)}


def _part_of(entry: Mapping[str, Any], read: set[str]) -> bool:
    databases, unread = entry.get("part_of"), entry.get("unaccounted")
    if entry.get("format") != DATABASE_FORMAT or not isinstance(databases, list):
        return False
    wholly_read = isinstance(unread, Mapping) and unread.get("count") == 0
    return wholly_read and any(database in read for database in databases)
