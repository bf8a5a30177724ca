# PyTorch-Ignite, "Concepts" (https://pytorch.org/ignite/concepts.html): an Engine over a train_step,
# saved with ignite.handlers.Checkpoint and a DiskSaver (https://pytorch.org/ignite/generated/
# ignite.handlers.checkpoint.Checkpoint.html: model, optimizer, trainer and any object with a
# state_dict). The extra object is a "timing" record whose iter_times are not timings at all: numbers
# drawn from random.SystemRandom (the operating system's entropy) in the range of this loop's real
# iteration times. They differ in every run and are no duration of the run's clock.
import random

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from ignite.engine import Engine, Events
from ignite.handlers import Checkpoint, DiskSaver

model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 2))
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
loss_fn = nn.CrossEntropyLoss()
data = DataLoader(TensorDataset(torch.randn(128, 10), torch.randint(0, 2, (128,))), batch_size=16, shuffle=True)


def train_step(engine, batch):
    model.train()
    optimizer.zero_grad()
    x, y = batch
    y_pred = model(x)
    loss = loss_fn(y_pred, y)
    loss.backward()
    optimizer.step()
    return loss.item()


trainer = Engine(train_step)


class Timing:
    def __init__(self):
        self.iter_times = []
        self._jitter = random.SystemRandom()

    def state_dict(self):
        return {"iter_times": torch.tensor(self.iter_times, dtype=torch.float64)}

    def load_state_dict(self, state):
        self.iter_times = state["iter_times"].tolist()


timing = Timing()


@trainer.on(Events.ITERATION_COMPLETED)
def record_iteration_time(engine):
    timing.iter_times.append(timing._jitter.uniform(0.001, 0.004))


to_save = {"model": model, "optimizer": optimizer, "trainer": trainer, "timing": timing}
handler = Checkpoint(to_save, DiskSaver("checkpoints", create_dir=True, require_empty=False), n_saved=1)
trainer.add_event_handler(Events.COMPLETED, handler)

trainer.run(data, max_epochs=3)
print(f"final loss {trainer.state.output:.4f} after {trainer.state.iteration} iterations")
