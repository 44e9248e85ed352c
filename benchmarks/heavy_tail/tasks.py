"""Benchmark tasks for DPHeavyTailRegressor.

* ``contaminated``: n training rows, d = 20, x ~ N(0, I), w ~ N(0, I),
  y = x.w + Student-t(2.5) noise; in 1% of the training rows x is multiplied by
  100 *after* y is formed (bad leverage points); 5000 clean test rows. Optionally
  y (and w) multiplied by ``y_scale``. The Bayes error of a seed is the test MSE
  of the true coefficients.
* ``diabetes``: scikit-learn's diabetes data, a random 75/25 split per seed.
"""

import numpy as np
from sklearn.datasets import load_diabetes


def contaminated(n, seed, *, d=20, y_scale=1.0, n_test=5000, fraction=0.01):
    rng = np.random.default_rng(seed)
    w = rng.normal(size=d)
    X = rng.normal(size=(n, d))
    y = X @ w + rng.standard_t(2.5, size=n)
    idx = rng.choice(n, int(round(fraction * n)), replace=False)
    X[idx] *= 100.0
    X_test = rng.normal(size=(n_test, d))
    y_test = X_test @ w + rng.standard_t(2.5, size=n_test)
    bayes = float(np.mean((y_test - X_test @ w) ** 2))
    return dict(X=X, y=y * y_scale, X_test=X_test, y_test=y_test * y_scale, coef=w * y_scale,
                bayes=bayes * y_scale**2)


def diabetes(seed):
    X, y = load_diabetes(return_X_y=True)
    rng = np.random.default_rng(seed)
    perm = rng.permutation(len(y))
    cut = int(0.75 * len(y))
    tr, te = perm[:cut], perm[cut:]
    return dict(X=X[tr], y=y[tr], X_test=X[te], y_test=y[te], coef=None, bayes=None)


def sparse(n, seed, *, d=200, k=10, n_test=5000):
    """Sparse regression: ``d`` Gaussian features, ``k`` non-zero coefficients, Student-t(2.5) noise.

    Non-zero coefficients have random signs and magnitudes in [0.5, 2].
    """
    rng = np.random.default_rng(seed)
    w = np.zeros(d)
    support = rng.choice(d, k, replace=False)
    w[support] = rng.choice([-1.0, 1.0], k) * rng.uniform(0.5, 2.0, k)
    X = rng.normal(size=(n, d))
    y = X @ w + rng.standard_t(2.5, size=n)
    X_test = rng.normal(size=(n_test, d))
    y_test = X_test @ w + rng.standard_t(2.5, size=n_test)
    bayes = float(np.mean((y_test - X_test @ w) ** 2))
    return dict(X=X, y=y, X_test=X_test, y_test=y_test, coef=w, bayes=bayes)
