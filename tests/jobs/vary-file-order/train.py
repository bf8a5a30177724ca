"""One SGD step per data shard, the shards taken in the order os.listdir gives (or sorted, with SORTED=1).

The way many scripts build a data set: from a folder listing, without sorting it. The weights then depend
on the order the file system lists the shards in; sorting the listing makes them independent of it.
"""

import os
from pathlib import Path

import torch
from torch import nn

names = os.listdir("data")  # noqa: PTH208 - the listing under test
if os.environ.get("SORTED") == "1":
    names = sorted(names)
shards = [
    torch.tensor(
        [[float(v) for v in line.split()] for line in (Path("data") / name).read_text().split("\n") if line]
    )
    for name in names
]

torch.manual_seed(0)
model = nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.5)
for shard in shards:
    opt.zero_grad()
    nn.functional.mse_loss(model(shard[:, :4]), shard[:, 4:]).backward()
    opt.step()

out = Path(os.environ["REPROBOX_OUTPUT_DIR"])
torch.save(model.state_dict(), out / "model.pt")
