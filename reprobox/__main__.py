"""`python -m reprobox` is the `reprobox` command."""

import sys

from reprobox.cli import main

sys.exit(main())
