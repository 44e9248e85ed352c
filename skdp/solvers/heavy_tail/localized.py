"""Population localization with clipped DP-SGD subproblems and aggregation (Theorem 1 of Asi, Liu and Tian).

'localized' combines three algorithms of Asi, Liu and Tian (see References):

* Algorithm 1 (Clipped-DP-SGD): full-batch noisy clipped gradient steps on a
  strongly convex subproblem ``mean f + (lambda/2) ||w - c||^2`` over
  ``Ball(0, R) ∩ Ball(c, r)``, steps ``4 / (lambda (t + 1))`` and weights
  ``t + 4``; the regulariser is not clipped;
* Algorithm 2 (population localization): phases ``i = 1..I`` with
  ``lambda_i = 32^i lambda`` centred at the previous phase's output;
* Algorithm 3 (aggregation): each phase solves ``J`` copies on disjoint
  portions and keeps the point whose ``ceil(0.51 J)``-nearest-neighbour radius
  is smallest (the radius-free rule in :func:`~skdp.solvers.geometry.aggregate_points`).

Privacy: every (phase, portion) block is disjoint from the others and runs ``T``
Gaussian releases of sensitivity ``2 C / m`` (clipped mean of ``m`` rows), so
each block is mu-GDP with noise ``sqrt(T) 2 C / (m mu)`` and the blocks compose
in parallel; centres, radii and aggregation are post-processing. Nothing is
assumed about the loss: per-sample gradients are clipped, so any convex
callable works (non-finite derivatives are zeroed).

Schedules: "theory" uses ``J`` in ``[400, 500] log(I / failure_prob)``,
``T = max(m, m^2 rho / d)`` and the moment bounds ``(k, G_k, G_2)`` for ``C`` and
``lambda``; "practical" (default) uses ``J = 3`` portions, ``I = 2`` phases, at
most ``max_steps`` steps per block, and a private clip quantile; the leftover
rows go to phase 1 (so that no row is discarded).

References
----------
H. Asi, D. Liu and K. Tian, "Private Stochastic Convex Optimization with Heavy
Tails: Near-Optimality from Simple Reductions", 2024, arXiv:2406.02789
(Theorem 1, Algorithms 1-3).
"""

import math
from dataclasses import dataclass

import numpy as np

from ...accounting import ExponentialMechanismRelease, GaussianRelease, Parallel, Repeated, Sequential
from .._contract import Capabilities, Solver, SolverResult, register_solver
from ..clip_threshold import private_clip
from ..descent import noisy_clipped_descent, step_noise_std
from ..geometry import aggregate_points, project_two_balls
from ..moments import MomentBounds

__all__ = ["Localized", "clipped_dp_sgd"]

_C_RP = 142.0  # the constant of Corollary 2 implied by the paper's printed arithmetic


def clipped_dp_sgd(problem, rows, center, lam, clip, n_steps, mu, rng):
    """Algorithm 1 on ``rows``: the weighted average iterate and the block's event.

    Minimises ``mean_rows f + (lam/2) ||w - center||^2 + 0.5 w^T diag(penalty) w``
    over ``Ball(0, R) ∩ Ball(center, 2 clip / lam)`` with steps ``4 / (lam (t + 1))``
    and weights ``t + 4`` on the iterates before each step.
    """
    m = len(rows)
    r = 2.0 * clip / lam  # Lemma 4 with G_1 <= clip for the clipped objective
    start = project_two_balls(center.copy(), problem.radius, center, r)
    steps = [4.0 / (lam * (t + 1)) for t in range(n_steps)]
    weights = [t + 4.0 for t in range(n_steps)] + [0.0]
    return noisy_clipped_descent(problem, start, clip=clip, std=step_noise_std(clip, m, n_steps, mu),
                                 steps=steps, rng=rng, rows=rows, anchor=center, lam=lam, proximal=True,
                                 project=lambda v: project_two_balls(v, problem.radius, center, r),
                                 weights=weights)


