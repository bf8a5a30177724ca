"""Shaped like timm's train.py with its CheckpointSaver (timm/utils/checkpoint_saver.py).

Arguments parse into an argparse Namespace that is pickled inside every checkpoint; `args.output` is the
output directory. Each epoch saves last.pth.tar, checkpoint-<epoch>.pth.tar and, when the metric
improves, model_best.pth.tar, each a dict of epoch, arch, state_dict, optimizer, version, args, metric.
"""

# os.path, as the upstream code it mirrors writes it:
# ruff: noqa: PTH103, PTH118

import argparse
import os
import shutil

import torch
from torch import nn

parser = argparse.ArgumentParser(description="PyTorch ImageNet Training")
parser.add_argument("--model", default="tinynet_s")
parser.add_argument("--output", default="")
parser.add_argument("--epochs", type=int, default=2)
parser.add_argument("--lr", type=float, default=0.05)
parser.add_argument("--batch-size", type=int, default=16)
parser.add_argument("--seed", type=int, default=42)


def save_checkpoint(path, model, optimizer, args, epoch, metric):
    save_state = {
        "epoch": epoch,
        "arch": args.model,
        "state_dict": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "version": 2,
        "args": args,
        "metric": metric,
    }
    torch.save(save_state, path)


def main():
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    model = nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1),
        nn.BatchNorm2d(8),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(8, 10),
    )
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    images, labels = torch.randn(64, 3, 16, 16), torch.randint(0, 10, (64,))
    os.makedirs(args.output, exist_ok=True)
    best_metric = None
    for epoch in range(args.epochs):
        model.train()
        for start in range(0, len(images), args.batch_size):
            loss = nn.functional.cross_entropy(
                model(images[start : start + args.batch_size]), labels[start : start + args.batch_size]
            )
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        model.eval()
        with torch.no_grad():
            top1 = (model(images).argmax(1) == labels).float().mean().item() * 100
        last = os.path.join(args.output, "last.pth.tar")
        save_checkpoint(last, model, optimizer, args, epoch, top1)
        shutil.copy2(last, os.path.join(args.output, f"checkpoint-{epoch}.pth.tar"))
        if best_metric is None or top1 > best_metric:
            best_metric = top1
            shutil.copy2(last, os.path.join(args.output, "model_best.pth.tar"))
        print(f"epoch {epoch}: loss {loss.item():.4f} top1 {top1:.2f}")
    print(f"*** Best metric: {best_metric}")


if __name__ == "__main__":
    main()
