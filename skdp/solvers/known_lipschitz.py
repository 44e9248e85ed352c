"""Known-Lipschitz reduction (paper 000, Algorithm 4; 'known_lipschitz').

For a linear model the per-sample Lipschitz constant over the coefficient ball
is computable from the row itself, ``L_s = sup_{||w|| <= R} |loss'(x.w, y)| ||x||``
(``Loss.lipschitz_bound``). Algorithm 4 replaces every row with ``L_s > C`` by
a dummy with zero loss (the dataset keeps its size ``n``) and runs a DP solver
for ``C``-Lipschitz losses on the result. The replacement is a per-row map with
a public threshold, so neighbouring datasets stay neighbours.

The uniformly-Lipschitz solver is the stand-in (ii) of the note: the localized
noisy clipped subgradient method of Lowy and Razaviyayn (paper 001, Algorithm 3
with Algorithm 2 inside), with per-sample clipping at ``C`` kept on as defence
in depth (it never binds when the bounds are right, and keeps the sensitivity
``2 C / n_i`` even if they were not). Phases ``i = 1..l`` use disjoint halving
batches ``n_i``, steps ``eta_i = eta / 4^i``, regularisation
``lambda_i = 1 / (eta_i n_i)`` towards the previous output over
``Ball(0, R) ∩ Ball(w_{i-1}, 2 C / lambda_i)``; each phase is mu-GDP and the
phases compose in parallel.

Schedules: "theory" uses ``C = G_k (n sqrt(rho) / sqrt(d))^(1/k)`` from public
moment bounds; "practical" takes ``C`` as a private quantile of the per-sample
bounds ``L_s`` at the level where about ``sqrt(d / rho)`` rows would become
dummies (pitfall 14), ``eta = D / (C sqrt(n))`` and caps the steps per phase.
"""

import math

import numpy as np

from ..accounting import ExponentialMechanismRelease, GaussianRelease, Parallel, Repeated, Sequential
from ..losses import Loss
from ..mechanisms import private_quantile
from ._glm import SolverResult, project_two_balls
from .one_pass_glm import phase_sizes

__all__ = ["KnownLipschitz"]


class KnownLipschitz:
    """Algorithm 4 of paper 000 over the LR localized subgradient method (see module docstring)."""

    name = "known_lipschitz"

    def __init__(self, schedule="practical", max_steps=100, moment_order=4, moment_bound=None, clip=None):
        self.schedule = schedule
        self.max_steps = int(max_steps)
        self.moment_order = moment_order
        self.moment_bound = moment_bound
        self.clip = clip
        self.recorder = None
        if schedule == "theory" and moment_bound is None:
            raise ValueError("schedule='theory' needs public moment bounds (moment_bound, moment_order).")

    def n_quantiles(self, loss):
        return 0 if (self.clip is not None or self.schedule == "theory") else 1

    def _steps(self, sizes, n):
        return [min(self.max_steps, int(math.ceil(n_i * math.log(max(n, 2))))) for n_i in sizes]

    def event(self, loss, mu, eps_q, n_samples):
        """A private threshold quantile, then T_i Gaussian steps on every disjoint phase."""
        if not isinstance(loss, Loss):
            raise ValueError("known_lipschitz needs a built-in loss with a computable per-sample "
                             "Lipschitz bound; use algorithm='localized' for a callable loss.")
        parts = [ExponentialMechanismRelease(eps_q)] if self.n_quantiles(loss) else []
        sizes = phase_sizes(n_samples)
        phases = [Repeated(GaussianRelease(1.0, math.sqrt(T) / mu), T) for T in self._steps(sizes, n_samples)]
        return Sequential(parts + [Parallel(phases)])

    def solve(self, problem, mu, eps_q, random_state):
        rng = random_state
        n, p = problem.X.shape
        rho = mu * mu / 2.0
        D = 2.0 * problem.radius
        events = []
        if self.clip is not None:
            C = float(self.clip)
        elif self.schedule == "theory":
            k = float(self.moment_order)
            C = float(self.moment_bound) * (n * math.sqrt(rho) / math.sqrt(p)) ** (1.0 / k)
        else:
            level = min(0.99, max(0.5, 1.0 - math.sqrt(p / rho) / n))
            upper = 10.0 * problem.row_bound * max(1.0, problem.radius * problem.row_bound)
            C, ev = private_quantile(problem.lipschitz_bounds(), level, eps_q,
                                     (1e-6 * problem.row_bound, upper), scale="log", random_state=rng)
            events.append(ev)
        reduced = problem.truncated(C)
        sizes = phase_sizes(n)
        eta = D / (C * math.sqrt(n))
        w = np.zeros(p)
        start = 0
        phases = []
        steps_used = []
        for i, n_i in enumerate(sizes, start=1):
            rows = np.arange(start, start + n_i)
            start += n_i
            eta_i = eta / 4.0**i
            lam_i = 1.0 / (eta_i * n_i)
            T_i = self._steps([n_i], n)[0]
            steps_used.append(T_i)
            D_i = 2.0 * C / lam_i
            sigma = math.sqrt(T_i) * 2.0 * C / (n_i * mu)
            anchor = w.copy()
            v = anchor.copy()
            for t in range(T_i):
                g = reduced.clipped_gradient_sum(v, C, rows) / n_i
                if self.recorder is not None:
                    self.recorder(f"phase{i}/step{t}", g, 2.0 * C / n_i)
                g = g + sigma * rng.standard_normal(p) + lam_i * (v - anchor) + problem.penalty * v
                v = project_two_balls(v - eta_i * g, problem.radius, anchor, D_i)
            w = v
            phases.append(Repeated(GaussianRelease(2.0 * C / n_i, sigma), T_i))
        events.append(Parallel(phases))
        schedule = {"algorithm": self.name, "n_steps": int(sum(steps_used)), "phases": len(sizes),
                    "clip_threshold": C, "dummies_threshold": C,
                    "grad_evals": int(sum(s * t for s, t in zip(sizes, steps_used)))}
        return SolverResult(w, Sequential(events), schedule)
