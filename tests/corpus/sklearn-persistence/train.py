# scikit-learn, "Model persistence" (https://scikit-learn.org/stable/model_persistence.html):
# fit a HistGradientBoostingClassifier on the bundled iris data and dump it with joblib.
from sklearn import datasets, ensemble

clf = ensemble.HistGradientBoostingClassifier()
X, y = datasets.load_iris(return_X_y=True)
clf.fit(X, y)

from joblib import dump, load

dump(clf, "filename.joblib")
clf = load("filename.joblib")
print(clf.score(X, y))
