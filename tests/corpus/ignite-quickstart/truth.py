"""Truth: both runs keep the same two best checkpoints (names carry epoch and accuracy), each loading
(torch.load, weights_only=True) into an equal state_dict, and their TensorBoard event files (TensorBoard's
EventFileLoader) hold equal steps, tags and values; only each event's wall_time and the event file's
name (its creation time and host) differ, clock readings and the host by construction."""

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "_truth"))

import torch  # noqa: E402
from runner import run_twice, verdict  # noqa: E402
from tensorboard.backend.event_processing.event_file_loader import EventFileLoader  # noqa: E402
from values import differences  # noqa: E402


def checkpoints(run: Path) -> dict:
    return {p.name: torch.load(p, weights_only=True) for p in sorted((run / "checkpoint").glob("*.pt"))}


def scalars(run: Path) -> list:
    (events,) = (run / "tb-logger").glob("events.out.tfevents.*")
    out = []
    for event in EventFileLoader(str(events)).Load():
        for value in event.summary.value:
            number = value.simple_value if value.HasField("simple_value") else value.tensor.float_val
            out.append(
                (event.step, value.tag, float(number) if value.HasField("simple_value") else list(number))
            )
    return out


a, b = run_twice(HERE, seed_torch=True)
ckpt_a, ckpt_b = checkpoints(a), checkpoints(b)
diffs = differences(sorted(ckpt_a), sorted(ckpt_b), "checkpoint/")
for name in sorted(set(ckpt_a) & set(ckpt_b)):
    diffs += [
        f"{name}: {k} differs" for k in ckpt_a[name] if not torch.equal(ckpt_a[name][k], ckpt_b[name][k])
    ]
events_a, events_b = scalars(a), scalars(b)
diffs += differences(events_a, events_b, "tb-logger events")
verdict(
    diffs,
    f"checkpoints {sorted(ckpt_a)}: equal state_dicts; {len(events_a)} TensorBoard scalars equal "
    "(only wall times and the event file's name differ)",
)
