"""A two-layer character-level transformer on a fixed text: small, real, and thread-count sensitive.

On CPU its reductions split work by thread, so the weights after training depend on the number of
threads: the stack fingerprint records it, and `reprobox compare` names it as the cause.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch
from torch import nn

TEXT = (
    "It is a truth universally acknowledged, that a single man in possession of a good fortune, "
    "must be in want of a wife. However little known the feelings or views of such a man may be "
    "on his first entering a neighbourhood, this truth is so well fixed in the minds of the "
    "surrounding families, that he is considered the rightful property of some one or other of "
    "their daughters. "
) * 4
CONTEXT, WIDTH, STEPS = 32, 64, int(os.environ.get("STEPS", "40"))


class TinyGPT(nn.Module):
    def __init__(self, vocab: int) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, WIDTH)
        self.position = nn.Parameter(torch.randn(CONTEXT, WIDTH) * 0.02)
        layer = nn.TransformerEncoderLayer(
            WIDTH, 4, 4 * WIDTH, dropout=0.1, batch_first=True, norm_first=True
        )
        self.blocks = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.head = nn.Linear(WIDTH, vocab)
        self.register_buffer("mask", nn.Transformer.generate_square_subsequent_mask(CONTEXT))

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        hidden = self.embed(tokens) + self.position[: tokens.shape[1]]
        return self.head(self.blocks(hidden, mask=self.mask, is_causal=True))


def main() -> None:
    vocabulary = sorted(set(TEXT))
    index = {ch: i for i, ch in enumerate(vocabulary)}
    data = torch.tensor([index[ch] for ch in TEXT])
    model = TinyGPT(len(vocabulary))
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    for step in range(1, STEPS + 1):
        starts = torch.randint(0, len(data) - CONTEXT - 1, (16,))
        batch = torch.stack([data[s : s + CONTEXT + 1] for s in starts])
        logits = model(batch[:, :-1])
        loss = nn.functional.cross_entropy(logits.reshape(-1, len(vocabulary)), batch[:, 1:].reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 10 == 0:
            print(f"step {step}: loss {loss.item():.4f}", flush=True)
    output_dir = Path(os.environ.get("REPROBOX_OUTPUT_DIR", "out"))
    output_dir.mkdir(parents=True, exist_ok=True)
    torch.save(model.state_dict(), output_dir / "model.pt")


if __name__ == "__main__":
    main()
