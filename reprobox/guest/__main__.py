"""`python -m reprobox.guest -- COMMAND...`: the entrypoint of every run, in a container or locally."""

from __future__ import annotations

import sys

from reprobox.guest.entrypoint import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
