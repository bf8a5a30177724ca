"""The corpus of library quickstarts (tests/corpus/): reprobox's verdict on each equals its measured truth.

Each case runs as a user runs it (`reprobox init`, then `verify --runtime local --runs 2` in a git
checkout of the case) and its truth.py, which never uses reprobox, runs it twice more and compares the
outputs with the library's own loader. Only the cases whose verdict is right today are here;
tests/corpus/README.md lists the wrong ones and why. Skipped where a case's library is not installed.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # each case: an init, two runs and two truth runs (30 s to 2 min)

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("corpus_case", ROOT / "scripts" / "corpus_case.py")
assert _spec is not None and _spec.loader is not None
corpus_case = importlib.util.module_from_spec(_spec)
sys.modules["corpus_case"] = corpus_case
_spec.loader.exec_module(corpus_case)

RIGHT_TODAY = {  # case: the module its library installs
    "bayesopt-jsonlogger": "bayes_opt",
    "dvclive-quickstart": "dvclive",
    "einops-torch": "einops",
    "equinox-cnn": "equinox",
    "flax-nnx-mnist": "flax",
    "gensim-word2vec": "gensim",
    "gpytorch-regression": "gpytorch",
    "hydra-train": "hydra",
    "hyperopt-trials": "hyperopt",
    "ignite-quickstart": "ignite",
    "imblearn-smote-pipeline": "imblearn",
    "kornia-augmentation": "kornia",
    "lightgbm-quickstart": "lightgbm",
    "metric-learning-triplet": "pytorch_metric_learning",
    "neg-epoch-time": "sklearn",
    "neg-iter-times-ignite": "ignite",
    "neg-prose-seconds": "sklearn",
    "neg-run-id-torch": "torch",
    "neg-train-time-xgboost": "xgboost",
    "notebook-nbconvert": "nbconvert",
    "numpyro-eight-schools": "numpyro",
    "papermill-params": "papermill",
    "pyg-gcn": "torch_geometric",
    "pyro-svi": "pyro",
    "river-pickle": "river",
    "sentence-transformers-static": "sentence_transformers",
    "sklearn-gridsearch": "sklearn",
    "sklearn-persistence": "sklearn",
    "sklearn-sgd-timed": "sklearn",
    "skops-persistence": "skops",
    "skopt-dump": "skopt",
    "spacy-textcat": "spacy",
    "statsmodels-ols": "statsmodels",
    "tabnet-save-model": "pytorch_tabnet",
    "tensorboardx-demo": "tensorboardX",
    "torch-jit-export": "torch",
    "torch-onnx-export": "onnx",
    "torch-save-model": "torch",
    "torchrl-dqn": "torchrl",
    "xgboost-native": "xgboost",
    "xgboost-sklearn": "xgboost",
}
IN_SUITE = {"torch-save-model", "sklearn-sgd-timed", "neg-epoch-time", "neg-iter-times-ignite"}
"""The part the suite runs (a torch save; durations and a uuid4 run id by the run's record; a random
number named like a duration; random numbers named like iteration times in a checkpoint's array): each
case costs an init and four runs. REPROBOX_CORPUS=all runs every right case here; scripts/corpus.sh runs
the whole corpus, wrong cases included."""


@pytest.mark.parametrize("name", sorted(RIGHT_TODAY))
def test_verdict_equals_the_measured_truth(name: str, tmp_path: Path) -> None:
    if name not in IN_SUITE and os.environ.get("REPROBOX_CORPUS") != "all":
        pytest.skip("scripts/corpus.sh runs it (or REPROBOX_CORPUS=all)")
    if importlib.util.find_spec(RIGHT_TODAY[name]) is None:
        pytest.skip(f"{RIGHT_TODAY[name]} is not installed (tests/corpus/{name}/requirements.txt)")
    case = ROOT / "tests" / "corpus" / name
    assert corpus_case.case_fields(case)["fast"] == "true"
    result = corpus_case.run_case(case, tmp_path)
    assert result.truth == corpus_case.case_fields(case)["expected"], (tmp_path / f"{name}.truth").read_text()
    assert result.verdict == result.truth, result.sentence
