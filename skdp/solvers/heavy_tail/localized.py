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

Schedules.

``"theory"`` (paper-exact): ``J`` in ``[400, 500] log(I / failure_prob)``,
``T = max(m, m^2 rho / d)`` (capped at ``max_steps``), ``lambda = Delta / D``
from the moment bounds ``(k, G_k, G_2)``, ``lambda_i = 32^i lambda``, Algorithm 1's
steps ``4 / (lambda_i (t + 1))`` and ``(t + 4)``-weighted average, consecutive
blocks.

``"practical"`` (default). Why the former practical schedule (the theory's
formulas with the constants dropped, ``J = 3``, ``I = 2``) was far from clipped
descent (2.6 times the Bayes error at n = 2000, epsilon = 1; 1.06 at
n = 20000, on the contaminated benchmark task): (1) ``lambda_1 = 32 lambda``
pulled phase 1 towards the arbitrary start 0 (a coefficient norm of 0.86-0.95
of the truth) and ``lambda_2 = 32^2 lambda`` kept phase 2 from correcting it;
(2) Algorithm 1's steps ``4 / (lambda (t + 1))`` are made for a curvature of
``lambda``; with a small ``lambda`` they are far above ``1 / curvature`` and the
iterates bounce on the ball; (3) the clip was the median of the gradient norms
at 0, several times the gradients near the solution; (4) each of the ``J = 3``
portions, and so the aggregated point, sees only ``n / J`` rows (with ``n / 6``
in phase 1, its noise is that of a 6 times smaller dataset). None of these is
forced by the privacy proof, which only needs disjoint blocks and ``T``
Gaussian releases of sensitivity ``2 C / m`` per block. The practical schedule:

* runs ``I = 2`` phases of ``J = 3`` portions when the private rows per
  coefficient ``n mu / p`` are at least 100, and otherwise one block of all
  rows (``I = J = 1``: Algorithm 1 alone, the aggregation being the identity);
  the layout depends on ``(n, mu, p)`` only, so the plan lists it before any
  data are read. At n = 2000, epsilon = 0.5 (d = 20) the full pipeline gives
  1.46 times the Bayes error and one block 1.17; at n = 20000 the full
  pipeline costs under 1% against one block (1.009 against 1.001 at
  epsilon = 0.5) and is kept there for the method's high-probability
  structure;
* phase 1 is not regularised (``lambda_1 = 0``, over ``Ball(0, R)``); phase
  ``i >= 2`` is pulled towards the previous output with ``lambda_i =
  regularization * h * 32^(i - 1)`` (``regularization = 0.03``, so
  ``lambda_2`` is about the curvature ``h = smoothness * unit^2`` of a
  standardised problem), applied by Algorithm 1's exact proximal step, over
  ``Ball(0, R) ∩ Ball(w_{i-1}, 2 C_i / lambda_i)``;
* steps ``eta0 min(1, tau / (t + 1))`` with ``eta0 = 1 / (h + lambda_i + max
  ridge)`` and ``tau = T / 4``, and the average of the last half of the
  iterates (as the practical 'clipped_gd');
* each phase's clip is a private quantile (level ``clip_quantile = 0.3``) of
  the per-sample gradient norms at the phase's centre (a released point), on
  the phase's own rows, so the phases' quantiles compose in parallel: every
  row pays for one quantile and one block, all with the same ``(eps_q, mu)``,
  and the run's curve is that of the single quantile followed by the parallel
  blocks, the event written here;
* blocks are cut from a data-independent random permutation (drawn first) and
  copied once, so the full-batch queries read contiguous memory.

Where it works (practical schedule): within 1.13 times the Bayes error in every
cell of the contaminated benchmark task (d = 20, n in {2000, 20000, 100000},
epsilon in {0.5, 1, 2}; 1.004 at n = 20000, epsilon = 1, 1.017 at n = 2000,
epsilon = 1), so it never warns.

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
from .._contract import (
    FRACTION,
    POSITIVE,
    POSITIVE_INT,
    PUBLIC_CLIP,
    SCHEDULE,
    Capabilities,
    ScheduledSolver,
    SolverResult,
    optional,
    register_solver,
)
from ..clip_threshold import private_clip
from ..descent import noisy_clipped_descent, step_noise_std
from ..geometry import aggregate_points, project_ball, project_two_balls
from ..moments import VALID_MOMENTS, MomentBounds
from ..schedules import decaying_steps, permuted_blocks, tail_average_weights

