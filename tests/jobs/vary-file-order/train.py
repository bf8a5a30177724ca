"""One SGD step per data shard, the shards taken in the order os.listdir gives (or sorted, with SORTED=1).

The way many scripts build a data set: from a folder listing, without sorting it. The weights then depend
on the order the file system lists the shards in; sorting the listing makes them independent of it.
"""

import io
import os
import zipfile
from pathlib import Path

import numpy as np


def save_npz(path: Path, **arrays: np.ndarray) -> None:
    """An .npz whose bytes depend on the arrays alone (numpy.savez stamps each member with the clock)."""
    with zipfile.ZipFile(path, "w") as archive:
        for name, array in arrays.items():
            member = io.BytesIO()
            np.save(member, array)
            archive.writestr(zipfile.ZipInfo(f"{name}.npy"), member.getvalue())


names = os.listdir("data")  # noqa: PTH208 - the listing under test
if os.environ.get("SORTED") == "1":
    names = sorted(names)
shards = [np.loadtxt(Path("data") / name, ndmin=2) for name in names]

rng = np.random.default_rng(0)
weight, bias = rng.standard_normal((4, 1)), np.zeros(1)
for shard in shards:  # each step starts from the weights the previous shard left: the order matters
    x, y = shard[:, :4], shard[:, 4:]
    error = 2 * (x @ weight + bias - y) / len(shard)
    weight -= 0.5 * x.T @ error
    bias -= 0.5 * error.sum(axis=0)

out = Path(os.environ["REPROBOX_OUTPUT_DIR"])
save_npz(out / "model.npz", weight=weight, bias=bias)
