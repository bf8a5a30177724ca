"""Truth: output.ipynb read with nbformat has equal cells (sources, outputs, execution counts, the
injected parameters) and notebook metadata, with papermill's clock readings and their differences
(start_time, end_time, duration; per cell and for the notebook), nbclient's execution stamps and the
injected cell's id (nbformat's `uuid.uuid4().hex[:8]`) aside; model.joblib loads (joblib) into an equal
fitted ElasticNet."""

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "_truth"))

import joblib  # noqa: E402
import nbformat  # noqa: E402
from runner import run_twice, verdict  # noqa: E402
from values import differences  # noqa: E402

CLOCK = ("start_time", "end_time", "duration")


def notebook(run: Path) -> dict:
    nb = nbformat.read(run / "output.ipynb", as_version=4)
    for cell in nb.cells:
        cell.metadata.pop("execution", None)
        if "injected-parameters" in cell.metadata.get("tags", []):
            assert len(cell.pop("id")) == 8, "the injected cell has no random id"
        stamps = [cell.metadata.get("papermill", {}).pop(key) for key in CLOCK]
        assert all(s is not None for s in stamps), "papermill recorded no cell times"
    assert all(nb.metadata.papermill.pop(key) for key in CLOCK)
    return nb


a, b = run_twice(HERE)
nb_a, nb_b = notebook(a), notebook(b)
diffs = differences(nb_a, nb_b, "output.ipynb")
model_a, model_b = joblib.load(a / "model.joblib"), joblib.load(b / "model.joblib")
diffs += differences(vars(model_a), vars(model_b), "model.joblib")
verdict(
    diffs,
    f"output.ipynb: {len(nb_a.cells)} equal cells and outputs (only papermill's and nbclient's times "
    "and the injected cell's uuid4 id differ); model.joblib: an equal ElasticNet",
)
