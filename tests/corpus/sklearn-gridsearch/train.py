# scikit-learn, "Tuning the hyper-parameters of an estimator" (https://scikit-learn.org/stable/modules/grid_search.html)
# and its "Custom refit strategy of a grid search with cross-validation" example: GridSearchCV over an
# SVC on the bundled digits, cv_results_ written as CSV with pandas, the search dumped with joblib.
import joblib
import pandas as pd
from sklearn import datasets
from sklearn.model_selection import GridSearchCV, train_test_split
from sklearn.svm import SVC

digits = datasets.load_digits()
X_train, X_test, y_train, y_test = train_test_split(digits.data, digits.target, test_size=0.5)

tuned_parameters = [
    {"kernel": ["rbf"], "gamma": [1e-3, 1e-4], "C": [1, 10]},
    {"kernel": ["linear"], "C": [1, 10]},
]
grid_search = GridSearchCV(SVC(), tuned_parameters, scoring="accuracy")
grid_search.fit(X_train, y_train)
print(grid_search.best_params_, grid_search.score(X_test, y_test))

pd.DataFrame(grid_search.cv_results_).to_csv("cv_results.csv")
joblib.dump(grid_search, "grid_search.joblib")
