"""Known-Lipschitz reduction (Asi, Liu and Tian, Algorithm 4; 'known_lipschitz').

For a linear model the per-sample Lipschitz constant over a coefficient set
``W`` is computable from the row itself, ``L_s(W) = sup_{w in W} |loss'(x.w, y)|
||x||`` (:meth:`~skdp.solvers.GLMProblem.lipschitz_bounds`). Algorithm 4
replaces every row with ``L_s > C`` by a dummy with zero loss (the dataset
keeps its size ``n``) and runs a DP solver for ``C``-Lipschitz losses on the
result. The replacement is a per-row map with a public (or previously
released) threshold and set ``W``, so neighbouring datasets stay neighbours.

Schedules.

``"theory"`` (paper-exact): ``W = Ball(0, R)``, ``C = G_k (n sqrt(rho) /
sqrt(d))^(1/k)`` from public moment bounds, and the uniformly-Lipschitz solver
is the localized noisy clipped subgradient method of Lowy and Razaviyayn
(Algorithm 3 with Algorithm 2 inside), with per-sample clipping at ``C`` kept
on as defence in depth (it never binds when the bounds are right, and keeps
the sensitivity ``2 C / n_i`` even if they were not). Phases ``i = 1..l`` use
disjoint halving batches ``n_i``, steps ``eta_i = eta / 4^i`` with ``eta = D /
(C sqrt(n))``, regularisation ``lambda_i = 1 / (eta_i n_i)`` towards the
previous output over ``Ball(0, R) ∩ Ball(w_{i-1}, 2 C / lambda_i)`` and
``min(max_steps, n_i ln n)`` steps; each phase is mu-GDP and the phases
compose in parallel.

``"practical"`` (default). Why the paper's reduction is far from clipped
descent: for the squared loss, ``L_s(Ball(0, R)) = ||x|| (R ||x|| + |y|)`` is
dominated by ``R ||x||^2`` (about ``R p = 105`` for standardised rows at
``p = 21``), tens of times the gradients near the solution; the noise of every
step is proportional to ``C``; and the step ``D / (C sqrt(n)) / 4^i`` is so
small that the iterate barely leaves 0 (a coefficient norm of about 1% of the
truth and 5.6 times the Bayes error at n = 20000 on the contaminated benchmark
task). That is a schedule problem, not a privacy one. The practical schedule
keeps the reduction (truncation by a true per-sample Lipschitz bound over the
set the solver works on, then a solver whose per-sample gradients never
exceed the threshold there) and makes the set small:

* the rows are cut (data-independent permutation, drawn first) into two
  phases of equal size (``phase_fractions``). Phase 1 works on ``W_1 =
  Ball(0, r_1)`` with the public ``r_1 = first_radius / unit`` (``first_radius
  = 1.5``: a standardised problem has ``||w*||`` about 1); phase ``i >= 2``
  works on the privately localised set ``W_i = Ball(0, R) ∩ Ball(w_{i-1},
  r_i)`` around the previous phase's released output, with ``r_i`` a public
  multiple (``radius_factor = 1.25``) of that phase's predicted noise norm
  ``2 sqrt(2 p) C_{i-1} / (n_{i-1} mu h)`` (released and public quantities
  only; ``h = truncation_quantile * smoothness * unit^2``), at least
  ``min_radius / unit``;
* the per-sample bound over ``W_i`` is exact for a loss of the residual:
  ``|x.w - x.c| <= r ||x||`` on ``Ball(c, r)``, so ``L_s(W_i) = ||x||
  derivative_bound(r ||x||, y - x.c)``, and the minimum with the bound over
  ``Ball(0, R)`` (both are valid on the intersection);
* the threshold ``C_i`` is a private quantile (level ``truncation_quantile =
  0.8``) of ``L_s(W_i)`` over the phase's rows, searched on a log scale up to
  the bound of a row of norm ``row_bound`` with a residual of 3 label units (a
  wider range lets a quantile with a small epsilon land in its empty top
  interval: the exponential mechanism weighs intervals by their length); rows
  above it become dummies. Truncating is not free: on ``Ball(0, r_1)`` the
  bound grows with ``|y|``, so truncation selects on the label and shrinks the
  estimate; the level trades that bias against the noise, which grows with
  ``C_i`` (0.5 gave 1.19 times the Bayes error, 0.9 quantile failures);
* the ``C_i``-Lipschitz solver is full-batch noisy clipped gradient descent on
  the phase's rows over ``W_i`` (exact projection), ``max_steps`` steps
  ``eta0 min(1, tau / (t + 1))`` with ``eta0 = 1 / (smoothness unit^2 + max
  ridge)`` and ``tau`` a quarter of the steps, returning the average of the
  last half of the iterates (as the practical 'clipped_gd').

Privacy of the practical schedule (any data, replace-one). Phase ``i`` reads
only its own rows ``B_i`` (disjoint blocks of a data-independent permutation),
plus ``w_{i-1}``, ``C_{i-1}`` (released by earlier phases) and public inputs.
Given those, (1) the bounds ``L_s(W_i)`` are per-row functions; (2) the quantile
is an exponential mechanism of epsilon ``eps_q`` on ``B_i``; (3) the truncation
is a per-row map with the released ``C_i``, so neighbouring blocks map to
blocks differing in at most one row, of the same size ``n_i`` (dummies count
in the mean); (4) each of the ``T`` steps releases the mean over ``n_i`` rows
of gradients clipped to ``C_i`` (clipping never binds on kept rows inside
``W_i``, and bounds the norm even if it did), sensitivity ``2 C_i / n_i``, plus
``N(0, (sqrt(T) 2 C_i / (n_i mu))^2)``: mu-GDP for ``B_i``; projection and
averaging are post-processing. Blocks are disjoint, so the phases compose in
parallel (adaptively), and every phase has the same ``(eps_q, mu)``: the run's
curve is that of ``Sequential([quantile(eps_q), Parallel(phases)])``, the event
written here.

Where it works (practical schedule). The first set must contain the solution,
so every kept row's bound there is about ``||x|| (r_1 ||x|| + |y|) ~ r_1 p``
(standardised rows of norm about ``sqrt(p)``, labels of scale 1): ``C_1 ~ 1.1
(r_1 p + sqrt(p))`` (45 at ``p = 21``) whatever the gradients near the
solution. Phase 1's averaged noisy descent has a noise norm of about ``2
sqrt(2 p) C_1 / ((n / 2) mu h) ~ 14 r_1 p^1.5 / (n mu)``; phase 2 works in a
ball 1.25 times that wide, whose threshold (and so its noise) shrinks in
proportion while it exceeds the residual term. Phase 1 localises at all only
when ``n mu > ~ 15 p^1.5``; measured against ``n mu / p^1.5`` on the
contaminated benchmark task (test error over the Bayes error): 7.0, 6.3 and
4.3 at 2.5, 5.0 and 9.1 (n = 2000); 1.50 at 27, 1.07 at 51, 1.013 at 96 and
1.001-1.008 from 119 to 432. The fit warns below ``n mu = 35 p^1.5``
(:meth:`KnownLipschitz.poor_fit_reason`): at ``p = 21`` that is ``n mu >=
3400``, i.e. n >= 14000 at epsilon = 1, 26000 at epsilon = 0.5 and 7400 at
epsilon = 2 (delta = 1e-5). Full-batch clipped descent ('clipped_gd') does not
pay the ``r_1 p`` factor: its clip follows the gradients. The threshold was
measured at d = 20 only (the ``p^1.5`` scaling comes from the arithmetic), and
``first_radius`` is a public assumption about ``||w*||`` (strongly collinear
features may need a larger one; a wrong one costs accuracy, never privacy).

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
from .._contract import (
    FRACTION,
    POSITIVE,
    POSITIVE_INT,
    POSITIVE_TUPLE,
    PUBLIC_CLIP,
    SCHEDULE,
    Capabilities,
    ScheduledSolver,
    SolverResult,
    optional,
    register_solver,
)
from ..arithmetic import total_ratio
from ..clip_threshold import CLIP_RANGE, private_clip
from ..descent import noisy_clipped_descent, step_noise_std
from ..geometry import project_two_balls
from ..moments import VALID_MOMENTS, MomentBounds
from ..schedules import (
    decaying_steps,
    fractional_phase_sizes,
    halving_phase_sizes,
    permuted_blocks,
    tail_average_weights,
)

__all__ = ["KnownLipschitz"]

_RESIDUAL_CAP = 3.0  # label units: top of the practical threshold search (see _search_upper)
# The practical schedule is predicted to be poor below n mu = _USEFUL_CONSTANT p^1.5 (see poor_fit_reason).
_USEFUL_CONSTANT = 35.0


@register_solver
@dataclass(frozen=True)
class KnownLipschitz(ScheduledSolver):
    """Algorithm 4 of Asi, Liu and Tian with a uniformly-Lipschitz DP solver (see module docstring).

    Parameters
    ----------
    schedule : {"practical", "theory"}
    max_steps : int
        Steps of every phase (practical); cap on the steps of every phase (theory).
    moments : MomentBounds
        Public moment bounds (theory schedule).
    clip : float or None
        Public truncation threshold of every phase; None takes private quantiles.
    phase_fractions : tuple of float
        Relative sizes of the practical phases.
    first_radius : float
        Radius of phase 1's ball around 0, in units of ``1 / unit`` (practical).
    radius_factor, min_radius : float
        Radius of phase ``i >= 2``: ``max(radius_factor * predicted noise norm of
        phase i - 1, min_radius / unit)`` (practical).
    truncation_quantile : float in (0, 1)
        Level of the private quantile of the per-sample bounds (practical).
    """

    schedule: str = "practical"
    max_steps: int = 100
    moments: MomentBounds = MomentBounds()
    clip: float = None
    phase_fractions: tuple = (0.5, 0.5)
    first_radius: float = 1.5
    radius_factor: float = 1.25
    min_radius: float = 0.05
    truncation_quantile: float = 0.8

    name = "known_lipschitz"
    family = "heavy_tail"
    capabilities = Capabilities()
    _parameter_constraints = {
        "schedule": [SCHEDULE],
        "max_steps": [POSITIVE_INT],
        "moments": [VALID_MOMENTS],
        "clip": optional(PUBLIC_CLIP),
        "phase_fractions": [POSITIVE_TUPLE],
        "first_radius": [POSITIVE],
        "radius_factor": [POSITIVE],
        "min_radius": [POSITIVE],
        "truncation_quantile": [FRACTION],
    }

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
        elif not 0.0 < float(self.truncation_quantile) < 1.0:
            raise ValueError(f"truncation_quantile must lie in (0, 1); got {self.truncation_quantile!r}.")

    def n_quantiles(self, spec):
        """Private quantiles a row pays for: the practical phases' thresholds compose in parallel (1)."""
        return 0 if (self.clip is not None or self.schedule == "theory") else 1

    def _steps(self, sizes, n):
        return [min(self.max_steps, int(math.ceil(n_i * math.log(max(n, 2))))) for n_i in sizes]

    def layout(self, n):
        """Disjoint phase sizes and the steps of every phase (public)."""
        if self.schedule == "theory":
            sizes = halving_phase_sizes(n)
            return sizes, self._steps(sizes, n)
        sizes = fractional_phase_sizes(n, self.phase_fractions)
        return sizes, [int(self.max_steps)] * len(sizes)

    def plan(self, spec, budget):
        """Threshold quantiles (one epsilon: parallel), then T_i Gaussian steps on every disjoint phase."""
        parts = [ExponentialMechanismRelease(budget.quantile_epsilon)] if self.n_quantiles(spec) else []
        _, steps = self.layout(spec.n_samples)
        phases = [Repeated(GaussianRelease(1.0, math.sqrt(T) / budget.mu), T) for T in steps]
        return Sequential(parts + [Parallel(phases)])

    def poor_fit_reason(self, spec, budget):
        """Why the practical schedule is predicted to be poor here, or None (public inputs only).

        Poor below ``n mu = 35 p^1.5`` (``mu`` the solver's Gaussian-DP budget):
        the per-sample bounds over a ball that contains the solution grow like
        ``p``, so phase 1's noise norm is about ``14 r_1 p^1.5 / (n mu)``; the
        arithmetic and the measurements are in the module docstring.
        """
        mu = budget.mu
        if self.schedule != "practical" or not math.isfinite(mu):
            return None
        need = _USEFUL_CONSTANT * float(spec.n_coef) ** 1.5
        if spec.n_samples * mu >= need:
            return None
        return (f"its per-sample Lipschitz bounds over a ball that contains the solution grow like p, so its "
                f"noise grows like p^1.5 / (n mu); it needs n * mu >= {_USEFUL_CONSTANT:g} * p^1.5 = "
                f"{need:.0f}, here n * mu = {spec.n_samples * mu:.0f} (mu = {mu:.3g}, the Gaussian-DP budget "
                "of the solver)")

    # -- practical ------------------------------------------------------------------------------
    def _run_practical(self, problem, budget, rng):
        mu = budget.mu
        n, p = problem.X.shape
        R, unit = problem.radius, problem.unit
        sizes, steps = self.layout(n)
        blocks = permuted_blocks(n, sizes, rng)  # public randomness, drawn first
        s = problem.loss_smoothness_or_one()
        eta0 = 1.0 / (s * unit**2 + float(np.max(problem.penalty, initial=0.0)))
        h = self.truncation_quantile * s * unit**2  # curvature guess of the truncated objective
        w = np.zeros(p)
        # Radii are capped at 2 R (public post-processing: a ball of radius 2 R around a point
        # of Ball(0, R) contains Ball(0, R), so the feasible set is the same), which keeps a
        # degenerate released unit from giving an infinite radius after the budget is charged.
        center, radius = np.zeros(p), min(R, total_ratio(self.first_radius, unit))
        phases, clips, radii = [], [], []
        quantile_event = None
        for rows, T in zip(blocks, steps):
            n_i = len(rows)
            block = problem.subset(rows)
            if self.clip is not None:
                C = float(self.clip)
            else:
                C, quantile_event = private_clip(
                    block, self.truncation_quantile, budget.quantile_epsilon, rng,
                    values=block.lipschitz_bounds(center, radius), upper=self._search_upper(problem, radius))
            reduced = block.truncated(C, center, radius)
            # Exact projection onto W_i = Ball(0, R) ∩ Ball(center, radius) (non-empty: the centre
            # lies in Ball(0, R)).
            def project(v, center=center, radius=radius):
                return project_two_balls(v, R, center, radius)

            w, event = noisy_clipped_descent(
                reduced, project(w), clip=C, std=step_noise_std(C, n_i, T, mu), steps=decaying_steps(eta0, T),
                rng=rng, project=project, weights=tail_average_weights(T))
            phases.append(event)
            clips.append(C)
            radii.append(radius)
            # The next set: a ball around this phase's output whose radius follows the
            # phase's predicted noise norm (released C, public n_i, mu, h, p).
            scale = n_i * mu * h
            noise_norm = 2.0 * math.sqrt(2.0 * p) * C / scale if (math.isfinite(mu) and scale > 0) else 0.0
            center = w.copy()
            radius = min(2.0 * R, max(self.radius_factor * noise_norm, total_ratio(self.min_radius, unit)))
        events = ([] if quantile_event is None else [quantile_event]) + [Parallel(phases)]
        schedule = {"algorithm": self.name, "schedule": self.schedule, "n_steps": int(sum(steps)),
                    "phases": len(sizes), "phase_sizes": sizes, "clip_threshold": clips[-1],
                    "dummies_threshold": clips[-1], "clip_thresholds": clips, "radii": radii,
                    "step_size": eta0,
                    "grad_evals": int(sum(n_i * T for n_i, T in zip(sizes, steps))
                                      + (0 if quantile_event is None else n))}
        return SolverResult(w, Sequential(events), schedule)

    @staticmethod
    def _search_upper(problem, radius):
        """Top of the public range of the threshold quantile over ``Ball(c, radius)``.

        The bound of a row of norm ``row_bound`` whose residual at the centre is
        ``_RESIDUAL_CAP`` label units (labels are standardised): a threshold
        above it would keep gross outliers, and a range much wider than the data
        lets a quantile with a small epsilon land in its empty top interval.
        """
        rb = problem.row_bound
        slope = problem.loss.derivative_bound(np.array([radius * rb]), np.array([_RESIDUAL_CAP]))
        return max(float(np.max(slope)) * rb, 2.0 * CLIP_RANGE[0] * rb)

    # -- theory (paper-exact) -------------------------------------------------------------------
    def _run_theory(self, problem, mu, rng):
        n, p = problem.X.shape
        rho = mu * mu / 2.0
        D = 2.0 * problem.radius
        if self.clip is not None:
            C = float(self.clip)
        else:
            C = self.moments.G * (n * math.sqrt(rho) / math.sqrt(p)) ** (1.0 / self.moments.k)
        reduced = problem.truncated(C)
        sizes, steps_used = self.layout(n)
        eta = D / (C * math.sqrt(n))
        w = np.zeros(p)
        start = 0
        phases = []
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
        schedule = {"algorithm": self.name, "n_steps": int(sum(steps_used)), "phases": len(sizes),
                    "clip_threshold": C, "dummies_threshold": C,
                    "grad_evals": int(sum(s * t for s, t in zip(sizes, steps_used)))}
        return SolverResult(w, Sequential([Parallel(phases)]), schedule)
