"""Fit a sine wave a little and save the prediction plot as PDF and SVG, as the script's authors did."""

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import torch

x = torch.linspace(0, 6.28, 100).unsqueeze(1)
model = torch.nn.Sequential(torch.nn.Linear(1, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(20):
    optimizer.zero_grad()
    torch.nn.functional.mse_loss(model(x), torch.sin(x)).backward()
    optimizer.step()
plt.figure(figsize=(6, 3))
plt.plot(x.squeeze().numpy(), model(x).detach().squeeze().numpy())
plt.savefig("predict.pdf")
plt.savefig("predict.svg")
