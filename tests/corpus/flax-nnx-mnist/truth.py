"""Truth: both runs' my-checkpoints/state, restored with Orbax's own StandardCheckpointer().restore,
hold equal arrays under equal names; Orbax's JSON metadata (_METADATA, _sharding,
array_metadatas/process_0, _CHECKPOINT_METADATA) is equal but for _CHECKPOINT_METADATA's
init_timestamp_nsecs and commit_timestamp_nsecs (time.time_ns() readings). The OCDBT data files under
d/ and ocdbt.process_0/d/ are named by TensorStore with random ids, so their names differ by
construction; their contents are what the restore reads."""

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "_truth"))

import jax  # noqa: E402
import numpy as np  # noqa: E402
import orbax.checkpoint as ocp  # noqa: E402
from runner import run_twice, verdict  # noqa: E402
from values import differences  # noqa: E402

STAMPS = {"init_timestamp_nsecs", "commit_timestamp_nsecs"}


def arrays(run: Path) -> dict:
    restored = ocp.StandardCheckpointer().restore(run / "my-checkpoints" / "state")
    flat = jax.tree_util.tree_flatten_with_path(restored)[0]
    return {jax.tree_util.keystr(path): np.asarray(leaf) for path, leaf in flat}


def metadata(run: Path) -> dict:
    state = run / "my-checkpoints" / "state"
    out = {name: json.loads((state / name).read_text()) for name in ("_METADATA", "_sharding")}
    out["array_metadatas"] = json.loads((state / "array_metadatas" / "process_0").read_text())
    checkpoint = json.loads((state / "_CHECKPOINT_METADATA").read_text())
    assert all(isinstance(checkpoint.pop(k), int) for k in STAMPS)
    out["_CHECKPOINT_METADATA"] = checkpoint
    return out


a, b = run_twice(HERE)
arrays_a, arrays_b = arrays(a), arrays(b)
diffs = differences(arrays_a, arrays_b, "my-checkpoints/state")
diffs += differences(metadata(a), metadata(b), "my-checkpoints/state metadata")
verdict(
    diffs,
    f"my-checkpoints/state: {len(arrays_a)} equal arrays restored by Orbax; its metadata equal but for the "
    "two commit stamps (the OCDBT data files' names are TensorStore's random ids)",
)
