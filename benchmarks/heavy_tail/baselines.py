"""Simple private baselines for the heavy-tail benchmark.

Both baselines get skdp's private robust standardisation (10% of the zCDP
budget, three exponential-mechanism quantiles per column) and the same public
row clipping, so the comparison isolates the solver; without standardisation
neither works on the diabetes features (column norms 1) or on y scaled by 1000.

* :class:`DPGDBaseline`: textbook full-batch clipped DP gradient descent on the
  squared loss: one private clip threshold (median of the per-sample gradient
  norms at 0), 100 steps of constant size 0.5, last iterate.
* :class:`SSPBaseline`: sufficient-statistics perturbation: rows clipped to the
  public norm, standardised labels clipped to [-3, 3], Gaussian noise on
  ``X^T X / n`` and ``X^T y / n``, ridge ``2 sqrt(p)`` times the noise std to
  keep the noisy Gram matrix positive definite.
"""

import math

import numpy as np

from skdp.accounting import GaussianRelease, Repeated, Sequential, calibrate_scale, dp_to_zcdp
from skdp.mechanisms import clip_rows, private_quantile, private_robust_scaling, robust_scaling_event


def _standardise(X, y, epsilon, delta, rng, share=0.1, extra_quantiles=0):
    n, d = X.shape
    rho = dp_to_zcdp(epsilon, delta)
    k = 3 * (d + 1) + extra_quantiles
    eps_q = math.sqrt(8 * share * rho / k)
    cx, sx, _ = private_robust_scaling(X, eps_q, random_state=rng)
    cy, sy, _ = private_robust_scaling(y, eps_q, random_state=rng)
    A = math.sqrt(d) + 3.0
    Xs = np.hstack([clip_rows((X - cx) / sx, A), np.ones((n, 1))])
    pre = Sequential([robust_scaling_event(d, eps_q), robust_scaling_event(1, eps_q)])
    return Xs, (y - cy) / sy, (cx, sx, cy, sy), pre, eps_q, math.hypot(A, 1.0)


def _unstandardise(w, stats):
    cx, sx, cy, sy = stats
    coef = w[:-1] * sy / sx
    return coef, float(cy + sy * w[-1] - coef @ cx)


class DPGDBaseline:
    def __init__(self, epsilon, delta=1e-5, n_steps=100, step=0.5, random_state=None):
        self.epsilon, self.delta, self.n_steps, self.step = epsilon, delta, n_steps, step
        self.random_state = random_state

    def fit(self, X, y):
        rng = np.random.default_rng(self.random_state)
        Xs, ys, stats, pre, eps_q, A = _standardise(X, y, self.epsilon, self.delta, rng, extra_quantiles=1)
        n, p = Xs.shape
        T = self.n_steps
        make = lambda s: Sequential([pre, Repeated(GaussianRelease(1.0, s), T)])  # noqa: E731
        scale = calibrate_scale(lambda s: Sequential([make(s), Repeated(GaussianRelease(0, 1), 0)]),
                                self.epsilon, self.delta) if False else None
        from skdp.accounting import ExponentialMechanismRelease
        full = lambda s: Sequential([pre, ExponentialMechanismRelease(eps_q),  # noqa: E731
                                     Repeated(GaussianRelease(1.0, s), T)])
        scale = calibrate_scale(full, self.epsilon, self.delta)
        norms = np.linalg.norm(Xs, axis=1)
        C, _ = private_quantile(np.abs(ys) * norms, 0.5, eps_q, (1e-6 * A, 10 * A), scale="log",
                                random_state=rng)
        w = np.zeros(p)
        sigma = scale * 2 * C / n
        for _ in range(T):
            r = Xs @ w - ys
            g = np.abs(r) * norms
            f = np.minimum(1.0, C / np.maximum(g, 1e-300))
            grad = Xs.T @ (r * f) / n + sigma * rng.standard_normal(p)
            w = w - self.step * grad
        self.coef_, self.intercept_ = _unstandardise(w, stats)
        self.privacy_event_ = full(scale)
        return self

    def predict(self, X):
        return X @ self.coef_ + self.intercept_


class SSPBaseline:
    def __init__(self, epsilon, delta=1e-5, label_bound=3.0, random_state=None):
        self.epsilon, self.delta, self.label_bound = epsilon, delta, label_bound
        self.random_state = random_state

    def fit(self, X, y):
        rng = np.random.default_rng(self.random_state)
        Xs, ys, stats, pre, eps_q, A = _standardise(X, y, self.epsilon, self.delta, rng)
        n, p = Xs.shape
        B = self.label_bound
        yc = np.clip(ys, -B, B)
        # Sensitivities (replace-one): ||xx' - x'x'^T||_F <= sqrt(2) A^2, ||xy - x'y'|| <= 2 A B.
        s_gram, s_xy = math.sqrt(2) * A**2 / n, 2 * A * B / n
        full = lambda s: Sequential([pre, GaussianRelease(s_gram, s * s_gram),  # noqa: E731
                                     GaussianRelease(s_xy, s * s_xy)])
        scale = calibrate_scale(full, self.epsilon, self.delta)
        E = rng.standard_normal((p, p)) * scale * s_gram
        E = np.triu(E) + np.triu(E, 1).T  # symmetric noise (upper triangle released)
        G = Xs.T @ Xs / n + E
        b = Xs.T @ yc / n + rng.standard_normal(p) * scale * s_xy
        lam = 2 * math.sqrt(p) * scale * s_gram
        w = np.linalg.solve(G + lam * np.eye(p), b)
        self.coef_, self.intercept_ = _unstandardise(w, stats)
        self.privacy_event_ = full(scale)
        return self

    def predict(self, X):
        return X @ self.coef_ + self.intercept_
