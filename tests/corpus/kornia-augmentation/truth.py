"""Truth: both runs' model.pt, loaded with torch.load(weights_only=True), hold equal state_dicts (every
tensor of the tiny CNN trained on kornia-augmented batches)."""

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "_truth"))

import torch  # noqa: E402
from runner import run_twice, verdict  # noqa: E402

a, b = run_twice(HERE, seed_torch=True)
state_a = torch.load(a / "model.pt", weights_only=True)
state_b = torch.load(b / "model.pt", weights_only=True)
diffs = [
    f"model.pt: {k} differs"
    for k in sorted(set(state_a) & set(state_b))
    if not torch.equal(state_a[k], state_b[k])
]
if set(state_a) != set(state_b):
    diffs.append("model.pt: different parameter names")
verdict(diffs, f"model.pt: equal state_dict ({len(state_a)} tensors)")
