"""A job whose reported accuracy follows the thread count: a claim that does not hold on another stack."""

import json
import os
from pathlib import Path

import torch

threads = torch.get_num_threads()
torch.manual_seed(0)
out = Path(os.environ["REPROBOX_OUTPUT_DIR"])
torch.save({"w": torch.randn(4) * threads}, out / "model.pt")
(out / "metrics.json").write_text(json.dumps({"val": {"acc": 0.70 + 0.05 * threads}}))
