# PyTorch, "Loading a TorchScript Model in C++" (https://pytorch.org/tutorials/advanced/cpp_export.html),
# step 1, converting a model to TorchScript by tracing and serializing it, here for a small MLP
# trained a few steps on random data (torchvision's resnet18 would need torchvision and a download).
import torch
import torch.nn as nn

model = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 3))
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
x, y = torch.randn(128, 20), torch.randint(0, 3, (128,))
for step in range(30):
    optimizer.zero_grad()
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()

# An example input you would normally provide to your model's forward() method.
example = torch.rand(1, 20)

# Use torch.jit.trace to generate a torch.jit.ScriptModule via tracing.
traced_script_module = torch.jit.trace(model, example)
traced_script_module.save("traced_model.pt")
