# pytorch-tabnet's README (https://github.com/dreamquark-ai/tabnet#how-to-use-it and "Saving and
# loading models"): TabNetClassifier().fit with an eval_set, predict, and save_model, which writes
# model_params.json and network.pt and zips them into tabnet_model_test_1.zip. scikit-learn's
# breast-cancer data (bundled), ten epochs and batches of 64 (the README's fit parameters batch_size and
# virtual_batch_size; its default of 1024 with drop_last would leave this data no batch at all).
from sklearn.datasets import load_breast_cancer
from sklearn.model_selection import train_test_split

from pytorch_tabnet.tab_model import TabNetClassifier

X, y = load_breast_cancer(return_X_y=True)
X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.2)
X_train, X_valid, y_train, y_valid = train_test_split(X_train, y_train, test_size=0.2)

clf = TabNetClassifier()  # TabNetRegressor()
clf.fit(
    X_train, y_train,
    eval_set=[(X_valid, y_valid)],
    max_epochs=10,
    batch_size=64,
    virtual_batch_size=32,
)
preds = clf.predict(X_test)
print("test accuracy", (preds == y_test).mean())

# save tabnet model
saving_path_name = "./tabnet_model_test_1"
saved_filepath = clf.save_model(saving_path_name)
