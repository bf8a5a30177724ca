"""Train the classifier for a few epochs and save its state; seeding is left to reprobox."""

import argparse
import os
from pathlib import Path

import torch
import torch.nn.functional as F
from data import FEATURES, LABEL_INDEX, make_loader
from model import Classifier


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--samples", type=int, default=256)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()

    loader = make_loader(args.samples, args.workers)
    model = Classifier(FEATURES, len(LABEL_INDEX))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    for epoch in range(args.epochs):
        total = 0.0
        for inputs, targets in loader:
            optimizer.zero_grad()
            loss = F.cross_entropy(model(inputs), targets)
            loss.backward()
            optimizer.step()
            total += loss.item()
        print(f"epoch {epoch + 1}: mean loss {total / len(loader):.4f}", flush=True)

    output_dir = Path(os.environ.get("REPROBOX_OUTPUT_DIR", "out"))
    output_dir.mkdir(parents=True, exist_ok=True)
    torch.save(model.state_dict(), output_dir / "model.pt")


if __name__ == "__main__":
    main()
