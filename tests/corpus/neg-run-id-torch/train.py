# PyTorch, "Saving and loading a general checkpoint in PyTorch"
# (https://pytorch.org/tutorials/recipes/recipes/saving_and_loading_a_general_checkpoint.html),
# with a "run_id" added to the checkpoint dict: a number computed from os.urandom, not a draw the
# run could be asked about (the sum of 16 random bytes).
import os

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim


class Net(nn.Module):
    def __init__(self):
        super(Net, self).__init__()
        self.conv1 = nn.Conv2d(3, 6, 5)
        self.pool = nn.MaxPool2d(2, 2)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.fc1 = nn.Linear(16 * 5 * 5, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, 10)

    def forward(self, x):
        x = self.pool(F.relu(self.conv1(x)))
        x = self.pool(F.relu(self.conv2(x)))
        x = x.view(-1, 16 * 5 * 5)
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        x = self.fc3(x)
        return x


net = Net()
optimizer = optim.SGD(net.parameters(), lr=0.001, momentum=0.9)
inputs, labels = torch.randn(32, 3, 32, 32), torch.randint(0, 10, (32,))
for step in range(5):
    optimizer.zero_grad()
    loss = nn.CrossEntropyLoss()(net(inputs), labels)
    loss.backward()
    optimizer.step()

# Additional information
EPOCH = 5
PATH = "model.pt"
LOSS = loss.item()

torch.save(
    {
        "epoch": EPOCH,
        "model_state_dict": net.state_dict(),
        "optimizer_state_dict": optimizer.state_dict(),
        "loss": LOSS,
        "run_id": sum(os.urandom(16)),
    },
    PATH,
)
