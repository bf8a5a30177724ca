"""`python -m reprobox.slurm_runtime node PLAN`: the node side, as the batch script starts it."""

from __future__ import annotations

from reprobox.slurm_runtime._node import main

if __name__ == "__main__":
    raise SystemExit(main())
