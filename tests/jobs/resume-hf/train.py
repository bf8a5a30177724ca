"""A tiny GPT-2 trained with the Hugging Face Trainer, written the way its examples are: nothing here knows
about resuming or stopping; reprobox does both through the Trainer (`resume: {framework: transformers}`).

Dropout is on and the data shuffled, so a resume is exact only if the Trainer restores its RNG state and
skips the batches it already consumed.
"""

from __future__ import annotations

import os

import torch
from torch.utils.data import Dataset
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments

VOCAB, BLOCK, EXAMPLES = 32, 16, 40


class RandomTokens(Dataset[dict[str, torch.Tensor]]):
    def __init__(self) -> None:
        self.ids = torch.randint(VOCAB, (EXAMPLES, BLOCK), generator=torch.Generator().manual_seed(0))

    def __len__(self) -> int:
        return EXAMPLES

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        return {"input_ids": self.ids[index], "labels": self.ids[index].clone()}


def main() -> None:
    config = GPT2Config(vocab_size=VOCAB, n_positions=BLOCK, n_embd=32, n_layer=1, n_head=2, n_inner=64)
    args = TrainingArguments(
        output_dir=os.environ["REPROBOX_OUTPUT_DIR"],
        max_steps=14,  # 10 steps an epoch: the run crosses into a second, reshuffled epoch
        per_device_train_batch_size=4,
        learning_rate=1e-2,
        warmup_steps=2,
        logging_steps=1,
        save_steps=4,
        report_to="none",
        use_cpu=True,
        disable_tqdm=True,
        dataloader_num_workers=0,
    )
    trainer = Trainer(model=GPT2LMHeadModel(config), args=args, train_dataset=RandomTokens())
    trainer.train()
    trainer.save_model()


if __name__ == "__main__":
    main()
