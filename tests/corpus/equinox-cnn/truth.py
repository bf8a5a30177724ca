"""Truth: both runs' cnn.eqx, read with Equinox's own eqx.tree_deserialise_leaves into the example's
CNN, hold equal arrays leaf by leaf."""

import sys
import types
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "_truth"))

import equinox as eqx  # noqa: E402
import jax  # noqa: E402
import numpy as np  # noqa: E402
from runner import run_twice, verdict  # noqa: E402
from values import differences  # noqa: E402

# The CNN class from the script's own text, without training: tree_deserialise_leaves needs a model
# of the same structure to fill.
source = (HERE / "train.py").read_text().split("key, subkey = jax.random.split(key, 2)")[0]
script = types.ModuleType("equinox_cnn_script")
exec(compile(source, str(HERE / "train.py"), "exec"), script.__dict__)


def leaves(run: Path) -> list:
    like = script.CNN(jax.random.PRNGKey(0))
    model = eqx.tree_deserialise_leaves(run / "cnn.eqx", like)
    return [np.asarray(leaf) for leaf in jax.tree_util.tree_leaves(eqx.filter(model, eqx.is_array))]


a, b = run_twice(HERE, seed_torch=True)
leaves_a, leaves_b = leaves(a), leaves(b)
diffs = differences(leaves_a, leaves_b, "cnn.eqx leaves")
verdict(diffs, f"cnn.eqx: {len(leaves_a)} equal arrays, read by eqx.tree_deserialise_leaves")
