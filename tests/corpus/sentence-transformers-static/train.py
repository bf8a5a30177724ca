# Sentence Transformers, "Training Overview" (https://sbert.net/docs/sentence_transformer/training_overview.html)
# with a static embedding model as "Train 400x faster Static Embedding Models" builds one
# (https://huggingface.co/blog/static-embeddings): StaticEmbedding over a tokenizer, SentenceTransformer
# from modules, MultipleNegativesRankingLoss, SentenceTransformerTrainingArguments and
# SentenceTransformerTrainer, then save_pretrained. Offline: the tokenizer is a WordLevel one trained
# on the pairs here, as the tokenizers quicktour trains one (https://huggingface.co/docs/tokenizers/quicktour),
# in place of bert-base-uncased's, and the pairs are made here in place of a Hub dataset.
from datasets import Dataset
from tokenizers import Tokenizer
from tokenizers.models import WordLevel
from tokenizers.pre_tokenizers import Whitespace
from tokenizers.trainers import WordLevelTrainer

from sentence_transformers import (
    SentenceTransformer,
    SentenceTransformerTrainer,
    SentenceTransformerTrainingArguments,
)
from sentence_transformers.losses import MultipleNegativesRankingLoss
from sentence_transformers.models import StaticEmbedding

subjects = ["the cat", "a dog", "the model", "my teacher", "the river", "a robot", "the market", "our team"]
verbs = ["sleeps on", "runs to", "learns from", "talks about", "flows past", "builds", "watches", "plans"]
objects = ["the sofa", "the park", "the data", "the lesson", "the bridge", "a tower", "the prices", "a trip"]
anchors, positives = [], []
for i, subject in enumerate(subjects):
    for j, verb in enumerate(verbs):
        thing = objects[(i + j) % len(objects)]
        anchors.append(f"{subject} {verb} {thing}")
        positives.append(f"{thing} and {subject}: it {verb.split()[0]}")
train_dataset = Dataset.from_dict({"anchor": anchors, "positive": positives})

# 1. A tokenizer, trained on the texts (the tokenizers quicktour's steps, with a word-level model)
tokenizer = Tokenizer(WordLevel(unk_token="[UNK]"))
tokenizer.pre_tokenizer = Whitespace()
tokenizer.train_from_iterator(anchors + positives, WordLevelTrainer(special_tokens=["[UNK]", "[PAD]"]))

# 2. Initialize a StaticEmbedding module and the SentenceTransformer model
static_embedding = StaticEmbedding(tokenizer, embedding_dim=64)
model = SentenceTransformer(modules=[static_embedding])

# 3. Define a loss function
loss = MultipleNegativesRankingLoss(model)

# 4. Specify training arguments
args = SentenceTransformerTrainingArguments(
    output_dir="models/static-embedding-pairs",
    num_train_epochs=2,
    per_device_train_batch_size=16,
    learning_rate=2e-1,
    warmup_ratio=0.1,
    save_strategy="epoch",
    save_total_limit=1,
    logging_steps=2,
    run_name="static-embedding-pairs",
    report_to="none",
)

# 5. Create a trainer & train
trainer = SentenceTransformerTrainer(
    model=model,
    args=args,
    train_dataset=train_dataset,
    loss=loss,
)
trainer.train()

# 6. Save the trained model
model.save_pretrained("models/static-embedding-pairs/final")
