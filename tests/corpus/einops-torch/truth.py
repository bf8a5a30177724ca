"""Truth: both runs' conv_net.pt load (torch.load, weights_only=True) into equal state_dicts."""

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "_truth"))

import torch  # noqa: E402
from runner import run_twice, verdict  # noqa: E402

a, b = run_twice(HERE, seed_torch=True)
state_a = torch.load(a / "conv_net.pt", weights_only=True)
state_b = torch.load(b / "conv_net.pt", weights_only=True)
diffs = [
    f"conv_net.pt: {k} differs" for k in state_a if k in state_b and not torch.equal(state_a[k], state_b[k])
]
if set(state_a) != set(state_b):
    diffs.append("conv_net.pt: different parameter names")
verdict(diffs, f"conv_net.pt: equal state_dict ({len(state_a)} tensors)")
