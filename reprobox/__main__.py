"""`python -m reprobox` is the `reprobox` command."""

import sys

from reprobox.cli import command

sys.exit(command())
