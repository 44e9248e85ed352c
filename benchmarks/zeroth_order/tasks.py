"""Benchmark tasks of the zeroth-order regressor (generated, no downloads).

* ``cauchy_lad``: median regression. ``n`` training rows, ``d = 10``,
  ``x ~ N(0, I)``, ``w ~ N(0, I)``, intercept 0, ``y = x.w + Cauchy`` noise
  (median 0, so the conditional median is ``x.w``); 10000 test rows. Parameter
  error: ``||[coef, intercept] - [w, 0]||``.
* ``contaminated``: robust regression under asymmetric contamination. ``d = 10``,
  ``x ~ N(0, I)``, ``w ~ N(0, I)``, ``y = x.w + N(0, 1)``, and in 20% of the
  training rows ``y`` is shifted by +10 (ten noise standard deviations); test
  rows are clean. Convex losses move the intercept towards the shift (a bias
  that does not vanish with ``n``); redescending ones (Tukey) ignore it.
  Parameter error as above.
* ``friedman``: scikit-learn's ``make_friedman1`` (10 features, 5 informative,
  noise 1), ``n`` training rows and 10000 test rows; metric: test R^2.
"""

import numpy as np
from sklearn.datasets import make_friedman1

N_TEST = 10_000


def cauchy_lad(n, seed, d=10):
    rng = np.random.default_rng([seed, 1])
    w = rng.normal(size=d)
    X = rng.normal(size=(n + N_TEST, d))
    y = X @ w + rng.standard_cauchy(n + N_TEST)
    return dict(X=X[:n], y=y[:n], X_test=X[n:], y_test=y[n:], coef=w, intercept=0.0)


def contaminated(n, seed, d=10, fraction=0.2, shift=10.0):
    rng = np.random.default_rng([seed, 2])
    w = rng.normal(size=d)
    X = rng.normal(size=(n + N_TEST, d))
    y = X @ w + rng.normal(size=n + N_TEST)
    bad = rng.choice(n, int(round(fraction * n)), replace=False)
    y[bad] += shift
    return dict(X=X[:n], y=y[:n], X_test=X[n:], y_test=y[n:], coef=w, intercept=0.0)


def friedman(n, seed):
    X, y = make_friedman1(n + N_TEST, noise=1.0, random_state=seed)
    return dict(X=X[:n], y=y[:n], X_test=X[n:], y_test=y[n:], coef=None, intercept=None)


def parameter_error(data, coef, intercept):
    """``||[coef, intercept] - [w, b]||`` (inf when not finite)."""
    err = float(np.linalg.norm(np.append(np.asarray(coef) - data["coef"], float(intercept) - data["intercept"])))
    return err if np.isfinite(err) else float("inf")


def pinball(y, prediction, quantile=0.5):
    r = np.asarray(y) - np.asarray(prediction)
    loss = float(np.mean(np.maximum(quantile * r, (quantile - 1.0) * r)))
    return loss if np.isfinite(loss) else float("inf")


def r2(y, prediction):
    prediction = np.asarray(prediction, dtype=float)
    if not np.all(np.isfinite(prediction)):
        return float("-inf")
    return 1.0 - float(np.mean((y - prediction) ** 2)) / float(np.var(y))
