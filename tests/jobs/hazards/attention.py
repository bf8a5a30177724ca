"""Attention code with the fused-kernel hazards planted; each planted line carries a hazard comment."""

import torch
from torch.nn import functional
from torch.nn.attention import SDPBackend, sdpa_kernel


def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    torch.backends.cuda.enable_flash_sdp(True)  # hazard: fused-attention
    torch.backends.cuda.enable_mem_efficient_sdp(False)
    fused = functional.scaled_dot_product_attention(q, k, v)  # hazard: fused-attention
    with sdpa_kernel(SDPBackend.MATH):
        exact = functional.scaled_dot_product_attention(q, k, v)
    with sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.MATH]):  # hazard: fused-attention
        flash = functional.scaled_dot_product_attention(q, k, v)  # hazard: fused-attention
    return fused + exact + flash


class Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.attn = torch.nn.MultiheadAttention(16, 2, batch_first=True)  # hazard: fused-attention

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.attn(x, x, x, need_weights=False)[0]
