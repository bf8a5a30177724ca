# skops, "Secure persistence with skops" (https://skops.readthedocs.io/en/stable/persistence.html):
# a GridSearchCV over an XGBClassifier on the bundled iris data, dumped with skops.io.dump, audited with
# get_untrusted_types and loaded back with those types trusted.
from xgboost.sklearn import XGBClassifier
from sklearn.model_selection import GridSearchCV, train_test_split
from sklearn.datasets import load_iris
from skops.io import dump, load, get_untrusted_types

X, y = load_iris(return_X_y=True)
X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.4)
param_grid = {"tree_method": ["exact", "approx", "hist"]}
clf = GridSearchCV(XGBClassifier(), param_grid=param_grid).fit(X_train, y_train)
print(clf.score(X_test, y_test))
dump(clf, "my-model.skops")
# ...
unknown_types = get_untrusted_types(file="my-model.skops")
print(unknown_types)
loaded = load("my-model.skops", trusted=unknown_types)
print(loaded.score(X_test, y_test))
