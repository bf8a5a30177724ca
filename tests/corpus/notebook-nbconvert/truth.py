"""Truth: executed.ipynb read with nbformat has equal cells (sources, outputs, execution counts) and
notebook metadata, the per-cell execution stamps aside; forest.joblib loads (joblib) into equal trees."""

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "_truth"))

import joblib  # noqa: E402
import nbformat  # noqa: E402
from runner import run_twice, verdict  # noqa: E402
from values import differences  # noqa: E402


def notebook(run: Path) -> dict:
    nb = nbformat.read(run / "executed.ipynb", as_version=4)
    stamps = [cell.get("metadata", {}).pop("execution", None) for cell in nb.cells]
    assert any(stamps), "nbclient recorded no execution stamps"
    return nb


a, b = run_twice(HERE)
diffs = differences(notebook(a), notebook(b), "executed.ipynb")
forest_a, forest_b = joblib.load(a / "forest.joblib"), joblib.load(b / "forest.joblib")
for i, (tree_a, tree_b) in enumerate(zip(forest_a.estimators_, forest_b.estimators_, strict=True)):
    diffs += differences(tree_a.tree_.__getstate__(), tree_b.tree_.__getstate__(), f"forest.joblib tree {i}")
diffs += differences(forest_a.get_params(), forest_b.get_params(), "forest.joblib params")
verdict(
    diffs,
    "executed.ipynb: equal cells and outputs (only nbclient's execution stamps differ); "
    "forest.joblib: equal trees",
)
