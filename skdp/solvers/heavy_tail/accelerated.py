"""DP accelerated stochastic approximation (Lowy and Razaviyayn, Algorithm 4; 'accelerated').

AC-SA of Ghadimi and Lan driven by the clipped Gaussian mean oracle, one pass
over ``T`` disjoint batches. With ``alpha_t = 2 / (t + 1)`` and
``eta_t = 4 eta / (t (t + 1))``, for ``t = 1..T``::

    w_md  = (1 - alpha_t) w_ag + alpha_t w
    g_t   = oracle(w_md, batch t)              # clipped mean + N(0, sigma^2 I) + ridge gradient
    w     = Proj_W(w - (t / (2 eta)) g_t)     # = argmin alpha_t <g_t, w> + eta_t/2 ||w_prev - w||^2
    w_ag  = alpha_t w + (1 - alpha_t) w_ag

and the output is ``w_ag`` after the last batch. ``w_md`` and ``w_ag`` are convex
combinations of points of the ball, so every iterate stays in it.
Proposition 28: with ``eta >= 2 beta``, bias ``||b_t|| <= B`` and noise
``E||N_t||^2 <= Sigma^2``, ``E F(w_ag_T) - F* <= 4 eta D^2 / (T (T + 1))
+ 4 (Sigma^2 + B^2)(T + 2) / (3 eta) + B D``.

Privacy: each batch is released once through the oracle with
``sigma = 2 C / (s mu)`` (mu-GDP for its rows); the batches are disjoint, so the
run is mu-GDP (parallel composition), plus the clip quantile if one is taken.

Schedules (``beta``: the public uniform smoothness ``problem.uniform_smoothness()``;
``D = 2 radius``; the paper's ``epsilon = sqrt(2 rho) = mu``; ``p`` coefficients):

* "theory" (Theorem 29): ``T = ceil(min{(beta D / G_k)^(2k/(5k-1)) (mu n / sqrt(p))^((2k-2)/(5k-1)),
  sqrt(beta D / G_k) n^(1/4)})`` clamped to ``[1, n]``; ``C = G_k (mu n / sqrt(p T))^(1/k)``;
  ``B = G_k^k / ((k-1) C^(k-1))``, ``Sigma^2 = p sigma^2 + G_2^2 / s``,
  ``eta = max{2 beta, T^(3/2) sqrt(Sigma^2 + B^2) / D}``.
* "practical": ``C`` is a private quantile of the per-sample gradient norms at
  0; with ``m = n mu / p`` (private rows per coefficient),
  ``T = min((32 m^2)^(1/5), (48 n / p)^(1/4))`` balances the two terms of
  Proposition 28 for standardised data (``C ~ sqrt(p)``, curvature ~1,
  ``||w*|| ~ 1``): the deterministic term ``~ 16 / T^2`` against the privacy
  noise ``~ T^3 / m^2`` (first) or the sampling noise ``~ T^2 p / n``
  (second); ``eta = max{2 L, T^(3/2) Sigma / D_ref}`` with the practical
  curvature ``L`` (:func:`practical_curvature`), ``Sigma^2 = p sigma^2 + r^2 / s`` with
  ``r = min(C, sqrt(p) unit)`` (the typical per-sample gradient norm)
  and ``D_ref = 2 / unit`` (a typical ``||w*||`` of a standardised problem, with
  room to spare): the paper's rule, with public scales in place of the
  moment bounds.

References
----------
A. Lowy and M. Razaviyayn, "Private Stochastic Optimization With Large
Worst-Case Lipschitz Parameter", 2022, arXiv:2209.07403 (Algorithm 4).
"""

import math
from dataclasses import dataclass

import numpy as np

from .._contract import register_solver, report_progress
from ..descent import noise_std
from ..geometry import project_ball
from ..schedules import clamp_steps
from ._one_pass import OnePassSolver, practical_curvature

__all__ = ["Accelerated", "ac_sa"]


