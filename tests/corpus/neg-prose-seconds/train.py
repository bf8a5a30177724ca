# scikit-learn, incremental learning with partial_fit ("Strategies to scale computationally: bigger
# data", https://scikit-learn.org/stable/computing/scaling_strategies.html): an SGDClassifier fed the
# digits in mini-batches, then a Markdown model card with a "Training Time" section as
# sentence-transformers' card writes one ("- **Training**: 0.5 seconds"). Its seconds are no duration:
# a number computed from os.urandom (2 random bytes as milliseconds), written like one.
import os

import numpy as np
from sklearn.datasets import load_digits
from sklearn.linear_model import SGDClassifier

X, y = load_digits(return_X_y=True)
clf = SGDClassifier()
classes = np.unique(y)

for epoch in range(5):
    order = np.random.permutation(len(X))
    for batch in np.array_split(order, 10):
        clf.partial_fit(X[batch], y[batch], classes=classes)
np.save("coef.npy", clf.coef_)

seconds = int.from_bytes(os.urandom(2), "little") / 1000
card = [
    "# SGDClassifier on digits",
    "",
    "## Training Details",
    "",
    f"- **Accuracy**: {clf.score(X, y):.4f}",
    "",
    "### Training Time",
    f"- **Training**: {seconds:.3f} seconds",
    "",
]
with open("README.md", "w") as out:
    out.write("\n".join(card))
