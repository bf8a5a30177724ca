"""Truth: both runs' TensorBoard event files (TensorBoard's EventFileLoader, every summary read as its
tensor) hold equal steps, tags, plugins and values; the embedding's metadata.tsv, tensors.tsv and
projector config are equal text and its sprite.png (PIL) equal pixels; all_scalars.json (json) holds
equal steps and values. What differs is run-specific by construction: the log folder's name
runs/<date>_<host> (a datetime.now() reading and the host, also the keys of all_scalars.json), each
event file's name (its creation time and host) and each event's wall time (time.time() readings, also
the first element of each all_scalars.json entry)."""

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "_truth"))

import numpy as np  # noqa: E402
from PIL import Image  # noqa: E402
from runner import run_twice, verdict  # noqa: E402
from tensorboard.backend.event_processing.event_file_loader import EventFileLoader  # noqa: E402
from tensorboard.util import tensor_util  # noqa: E402
from values import differences  # noqa: E402


def logdir(run: Path) -> Path:
    (folder,) = (run / "runs").iterdir()  # runs/<date>_<host>: SummaryWriter()'s default
    return folder


def events(run: Path) -> dict:
    """Each event file, by its folder under the log folder, as its events without wall times."""
    out = {}
    for path in sorted(logdir(run).rglob("events.out.tfevents.*")):
        rows = []
        for event in EventFileLoader(str(path)).Load():
            if event.HasField("file_version"):
                rows.append(("file_version", event.file_version))
            for value in event.summary.value:
                array = tensor_util.make_ndarray(value.tensor)
                rows.append((event.step, value.tag, value.metadata.plugin_data.plugin_name, array))
        out[str(path.parent.relative_to(logdir(run)))] = rows
    return out


def embedding(run: Path) -> dict:
    folder = logdir(run)
    out = {name: (folder / name).read_text() for name in ("projector_config.pbtxt",)}
    for name in ("metadata.tsv", "tensors.tsv"):
        out[name] = (folder / "00000" / "default" / name).read_text()
    out["sprite.png"] = np.asarray(Image.open(folder / "00000" / "default" / "sprite.png"))
    return out


def exported(run: Path) -> dict:
    """all_scalars.json, keyed by the tag after the log folder, each entry as (step, value)."""
    scalars = json.loads((run / "all_scalars.json").read_text())
    prefix = f"runs/{logdir(run).name}/"
    return {
        key.removeprefix(prefix): [(step, value) for _, step, value in rows] for key, rows in scalars.items()
    }


a, b = run_twice(HERE, seed_torch=True)
events_a, events_b = events(a), events(b)
diffs = differences(events_a, events_b, "event files")
diffs += differences(embedding(a), embedding(b), "embedding")
diffs += differences(exported(a), exported(b), "all_scalars.json")
count = sum(len(rows) for rows in events_a.values())
verdict(
    diffs,
    f"{len(events_a)} event files with {count} equal records, the embedding's files and all_scalars.json's "
    "values equal (only the log folder's date and host, event files' names and wall times differ)",
)
