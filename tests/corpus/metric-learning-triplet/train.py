# PyTorch Metric Learning, "How loss functions work" (https://kevinmusgrave.github.io/pytorch-metric-learning/):
# a MultiSimilarityMiner and a TripletMarginLoss in the training loop, the loss customised as the page
# shows (CosineSimilarity, ThresholdReducer, LpRegularizer). The page leaves the model and data to the
# user: here a small embedding MLP on random labelled vectors, and the trained weights saved with
# torch.save(model.state_dict(), PATH), PyTorch's recommended way.
import torch
from torch.utils.data import DataLoader, TensorDataset

from pytorch_metric_learning import losses, miners
from pytorch_metric_learning.distances import CosineSimilarity
from pytorch_metric_learning.reducers import ThresholdReducer
from pytorch_metric_learning.regularizers import LpRegularizer

model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 16))
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)

inputs, targets = torch.randn(512, 32), torch.randint(0, 8, (512,))
dataloader = DataLoader(TensorDataset(inputs, targets), batch_size=64, shuffle=True)

miner = miners.MultiSimilarityMiner()
loss_func = losses.TripletMarginLoss(
    distance=CosineSimilarity(), reducer=ThresholdReducer(high=0.3), embedding_regularizer=LpRegularizer()
)

for epoch in range(10):
    # your training loop
    for i, (data, labels) in enumerate(dataloader):
        optimizer.zero_grad()
        embeddings = model(data)
        hard_pairs = miner(embeddings, labels)
        loss = loss_func(embeddings, labels, hard_pairs)
        loss.backward()
        optimizer.step()
    print(f"epoch {epoch}: loss {loss.item():.4f}")

torch.save(model.state_dict(), "embedder.pt")
