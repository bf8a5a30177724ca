"""What each state digest of the trail is, in words: its label and the call that restores it."""

from __future__ import annotations

# key prefix (before the first "." index) -> (what differs, what the checkpoint must restore)
STATE_NAMES = {
    "rng.torch": ("torch RNG state", "torch.get_rng_state()"),
    "rng.cuda": ("CUDA RNG state", "torch.cuda.get_rng_state_all()"),
    "rng.numpy": ("NumPy global RNG state", "numpy.random.get_state()"),
    "rng.python": ("Python random state", "random.getstate()"),
    "rng.loader": ("DataLoader generator state", "the DataLoader generator's get_state()"),
    "optimizer": ("optimizer state", "optimizer.state_dict()"),
    "scheduler": ("LR scheduler state", "scheduler.state_dict()"),
}


def describe_state(key: str) -> dict[str, str]:
    """{label, restore} for a trail state key such as "rng.torch" or "optimizer.0"."""
    for prefix, (label, restore) in STATE_NAMES.items():
        if key == prefix or key.startswith(prefix + "."):
            index = key[len(prefix) + 1 :]
            suffix = f" {index}" if index and index != "0" else ""
            return {"label": label + suffix, "restore": restore}
    return {"label": key, "restore": key}
