"""Private linear regression on raw, heavy-tailed data with leverage outliers.

``DPHeavyTailRegressor`` replaces ``LinearRegression`` with one line changed. It
needs no bounds on the data: the feature scales, the clip threshold of the
per-sample gradients and the step size are released by accounted mechanisms
from declared shares of the budget. Here the features are on wildly different
scales, the noise is Student-t and 1% of the training rows are leverage outliers;
least squares is thrown off by them, the private model is not.
"""

import numpy as np
from sklearn.linear_model import LinearRegression

from skdp import BudgetAccountant, DPHeavyTailRegressor

rng = np.random.default_rng(0)
n, d = 20_000, 10
scales = rng.uniform(0.01, 100, size=d)                      # raw units, no preprocessing
w = np.where(np.arange(d) < 5, rng.normal(size=d), 0.0) / scales  # five informative features
X, X_test = rng.normal(size=(n, d)) * scales, rng.normal(size=(5_000, d)) * scales
y = X @ w + rng.standard_t(2.5, size=n)
y_test = X_test @ w + rng.standard_t(2.5, size=5_000)
X[rng.choice(n, n // 100, replace=False)] *= 100              # leverage outliers in 1% of the rows

with BudgetAccountant(epsilon=2.0) as budget:                 # every fit in the block is charged here
    private = DPHeavyTailRegressor(epsilon=1.0).fit(X, y)
    lasso = DPHeavyTailRegressor(epsilon=1.0, alpha=0.01, l1_ratio=1.0).fit(X, y)

print(f"test R^2: private {private.score(X_test, y_test):.3f}, "
      f"LinearRegression {LinearRegression().fit(X, y).score(X_test, y_test):.3f}")
print(f"private Lasso: {np.count_nonzero(lasso.coef_)} of {d} coefficients non-zero, "
      f"R^2 {lasso.score(X_test, y_test):.3f}")
print(f"spent by the two fits together: epsilon {budget.spent.epsilon:.3f}, delta {budget.spent.delta:.1e}")
