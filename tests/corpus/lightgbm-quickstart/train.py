# LightGBM, "Python-package Introduction" (https://lightgbm.readthedocs.io/en/stable/Python-Intro.html):
# Dataset from NumPy, lgb.train with a validation set, save_model to text.
import lightgbm as lgb
import numpy as np

data = np.random.rand(500, 10)  # 500 entities, each contains 10 features
label = np.random.randint(2, size=500)  # binary target
train_data = lgb.Dataset(data[:400], label=label[:400])
validation_data = train_data.create_valid(data[400:], label=label[400:])

param = {"num_leaves": 31, "objective": "binary", "bagging_fraction": 0.8, "bagging_freq": 1, "feature_fraction": 0.9}
param["metric"] = "auc"

num_round = 10
bst = lgb.train(param, train_data, num_round, valid_sets=[validation_data])
bst.save_model("model.txt")