__all__ = ["Localized", "clipped_dp_sgd", "practical_block"]

_C_RP = 142.0  # the constant of Corollary 2 implied by the paper's printed arithmetic
# Private rows per coefficient (n mu / p) from which the practical schedule runs 2 phases of 3 portions.
_PIPELINE_ROWS_PER_COEF = 100.0


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


def practical_block(problem, center, lam, clip, n_steps, eta0, mu, rng):
    """The practical variant of Algorithm 1 on all rows of ``problem`` (a block copied once).

    The same releases as :func:`clipped_dp_sgd` (``T`` clipped means of
    sensitivity ``2 clip / m``, so the same privacy); steps ``eta0 min(1, tau / (t +
    1))`` (``tau = T / 4``), the regulariser by its exact proximal step over
    ``Ball(0, R) ∩ Ball(center, 2 clip / lam)`` (``Ball(0, R)`` when ``lam = 0``),
    and the average of the last half of the iterates.
    """
    R = problem.radius
    if lam > 0:
        r = 2.0 * clip / lam  # Lemma 4 with G_1 <= clip for the clipped objective

        def project(v):
            return project_two_balls(v, R, center, r)
    else:
        def project(v):
            return project_ball(v, R)

    return noisy_clipped_descent(problem, project(center.copy()), clip=clip,
                                 std=step_noise_std(clip, problem.n_samples, n_steps, mu),
                                 steps=decaying_steps(eta0, n_steps), rng=rng, anchor=center, lam=lam,
                                 proximal=True, project=project, weights=tail_average_weights(n_steps))


