"""Noisy clipped projected SGD with weighted averaging (Lowy and Razaviyayn, Algorithm 5; 'averaged_sgd').

For ``t = 0..T-1`` (``T`` disjoint batches; the paper's box loops over ``T + 1``
batches of ``n / T`` rows, more than ``n``, a slip of the paper)::

    g_t     = oracle(w_t, batch t)          # clipped mean + N(0, sigma^2 I) + ridge gradient
    w_{t+1} = Proj_W(w_t - eta_t g_t)

and the output is ``sum_t zeta_t w_{t+1} / sum_t zeta_t``. Steps and weights are
Stich's (2019, Lemma 3 with ``a = mu/2``, ``d = beta``), with
``kappa = beta / mu`` and ``t0 = ceil(T / 2)``: if ``T <= 2 kappa``,
``eta_t = 1 / beta`` and ``zeta_t = (1 - mu / (2 beta))^-(t+1)``; otherwise
``eta_t = 1 / beta``, ``zeta_t = 0`` for ``t < t0`` and
``eta_t = 4 / (mu (4 kappa + t - t0))``, ``zeta_t = (4 kappa + t - t0)^2`` after.
Proposition 31: ``E F(w_hat) - F* <= 32 beta D^2 exp(-T / (4 kappa)) + 72 Sigma^2 / (mu T)
+ 2 B^2 / mu`` for a mu-strongly convex, beta-smooth ``F``.

Privacy: one mu-GDP release per disjoint batch (parallel composition), plus the
clip quantile if one is taken; steps, projection and averaging are
post-processing.

Strong convexity. The theory schedule needs a public ``mu``: it is the smallest
ridge weight on the feature coefficients; the intercept coefficient carries no
ridge and is treated through the row structure (its curvature is the loss's on
the constant column, ``smoothness * unit^2``, exact for the squared loss with
centred features; see :func:`~skdp.solvers.heavy_tail._one_pass.theory_strong_convexity`).
Without a ridge the theory schedule refuses to run (its ``T`` and guarantee need
``mu > 0``). The practical schedule only uses ``mu`` to shape the steps: it takes
``max(ridge, L / 2)`` with the practical curvature ``L``, i.e. it assumes a
standardised design whose Hessian has condition number about 2; a worse
conditioning only slows it down.

Schedules (``beta = problem.uniform_smoothness()``, ``D = 2 radius``, the paper's
``epsilon = mu`` of the Gaussian budget, ``p`` coefficients):

* "theory" (Theorem 30): ``T = ceil(4 kappa ln((mu_sc beta D^2 / G_k^2) (n + (mu^2 n^2 / p)^((k-1)/k))))``
  clamped to ``[1, n]`` (the guarantee needs ``kappa <= n / ln n``; beyond, ``T = n``
  and the guarantee is lost, never privacy); ``C = G_k (mu^2 n^2 / (p T))^(1/(2k))``.
* "practical": ``C`` from the private quantile; with ``m = n mu / p``,
  ``T = min(2 log2(m) - 1.5, 4 sqrt(n / p))``: the first half contracts the
  initial error by about 1/2 per step (``2^-T``) while the averaged privacy
  noise grows like ``2 T / m^2``; their balance gives ``2^-T = 2 / (m^2 ln 2)``.
  The cap is the noise-free regime, where more steps only shrink the batches.

References
----------
A. Lowy and M. Razaviyayn, "Private Stochastic Optimization With Large
Worst-Case Lipschitz Parameter", 2022, arXiv:2209.07403 (Algorithm 5).
"""

import math
from dataclasses import dataclass

import numpy as np

from .._contract import register_solver, report_progress
from ..geometry import project_ball
from ..schedules import clamp_steps, stich_schedule
from ._one_pass import OnePassSolver, step_constants

__all__ = ["AveragedSGD", "averaged_sgd"]


def averaged_sgd(oracle, w0, steps, weights, project):
    """Projected SGD returning the ``weights``-average of ``w_1..w_T``.

    Parameters
    ----------
    oracle : callable ``(w, t) -> g``
        Gradient estimate at ``w`` for step ``t``. ``w`` may hold a stack of
        independent runs (any shape ``oracle`` and ``project`` accept).
    w0 : ndarray
    steps, weights : sequences of length T
    project : callable
        Euclidean projection onto the domain.
    """
    w = np.array(w0, dtype=float)
    total = np.zeros_like(w)
    weight = 0.0
    for t, (eta, zeta) in enumerate(zip(steps, weights)):
        w = project(w - eta * oracle(w, t))
        if zeta > 0:
            total += zeta * w
            weight += zeta
        report_progress(t + 1, len(steps), eta)
    return total / weight


@register_solver
@dataclass(frozen=True)
class AveragedSGD(OnePassSolver):
    """Algorithm 5 of Lowy and Razaviyayn: projected clipped SGD with Stich's weighted averaging.

    The parameters are those of :class:`~skdp.solvers.heavy_tail._one_pass.OnePassSolver`.

    Notes
    -----
    An L1 penalty is refused (no proximal step; use 'proximal_sgd').
    """

    name = "averaged_sgd"
    theory_needs_ridge = True

    def _step_constants(self, problem):
        beta, mu_sc = step_constants(problem, self.schedule, self.name)
        return {"beta": beta, "mu_sc": mu_sc}

    def _theory_steps(self, problem, mu, constants):
        n, p = problem.n_samples, problem.n_coef
        k, Gk = self.moments.k, self.moments.G
        beta, mu_sc = constants["beta"], constants["mu_sc"]
        D = 2.0 * problem.radius
        private = (mu * mu * n * n / p) ** ((k - 1.0) / k)
        T = 4.0 * beta / mu_sc * math.log(max(mu_sc * beta * D * D / Gk**2 * (n + private), 1.0))
        return clamp_steps(T, n)

    def _theory_clip(self, n, p, mu, T):
        return self.moments.G * (mu * mu * n * n / (p * T)) ** (1.0 / (2.0 * self.moments.k))

    def _iterate(self, problem, oracle, T, C, mu, plan):
        if problem.has_l1:  # also checked before the data is touched
            raise ValueError("averaged_sgd does not support an L1 penalty; use algorithm='proximal_sgd'.")
        steps, weights = stich_schedule(T, plan["beta"], plan["mu_sc"])
        coef = averaged_sgd(oracle, np.zeros(problem.n_coef), steps, weights,
                            lambda v: project_ball(v, problem.radius))
        return coef, {"step_size": float(steps[0]), "final_step_size": float(steps[-1]),
                      "smoothness": plan["beta"], "strong_convexity": plan["mu_sc"]}
