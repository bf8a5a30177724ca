"""Observe each factor of `verify --vary` the way a training script would come to depend on it, in plain
Python: what torch itself makes of threads, the CPU capability and DataLoader workers is observed by
tests/jobs/vary-torch-factors, so the many runs of `--vary all` need no torch."""

from __future__ import annotations

import getpass
import json
import locale
import os
import socket
import stat
import time
from pathlib import Path


def formatted_number() -> str:
    try:
        locale.setlocale(locale.LC_ALL, "")
    except locale.Error as error:  # a locale this image lacks: the job still sees its name
        return f"unavailable: {error}"
    return locale.format_string("%.2f", 1234567.891, grouping=True)


made = Path(os.environ["REPROBOX_OUTPUT_DIR"]) / "made-by-job.txt"
made.write_text("its mode follows the umask\n")
observed = {
    # what NumPy's BLAS and any OpenMP library size their thread pools by
    "threads": {name: os.environ.get(name) for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS")},
    "cpu-isa": os.environ.get("ATEN_CPU_CAPABILITY"),
    "workers": int(os.environ.get("REPROBOX_DATALOADER_WORKERS", "0")),
    "tz": time.strftime("%H:%M", time.localtime(1_700_000_000)),
    "locale": {"LC_ALL": os.environ.get("LC_ALL"), "number": formatted_number()},
    "env-order": [name for name in os.environ if name.startswith("PROBE_")],
    "hostname": socket.gethostname(),
    "user": {"uid": os.getuid(), "name": getpass.getuser()},
    "cwd": os.getcwd(),  # noqa: PTH109
    "home": str(Path("~").expanduser()),
    "umask": f"{stat.S_IMODE(made.stat().st_mode):03o}",
    "file-order": os.listdir("data"),  # noqa: PTH208 - unsorted on purpose
    "time": int(time.time() // 86400),  # the day
}
folder = Path(os.environ["REPROBOX_OUTPUT_DIR"]) / "observed"
folder.mkdir()
for factor, value in observed.items():
    (folder / f"{factor}.json").write_text(json.dumps(value) + "\n")
