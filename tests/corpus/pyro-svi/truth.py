"""Truth: both runs' params.pt load through Pyro's own loader (ParamStoreDict.load) into equal
constrained and unconstrained parameters with the same constraints, and optimizer.pt loads through
PyroOptim.load into equal Adam states (steps, moments) per parameter."""

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "_truth"))

import pyro  # noqa: E402
import torch  # noqa: E402
from pyro.optim import Adam  # noqa: E402
from runner import run_twice, verdict  # noqa: E402
from values import differences  # noqa: E402


def params(run: Path) -> dict:
    store = pyro.get_param_store()
    store.clear()
    store.load(str(run / "params.pt"))
    return {
        name: (
            store[name].detach().clone(),
            store._params[name].detach().clone(),
            repr(store._constraints[name]),
        )
        for name in sorted(store.keys())
    }


def optimizer_state(run: Path) -> dict:
    optim = Adam({"lr": 0.0005, "betas": (0.90, 0.999)})
    optim.load(str(run / "optimizer.pt"))
    waiting = optim._state_waiting_to_be_consumed  # what load() read, until the params are seen again
    assert waiting, "optimizer.pt holds no state"
    return {name: waiting[name]["state"] for name in sorted(waiting)}


a, b = run_twice(HERE, seed_torch=True)
params_a, params_b = params(a), params(b)
diffs = differences(sorted(params_a), sorted(params_b), "params.pt names")
for name in sorted(set(params_a) & set(params_b)):
    (con_a, raw_a, kind_a), (con_b, raw_b, kind_b) = params_a[name], params_b[name]
    if not torch.equal(con_a, con_b) or not torch.equal(raw_a, raw_b):
        diffs.append(f"params.pt {name}: {con_a.item()!r} != {con_b.item()!r}")
    diffs += differences(kind_a, kind_b, f"params.pt {name} constraint")
optim_a, optim_b = optimizer_state(a), optimizer_state(b)
diffs += differences(
    {k: {i: {n: t.numpy() for n, t in s.items()} for i, s in v.items()} for k, v in optim_a.items()},
    {k: {i: {n: t.numpy() for n, t in s.items()} for i, s in v.items()} for k, v in optim_b.items()},
    "optimizer.pt",
)
verdict(
    diffs,
    f"params.pt: equal {sorted(params_a)} (constrained, unconstrained, constraints); "
    f"optimizer.pt: equal Adam states for {sorted(optim_a)}",
)
