"""Train a small convolutional classifier on synthetic 32x32 images and save its weights."""

import os
from pathlib import Path

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

device = "cuda" if torch.cuda.is_available() else "cpu"
images = torch.randn(1024, 3, 32, 32)
labels = torch.randint(0, 10, (1024,))
loader = DataLoader(TensorDataset(images, labels), batch_size=64, shuffle=True)

model = nn.Sequential(
    nn.Conv2d(3, 32, 3, padding=1),
    nn.BatchNorm2d(32),
    nn.ReLU(),
    nn.MaxPool2d(2),
    nn.Conv2d(32, 64, 3, padding=1),
    nn.BatchNorm2d(64),
    nn.ReLU(),
    nn.MaxPool2d(2),
    nn.Conv2d(64, 128, 3, padding=1),
    nn.ReLU(),
    nn.AdaptiveAvgPool2d(1),
    nn.Flatten(),
    nn.Linear(128, 10),
).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
loss_fn = nn.CrossEntropyLoss()

for epoch in range(int(os.environ.get("EPOCHS", "2"))):
    total = 0.0
    for batch_images, batch_labels in loader:
        optimizer.zero_grad()
        loss = loss_fn(model(batch_images.to(device)), batch_labels.to(device))
        loss.backward()
        optimizer.step()
        total += loss.item()
    print(f"epoch {epoch}: loss {total / len(loader):.4f} on {device}", flush=True)

torch.save(model.state_dict(), Path(os.environ["REPROBOX_OUTPUT_DIR"]) / "model.pt")
