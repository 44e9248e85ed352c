"""Simple private baselines for the heavy-tail benchmark.

Both baselines are solvers of the library's contract passed as ``algorithm=``,
so they run inside DPHeavyTailRegressor's pipeline (the same private
standardisation, row clipping and budget calibration) with a textbook solver,
so that the comparison isolates the solver. Without standardisation neither
works on the diabetes features (column norms 1) or on y scaled by 1000.

* ``TextbookDPGD`` (``DPHeavyTailRegressor(algorithm=TextbookDPGD())``):
  textbook full-batch clipped DP gradient descent on the squared loss: one private clip threshold (the median of the per-sample
  gradient norms at 0), 100 steps of constant size 0.5, the last iterate.
* ``SSP``: sufficient-statistics perturbation: rows clipped to the public
  norm, standardised labels clipped to [-3, 3], Gaussian noise on ``X^T X / n``
  and ``X^T y / n`` (half of mu^2 each), and a ridge of ``2 sqrt(p)`` times the
  Gram noise std to keep the noisy Gram matrix positive definite.
"""

import math
from dataclasses import dataclass

import numpy as np

from skdp.accounting import ExponentialMechanismRelease, GaussianRelease, Repeated, Sequential
from skdp.mechanisms import gaussian_mechanism
from skdp.solvers import Capabilities, Solver, SolverResult
from skdp.solvers.clip_threshold import private_clip
from skdp.solvers.descent import noisy_clipped_descent, step_noise_std
from skdp.solvers.geometry import project_ball


@dataclass(frozen=True)
class TextbookDPGD(Solver):
    """Clipped DP-GD on the squared loss: a private median clip, constant steps, the last iterate."""

    n_steps: int = 100
    step: float = 0.5

    name = "textbook_dpgd"
    capabilities = Capabilities()

    def n_quantiles(self, spec):
        return 1

    def plan(self, spec, budget):
        T = self.n_steps
        return Sequential([ExponentialMechanismRelease(budget.quantile_epsilon),
                           Repeated(GaussianRelease(1.0, math.sqrt(T) / budget.mu), T)])

    def run(self, spec, problem, budget, rng):
        n, p = problem.X.shape
        C, ev = private_clip(problem, 0.5, budget.quantile_epsilon, rng)
        w, steps = noisy_clipped_descent(problem, np.zeros(p), clip=C, std=step_noise_std(C, n, self.n_steps, budget.mu),
                                         steps=[self.step] * self.n_steps, rng=rng)
        return SolverResult(w, Sequential([ev, steps]), {"algorithm": self.name, "n_steps": self.n_steps})


@dataclass(frozen=True)
class SSP(Solver):
    """Sufficient-statistics perturbation with rows clipped to the public norm and labels to [-B, B]."""

    label_bound: float = 3.0

    name = "ssp"
    capabilities = Capabilities()

    def plan(self, spec, budget):
        m = budget.mu / math.sqrt(2.0)
        return Sequential([GaussianRelease(1.0, 1.0 / m), GaussianRelease(1.0, 1.0 / m)])

    def run(self, spec, problem, budget, rng):
        n, p = problem.X.shape
        A, B = problem.row_bound, self.label_bound
        yc = np.clip(problem.y, -B, B)
        m = budget.mu / math.sqrt(2.0)
        # Replace-one sensitivities: ||xx^T - x'x'^T||_F <= sqrt(2) A^2 and ||xy - x'y'|| <= 2 A B.
        s_gram, s_xy = math.sqrt(2) * A**2 / n, 2 * A * B / n
        upper = np.triu_indices(p)  # only the upper triangle is released; the matrix is symmetric
        gram_values, ev_gram = gaussian_mechanism((problem.X.T @ problem.X / n)[upper], s_gram, s_gram / m, rng)
        b, ev_xy = gaussian_mechanism(problem.X.T @ yc / n, s_xy, s_xy / m, rng)
        G = np.zeros((p, p))
        G[upper] = gram_values
        G = G + np.triu(G, 1).T + np.diag(problem.penalty)
        w = np.linalg.solve(G + 2 * math.sqrt(p) * (s_gram / m) * np.eye(p), b)
        return SolverResult(project_ball(w, problem.radius), Sequential([ev_gram, ev_xy]),
                            {"algorithm": self.name, "n_steps": 1})
