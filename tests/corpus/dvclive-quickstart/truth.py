"""Truth: both runs write the same DVCLive outputs, each read as what it is: model.pt (torch.load,
weights_only=True) as equal state_dicts, dvclive/metrics.json and the confusion matrices (json),
params.yaml and dvc.yaml (yaml), each metric's history (pandas.read_csv of the .tsv) and
misclassified.jpg (PIL) as equal values; and the same set of files."""

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "_truth"))

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import torch  # noqa: E402
import yaml  # noqa: E402
from PIL import Image  # noqa: E402
from runner import run_twice, verdict, written  # noqa: E402
from values import differences  # noqa: E402


def outputs(run: Path) -> dict:
    out: dict = {"files": written(run, HERE)}
    for path in sorted(run.rglob("*")):
        rel = str(path.relative_to(run))
        if path.suffix == ".json":
            out[rel] = json.loads(path.read_text())
        elif path.suffix == ".yaml":
            out[rel] = yaml.safe_load(path.read_text())
        elif path.suffix == ".tsv":
            frame = pd.read_csv(path, sep="\t")
            out[rel] = {column: frame[column].to_numpy() for column in frame.columns}
        elif path.suffix == ".jpg":
            out[rel] = np.asarray(Image.open(path))
        elif path.suffix == ".pt":
            out[rel] = {k: v.numpy() for k, v in torch.load(path, weights_only=True).items()}
    return out


a, b = run_twice(HERE, seed_torch=True)
out_a, out_b = outputs(a), outputs(b)
verdict(
    differences(out_a, out_b, "outputs"),
    f"{len(out_a['files'])} files ({', '.join(out_a['files'])}) read as their formats: every value equal",
)
