"""The marks a comparison puts on what it lists: a whole file's entry, and each output file's status.

A leaf of the package, so that the verdict's model, its table, its coverage and its summaries can all
name them without importing one another.
"""

from __future__ import annotations

WHOLE_FILE = "<file>"  # an entry about a whole file (its name, its bytes), not a tensor or value in it

SAME = "same"  # the file's bytes are equal in every run
EQUAL = "equal"  # its tensors and values are equal; only the container's bytes differ
RUN_SPECIFIC = "run-specific"  # equal but for values that name the run (listed)
RESHARDED = "resharded"  # a file of a DCP checkpoint cut otherwise, whose tensors are equal by name
IN_DATABASE = "in database"  # a data file of a database, compared through the database's keys
IGNORED = "ignored"  # the job file leaves it out of the verdict
UNREADABLE = "unreadable"  # it differs in a format reprobox cannot read
DIFFERS = "differs"  # a tensor or a value in it differs
MISSING = "missing"  # some runs did not write it
AGREEING = frozenset({SAME, EQUAL, RUN_SPECIFIC, RESHARDED, IN_DATABASE})
