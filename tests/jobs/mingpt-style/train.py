"""Shaped like minGPT's projects/chargpt: a CfgNode-style config, setup_logging, then model.pt.

setup_logging writes args.txt and config.json (which holds system.work_dir, the output directory) into
the work dir before training, and the trainer's callback saves `model.state_dict()` there.
"""

# os.path, as the upstream code it mirrors writes it:
# ruff: noqa: PTH103, PTH118, PTH123

import json
import os
import random
import sys

import numpy as np
import torch
from torch import nn


def set_seed(seed):
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    torch.cuda.manual_seed_all(seed)


def get_config():
    return {
        "system": {"seed": 3407, "work_dir": os.environ["REPROBOX_OUTPUT_DIR"]},
        "data": {"block_size": 16},
        "model": {"model_type": "gpt-nano", "n_layer": 2, "n_embd": 32, "vocab_size": None},
        "trainer": {"max_iters": 100, "batch_size": 8, "learning_rate": 5e-4, "betas": [0.9, 0.95]},
    }


def merge_from_args(config, args):
    """minGPT's CfgNode.merge_from_args: `--trainer.max_iters=20` style overrides."""
    for arg in args:
        key, value = arg[2:].split("=")
        *path, leaf = key.split(".")
        node = config
        for part in path:
            node = node[part]
        node[leaf] = type(node[leaf])(value)


def setup_logging(config):
    work_dir = config["system"]["work_dir"]
    os.makedirs(work_dir, exist_ok=True)
    with open(os.path.join(work_dir, "args.txt"), "w") as f:
        f.write(" ".join(sys.argv))
    with open(os.path.join(work_dir, "config.json"), "w") as f:
        f.write(json.dumps(config, indent=4))


class CharModel(nn.Module):
    def __init__(self, vocab, block, width):
        super().__init__()
        self.tok = nn.Embedding(vocab, width)
        self.pos = nn.Parameter(torch.zeros(1, block, width))
        self.mix = nn.Sequential(
            nn.LayerNorm(width), nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width)
        )
        self.head = nn.Linear(width, vocab, bias=False)

    def forward(self, idx):
        x = self.tok(idx) + self.pos[:, : idx.shape[1]]
        return self.head(x + self.mix(x))


def main():
    config = get_config()
    merge_from_args(config, sys.argv[1:])
    setup_logging(config)
    set_seed(config["system"]["seed"])
    text = "first citizen: before we proceed any further, hear me speak. " * 20
    chars = sorted(set(text))
    config["model"]["vocab_size"] = len(chars)
    data = torch.tensor([chars.index(c) for c in text])
    block, tc = config["data"]["block_size"], config["trainer"]
    model = CharModel(len(chars), block, config["model"]["n_embd"])
    optimizer = torch.optim.AdamW(model.parameters(), lr=tc["learning_rate"], betas=tuple(tc["betas"]))
    for iter_num in range(tc["max_iters"]):
        ix = torch.randint(len(data) - block - 1, (tc["batch_size"],))
        x = torch.stack([data[i : i + block] for i in ix])
        y = torch.stack([data[i + 1 : i + block + 1] for i in ix])
        loss = nn.functional.cross_entropy(model(x).view(-1, len(chars)), y.view(-1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if iter_num % 10 == 0:
            print(f"iter {iter_num}: train loss {loss.item():.5f}")
    ckpt_path = os.path.join(config["system"]["work_dir"], "model.pt")
    torch.save(model.state_dict(), ckpt_path)


if __name__ == "__main__":
    main()
