"""Truth: both runs' image_classifier_model.onnx load with ONNX's own loader (onnx.load) into equal
models: every initializer equal as an array (onnx.numpy_helper.to_array), and the graph (nodes, their
attributes, inputs, outputs, value infos), opsets, producer and metadata equal as protobuf messages,
but for the run's own folder: the exporter keeps each node's stack trace in its metadata
(`pkg.torch.onnx.stack_trace`), naming the script by its absolute path, which is each run's folder."""

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "_truth"))

import onnx  # noqa: E402
from onnx import numpy_helper  # noqa: E402
from runner import run_twice, verdict  # noqa: E402
from values import differences  # noqa: E402

FILE = "image_classifier_model.onnx"


def loaded(run: Path) -> tuple[dict, onnx.ModelProto]:
    model = onnx.load(str(run / FILE))
    weights = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    del model.graph.initializer[:]
    return weights, model


a, b = run_twice(HERE, seed_torch=True)
(weights_a, model_a), (weights_b, model_b) = loaded(a), loaded(b)
diffs = differences(weights_a, weights_b, f"{FILE} initializers")


def text(model: onnx.ModelProto, run: Path) -> str:
    """The model as protobuf text, with the run's folder named alike in both runs."""
    out = str(model)
    for folder in {str(run), str(run.resolve())}:
        out = out.replace(folder, "<run folder>")
    return out


text_a, text_b = text(model_a, a), text(model_b, b)
assert text_a != str(model_a), "the stack traces no longer name the run's folder"
if text_a != text_b:
    lines_a, lines_b = text_a.splitlines(), text_b.splitlines()
    changed = [f"{x!r} != {y!r}" for x, y in zip(lines_a, lines_b, strict=False) if x != y]
    diffs.append(f"{FILE} graph: {len(changed)} lines differ (first: {changed[:1]})")
verdict(
    diffs,
    f"{FILE}: {len(weights_a)} equal initializers and an equal graph ({len(model_a.graph.node)} nodes)",
)
