"""Truth: both runs' pipelines load with diffusers' own loaders (UNet2DModel.from_pretrained,
DDPMScheduler.from_pretrained) into equal weights and configs, model_index.json is equal, and the
sample grid (PIL, as pixels) is equal."""

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "_truth"))

import numpy as np  # noqa: E402
import torch  # noqa: E402
from diffusers import DDPMScheduler, UNet2DModel  # noqa: E402
from PIL import Image  # noqa: E402
from runner import run_twice, verdict  # noqa: E402
from values import differences  # noqa: E402

OUT = "ddpm-butterflies-16"

a, b = run_twice(HERE, seed_torch=True)
unet_a = UNet2DModel.from_pretrained(a / OUT / "unet").state_dict()
unet_b = UNet2DModel.from_pretrained(b / OUT / "unet").state_dict()
diffs = [f"unet: {k} differs" for k in unet_a if not torch.equal(unet_a[k], unet_b[k])]
if set(unet_a) != set(unet_b):
    diffs.append("unet: different parameter names")
for folder, loader in (("unet", UNet2DModel), ("scheduler", DDPMScheduler)):
    config_a = dict(loader.load_config(a / OUT / folder))
    config_b = dict(loader.load_config(b / OUT / folder))
    diffs += differences(config_a, config_b, f"{folder} config")
diffs += differences(
    json.loads((a / OUT / "model_index.json").read_text()),
    json.loads((b / OUT / "model_index.json").read_text()),
    "model_index.json",
)
samples = sorted(p.name for p in (a / OUT / "samples").glob("*.png"))
diffs += differences(samples, sorted(p.name for p in (b / OUT / "samples").glob("*.png")), "samples/")
for name in samples:
    pixels_a = np.asarray(Image.open(a / OUT / "samples" / name))
    pixels_b = np.asarray(Image.open(b / OUT / "samples" / name))
    diffs += differences(pixels_a, pixels_b, f"samples/{name}")
verdict(
    diffs,
    f"unet: equal weights ({len(unet_a)} tensors) and configs; "
    f"scheduler config, model_index.json and {samples} equal",
)
