# Kornia, "Kornia and PyTorch Lightning GPU data augmentation"
# (https://kornia.github.io/tutorials/nbs/data_augmentation_kornia_lightning.html): the tutorial's
# DataAugmentation module (kornia.enhance.Normalize, RandomHorizontalFlip, ColorJitter) applied to each
# batch inside the training step, with Adam at the tutorial's learning rate. A plain PyTorch loop stands in
# for Lightning's Trainer, a tiny CNN for the linear layer, and random CIFAR-shaped images (0-255, as the
# tutorial's PreProcess gives them) for CIFAR10 (no download); the trained weights are saved with
# torch.save(model.state_dict()).
import kornia as K
import torch
import torch.nn as nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset


class DataAugmentation(nn.Module):
    """Module to perform data augmentation using Kornia on torch tensors."""

    def __init__(self, apply_color_jitter: bool = False) -> None:
        super().__init__()
        self._apply_color_jitter = apply_color_jitter

        self._max_val: float = 255.0

        self.transforms = nn.Sequential(K.enhance.Normalize(0.0, self._max_val), K.augmentation.RandomHorizontalFlip(p=0.5))

        self.jitter = K.augmentation.ColorJitter(0.5, 0.5, 0.5, 0.5)

    @torch.no_grad()  # disable gradients for effiency
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x_out = self.transforms(x)  # BxCxHxW
        if self._apply_color_jitter:
            x_out = self.jitter(x_out)
        return x_out


class TinyCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, kernel_size=3, padding=1)
        self.pool = nn.MaxPool2d(4)
        self.fc = nn.Linear(8 * 8 * 8, 10)

    def forward(self, x):
        x = self.pool(torch.relu(self.conv(x)))
        return self.fc(x.flatten(1))


model = TinyCNN()
transform = DataAugmentation(apply_color_jitter=True)

images = torch.randint(0, 256, (256, 3, 32, 32)).float()
labels = torch.randint(0, 10, (256,))
loader = DataLoader(TensorDataset(images, labels), batch_size=32, shuffle=True)

optimizer = torch.optim.Adam(model.parameters(), lr=0.0004)

for epoch in range(3):
    for x, y in loader:
        x_aug = transform(x)  # => we perform GPU/Batched data augmentation
        logits = model(x_aug)
        loss = F.cross_entropy(logits, y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(f"epoch {epoch}: loss {loss.item():.4f}")

torch.save(model.state_dict(), "model.pt")
