"""Truth: both runs' entire_model.pt load (torch.load, weights_only=False: the tutorial's own way) into
modules of the same class with equal state_dicts."""

import sys
import types
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "_truth"))

import torch  # noqa: E402
from runner import run_twice, verdict  # noqa: E402

# The pickle names __main__.TheModelClass: define it there from the script's own text, without training.
source = (HERE / "train.py").read_text().split("# Initialize model")[0]
main = types.ModuleType("__main__")
exec(compile(source, str(HERE / "train.py"), "exec"), main.__dict__)
sys.modules["__main__"] = main

a, b = run_twice(HERE, seed_torch=True)
state_a = torch.load(a / "entire_model.pt", weights_only=False).state_dict()
state_b = torch.load(b / "entire_model.pt", weights_only=False).state_dict()
diffs = [f"entire_model.pt: {k} differs" for k in state_a if not torch.equal(state_a[k], state_b[k])]
if set(state_a) != set(state_b):
    diffs.append("entire_model.pt: different parameter names")
verdict(diffs, f"entire_model.pt: equal state_dict ({len(state_a)} tensors)")
