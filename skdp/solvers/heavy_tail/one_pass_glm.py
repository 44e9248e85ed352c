"""One-pass clipped DP-SGD for smooth GLMs (Asi, Liu and Tian, Algorithm 8; 'one_pass_glm').

Phases ``i = 1..I`` (``I = floor(log2 n)``) run one pass of projected, clipped SGD
over disjoint blocks of ``n_i = 2^(I - i)`` rows (the rows beyond ``2^I - 1`` go to
phase 1), with step ``eta_i = eta / 16^i`` and clip ``C_i = 2^i C``, starting from
the previous phase's private output. Each phase releases its average iterate
plus Gaussian noise.

Privacy (replace-one, any data): a changed row lies in one phase. For a GLM,
``grad f(w) = loss'(x.w) x`` and clipping only shrinks the scalar ``loss'``
monotonically, so the clipped step is a gradient step of a convex function
whose curvature along ``x`` lies in ``[0, beta]``: with ``eta_i <= 2 / (beta +
max ridge)`` every step on a common row is non-expansive (Lemma 14), and the
projection onto the ball is too. The differing step moves the coupled iterates
apart by at most ``2 eta_i C_i``, hence the phase average has sensitivity
``2 eta_i C_i``. ``beta`` is the *uniform* per-row smoothness
``loss.smoothness * row_bound^2``, enforced by the public row clipping. Phases
are disjoint: their Gaussian releases compose in parallel, so each phase uses
the whole budget mu (the paper's printed noise spends a quarter of it; here it
is calibrated exactly).

Schedules: ``"theory"`` uses the paper's eta and C from moment bounds
``(k, G_k, G_2)`` that the user vouches for; ``"practical"`` takes C from a
private quantile of the per-sample gradient norms at 0 (the level at which,
in the paper's analysis, ``(G_k / C)^k = 8 sqrt(d) / (n sqrt(rho))`` of the rows
would be clipped) and ``eta = min(sqrt(8 / n) D / C, D sqrt(rho) / (4 C sqrt(d)))``.
Both are capped so that ``eta_1 <= 2 / (beta + max ridge)``: the cap only
changes accuracy; the privacy condition is checked before any data is read.

References
----------
H. Asi, D. Liu and K. Tian, "Private Stochastic Convex Optimization with Heavy
Tails: Near-Optimality from Simple Reductions", 2024, arXiv:2406.02789 (Algorithm 8).
"""

import math
from dataclasses import dataclass

import numpy as np

from ...accounting import ExponentialMechanismRelease, GaussianRelease, Parallel, Sequential
from ...mechanisms import clip_factors, gaussian_mechanism
from .._contract import Capabilities, Solver, SolverResult, register_solver
from ..clip_threshold import private_clip
from ..geometry import project_ball
from ..moments import MomentBounds
from ..schedules import halving_phase_sizes

__all__ = ["OnePassGLM"]


