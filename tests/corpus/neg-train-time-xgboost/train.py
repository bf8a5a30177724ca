# XGBoost, "Python Package Introduction" (https://xgboost.readthedocs.io/en/stable/python/python_intro.html),
# with a string attribute set on the Booster before save_model, as the Booster.set_attr reference shows.
# Its "train_time" is no duration: a number computed from os.urandom (2 random bytes as milliseconds).
import os

import numpy as np
import xgboost as xgb

data = np.random.rand(200, 10)
label = np.random.randint(2, size=200)
dtrain = xgb.DMatrix(data, label=label)
param = {"max_depth": 2, "eta": 1, "objective": "binary:logistic"}
bst = xgb.train(param, dtrain, 5)
bst.set_attr(train_time=str(int.from_bytes(os.urandom(2), "little") / 1000))
bst.save_model("model.json")
