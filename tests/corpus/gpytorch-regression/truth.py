"""Truth: each run's model_state.pth loads as GPyTorch's "Saving and Loading Models" page loads it
(torch.load, then load_state_dict into a fresh ExactGPModel), and the two models have equal state_dicts
and hyperparameters (lengthscale, outputscale, noise, constant); predictions.pt (torch.load,
weights_only=True) holds equal means and confidence bounds."""

import sys
import types
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "_truth"))

import gpytorch  # noqa: E402
import torch  # noqa: E402
from runner import run_twice, verdict  # noqa: E402

# The script's ExactGPModel, defined from its own text, without training.
source = (HERE / "train.py").read_text().split("# initialize likelihood and model")[0]
script = types.ModuleType("gp_script")
exec(compile(source, str(HERE / "train.py"), "exec"), script.__dict__)


def loaded(run: Path) -> dict:
    likelihood = gpytorch.likelihoods.GaussianLikelihood()
    model = script.ExactGPModel(script.train_x, script.train_y, likelihood)
    model.load_state_dict(torch.load(run / "model_state.pth", weights_only=True))
    values = dict(model.state_dict())
    values["lengthscale"] = model.covar_module.base_kernel.lengthscale.detach()
    values["outputscale"] = model.covar_module.outputscale.detach()
    values["noise"] = model.likelihood.noise.detach()
    values["constant"] = model.mean_module.constant.detach()
    for name, tensor in torch.load(run / "predictions.pt", weights_only=True).items():
        values[f"predictions.pt {name}"] = tensor
    return values


a, b = run_twice(HERE, seed_torch=True)
values_a, values_b = loaded(a), loaded(b)
diffs = [f"{k} differs" for k in values_a if not torch.equal(values_a[k], values_b[k])]
if set(values_a) != set(values_b):
    diffs.append("different names")
verdict(diffs, f"model_state.pth and predictions.pt: {len(values_a)} equal tensors and hyperparameters")
