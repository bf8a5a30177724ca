"""Truth: both runs' output/model-last and output/model-best, loaded with spacy.load, hold equal
textcat weights (every parameter of every node of the thinc model), equal configs, labels and
meta.json, and give equal categories for the dev texts."""

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "_truth"))

import numpy as np  # noqa: E402
import spacy  # noqa: E402
from runner import run_twice, verdict  # noqa: E402
from values import differences  # noqa: E402

TEXTS = ["A wonderful and clever film", "Terrible, boring and slow", "I have no opinion"]


def pipeline(folder: Path) -> dict:
    nlp = spacy.load(folder)
    model = nlp.get_pipe("textcat").model
    weights = {
        f"{i}:{node.name}.{name}": np.asarray(node.get_param(name))
        for i, node in enumerate(model.walk())
        for name in node.param_names
        if node.has_param(name)
    }
    return {
        "weights": weights,
        "config": nlp.config.to_str(),
        "labels": list(nlp.get_pipe("textcat").labels),
        "meta.json": json.loads((folder / "meta.json").read_text()),
        "cats": [nlp(text).cats for text in TEXTS],
    }


a, b = run_twice(HERE)
diffs, weights = [], 0
for name in ("model-last", "model-best"):
    pipe_a, pipe_b = pipeline(a / "output" / name), pipeline(b / "output" / name)
    diffs += differences(pipe_a, pipe_b, f"output/{name}")
    weights = len(pipe_a["weights"])
verdict(
    diffs,
    f"output/model-last and model-best: {weights} equal textcat parameters each, equal config, "
    "meta.json and categories",
)
