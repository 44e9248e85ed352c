"""Simple private baselines for the heavy-tail benchmark.

Both baselines run inside DPHeavyTailRegressor's pipeline (the same private
standardisation, row clipping and budget calibration) with a textbook solver,
so that the comparison isolates the solver. Without standardisation neither
works on the diabetes features (column norms 1) or on y scaled by 1000.

* ``DPGDBaseline``: textbook full-batch clipped DP gradient descent on the
  squared loss: one private clip threshold (the median of the per-sample
  gradient norms at 0), 100 steps of constant size 0.5, the last iterate.
* ``SSPBaseline``: sufficient-statistics perturbation: rows clipped to the public
  norm, standardised labels clipped to [-3, 3], Gaussian noise on ``X^T X / n``
  and ``X^T y / n`` (half of mu^2 each), and a ridge of ``2 sqrt(p)`` times the
  Gram noise std to keep the noisy Gram matrix positive definite.
"""

import math

import numpy as np

from skdp import DPHeavyTailRegressor
from skdp.accounting import ExponentialMechanismRelease, GaussianRelease, Repeated, Sequential
from skdp.mechanisms import private_quantile
from skdp.solvers import SolverResult


class TextbookDPGD:
    name = "textbook_dpgd"

    def __init__(self, n_steps=100, step=0.5):
        self.n_steps, self.step = n_steps, step

    def n_quantiles(self, loss):
        return 1

    def event(self, loss, mu, eps_q, n_samples=None):
        T = self.n_steps
        return Sequential([ExponentialMechanismRelease(eps_q), Repeated(GaussianRelease(1.0, math.sqrt(T) / mu), T)])

    def solve(self, problem, mu, eps_q, rng):
        n, p = problem.X.shape
        g_norms = np.abs(problem.derivatives(np.zeros(p))) * problem.norms
        C, ev = private_quantile(g_norms, 0.5, eps_q, (1e-6 * problem.row_bound, 10 * problem.row_bound),
                                 scale="log", random_state=rng)
        sigma = math.sqrt(self.n_steps) * 2 * C / (n * mu)
        w = np.zeros(p)
        for _ in range(self.n_steps):
            grad = problem.clipped_gradient_sum(w, C) / n + sigma * rng.standard_normal(p) + problem.penalty * w
            w = w - self.step * grad
        return SolverResult(w, Sequential([ev, Repeated(GaussianRelease(2 * C / n, sigma), self.n_steps)]),
                            {"algorithm": self.name, "n_steps": self.n_steps})


class SSP:
    name = "ssp"

    def __init__(self, label_bound=3.0):
        self.label_bound = label_bound

    def n_quantiles(self, loss):
        return 0

    def event(self, loss, mu, eps_q, n_samples=None):
        m = mu / math.sqrt(2.0)
        return Sequential([GaussianRelease(1.0, 1.0 / m), GaussianRelease(1.0, 1.0 / m)])

    def solve(self, problem, mu, eps_q, rng):
        n, p = problem.X.shape
        A, B = problem.row_bound, self.label_bound
        yc = np.clip(problem.y, -B, B)
        m = mu / math.sqrt(2.0)
        # Replace-one sensitivities: ||xx^T - x'x'^T||_F <= sqrt(2) A^2 and ||xy - x'y'|| <= 2 A B.
        s_gram, s_xy = math.sqrt(2) * A**2 / n, 2 * A * B / n
        sd_gram, sd_xy = s_gram / m, s_xy / m
        E = np.triu(rng.standard_normal((p, p)) * sd_gram)
        E = E + np.triu(E, 1).T  # symmetric noise: only the upper triangle is released
        G = problem.X.T @ problem.X / n + E + np.diag(problem.penalty)
        b = problem.X.T @ yc / n + rng.standard_normal(p) * sd_xy
        w = np.linalg.solve(G + 2 * math.sqrt(p) * sd_gram * np.eye(p), b)
        norm = np.linalg.norm(w)
        if norm > problem.radius:
            w *= problem.radius / norm
        return SolverResult(w, Sequential([GaussianRelease(s_gram, sd_gram), GaussianRelease(s_xy, sd_xy)]),
                            {"algorithm": self.name, "n_steps": 1})


class _WithSolver(DPHeavyTailRegressor):
    _solver_class = None

    def _make_solver(self, algorithm, loss, n_samples, n_coef):
        return self._solver_class()

    def _choose_algorithm(self, n_samples, n_features):
        return "clipped_gd"  # only used for validation; the solver is replaced


class DPGDBaseline(_WithSolver):
    """Textbook clipped DP-GD with a private clip threshold, in skdp's pipeline."""

    _solver_class = TextbookDPGD


class SSPBaseline(_WithSolver):
    """Sufficient-statistics perturbation with clipped rows and labels, in skdp's pipeline."""

    _solver_class = SSP
