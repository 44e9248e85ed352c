"""Private logistic-regression-style classification with calibrated probabilities.

``DPInterpolatingClassifier`` replaces ``LogisticRegression``. Pass the public list
of labels as ``classes=`` (otherwise the label set is read from the data and
released with the model, and a ``PrivacyLeakWarning`` says so). ``predict_proba``
comes from a privately calibrated logistic model of the decision function, and a
private check compares the model with the released class prior.
"""

import numpy as np
from sklearn.datasets import load_breast_cancer
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import log_loss
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from skdp import DPInterpolatingClassifier

X, y = load_breast_cancer(return_X_y=True)                    # raw features: no scaling needed
X, X_test, y, y_test = train_test_split(X, y, test_size=0.25, random_state=0)

model = DPInterpolatingClassifier(epsilon=2.0, classes=[0, 1]).fit(X, y)
proba = model.predict_proba(X_test)
reference = make_pipeline(StandardScaler(), LogisticRegression()).fit(X, y)  # non-private

print(f"accuracy: private {model.score(X_test, y_test):.3f}, LogisticRegression "
      f"{reference.score(X_test, y_test):.3f}")
print(f"log loss: private {log_loss(y_test, proba):.3f}; released class prior {np.round(model.class_prior_, 3)}")
print(f"privacy spent: {model.privacy_spent_}")
