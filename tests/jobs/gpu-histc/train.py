"""Histogram of activations on the GPU (a common debugging line in training scripts)."""

import torch

device = "cuda" if torch.cuda.is_available() else "cpu"
activations = torch.randn(10_000, device=device)
histogram = torch.histc(activations, bins=20, min=-4, max=4)
print(f"histogram on {device}: {histogram.tolist()}", flush=True)
