"""Leave FIFOs nobody writes to where reprobox reads files the job's processes write."""

import os
from pathlib import Path

state = Path(os.environ["REPROBOX_RUN_DIR"]) / ".reprobox"
state.mkdir(parents=True, exist_ok=True)
os.mkfifo(state / "stop.json")
os.mkfifo(state / "fingerprint-rank0.json")
(state / "fingerprint-rank1.json").symlink_to("/dev/zero")
print("planted", flush=True)