@register_solver
@dataclass(frozen=True)
class Localized(ScheduledSolver):
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
        Public clip threshold of every phase; None takes private quantiles.
    regularization : float
        ``lambda_i = regularization * smoothness * unit^2 * 32^(i - 1)`` for the
        phases ``i >= 2`` (practical; phase 1 is not regularised).
    clip_quantile : float in (0, 1)
        Level of the private clip quantiles (practical).
    """

    schedule: str = "practical"
    n_portions: int = None
    n_phases: int = None
    max_steps: int = 100
    failure_prob: float = 0.05
    moments: MomentBounds = MomentBounds()
    clip: float = None
    regularization: float = 0.03
    clip_quantile: float = 0.3

    name = "localized"
    family = "heavy_tail"
    capabilities = Capabilities(callable_losses=True, public_clip=True)
    _parameter_constraints = {
        "schedule": [SCHEDULE],
        "n_portions": optional(POSITIVE_INT),
        "n_phases": optional(POSITIVE_INT),
        "max_steps": [POSITIVE_INT],
        "failure_prob": [FRACTION],
        "moments": [VALID_MOMENTS],
        "clip": optional(PUBLIC_CLIP),
        "regularization": [POSITIVE],
        "clip_quantile": [FRACTION],
    }

    @classmethod
    def from_options(cls, options):
        return cls(schedule=options.schedule, max_steps=options.max_iter or 100,
                   moments=MomentBounds.from_options(options))

    def check(self, spec):
        super().check(spec)
        if self.schedule == "theory":
            self.moments.require(self.name)
        elif not 0.0 < float(self.clip_quantile) < 1.0:
            raise ValueError(f"clip_quantile must lie in (0, 1); got {self.clip_quantile!r}.")
        self.layout(spec.n_samples)  # raises when there are too few rows (for the largest layout)

    def n_quantiles(self, spec):
        """Private quantiles a row pays for: the practical phases' clips compose in parallel (1)."""
        return 0 if (self.clip is not None or self.schedule == "theory") else 1

    def plan(self, spec, budget):
        """The clip quantile(s) (one epsilon: parallel), then T Gaussian steps on every disjoint block."""
        parts = [ExponentialMechanismRelease(budget.quantile_epsilon)] if self.n_quantiles(spec) else []
        J, _, sizes = self.layout(spec.n_samples, budget.mu, spec.n_coef)
        blocks = []
        for T in self._steps(sizes, budget.mu, spec.n_coef):
            blocks += [Repeated(GaussianRelease(1.0, math.sqrt(T) / budget.mu), T)] * J
        return Sequential(parts + [Parallel(blocks)])

    def _steps(self, sizes, mu, p):
        """Steps per block of each phase (public): max(m, m^2 rho / d), capped."""
        rho = mu * mu / 2.0
        return [min(self.max_steps, int(math.ceil(max(m, m * m * rho / p)))) if math.isfinite(rho)
                else self.max_steps for m in sizes]

    def layout(self, n, mu=None, n_coef=None):
        """Portions J, phases I and the block size of every phase (public).

        The practical schedule runs ``I = 2`` phases of ``J = 3`` portions when
        the private rows per coefficient ``n mu / p`` are at least 100 (or when
        ``mu`` or ``n_coef`` is not given), else one block of all rows
        (``I = J = 1``); ``n_portions`` and ``n_phases`` override either.
        """
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
            full = (mu is None or n_coef is None or not math.isfinite(mu)
                    or n * mu / n_coef >= _PIPELINE_ROWS_PER_COEF)
            J = self.n_portions or (3 if full else 1)
            I = self.n_phases or (2 if full else 1)
            m = n // J
            sizes = [max(m // 2**i, 1) for i in range(1, I + 1)]
            sizes[0] += m - sum(sizes)  # leftover rows of each portion go to phase 1
        if J * sum(sizes) > n or min(sizes) < 1:
            raise ValueError(f"'localized' needs more rows: {J} portions x {sum(sizes)} rows > n = {n}.")
        return J, I, sizes

    def _run_practical(self, problem, budget, rng):
        """The practical schedule (module docstring): the same blocks and releases, other constants."""
        mu = budget.mu
        n, p = problem.X.shape
        J, I, sizes = self.layout(n, mu, p)
        steps_used = self._steps(sizes, mu, p)
        # Public randomness, drawn first: J portions of every phase, in phase order.
        blocks = permuted_blocks(n, [m_i for m_i in sizes for _ in range(J)], rng)
        pen_max = float(np.max(problem.penalty, initial=0.0))
        h = problem.loss_smoothness_or_one() * problem.unit**2  # curvature of a standardised problem
        x = np.zeros(p)
        events, clips, lams = [], [], []
        quantile_event = None
        for i, T in enumerate(steps_used, start=1):
            portions = blocks[(i - 1) * J:i * J]
            if self.clip is not None:
                C = float(self.clip)
            else:
                # One quantile per phase, on the phase's own rows, at the phase's centre.
                C, quantile_event = private_clip(problem, self.clip_quantile, budget.quantile_epsilon, rng,
                                                 w=x, rows=np.concatenate(portions))
            # Phase 1 is not pulled towards the arbitrary start 0; later phases are pulled
            # towards the previous output with weights growing by 32 per phase.
            lam_i = 0.0 if i == 1 else self.regularization * h * 32.0 ** (i - 1)
            eta0 = 1.0 / (h + lam_i + pen_max)
            outputs = []
            for rows in portions:
                # One contiguous copy per block: its T full-batch queries read it in order.
                out, ev = practical_block(problem.subset(rows), x, lam_i, C, T, eta0, mu, rng)
                outputs.append(out)
                events.append(ev)
            x = aggregate_points(outputs)
            clips.append(C)
            lams.append(lam_i)
        released = ([] if quantile_event is None else [quantile_event]) + [Parallel(events)]
        schedule = {"algorithm": self.name, "schedule": self.schedule, "n_steps": int(sum(steps_used)),
                    "portions": J, "phases": I, "block_sizes": sizes, "steps_per_block": steps_used,
                    "clip_threshold": clips[-1], "clip_thresholds": clips, "regularization": lams,
                    "grad_evals": int(J * sum(s * t for s, t in zip(sizes, steps_used))
                                      + (0 if quantile_event is None else J * sum(sizes)))}
        return SolverResult(x, Sequential(released), schedule)

    def _run_theory(self, problem, mu, rng):
        n, p = problem.X.shape
        J, I, sizes = self.layout(n)
        D = 2.0 * problem.radius
        rho = mu * mu / 2.0
        events = []
        m = sizes[0] * 2  # nominal portion size for the constants
        k, Gk, G2 = self.moments.k, self.moments.G, self.moments.second
        C = Gk * (25.0 * m * m * rho / (32.0 * p)) ** (1.0 / (2.0 * k))
        Delta = 3.0 * _C_RP * (Gk * (math.sqrt(p) / (m * math.sqrt(rho))) ** (1 - 1 / k) + G2 / math.sqrt(m))
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
