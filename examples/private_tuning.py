"""Private LassoCV: choose the sparsity privately, with one budget for the choice and the model.

``LassoCV`` chooses ``alpha`` on validation folds, so the chosen strength and the
scores depend on every row. ``DPRegularizationTuner`` chooses privately and
returns the final private model; here 10 of 200 coefficients matter and
``epsilon * n_samples = 4000``, where the untuned private fit spreads its noise
over all 200 coefficients. Without a grid the tuner's ``"auto"`` reads only
public inputs (the estimator, ``epsilon``, ``n_samples``) to pick its method
(``"noise_floor"`` here: one fit, its coefficients thresholded at the privacy
noise floor as a second candidate, one private draw between the two).
"""

import numpy as np
from sklearn.linear_model import LassoCV

from skdp import BudgetAccountant, DPHeavyTailRegressor
from skdp.model_selection import DPRegularizationTuner

rng = np.random.default_rng(1)
n, d = 4000, 200
beta = np.zeros(d)
beta[rng.choice(d, 10, replace=False)] = rng.choice([-1.0, 1.0], 10)
X, X_test = rng.normal(size=(n, d)), rng.normal(size=(5000, d))
y, y_test = X @ beta + rng.normal(size=n), X_test @ beta + rng.normal(size=5000)

with BudgetAccountant(epsilon=2.0) as budget:                   # every fit in the block is charged here
    untuned = DPHeavyTailRegressor(epsilon=1.0, l1_ratio=1.0, random_state=0).fit(X, y)
    tuner = DPRegularizationTuner(DPHeavyTailRegressor(l1_ratio=1.0), epsilon=1.0, random_state=0).fit(X, y)

print(f"method chosen: {tuner.method_}; threshold applied: {tuner.noise_floor_ is not None}")
print(f"non-zero coefficients: untuned {np.count_nonzero(untuned.coef_)}, tuned {np.count_nonzero(tuner.coef_)}")
print(f"test R^2: untuned {untuned.score(X_test, y_test):.3f}, tuned {tuner.score(X_test, y_test):.3f}, "
      f"LassoCV (not private) {LassoCV().fit(X, y).score(X_test, y_test):.3f}")
print(f"spent: {budget.spent.epsilon:.3f} of {budget.epsilon:g}")
