"""Record, as the job sees them, the CUDA settings reprobox applies before user code runs."""

import json
import os
from pathlib import Path

import torch

seen = {
    "cuda_initialized_at_start": torch.cuda.is_initialized(),
    "cublas_workspace_config": os.environ.get("CUBLAS_WORKSPACE_CONFIG"),
    "deterministic_algorithms": torch.are_deterministic_algorithms_enabled(),
    "cudnn_deterministic": torch.backends.cudnn.deterministic,
    "cudnn_benchmark": torch.backends.cudnn.benchmark,
    "matmul_allow_tf32": torch.backends.cuda.matmul.allow_tf32,
    "cudnn_allow_tf32": torch.backends.cudnn.allow_tf32,
    "float32_matmul_precision": torch.get_float32_matmul_precision(),
    "sdpa": {
        "flash": torch.backends.cuda.flash_sdp_enabled(),
        "efficient": torch.backends.cuda.mem_efficient_sdp_enabled(),
        "math": torch.backends.cuda.math_sdp_enabled(),
    },
    "device_count": torch.cuda.device_count(),
}
if torch.cuda.is_available():
    torch.cuda.init()  # each device's default generator exists once CUDA has initialised
    devices = range(torch.cuda.device_count())
    seen["initial_seeds"] = [torch.cuda.default_generators[i].initial_seed() for i in devices]
    seen["draws"] = [torch.rand(4, device=f"cuda:{i}").tolist() for i in devices]
    a = torch.randn(256, 256, device="cuda")
    seen["matmul_sum"] = float((a @ a).sum())  # raises without CUBLAS_WORKSPACE_CONFIG under determinism
    conv = torch.nn.Conv2d(3, 8, 3).cuda()
    seen["conv_sum"] = float(conv(torch.randn(2, 3, 16, 16, device="cuda")).sum())
Path(os.environ["REPROBOX_OUTPUT_DIR"], "seen.json").write_text(json.dumps(seen, indent=1))
