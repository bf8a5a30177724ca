"""Truth: model.pt loads (torch.load, weights_only=True) into equal weights, optimizer state, epoch and
loss, and a run_id that differs: a computed number, not a run-specific record, so the runs differ."""

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "_truth"))

import torch  # noqa: E402
from runner import run_twice, verdict  # noqa: E402

a, b = run_twice(HERE, seed_torch=True)
ckpt_a = torch.load(a / "model.pt", weights_only=True)
ckpt_b = torch.load(b / "model.pt", weights_only=True)
diffs = []
for key in ("model_state_dict",):
    diffs += [
        f"model.pt {key}.{k} differs" for k in ckpt_a[key] if not torch.equal(ckpt_a[key][k], ckpt_b[key][k])
    ]
for k, (x, y) in enumerate(
    zip(
        ckpt_a["optimizer_state_dict"]["state"].values(),
        ckpt_b["optimizer_state_dict"]["state"].values(),
        strict=True,
    )
):
    if not torch.equal(x["momentum_buffer"], y["momentum_buffer"]):
        diffs.append(f"model.pt optimizer state {k} differs")
for key in ("epoch", "loss", "run_id"):
    if ckpt_a[key] != ckpt_b[key]:
        diffs.append(f"model.pt {key}: {ckpt_a[key]!r} != {ckpt_b[key]!r}")
verdict(diffs, "model.pt: every value equal")
