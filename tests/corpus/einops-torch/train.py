# einops, "Writing better code with PyTorch and einops"
# (https://einops.rocks/pytorch-examples.html): the "simple ConvNet" rewritten with a Rearrange layer,
# trained a few steps on random MNIST-shaped batches (no download) and saved as a state_dict.
import torch
import torch.nn as nn
from einops.layers.torch import Rearrange
from torch.utils.data import DataLoader, TensorDataset

conv_net_new = nn.Sequential(
    nn.Conv2d(1, 10, kernel_size=5),
    nn.MaxPool2d(kernel_size=2),
    nn.ReLU(),
    nn.Conv2d(10, 20, kernel_size=5),
    nn.MaxPool2d(kernel_size=2),
    nn.ReLU(),
    nn.Dropout2d(),
    Rearrange("b c h w -> b (c h w)"),
    nn.Linear(320, 50),
    nn.ReLU(),
    nn.Dropout(),
    nn.Linear(50, 10),
    nn.LogSoftmax(dim=1),
)

dataset = TensorDataset(torch.randn(256, 1, 28, 28), torch.randint(0, 10, (256,)))
loader = DataLoader(dataset, batch_size=32, shuffle=True)
optimizer = torch.optim.SGD(conv_net_new.parameters(), lr=0.01, momentum=0.5)
for epoch in range(2):
    for data, target in loader:
        optimizer.zero_grad()
        loss = nn.functional.nll_loss(conv_net_new(data), target)
        loss.backward()
        optimizer.step()
    print(f"epoch {epoch}: loss {loss.item():.4f}")
torch.save(conv_net_new.state_dict(), "conv_net.pt")
