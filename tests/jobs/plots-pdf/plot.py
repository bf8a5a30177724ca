"""Fit a sine wave a little and save the prediction plot as PDF and SVG, as time_sequence_prediction's
authors did (here a small tanh network in NumPy: the plot files are the point, not the framework)."""

import matplotlib
import numpy as np

matplotlib.use("Agg")
import matplotlib.pyplot as plt

x = np.linspace(0, 6.28, 100)[:, None]
hidden_weight, hidden_bias = np.random.randn(1, 16), np.zeros(16)
out_weight, out_bias = np.random.randn(16, 1) * 0.25, np.zeros(1)
for _ in range(20):
    hidden = np.tanh(x @ hidden_weight + hidden_bias)
    error = 2 * (hidden @ out_weight + out_bias - np.sin(x)) / len(x)
    back = error @ out_weight.T * (1 - hidden**2)
    out_weight -= 0.1 * hidden.T @ error
    out_bias -= 0.1 * error.sum(axis=0)
    hidden_weight -= 0.1 * x.T @ back
    hidden_bias -= 0.1 * back.sum(axis=0)
prediction = np.tanh(x @ hidden_weight + hidden_bias) @ out_weight + out_bias
plt.figure(figsize=(6, 3))
plt.plot(x.squeeze(), prediction.squeeze())
plt.savefig("predict.pdf")
plt.savefig("predict.svg")
