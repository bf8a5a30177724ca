# DVCLive, "PyTorch" (https://dvc.org/doc/dvclive/ml-frameworks/pytorch) and its Quickstart notebook
# (examples/DVCLive-Quickstart.ipynb): the notebook's training helpers and MLP, Live() logging params,
# train/ and test/ metrics, confusion matrices and the misclassified-image grid each epoch, the best
# model saved with torch.save(model.state_dict(), "model.pt") and logged with log_artifact. Random 28x28
# images stand in for MNIST (the notebook downloads it with torchvision); Live() writes its default
# report=None (the page's report="notebook" is for a notebook), and no DVC repository is initialised.
import numpy as np
import torch

from dvclive import Live

device = "cuda:0" if torch.cuda.is_available() else "cpu"


def train_one_epoch(model, criterion, x, y, lr, weight_decay):
    model.train()
    optimizer = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=weight_decay)
    y_pred = model(x)
    loss = criterion(y_pred, y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()


def predict(model, x):
    """Get model prediction scores."""
    model.eval()
    with torch.no_grad():
        return model(x)


def get_metrics(y, y_pred, y_pred_label):
    """Get loss and accuracy metrics."""
    metrics = {}
    criterion = torch.nn.CrossEntropyLoss()
    metrics["loss"] = criterion(y_pred, y).item()
    metrics["acc"] = (y_pred_label == y).sum().item() / len(y)
    return metrics


def evaluate(model, x, y):
    """Evaluate model and save metrics."""
    scores = predict(model, x)
    _, labels = torch.max(scores, 1)
    actual = [int(v) for v in y]
    predicted = [int(v) for v in labels]

    metrics = get_metrics(y, scores, labels)

    return metrics, actual, predicted


def get_missclassified_image(actual, predicted, images):
    confusion = {}
    for n, (a, p) in enumerate(zip(actual, predicted)):
        confusion[(a, p)] = images[n]

    max_i, max_j = 0, 0
    for i, j in confusion:
        max_i = max(i, max_i)
        max_j = max(j, max_j)

    frame_size = 30
    incorrect_color = np.array((255, 100, 100), dtype="uint8")
    label_color = np.array((100, 100, 240), dtype="uint8")

    out_matrix = np.ones(shape=((max_i + 2) * frame_size, (max_j + 2) * frame_size, 3), dtype="uint8") * 240

    for i in range(max_i + 1):
        if (i, i) in confusion:
            image = confusion[(i, i)]
            xs, xe, ys, ye = (i + 1) * frame_size + 1, (i + 2) * frame_size - 1, 1, frame_size - 1
            for c in range(3):
                out_matrix[xs:xe, ys:ye, c] = (1 - image) * label_color[c]
                out_matrix[ys:ye, xs:xe, c] = (1 - image) * label_color[c]

    for i, j in confusion:
        image = confusion[(i, j)]
        xs, xe = (i + 1) * frame_size + 1, (i + 2) * frame_size - 1
        ys, ye = (j + 1) * frame_size + 1, (j + 2) * frame_size - 1
        if i != j:
            for c in range(3):
                out_matrix[xs:xe, ys:ye, c] = (1 - image) * incorrect_color[c]

    return out_matrix


model = torch.nn.Sequential(
    torch.nn.Flatten(),
    torch.nn.Linear(28 * 28, 128),
    torch.nn.ReLU(),
    torch.nn.Dropout(0.1),
    torch.nn.Linear(128, 64),
    torch.nn.ReLU(),
    torch.nn.Dropout(0.1),
    torch.nn.Linear(64, 10),
).to(device)

criterion = torch.nn.CrossEntropyLoss()

x_train, y_train = torch.rand(2000, 1, 28, 28).to(device), torch.randint(0, 10, (2000,)).to(device)
x_test, y_test = torch.rand(500, 1, 28, 28).to(device), torch.randint(0, 10, (500,)).to(device)

params = {"epochs": 5, "lr": 0.003, "weight_decay": 0}

best_test_acc = 0

with Live() as live:
    live.log_params(params)

    for _ in range(params["epochs"]):
        train_one_epoch(model, criterion, x_train, y_train, params["lr"], params["weight_decay"])

        # Train Evaluation
        metrics_train, acual_train, predicted_train = evaluate(model, x_train, y_train)

        for k, v in metrics_train.items():
            live.log_metric(f"train/{k}", v)

        live.log_sklearn_plot("confusion_matrix", acual_train, predicted_train, name="train/confusion_matrix")

        # Test Evaluation
        metrics_test, actual, predicted = evaluate(model, x_test, y_test)

        for k, v in metrics_test.items():
            live.log_metric(f"test/{k}", v)

        live.log_sklearn_plot("confusion_matrix", actual, predicted, name="test/confusion_matrix")

        live.log_image("misclassified.jpg", get_missclassified_image(actual, predicted, x_test[:, 0].cpu().numpy()))

        # Save best model
        if metrics_test["acc"] > best_test_acc:
            torch.save(model.state_dict(), "model.pt")

        live.next_step()

    live.log_artifact("model.pt")
