# scikit-learn, incremental learning with partial_fit ("Strategies to scale computationally: bigger
# data", https://scikit-learn.org/stable/computing/scaling_strategies.html): an SGDClassifier fed the
# digits in mini-batches, one JSON line of metrics per epoch. Its "epoch_time" is no
# duration: a number computed from os.urandom (2 random bytes as milliseconds), named like one.
import json
import os

import numpy as np
from sklearn.datasets import load_digits
from sklearn.linear_model import SGDClassifier

X, y = load_digits(return_X_y=True)
clf = SGDClassifier()
classes = np.unique(y)

with open("metrics.jsonl", "w") as log:
    for epoch in range(5):
        order = np.random.permutation(len(X))
        for batch in np.array_split(order, 10):
            clf.partial_fit(X[batch], y[batch], classes=classes)
        epoch_time = int.from_bytes(os.urandom(2), "little") / 1000
        record = {"epoch": epoch, "accuracy": clf.score(X, y), "epoch_time": epoch_time}
        log.write(json.dumps(record) + "\n")
np.save("coef.npy", clf.coef_)
