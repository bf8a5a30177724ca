# River, "Getting started: binary classification"
# (https://riverml.xyz/latest/introduction/getting-started/binary-classification/): a StandardScaler and
# LogisticRegression pipeline learnt one sample at a time on the bundled Phishing data, scored by
# progressive validation, then saved with pickle as River's FAQ ("How do I save and load models?") does.
import pickle

from river import compose
from river import datasets
from river import evaluate
from river import linear_model
from river import metrics
from river import preprocessing

dataset = datasets.Phishing()

model = compose.Pipeline(
    preprocessing.StandardScaler(),
    linear_model.LogisticRegression()
)

metric = metrics.ROCAUC()
print(evaluate.progressive_val_score(dataset, model, metric))

# save
with open('model.pkl', 'wb') as f:
    pickle.dump(model, f)

# load
with open('model.pkl', 'rb') as f:
    model = pickle.load(f)
