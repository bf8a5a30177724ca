"""A tiny GPT-2 trained with the Hugging Face Trainer, the way its examples do it, and nothing seeded here.

The model is built from a `GPT2Config` (no download) and reads characters of `corpus.txt` (no tokenizer
download: the vocabulary is the text's own characters). The Trainer writes its usual `checkpoint-N/`
folders (model.safetensors, optimizer.pt, scheduler.pt, rng_state.pth, trainer_state.json,
training_args.bin) and the final model under $REPROBOX_OUTPUT_DIR.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch
from torch.utils.data import Dataset
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments

BLOCK = 32  # characters per training example
STRIDE = 4


class CharWindows(Dataset[dict[str, torch.Tensor]]):
    """Overlapping windows of the text; the model shifts the labels itself."""

    def __init__(self, ids: torch.Tensor) -> None:
        self.ids = ids

    def __len__(self) -> int:
        return (len(self.ids) - BLOCK) // STRIDE

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        window = self.ids[index * STRIDE : index * STRIDE + BLOCK]
        return {"input_ids": window, "labels": window.clone()}


def main() -> None:
    text = (Path(__file__).parent / "corpus.txt").read_text(encoding="utf-8")
    vocabulary = sorted(set(text))
    ids = torch.tensor([vocabulary.index(ch) for ch in text])
    split = int(len(ids) * 0.9)
    config = GPT2Config(
        vocab_size=len(vocabulary),
        n_positions=BLOCK,
        n_embd=64,
        n_layer=2,
        n_head=4,
        n_inner=128,
        bos_token_id=0,
        eos_token_id=0,
    )
    model = GPT2LMHeadModel(config)
    args = TrainingArguments(
        output_dir=os.environ["REPROBOX_OUTPUT_DIR"],
        max_steps=30,
        per_device_train_batch_size=8,
        per_device_eval_batch_size=8,
        learning_rate=3e-3,
        warmup_steps=3,
        logging_steps=5,
        eval_strategy="steps",
        eval_steps=15,
        save_steps=15,
        dataloader_num_workers=2,
        report_to="none",
        use_cpu=True,
        disable_tqdm=True,
    )
    trainer = Trainer(
        model=model,
        args=args,
        train_dataset=CharWindows(ids[:split]),
        eval_dataset=CharWindows(ids[split:]),
    )
    trainer.train()
    trainer.save_model()
    print(trainer.evaluate())


if __name__ == "__main__":
    main()
