"""Record what this run sees of the machine in observed.json (plain Python: runs in any image)."""

from __future__ import annotations

import getpass
import json
import os
import socket
import stat
import time
from pathlib import Path

outputs = Path(os.environ["REPROBOX_OUTPUT_DIR"])
made = outputs / "made-by-job.txt"
made.write_text("mode follows the umask\n")
umask = os.umask(0)
os.umask(umask)
seen = {
    "hostname": socket.gethostname(),
    "uid": os.getuid(),
    "user": getpass.getuser(),
    "umask": f"{umask:03o}",
    "file_mode": f"{stat.S_IMODE(made.stat().st_mode):03o}",
    "home": os.environ["HOME"],
    "home_expanded": str(Path("~").expanduser()),
    "cwd": os.getcwd(),  # noqa: PTH109
    "output_dir": str(outputs),
    "time": time.time(),
    "monotonic": time.monotonic(),
}
(outputs / "observed.json").write_text(json.dumps(seen, indent=1, sort_keys=True) + "\n")
print(json.dumps(seen), flush=True)