def ac_sa(oracle, w0, n_steps, eta, project):
    """The AC-SA iteration with ``alpha_t = 2/(t+1)``, ``eta_t = 4 eta / (t (t+1))``.

    Parameters
    ----------
    oracle : callable ``(w, t) -> g``
        Gradient estimate at the query point ``w`` for step ``t = 0..T-1``
        (possibly biased and noisy). Shapes are free: ``w`` may hold a stack
        of independent runs, as long as ``oracle`` and ``project`` accept it.
    w0 : ndarray
        Starting point (in the domain).
    n_steps : int
        ``T``.
    eta : float
        The base step parameter (Proposition 28 needs ``eta >= 2 beta``).
    project : callable
        Euclidean projection onto the domain.

    Returns
    -------
    w_ag : ndarray
        The aggregated iterate after ``T`` steps.
    """
    w = np.array(w0, dtype=float)
    w_ag = w.copy()
    for t in range(1, int(n_steps) + 1):
        alpha = 2.0 / (t + 1)
        w_md = (1.0 - alpha) * w_ag + alpha * w
        g = oracle(w_md, t - 1)
        w = project(w - (t / (2.0 * eta)) * g)
        w_ag = alpha * w + (1.0 - alpha) * w_ag
        report_progress(t, n_steps, t / (2.0 * eta))
    return w_ag


@register_solver
@dataclass(frozen=True)
class Accelerated(OnePassSolver):
    """Algorithm 4 of Lowy and Razaviyayn: one-pass AC-SA with clipped Gaussian means (see module docstring).

    The parameters are those of :class:`~skdp.solvers.heavy_tail._one_pass.OnePassSolver`.

    Notes
    -----
    The method is for smooth convex objectives; it has no proximal step, so an
    L1 penalty is refused (use 'proximal_sgd').
    """

    name = "accelerated"

    def practical_steps(self, n, p, mu):
        m = n * mu / p
        return min((32.0 * m * m) ** 0.2, (48.0 * n / p) ** 0.25)

    def _theory_steps(self, problem, mu, constants):
        n, p = problem.n_samples, problem.n_coef
        beta = problem.uniform_smoothness()
        D = 2.0 * problem.radius
        k, Gk = self.moments.k, self.moments.G
        ratio = beta * D / Gk
        T = min(ratio ** (2 * k / (5 * k - 1)) * (mu * n / math.sqrt(p)) ** ((2 * k - 2) / (5 * k - 1)),
                math.sqrt(ratio) * n**0.25)
        return clamp_steps(T, n)

    def _theory_clip(self, n, p, mu, T):
        return self.moments.G * (mu * n / math.sqrt(p * T)) ** (1.0 / self.moments.k)

    def _eta(self, problem, T, C, mu):
        """The base step ``eta``: the larger of twice the curvature and the noise-driven term."""
        n, p = problem.n_samples, problem.n_coef
        s = n // T
        finite = math.isfinite(C)
        sigma = noise_std(2.0 * C / s, mu) if finite else 0.0
        if self.schedule == "theory":
            k, Gk, G2 = self.moments.k, self.moments.G, self.moments.second
            beta = problem.uniform_smoothness()
            D = 2.0 * problem.radius
            B = Gk**k / ((k - 1.0) * C ** (k - 1.0)) if finite else 0.0
            Sigma2 = p * sigma**2 + G2**2 / s
        else:
            beta = practical_curvature(problem)
            D = 2.0 / problem.unit
            B = 0.0
            # Sampling variance of a batch mean: per-sample gradients of a standardised
            # problem are about sqrt(p) unit long (|residual| ~ 1), never more than C.
            r = min(C, math.sqrt(p) * problem.unit)
            Sigma2 = p * sigma**2 + r * r / s
        return max(2.0 * beta, T**1.5 * math.sqrt(Sigma2 + B * B) / D)

    def _iterate(self, problem, oracle, T, C, mu, plan):
        if problem.has_l1:  # also checked before the data is touched
            raise ValueError("accelerated does not support an L1 penalty; use algorithm='proximal_sgd'.")
        eta = self._eta(problem, T, C, mu)
        coef = ac_sa(oracle, np.zeros(problem.n_coef), T, eta,
                     lambda v: project_ball(v, problem.radius))
        return coef, {"step_size": 1.0 / (2.0 * eta), "eta": eta}
