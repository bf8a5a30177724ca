"""Truth: the final model loads with Sentence Transformers' own loader (SentenceTransformer(path)) into
equal weights and equal embeddings of the training texts; its tokenizer, modules and config are equal
JSON; the Trainer's checkpoint holds equal weights (safetensors), optimizer and scheduler state, RNG
state (torch.load) and trainer state (json); training_args.bin (torch.load) equal arguments; and the
model cards (README.md) are equal line by line but for the one that says how long training took:
"- **Training**: 0.3 seconds", a difference of two time.time() readings the card's callback took."""

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "_truth"))

import torch  # noqa: E402
from runner import run_twice, verdict  # noqa: E402
from safetensors.torch import load_file  # noqa: E402
from sentence_transformers import SentenceTransformer  # noqa: E402
from values import differences  # noqa: E402

OUT = Path("models/static-embedding-pairs")
TRAINING_TIME = "- **Training**: "


def numpy_tree(value):
    if isinstance(value, torch.Tensor):
        return value.numpy()
    if isinstance(value, dict):
        return {k: numpy_tree(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [numpy_tree(v) for v in value]
    return value


def card(path: Path) -> list[str]:
    lines = path.read_text().splitlines()
    timed = [line for line in lines if line.startswith(TRAINING_TIME)]
    assert len(timed) == 1 and timed[0].endswith(" seconds"), "the card no longer says its training time"
    return [line for line in lines if not line.startswith(TRAINING_TIME)]


def outputs(run: Path) -> dict:
    final = run / OUT / "final"
    (checkpoint,) = (run / OUT).glob("checkpoint-*")
    model = SentenceTransformer(str(final), device="cpu")
    vocab = sorted(json.loads((final / "tokenizer.json").read_text())["model"]["vocab"])
    values = {
        "final weights": numpy_tree(model.state_dict()),
        "final embeddings": model.encode(vocab, convert_to_numpy=True),
        "checkpoint": checkpoint.name,
        "checkpoint weights": numpy_tree(load_file(checkpoint / "model.safetensors")),
        "optimizer.pt": numpy_tree(torch.load(checkpoint / "optimizer.pt", weights_only=True)),
        "scheduler.pt": numpy_tree(torch.load(checkpoint / "scheduler.pt", weights_only=True)),
        "rng_state.pth": numpy_tree(torch.load(checkpoint / "rng_state.pth", weights_only=False)),
        "trainer_state.json": json.loads((checkpoint / "trainer_state.json").read_text()),
        "training_args.bin": torch.load(checkpoint / "training_args.bin", weights_only=False).to_dict(),
    }
    for folder in (final, checkpoint):
        for name in ("tokenizer.json", "modules.json", "config_sentence_transformers.json"):
            values[f"{folder.name}/{name}"] = json.loads((folder / name).read_text())
        values[f"{folder.name}/README.md"] = card(folder / "README.md")
    return values


a, b = run_twice(HERE, seed_torch=True)
values_a, values_b = outputs(a), outputs(b)
diffs = differences(values_a, values_b, "")
verdict(
    diffs,
    f"final model: equal weights and embeddings; {values_a['checkpoint']}: equal weights, optimizer, "
    "scheduler, RNG and trainer state and arguments; model cards equal but for the training time",
)
