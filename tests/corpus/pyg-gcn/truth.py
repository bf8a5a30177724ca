"""Truth: both runs' gcn.pt load (torch.load, weights_only=True) into equal state_dicts, and the GCN
rebuilt from each gives equal log-probabilities on the KarateClub graph."""

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "_truth"))

import torch  # noqa: E402
from runner import run_twice, verdict  # noqa: E402
from torch_geometric.datasets import KarateClub  # noqa: E402
from torch_geometric.nn import GCNConv  # noqa: E402

a, b = run_twice(HERE, seed_torch=True)
state_a = torch.load(a / "gcn.pt", weights_only=True)
state_b = torch.load(b / "gcn.pt", weights_only=True)
diffs = [f"gcn.pt: {k} differs" for k in state_a if k in state_b and not torch.equal(state_a[k], state_b[k])]
if set(state_a) != set(state_b):
    diffs.append(f"gcn.pt: parameter names {sorted(state_a)} != {sorted(state_b)}")

data = KarateClub()[0]


def log_probs(state: dict) -> torch.Tensor:
    conv1 = GCNConv(data.num_node_features, 16)
    conv2 = GCNConv(16, int(data.y.max()) + 1)
    conv1.load_state_dict({k.removeprefix("conv1."): v for k, v in state.items() if k.startswith("conv1.")})
    conv2.load_state_dict({k.removeprefix("conv2."): v for k, v in state.items() if k.startswith("conv2.")})
    with torch.no_grad():
        return torch.log_softmax(conv2(torch.relu(conv1(data.x, data.edge_index)), data.edge_index), dim=1)


if not diffs and not torch.equal(log_probs(state_a), log_probs(state_b)):
    diffs.append("gcn.pt: the rebuilt GCN's log-probabilities differ")
verdict(diffs, f"gcn.pt: equal state_dict ({len(state_a)} tensors) and equal log-probabilities on KarateClub")
