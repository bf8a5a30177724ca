"""Truth: both runs' tabnet_model_test_1.zip load through TabNet's own loader
(TabNetClassifier().load_model) into networks with equal state_dicts and equal init parameters and
class attributes (model_params.json); the zip's own member dates are when the file was written."""

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "_truth"))

import torch  # noqa: E402
from pytorch_tabnet.tab_model import TabNetClassifier  # noqa: E402
from runner import run_twice, verdict  # noqa: E402
from values import differences  # noqa: E402


def loaded(run: Path) -> TabNetClassifier:
    clf = TabNetClassifier()
    clf.load_model(str(run / "tabnet_model_test_1.zip"))
    return clf


a, b = run_twice(HERE, seed_torch=True)
clf_a, clf_b = loaded(a), loaded(b)
state_a, state_b = clf_a.network.state_dict(), clf_b.network.state_dict()
diffs = [f"network.pt: {k} differs" for k in state_a if not torch.equal(state_a[k], state_b[k])]
if set(state_a) != set(state_b):
    diffs.append("network.pt: different parameter names")
diffs += differences(clf_a.get_params(), clf_b.get_params(), "model_params.json init_params")
diffs += differences(clf_a.preds_mapper, clf_b.preds_mapper, "model_params.json preds_mapper")
verdict(diffs, f"tabnet_model_test_1.zip: equal network ({len(state_a)} tensors) and parameters")
