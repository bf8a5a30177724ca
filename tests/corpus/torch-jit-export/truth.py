"""Truth: both runs' traced_model.pt load (torch.jit.load) into equal code and equal state_dicts."""

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "_truth"))

import torch  # noqa: E402
from runner import run_twice, verdict  # noqa: E402

a, b = run_twice(HERE, seed_torch=True)
model_a, model_b = torch.jit.load(str(a / "traced_model.pt")), torch.jit.load(str(b / "traced_model.pt"))
state_a, state_b = model_a.state_dict(), model_b.state_dict()
diffs = [f"traced_model.pt: {k} differs" for k in state_a if not torch.equal(state_a[k], state_b[k])]
if model_a.code != model_b.code:
    diffs.append("traced_model.pt: the traced code differs")
verdict(diffs, f"traced_model.pt: equal code and state_dict ({len(state_a)} tensors)")
