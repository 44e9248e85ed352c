"""A small test-only estimator that exercises the shared base end to end.

``ToyDPRidge`` fits ridge regression by certified output perturbation: rows are
clipped to ``row_norm`` and labels to ``label_bound`` (public, per-record
transforms), the squared loss is replaced by its Lipschitzian extension (Huber)
so that every row's loss is ``L``-Lipschitz by construction, and the certified
minimiser is released with Gaussian noise calibrated to (epsilon, delta).
"""

import numbers

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.utils.validation import check_is_fitted, validate_data

from skdp._base import DPEstimatorMixin
from skdp._validation import Interval
from skdp.accounting import GaussianRelease, calibrate_gaussian
from skdp.losses import SquaredLoss
from skdp.mechanisms import clip_rows, erm_sensitivity, output_perturbation, row_norms


class ToyDPRidge(DPEstimatorMixin, RegressorMixin, BaseEstimator):
    """Private ridge regression without intercept (for tests of the base only)."""

    _parameter_constraints = {
        **DPEstimatorMixin._privacy_parameter_constraints,
        "alpha": [Interval(numbers.Real, 0, None, closed="neither")],
        "row_norm": [Interval(numbers.Real, 0, None, closed="neither")],
        "label_bound": [Interval(numbers.Real, 0, None, closed="neither")],
    }

    def __init__(self, *, epsilon=1.0, delta=1e-5, alpha=1.0, row_norm=1.0, label_bound=1.0,
                 accountant=None, random_state=None, verbose=0):
        self.epsilon = epsilon
        self.delta = delta
        self.alpha = alpha
        self.row_norm = row_norm
        self.label_bound = label_bound
        self.accountant = accountant
        self.random_state = random_state
        self.verbose = verbose

    def _plan(self, n_samples):
        # Lipschitz constant of the extended loss, fixed from public bounds only.
        lipschitz = 2.0 * self.row_norm * self.label_bound
        tol = 0.01 * lipschitz / (self.alpha * n_samples)
        sensitivity = erm_sensitivity(lipschitz, self.alpha, n_samples, tol)
        noise_std = calibrate_gaussian(sensitivity, self.epsilon, self._resolve_delta(n_samples))
        return lipschitz, tol, GaussianRelease(sensitivity, noise_std)

    def fit(self, X, y):
        self._validate_privacy_params()
        X, y = validate_data(self, X, y, y_numeric=True, dtype=np.float64)
        n, d = X.shape
        lipschitz, tol, planned = self._plan(n)
        loss = SquaredLoss()

        def solve(rng):
            Xc = clip_rows(X, self.row_norm)
            yc = np.clip(y, -self.label_bound, self.label_bound)
            slope = loss.extension_slope(row_norms(Xc), lipschitz)

            def fun_and_grad(w):
                z = Xc @ w
                value = loss.extended_value(z, yc, slope).mean() + 0.5 * self.alpha * w @ w
                grad = Xc.T @ loss.extended_derivative(z, yc, slope) / n + self.alpha * w
                return value, grad

            return output_perturbation(
                fun_and_grad, np.zeros(d), n_samples=n, lipschitz=lipschitz,
                strong_convexity=self.alpha, smoothness=self.row_norm**2 + self.alpha,
                noise_std=planned.noise_std, tol=tol, radius=lipschitz / self.alpha,
                random_state=rng,
            )[::-1]

        self.coef_ = self._run_private(planned, solve, n_samples=n)
        return self

    def predict(self, X):
        check_is_fitted(self)
        X = validate_data(self, X, reset=False, dtype=np.float64)
        return X @ self.coef_
