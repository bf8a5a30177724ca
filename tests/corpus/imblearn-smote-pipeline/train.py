# imbalanced-learn, imblearn.pipeline.Pipeline's example
# (https://imbalanced-learn.org/stable/references/generated/imblearn.pipeline.Pipeline.html): SMOTE, PCA and a
# k-nearest-neighbours classifier in one pipeline, fitted on make_classification's imbalanced data, then the
# fitted pipeline saved with joblib.dump as scikit-learn's model persistence page does.
from collections import Counter
from sklearn.datasets import make_classification
from sklearn.model_selection import train_test_split as tts
from sklearn.decomposition import PCA
from sklearn.neighbors import KNeighborsClassifier as KNN
from sklearn.metrics import classification_report
from imblearn.over_sampling import SMOTE
from imblearn.pipeline import Pipeline

X, y = make_classification(n_classes=2, class_sep=2,
weights=[0.1, 0.9], n_informative=3, n_redundant=1, flip_y=0,
n_features=20, n_clusters_per_class=1, n_samples=1000, random_state=10)
print(f'Original dataset shape {Counter(y)}')
pca = PCA()
smt = SMOTE(random_state=42)
knn = KNN()
pipeline = Pipeline([('smt', smt), ('pca', pca), ('knn', knn)])
X_train, X_test, y_train, y_test = tts(X, y, random_state=42)
pipeline.fit(X_train, y_train)
y_hat = pipeline.predict(X_test)
print(classification_report(y_test, y_hat))

from joblib import dump

dump(pipeline, "pipeline.joblib")
