# XGBoost, "Get Started with XGBoost" (https://xgboost.readthedocs.io/en/stable/get_started.html),
# the scikit-learn interface, then XGBModel.save_model as "Model IO" recommends.
from sklearn.datasets import load_iris
from sklearn.model_selection import train_test_split
from xgboost import XGBClassifier

# read data
data = load_iris()
X_train, X_test, y_train, y_test = train_test_split(data["data"], data["target"], test_size=0.2)
# create model instance
bst = XGBClassifier(n_estimators=2, max_depth=2, learning_rate=1, colsample_bytree=0.5)
# fit model
bst.fit(X_train, y_train)
# make predictions
preds = bst.predict(X_test)
print(preds)
bst.save_model("model.json")
