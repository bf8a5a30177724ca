"""DataLoader workers started with 'spawn' are new interpreters: the hook must reach them too."""

import json
import os
from pathlib import Path

import torch
from torch.utils.data import DataLoader, Dataset


class Probe(Dataset):
    def __len__(self) -> int:
        return 4

    def __getitem__(self, index: int) -> dict:
        return {
            "pid": os.getpid(),
            "deterministic": torch.are_deterministic_algorithms_enabled(),
            "hook": os.environ.get("REPROBOX_HOOK"),
        }


if __name__ == "__main__":
    loader = DataLoader(Probe(), batch_size=None, num_workers=2, multiprocessing_context="spawn")
    items = list(loader)
    result = {
        "main_pid": os.getpid(),
        "worker_pids": sorted({int(i["pid"]) for i in items}),
        "workers_deterministic": all(bool(i["deterministic"]) for i in items),
    }
    Path(os.environ["REPROBOX_OUTPUT_DIR"], "workers.json").write_text(json.dumps(result))
