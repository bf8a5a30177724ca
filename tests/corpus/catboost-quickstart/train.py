# CatBoost, "Quick start" (https://catboost.ai/docs/en/concepts/python-quickstart):
# CatBoostClassifier on a few rows, then save_model. CatBoost writes catboost_info/ beside it.
from catboost import CatBoostClassifier

# Initialize data
train_data = [[1, 4, 5, 6], [4, 5, 6, 7], [30, 40, 50, 60]]
train_labels = [0, 0, 1]
eval_data = [[2, 4, 6, 8], [1, 4, 50, 60]]

# Initialize CatBoostClassifier
model = CatBoostClassifier(iterations=2, learning_rate=1, depth=2)
# Fit model
model.fit(train_data, train_labels)
# Get predicted classes
preds_class = model.predict(eval_data)
# Get predicted probabilities for each class
preds_proba = model.predict_proba(eval_data)
print(preds_class, preds_proba)
model.save_model("model.cbm")
