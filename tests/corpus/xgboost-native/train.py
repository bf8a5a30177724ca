# XGBoost, "Python Package Introduction" (https://xgboost.readthedocs.io/en/stable/python/python_intro.html):
# DMatrix from NumPy, xgb.train with an evaluation list, save_model to JSON and UBJSON, dump_model.
import numpy as np
import xgboost as xgb

data = np.random.rand(500, 10)  # 500 entities, each contains 10 features
label = np.random.randint(2, size=500)  # binary target
dtrain = xgb.DMatrix(data[:400], label=label[:400])
dtest = xgb.DMatrix(data[400:], label=label[400:])

param = {"max_depth": 2, "eta": 1, "objective": "binary:logistic", "subsample": 0.8}
param["nthread"] = 4
param["eval_metric"] = "auc"
evallist = [(dtrain, "train"), (dtest, "eval")]

num_round = 10
bst = xgb.train(param, dtrain, num_round, evallist)

bst.save_model("0001.json")
bst.save_model("0001.ubj")
bst.dump_model("dump.raw.txt")
