"""Known-Lipschitz reduction (Asi, Liu and Tian, Algorithm 4; 'known_lipschitz').

For a linear model the per-sample Lipschitz constant over the coefficient ball
is computable from the row itself, ``L_s = sup_{||w|| <= R} |loss'(x.w, y)| ||x||``
(``Loss.lipschitz_bound``). Algorithm 4 replaces every row with ``L_s > C`` by
a dummy with zero loss (the dataset keeps its size ``n``) and runs a DP solver
for ``C``-Lipschitz losses on the result. The replacement is a per-row map with
a public threshold, so neighbouring datasets stay neighbours.

The uniformly-Lipschitz solver is the localized noisy clipped subgradient
method of Lowy and Razaviyayn (Algorithm 3 with Algorithm 2 inside), with per-sample clipping at ``C`` kept on as defence
in depth (it never binds when the bounds are right, and keeps the sensitivity
``2 C / n_i`` even if they were not). Phases ``i = 1..l`` use disjoint halving
batches ``n_i``, steps ``eta_i = eta / 4^i``, regularisation
``lambda_i = 1 / (eta_i n_i)`` towards the previous output over
``Ball(0, R) ∩ Ball(w_{i-1}, 2 C / lambda_i)``; each phase is mu-GDP and the
phases compose in parallel.

Schedules: "theory" uses ``C = G_k (n sqrt(rho) / sqrt(d))^(1/k)`` from public
moment bounds; "practical" takes ``C`` as a private quantile of the per-sample
bounds ``L_s`` at the level where about ``sqrt(d / rho)`` rows would become
dummies, ``eta = D / (C sqrt(n))`` and caps the steps per phase.

References
----------
H. Asi, D. Liu and K. Tian, "Private Stochastic Convex Optimization with Heavy
Tails: Near-Optimality from Simple Reductions", 2024, arXiv:2406.02789 (Algorithm 4).

A. Lowy and M. Razaviyayn, "Private Stochastic Optimization With Large
Worst-Case Lipschitz Parameter", 2022, arXiv:2209.07403 (Algorithms 2 and 3).
"""

import math
from dataclasses import dataclass

import numpy as np

from ...accounting import ExponentialMechanismRelease, GaussianRelease, Parallel, Repeated, Sequential
from .._contract import Capabilities, Solver, SolverResult, register_solver
from ..clip_threshold import private_clip
from ..descent import noisy_clipped_descent, step_noise_std
from ..geometry import project_two_balls
from ..moments import MomentBounds
from ..schedules import halving_phase_sizes

__all__ = ["KnownLipschitz"]


@register_solver
@dataclass(frozen=True)
class KnownLipschitz(Solver):
    """Algorithm 4 of Asi, Liu and Tian over the localized subgradient method (see module docstring).

    Parameters
    ----------
    schedule : {"practical", "theory"}
    max_steps : int
        Cap on the steps of every phase.
    moments : MomentBounds
        Public moment bounds (theory schedule).
    clip : float or None
        Public truncation threshold; None takes a private quantile.
    """

    schedule: str = "practical"
    max_steps: int = 100
    moments: MomentBounds = MomentBounds()
    clip: float = None

    name = "known_lipschitz"
    family = "heavy_tail"
    capabilities = Capabilities()

    @classmethod
    def from_options(cls, options):
        return cls(schedule=options.schedule, max_steps=options.max_iter or 100,
                   moments=MomentBounds.from_options(options))

    def check(self, spec):
        if spec.callable_loss:
            raise ValueError("known_lipschitz needs a built-in loss with a computable per-sample "
                             "Lipschitz bound; use algorithm='localized' for a callable loss.")
        super().check(spec)
        if self.schedule == "theory":
            self.moments.require(self.name)

    def n_quantiles(self, spec):
        return 0 if (self.clip is not None or self.schedule == "theory") else 1

    def _steps(self, sizes, n):
        return [min(self.max_steps, int(math.ceil(n_i * math.log(max(n, 2))))) for n_i in sizes]

    def plan(self, spec, budget):
        """A private threshold quantile, then T_i Gaussian steps on every disjoint phase."""
        n = spec.n_samples
        parts = [ExponentialMechanismRelease(budget.quantile_epsilon)] if self.n_quantiles(spec) else []
        phases = [Repeated(GaussianRelease(1.0, math.sqrt(T) / budget.mu), T)
                  for T in self._steps(halving_phase_sizes(n), n)]
        return Sequential(parts + [Parallel(phases)])

    def run(self, spec, problem, budget, rng):
        mu = budget.mu
        n, p = problem.X.shape
        rho = mu * mu / 2.0
        D = 2.0 * problem.radius
        events = []
        if self.clip is not None:
            C = float(self.clip)
        elif self.schedule == "theory":
            C = self.moments.G * (n * math.sqrt(rho) / math.sqrt(p)) ** (1.0 / self.moments.k)
        else:
            level = min(0.99, max(0.5, 1.0 - math.sqrt(p / rho) / n))
            upper = 10.0 * problem.row_bound * max(1.0, problem.radius * problem.row_bound)
            C, ev = private_clip(problem, level, budget.quantile_epsilon, rng,
                                 values=problem.lipschitz_bounds(), upper=upper)
            events.append(ev)
        reduced = problem.truncated(C)
        sizes = halving_phase_sizes(n)
        eta = D / (C * math.sqrt(n))
        w = np.zeros(p)
        start = 0
        phases = []
        steps_used = self._steps(sizes, n)
        for i, (n_i, T_i) in enumerate(zip(sizes, steps_used), start=1):
            rows = np.arange(start, start + n_i)
            start += n_i
            eta_i = eta / 4.0**i
            lam_i = 1.0 / (eta_i * n_i)
            D_i = 2.0 * C / lam_i
            anchor = w.copy()
            w, ev = noisy_clipped_descent(
                reduced, anchor, clip=C, std=step_noise_std(C, n_i, T_i, mu), steps=[eta_i] * T_i, rng=rng,
                rows=rows, anchor=anchor, lam=lam_i,
                project=lambda v, anchor=anchor, D_i=D_i: project_two_balls(v, problem.radius, anchor, D_i))
            phases.append(ev)
        events.append(Parallel(phases))
        schedule = {"algorithm": self.name, "n_steps": int(sum(steps_used)), "phases": len(sizes),
                    "clip_threshold": C, "dummies_threshold": C,
                    "grad_evals": int(sum(s * t for s, t in zip(sizes, steps_used)))}
        return SolverResult(w, Sequential(events), schedule)