@register_solver
@dataclass(frozen=True)
class OnePassGLM(Solver):
    """Algorithm 8 of Asi, Liu and Tian (see module docstring).

    Parameters
    ----------
    schedule : {"practical", "theory"}
    moments : MomentBounds
        Public moment bounds ``k``, ``G_k`` and ``G_2`` for ``schedule="theory"``.
    clip : float or None
        Public clip threshold ``C`` (skips the private quantile).
    """

    schedule: str = "practical"
    moments: MomentBounds = MomentBounds()
    clip: float = None

    name = "one_pass_glm"
    family = "heavy_tail"
    capabilities = Capabilities(smooth_only=True, public_clip=True)

    @classmethod
    def from_options(cls, options):
        return cls(schedule=options.schedule, moments=MomentBounds.from_options(options))

    def needs_public_smoothness(self):
        """The theory schedule's privacy condition involves the uniform smoothness, which must be public."""
        return self.schedule == "theory"

    def check(self, spec):
        super().check(spec)
        if self.schedule == "theory":
            self.moments.require(self.name)
            if spec.public_smoothness is None:
                raise ValueError("one_pass_glm with schedule='theory' needs a public smoothness bound (row "
                                 "clipping at a public norm and a public ridge).")

    def check_budget(self, spec, budget):
        """Raise (before any data is read) when the paper's step breaks ``eta / 16 <= 2 / beta``."""
        if self.schedule != "theory":
            return
        eta, _ = self._step_and_clip(spec.n_samples, spec.n_coef, 2.0 * spec.radius, budget.mu ** 2 / 2.0, None)
        beta = spec.public_smoothness
        if eta > 32.0 / beta:
            raise ValueError(
                f"The paper's step eta={eta:.3g} breaks the privacy condition eta/16 <= 2/beta "
                f"(beta={beta:.3g}); use schedule='practical' or tighter moment bounds.")

    def n_quantiles(self, spec):
        return 0 if (self.clip is not None or self.schedule == "theory") else 1

    def plan(self, spec, budget):
        """A private clip quantile, then one mu-GDP release per disjoint phase."""
        parts = [ExponentialMechanismRelease(budget.quantile_epsilon)] if self.n_quantiles(spec) else []
        phases = [GaussianRelease(1.0, 1.0 / budget.mu) for _ in halving_phase_sizes(spec.n_samples)]
        return Sequential(parts + [Parallel(phases)])

    def _step_and_clip(self, n, p, D, rho, C):
        if self.schedule == "theory":
            k, Gk, G2 = self.moments.k, self.moments.G, self.moments.second
            eta = min(math.sqrt(8.0 / n) * D / G2,
                      (1.0 / n) * (n * n * rho / (32.0 * p)) ** ((k - 1) / (2 * k))
                      * 2 ** ((k + 1) / (2 * k)) * D / Gk)
            C = (Gk**k * D * rho * n / (32.0 * eta * p)) ** (1.0 / (k + 1))
            return eta, C
        eta = min(math.sqrt(8.0 / n) * D / C, D * math.sqrt(rho) / (4.0 * C * math.sqrt(p)))
        return eta, C

    def run(self, spec, problem, budget, rng):
        mu = budget.mu
        n, p = problem.X.shape
        beta = problem.uniform_smoothness()
        D = 2.0 * problem.radius
        rho = mu * mu / 2.0
        events = []
        if self.clip is not None:
            C = float(self.clip)
        elif self.schedule == "theory":
            C = None
        else:
            level = min(0.99, max(0.5, 1.0 - 8.0 * math.sqrt(p) / (n * math.sqrt(rho))))
            C, ev = private_clip(problem, level, budget.quantile_epsilon, rng)
            events.append(ev)
        eta, C = self._step_and_clip(n, p, D, rho, C)
        eta = min(eta, 32.0 / beta)  # eta_1 = eta / 16 <= 2 / beta
        sizes = halving_phase_sizes(n)
        phases = []
        x = np.zeros(p)
        start = 0
        for i, size in enumerate(sizes, start=1):
            eta_i = eta / 16.0**i
            C_i = C * 2.0**i
            rows = np.arange(start, start + size)
            start += size
            x = project_ball(x, problem.radius)
            total = np.zeros(p)
            for j in rows:
                total += x
                xj = problem.X[j]
                d = float(problem.loss.derivative(np.array([xj @ x]), problem.y[j : j + 1])[0])
                grad = d * xj * clip_factors(np.array([abs(d) * problem.norms[j]]), C_i)[0]
                x = project_ball(x - eta_i * (grad + problem.penalty * x), problem.radius)
            sensitivity = 2.0 * eta_i * C_i
            x, ev = gaussian_mechanism(total / size, sensitivity, sensitivity / mu, random_state=rng)
            phases.append(ev)
        coef = project_ball(x, problem.radius)
        events.append(Parallel(phases))
        schedule = {"algorithm": self.name, "n_steps": n, "phases": len(sizes), "phase_sizes": sizes,
                    "step_size": eta, "clip_threshold": C, "grad_evals": n}
        return SolverResult(coef, Sequential(events), schedule)
