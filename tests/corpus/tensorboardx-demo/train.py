# tensorboardX, README "Example" (examples/demo.py, https://github.com/lanpa/tensorboardX): a default
# SummaryWriter() (runs/<date>_<host>/), scalars grouped by slash, a scalar group, text, every parameter's
# histogram and a PR curve every 10 iterations, an embedding with metadata and label images, then
# export_scalars_to_json("./all_scalars.json") and close(). The demo's dummy values become a small torch
# model's training on random 28x28 images (the demo downloads MNIST and builds torchvision's ResNet18;
# its image and audio summaries need torchvision and soundfile, so they are left out).
import numpy as np
import torch
from tensorboardX import SummaryWriter

model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(784, 32), torch.nn.ReLU(), torch.nn.Linear(32, 10))
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
images, labels = torch.rand(256, 28, 28), torch.randint(0, 10, (256,))

writer = SummaryWriter()

for n_iter in range(100):
    batch = torch.randint(0, 256, (32,))
    optimizer.zero_grad()
    output = model(images[batch])
    loss = torch.nn.functional.cross_entropy(output, labels[batch])
    loss.backward()
    optimizer.step()
    accuracy = (output.argmax(1) == labels[batch]).float().mean()
    # data grouping by `slash`
    writer.add_scalar("data/loss", loss.item(), n_iter)
    writer.add_scalar("data/accuracy", accuracy, n_iter)

    writer.add_scalars(
        "data/scalar_group",
        {"xsinx": n_iter * np.sin(n_iter), "xcosx": n_iter * np.cos(n_iter), "arctanx": np.arctan(n_iter)},
        n_iter,
    )

    if n_iter % 10 == 0:
        writer.add_text("Text", "text logged at step:" + str(n_iter), n_iter)

        for name, param in model.named_parameters():
            writer.add_histogram(name, param.clone().cpu().data.numpy(), n_iter)

        # needs tensorboard 0.4RC or later
        writer.add_pr_curve("xoxo", np.random.randint(2, size=100), np.random.rand(100), n_iter)

features = model[:3](images[:100]).detach()
writer.add_embedding(features, metadata=labels[:100], label_img=images[:100].unsqueeze(1))

# export scalar data to JSON for external processing
writer.export_scalars_to_json("./all_scalars.json")
writer.close()
