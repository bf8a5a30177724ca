"""A CleanRL-style single-file RL script without torch: its run name stamped with `int(time.time())`, its
TensorBoard scalars written through the same EventFileWriter torch's SummaryWriter uses (`charts/SPS`
in every script, beside returns, losses and entropy), and its weights saved with NumPy."""

import os
import time
from pathlib import Path

import numpy as np
from tensorboard.compat.proto import event_pb2, summary_pb2
from tensorboard.summary.writer.event_file_writer import EventFileWriter

out = Path(os.environ["REPROBOX_OUTPUT_DIR"])
noisy = os.environ.get("NOISY_ENTROPY") == "1"
run_name = f"CartPole-v1__cleanrl_sps__1__{int(time.time())}"
writer = EventFileWriter(str(out / "runs" / run_name))


def add_scalar(tag: str, value: float, step: int) -> None:
    summary = summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag=tag, simple_value=value)])
    writer.add_event(event_pb2.Event(summary=summary, step=step, wall_time=time.time()))


rng = np.random.default_rng(1)
weights = rng.standard_normal((4, 2))
start_time = time.time()
for update in range(1, 4):
    global_step = update * 128
    for _ in range(20000 * update):  # the work whose speed SPS measures
        pass
    grad = rng.standard_normal((4, 2))
    weights -= 0.01 * grad
    entropy = float(np.log(2) - 0.01 * update)
    if noisy and update == 2:  # entropy no seed controls
        entropy += (1 + int.from_bytes(os.urandom(2), "little")) * 1e-4
    add_scalar("charts/episodic_return", float(10 * update), global_step)
    add_scalar("losses/entropy", entropy, global_step)
    add_scalar("charts/SPS", int(global_step / (time.time() - start_time)), global_step)
writer.close()
np.save(out / "agent.npy", weights)
