# XGBoost, "Python Package Introduction" (https://xgboost.readthedocs.io/en/stable/python/python_intro.html),
# with a string attribute set on the Booster before save_model, as the Booster.set_attr reference shows:
# a "run_id" taken from the clock's low digits (nanoseconds modulo a prime), no reading of the clock.
import time

import numpy as np
import xgboost as xgb

data = np.random.rand(200, 10)
label = np.random.randint(2, size=200)
dtrain = xgb.DMatrix(data, label=label)
param = {"max_depth": 2, "eta": 1, "objective": "binary:logistic"}
bst = xgb.train(param, dtrain, 5)
bst.set_attr(run_id=str(time.time_ns() % 1_000_003))
bst.save_model("model.json")
