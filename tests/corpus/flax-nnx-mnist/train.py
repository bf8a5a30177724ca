# Flax NNX, "MNIST tutorial" (https://flax.readthedocs.io/en/latest/mnist_tutorial.html): the
# tutorial's CNN (nnx.Rngs(0)), nnx.Optimizer over optax.adamw, nnx.MultiMetric, the jitted train and
# eval steps and loop, on random 28x28 images from NumPy in place of TFDS' MNIST (no download), 60
# steps instead of 1200. Then "Save and load checkpoints"
# (https://flax.readthedocs.io/en/latest/guides/checkpointing.html): nnx.split, Orbax's
# StandardCheckpointer into my-checkpoints/state beside the script.
import os
from functools import partial

import jax.numpy as jnp  # JAX NumPy
import numpy as np
import optax
import orbax.checkpoint as ocp
from flax import nnx  # The Flax NNX API.

train_steps = 60
eval_every = 20
batch_size = 32

# Random images and labels in place of MNIST (the tutorial loads it with TFDS).
train_images = np.random.rand(train_steps * batch_size, 28, 28, 1).astype(np.float32)
train_labels = np.random.randint(0, 10, train_steps * batch_size)
test_images = np.random.rand(4 * batch_size, 28, 28, 1).astype(np.float32)
test_labels = np.random.randint(0, 10, 4 * batch_size)
train_ds = [
    {"image": train_images[i : i + batch_size], "label": train_labels[i : i + batch_size]}
    for i in range(0, len(train_images), batch_size)
]
test_ds = [
    {"image": test_images[i : i + batch_size], "label": test_labels[i : i + batch_size]}
    for i in range(0, len(test_images), batch_size)
]


class CNN(nnx.Module):
  """A simple CNN model."""

  def __init__(self, *, rngs: nnx.Rngs):
    self.conv1 = nnx.Conv(1, 32, kernel_size=(3, 3), rngs=rngs)
    self.conv2 = nnx.Conv(32, 64, kernel_size=(3, 3), rngs=rngs)
    self.avg_pool = partial(nnx.avg_pool, window_shape=(2, 2), strides=(2, 2))
    self.linear1 = nnx.Linear(3136, 256, rngs=rngs)
    self.linear2 = nnx.Linear(256, 10, rngs=rngs)

  def __call__(self, x):
    x = self.avg_pool(nnx.relu(self.conv1(x)))
    x = self.avg_pool(nnx.relu(self.conv2(x)))
    x = x.reshape(x.shape[0], -1)  # flatten
    x = nnx.relu(self.linear1(x))
    x = self.linear2(x)
    return x


# Instantiate the model.
model = CNN(rngs=nnx.Rngs(0))

y = model(jnp.ones((1, 28, 28, 1)))

learning_rate = 0.005
momentum = 0.9

optimizer = nnx.Optimizer(model, optax.adamw(learning_rate, momentum), wrt=nnx.Param)
metrics = nnx.MultiMetric(
  accuracy=nnx.metrics.Accuracy(),
  loss=nnx.metrics.Average('loss'),
)


def loss_fn(model: CNN, batch):
  logits = model(batch['image'])
  loss = optax.softmax_cross_entropy_with_integer_labels(
    logits=logits, labels=batch['label']
  ).mean()
  return loss, logits


@nnx.jit
def train_step(model: CNN, optimizer: nnx.Optimizer, metrics: nnx.MultiMetric, batch):
  """Train for a single step."""
  grad_fn = nnx.value_and_grad(loss_fn, has_aux=True)
  (loss, logits), grads = grad_fn(model, batch)
  metrics.update(loss=loss, logits=logits, labels=batch['label'])  # In-place updates.
  optimizer.update(model, grads)  # In-place updates.


@nnx.jit
def eval_step(model: CNN, metrics: nnx.MultiMetric, batch):
  loss, logits = loss_fn(model, batch)
  metrics.update(loss=loss, logits=logits, labels=batch['label'])  # In-place updates.


metrics_history = {
  'train_loss': [],
  'train_accuracy': [],
  'test_loss': [],
  'test_accuracy': [],
}

for step, batch in enumerate(train_ds):
  train_step(model, optimizer, metrics, batch)

  if step > 0 and (step % eval_every == 0 or step == train_steps - 1):  # One training epoch has passed.
    # Log the training metrics.
    for metric, value in metrics.compute().items():  # Compute the metrics.
      metrics_history[f'train_{metric}'].append(value)  # Record the metrics.
    metrics.reset()  # Reset the metrics for the test set.

    # Compute the metrics on the test set after each training epoch.
    for test_batch in test_ds:
      eval_step(model, metrics, test_batch)

    # Log the test metrics.
    for metric, value in metrics.compute().items():
      metrics_history[f'test_{metric}'].append(value)
    metrics.reset()  # Reset the metrics for the next training epoch.

    print(
      f"[train] step: {step}, "
      f"loss: {metrics_history['train_loss'][-1]}, "
      f"accuracy: {metrics_history['train_accuracy'][-1] * 100}"
    )
    print(
      f"[test] step: {step}, "
      f"loss: {metrics_history['test_loss'][-1]}, "
      f"accuracy: {metrics_history['test_accuracy'][-1] * 100}"
    )

# Save and load checkpoints: the model's state with Orbax.
ckpt_dir = ocp.test_utils.erase_and_create_empty(os.path.abspath('my-checkpoints'))
_, state = nnx.split(model)
checkpointer = ocp.StandardCheckpointer()
checkpointer.save(ckpt_dir / 'state', state)
checkpointer.wait_until_finished()
