"""Observe each factor of `verify --vary` the way a training script would come to depend on it."""

from __future__ import annotations

import getpass
import json
import locale
import os
import socket
import stat
import time
from pathlib import Path

import torch
from torch.utils.data import DataLoader, Dataset


class WhoLoads(Dataset[int]):
    """Item i is the id of the worker that loaded it (-1: the main process)."""

    def __len__(self) -> int:
        return 8

    def __getitem__(self, index: int) -> int:
        info = torch.utils.data.get_worker_info()
        return -1 if info is None else info.id


def formatted_number() -> str:
    try:
        locale.setlocale(locale.LC_ALL, "")
    except locale.Error as error:  # a locale this image lacks: the job still sees its name
        return f"unavailable: {error}"
    return locale.format_string("%.2f", 1234567.891, grouping=True)


workers = int(os.environ.get("REPROBOX_DATALOADER_WORKERS", "0"))
made = Path(os.environ["REPROBOX_OUTPUT_DIR"]) / "made-by-job.txt"
made.write_text("its mode follows the umask\n")
observed = {
    "threads": torch.get_num_threads(),
    "cpu-isa": torch.backends.cpu.get_cpu_capability(),
    "workers": [int(batch) for batch in DataLoader(WhoLoads(), batch_size=None, num_workers=workers)],
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