@register_solver
@dataclass(frozen=True)
class Localized(Solver):
    """Population localization over clipped DP-SGD subproblems (see module docstring).

    Parameters
    ----------
    schedule : {"practical", "theory"}
    n_portions, n_phases : int or None
        ``J`` and ``I`` (None: from the schedule).
    max_steps : int
        Cap on the steps of every block (the noise is calibrated to the steps
        actually taken).
    failure_prob : float
        ``delta_f`` of the theory schedule (not the privacy delta).
    moments : MomentBounds
        ``k``, ``G_k``, ``G_2`` (theory schedule).
    clip : float or None
        Public clip threshold; None takes a private quantile.
    """

    schedule: str = "practical"
    n_portions: int = None
    n_phases: int = None
    max_steps: int = 100
    failure_prob: float = 0.05
    moments: MomentBounds = MomentBounds()
    clip: float = None

    name = "localized"
    family = "heavy_tail"
    capabilities = Capabilities(callable_losses=True, public_clip=True)

    @classmethod
    def from_options(cls, options):
        return cls(schedule=options.schedule, max_steps=options.max_iter or 100,
                   moments=MomentBounds.from_options(options))

    def check(self, spec):
        super().check(spec)
        if self.schedule == "theory":
            self.moments.require(self.name)
        self.layout(spec.n_samples)  # raises when there are too few rows

    def n_quantiles(self, spec):
        return 0 if (self.clip is not None or self.schedule == "theory") else 1

    def plan(self, spec, budget):
        """A private clip quantile, then T Gaussian steps on every disjoint block (mu-GDP each)."""
        parts = [ExponentialMechanismRelease(budget.quantile_epsilon)] if self.n_quantiles(spec) else []
        J, _, sizes = self.layout(spec.n_samples)
        blocks = []
        for T in self._steps(sizes, budget.mu, spec.n_coef):
            blocks += [Repeated(GaussianRelease(1.0, math.sqrt(T) / budget.mu), T)] * J
        return Sequential(parts + [Parallel(blocks)])

    def _steps(self, sizes, mu, p):
        """Steps per block of each phase (public): max(m, m^2 rho / d), capped."""
        rho = mu * mu / 2.0
        return [min(self.max_steps, int(math.ceil(max(m, m * m * rho / p)))) if math.isfinite(rho)
                else self.max_steps for m in sizes]

    def layout(self, n):
        """Portions J, phases I and the block size of every phase (public)."""
        if self.schedule == "theory":
            J = self.n_portions
            I = self.n_phases
            if J is None or I is None:
                I = max(1, int(math.floor(math.log2(max(n / 400.0, 2.0)))))
                for _ in range(20):
                    J = int(math.ceil(400.0 * math.log(max(I, 1) / self.failure_prob)))
                    I_new = max(1, int(math.floor(math.log2(max(n / J, 2.0)))))
                    if I_new == I:
                        break
                    I = I_new
            m = 2 ** int(math.floor(math.log2(max(n // J, 1))))
            sizes = [max(m // 2**i, 1) for i in range(1, I + 1)]
        else:
            J = self.n_portions or 3
            I = self.n_phases or 2
            m = n // J
            sizes = [max(m // 2**i, 1) for i in range(1, I + 1)]
            sizes[0] += m - sum(sizes)  # leftover rows of each portion go to phase 1
        if J * sum(sizes) > n or min(sizes) < 1:
            raise ValueError(f"'localized' needs more rows: {J} portions x {sum(sizes)} rows > n = {n}.")
        return J, I, sizes

    def run(self, spec, problem, budget, rng):
        mu, eps_q = budget.mu, budget.quantile_epsilon
        n, p = problem.X.shape
        J, I, sizes = self.layout(n)
        D = 2.0 * problem.radius
        rho = mu * mu / 2.0
        events = []
        m = sizes[0] * 2  # nominal portion size for the constants
        if self.schedule == "theory":
            k, Gk, G2 = self.moments.k, self.moments.G, self.moments.second
            C = Gk * (25.0 * m * m * rho / (32.0 * p)) ** (1.0 / (2.0 * k))
            Delta = 3.0 * _C_RP * (Gk * (math.sqrt(p) / (m * math.sqrt(rho))) ** (1 - 1 / k) + G2 / math.sqrt(m))
        else:
            if self.clip is not None:
                C = float(self.clip)
            else:
                C, ev = private_clip(problem, 0.5, eps_q, rng)
                events.append(ev)
            Delta = C * (math.sqrt(p) / (m * math.sqrt(rho)) + 1.0 / math.sqrt(m))
        lam = Delta / D
        order = np.arange(n)
        start = 0
        x = np.zeros(p)
        blocks = []
        steps_used = self._steps(sizes, mu, p)
        for i, (m_i, T) in enumerate(zip(sizes, steps_used), start=1):
            lam_i = 32.0**i * lam
            outputs = []
            for _ in range(J):
                rows = order[start:start + m_i]
                start += m_i
                out, ev = clipped_dp_sgd(problem, rows, x, lam_i, C, T, mu, rng)
                outputs.append(out)
                blocks.append(ev)
            x = aggregate_points(outputs)
        events.append(Parallel(blocks))
        schedule = {"algorithm": self.name, "n_steps": int(sum(steps_used)), "portions": J, "phases": I,
                    "block_sizes": sizes, "steps_per_block": steps_used, "clip_threshold": C,
                    "lambda": lam, "grad_evals": int(J * sum(s * t for s, t in zip(sizes, steps_used)))}
        return SolverResult(x, Sequential(events), schedule)
