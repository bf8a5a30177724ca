"""Truth: both runs' embedder.pt load (torch.load, weights_only=True) into equal state_dicts, and the
embedding network rebuilt from each gives equal embeddings, equal mined pairs and an equal loss (the
library's own miner and loss) on a fixed batch."""

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "_truth"))

import torch  # noqa: E402
from pytorch_metric_learning import losses, miners  # noqa: E402
from runner import run_twice, verdict  # noqa: E402

a, b = run_twice(HERE, seed_torch=True)
state_a = torch.load(a / "embedder.pt", weights_only=True)
state_b = torch.load(b / "embedder.pt", weights_only=True)
diffs = [
    f"embedder.pt: {k} differs" for k in state_a if k in state_b and not torch.equal(state_a[k], state_b[k])
]
if set(state_a) != set(state_b):
    diffs.append(f"embedder.pt: parameter names {sorted(state_a)} != {sorted(state_b)}")

generator = torch.Generator().manual_seed(1234)
batch, labels = torch.randn(64, 32, generator=generator), torch.randint(0, 8, (64,), generator=generator)


def judged(state: dict) -> tuple:
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 16))
    model.load_state_dict(state)
    with torch.no_grad():
        embeddings = model(batch)
        pairs = miners.MultiSimilarityMiner()(embeddings, labels)
        return embeddings, pairs, losses.TripletMarginLoss()(embeddings, labels, pairs)


if not diffs:
    (emb_a, pairs_a, loss_a), (emb_b, pairs_b, loss_b) = judged(state_a), judged(state_b)
    if not torch.equal(emb_a, emb_b):
        diffs.append("embedder.pt: the rebuilt network's embeddings differ")
    if len(pairs_a) != len(pairs_b) or not all(
        torch.equal(x, y) for x, y in zip(pairs_a, pairs_b, strict=True)
    ):
        diffs.append("embedder.pt: the mined pairs differ")
    if not torch.equal(loss_a, loss_b):
        diffs.append("embedder.pt: the loss differs")
verdict(diffs, f"embedder.pt: equal state_dict ({len(state_a)} tensors), embeddings, mined pairs and loss")
