# PyTorch, "Export a PyTorch model to ONNX"
# (https://docs.pytorch.org/tutorials/beginner/onnx/export_simple_model_to_onnx_tutorial.html): the
# tutorial's ImageClassifierModel, exported with torch.onnx.export(..., dynamo=True), optimized and
# saved. Here it is first trained a few steps on random 32x32 images, so that the weights it exports
# come from a run.
import torch
import torch.nn as nn
import torch.nn.functional as F


class ImageClassifierModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 6, 5)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.fc1 = nn.Linear(16 * 5 * 5, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, 10)

    def forward(self, x: torch.Tensor):
        x = F.max_pool2d(F.relu(self.conv1(x)), (2, 2))
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = torch.flatten(x, 1)
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        x = self.fc3(x)
        return x


torch_model = ImageClassifierModel()

optimizer = torch.optim.SGD(torch_model.parameters(), lr=0.01, momentum=0.9)
images, labels = torch.randn(64, 1, 32, 32), torch.randint(0, 10, (64,))
for step in range(10):
    optimizer.zero_grad()
    loss = F.cross_entropy(torch_model(images), labels)
    loss.backward()
    optimizer.step()

# Create example inputs for exporting the model. The inputs should be a tuple of tensors.
example_inputs = (torch.randn(1, 1, 32, 32),)
onnx_program = torch.onnx.export(torch_model, example_inputs, dynamo=True)

onnx_program.optimize()

onnx_program.save("image_classifier_model.onnx")
