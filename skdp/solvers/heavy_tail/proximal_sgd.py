"""Noisy clipped proximal SGD (Lowy and Razaviyayn, Algorithm 6; 'proximal_sgd').

For ``t = 0..T-1`` over ``T`` disjoint batches::

    g_t     = oracle(w_t, batch t)                  # clipped mean of the DATA loss + noise + ridge
    w_{t+1} = prox_{eta_t f1}(w_t - eta_t g_t)      # f1 = sum(l1 |w|) + indicator of the ball

and the output is the LAST iterate (no averaging). The non-smooth part never
goes through the oracle: ``problem.prox`` is exact (soft threshold, then the
radial projection). Proposition 36 (``F`` mu-Proximal-PL, smooth part
beta-smooth, ``eta = 1 / (2 beta)``): ``E F(w_T) - F* <= (1 - mu / (2 beta))^T Delta
+ 4 (B^2 + Sigma^2) / mu``.

Privacy: one mu-GDP release per disjoint batch (parallel composition), plus the
clip quantile if one is taken; the prox is post-processing.

Schedules (``beta = problem.uniform_smoothness()``, the paper's ``epsilon = mu``):

* "theory" (Theorem 35): constant step ``1 / (2 beta)``; ``T = 2 ceil(kappa ln n)``
  (a non-circular form of the paper's rule), clamped to ``[1, n]``;
  ``C = G_k (mu^2 n^2 / (p T^2))^(1/(2k))``. ``kappa = beta / mu_sc`` with the
  strong-convexity constant of :func:`~skdp.solvers.heavy_tail._one_pass.theory_strong_convexity`
  (the ridge; an L1 penalty alone makes a Lasso PPL with a data-dependent
  constant, which is not public), so the theory schedule needs a ridge.
* "practical": the step sizes of the practical 'averaged_sgd' (constant
  ``1 / L`` for the first half, then Stich's decreasing steps with
  ``mu = max(ridge, L / 2)``): without averaging, the last iterate of a
  constant-step run keeps a noise floor ``~ eta Sigma^2`` (Proposition 36's
  ``Sigma^2 / mu``), and decreasing steps average the noise out along the run.
  ``T = min(2 log2(m) - 1.5, 4 sqrt(n / p))`` with ``m = n mu / p``, as for
  'averaged_sgd'.

References
----------
A. Lowy and M. Razaviyayn, "Private Stochastic Optimization With Large
Worst-Case Lipschitz Parameter", 2022, arXiv:2209.07403 (Algorithm 6).
"""

import math
from dataclasses import dataclass

import numpy as np

from .._contract import Capabilities, register_solver, report_progress
from ..schedules import clamp_steps, stich_schedule
from ._one_pass import OnePassSolver, step_constants

__all__ = ["ProximalSGD", "proximal_sgd"]


def proximal_sgd(oracle, w0, steps, prox):
    """Proximal SGD returning the last iterate.

    Parameters
    ----------
    oracle : callable ``(w, t) -> g``
        Estimate of the gradient of the smooth part at ``w`` for step ``t``
        (any shape ``oracle`` and ``prox`` accept, e.g. a stack of runs).
    w0 : ndarray
    steps : sequence of length T
    prox : callable ``(v, step) -> w``
        Proximal map of ``step`` times the non-smooth part.
    """
    w = np.array(w0, dtype=float)
    for t, eta in enumerate(steps):
        w = prox(w - eta * oracle(w, t), eta)
        report_progress(t + 1, len(steps), eta)
    return w


@register_solver
@dataclass(frozen=True)
class ProximalSGD(OnePassSolver):
    """Algorithm 6 of Lowy and Razaviyayn: one-pass proximal SGD with clipped Gaussian means.

    The parameters are those of :class:`~skdp.solvers.heavy_tail._one_pass.OnePassSolver`.

    Notes
    -----
    Supports the L1 weights of the problem (``problem.l1``) through exact
    proximal steps.
    """

    name = "proximal_sgd"
    capabilities = Capabilities(l1=True, smooth_only=True, public_clip=True)
    theory_needs_ridge = True

    def _step_constants(self, problem):
        beta, mu_sc = step_constants(problem, self.schedule, self.name)
        return {"beta": beta, "mu_sc": mu_sc}

    def _theory_steps(self, problem, mu, constants):
        # inf (an underflowed strong convexity) clamps to n
        return clamp_steps(2.0 * constants["beta"] / constants["mu_sc"] * math.log(problem.n_samples),
                           problem.n_samples)

    def _theory_clip(self, n, p, mu, T):
        return self.moments.G * (mu * mu * n * n / (p * T * T)) ** (1.0 / (2.0 * self.moments.k))

    def _iterate(self, problem, oracle, T, C, mu, plan):
        if self.schedule == "theory":
            steps = np.full(T, 1.0 / (2.0 * plan["beta"]))
        else:
            steps, _ = stich_schedule(T, plan["beta"], plan["mu_sc"])
        coef = proximal_sgd(oracle, np.zeros(problem.n_coef), steps, problem.prox)
        return coef, {"step_size": float(steps[0]), "final_step_size": float(steps[-1]),
                      "smoothness": plan["beta"], "strong_convexity": plan["mu_sc"]}
