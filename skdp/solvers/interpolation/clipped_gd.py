"""Full-batch clipped DP gradient descent for linear classifiers (the baseline of the family).

Every step releases the sum of the per-row gradients of the whole coefficient
matrix, each clipped *jointly* to Frobenius norm ``C``, plus noise. Replacing a
row changes that sum by at most ``2 C`` in Frobenius norm whatever the number of
classes, so one release per step covers every class (one-vs-rest included): the
budget is not split across classes. With class weights (public, or computed from
released class counts) each clipped gradient is multiplied by its row's class
weight, and the sensitivity is ``2 C w_max`` with ``w_max`` the largest class
weight; the curvature release weights its rows the same way.

* (epsilon, delta): ``T`` Gaussian steps with noise ``sqrt(T) (2 C / n) / mu_steps``
  per step are exactly ``mu_steps``-GDP together.
* pure DP: each step is an l2-Laplace release at ``epsilon_steps / T`` (basic
  composition; pure DP has nothing tighter for adaptive steps).

With an intercept, the rows are first centred privately: one release of the
mean of the feature parts (rows clipped to the released row bound, so the L2
sensitivity is ``2 B / n``; a share :attr:`ClippedGD.centre_share` of the
budget; skipped when the scaling mode centres every column exactly), and a
column is centred only where its released mean clearly exceeds
the noise (public post-processing). The fit on centred rows is mapped back by
moving ``W m`` into the intercept. On tables whose columns sit far from 0 and
cannot be standardised per column (few rows), this removes the mean direction
that otherwise dominates the curvature and leaves every other direction
unlearnt in a few steps.

The step size comes from a private estimate of the largest eigenvalue of the
mean of ``a a^T`` (:func:`~skdp.solvers.interpolation._noise.release_curvature`,
a share :attr:`ClippedGD.curvature_share` of the budget). Clipping per-row
gradients of a linear model to norm ``C`` is gradient descent on the
Lipschitzian extension with bound ``C`` (for margin losses and the joint squared
loss), so on separable data the clip does not move the minimiser.

Practical schedule (changes accuracy, never the calibration): ``C`` is
:attr:`ClippedGD.clip_multiplier` times the released typical row norm (public
post-processing: no quantile is spent); ``T`` steps decreasing as
``eta0 min(1, tau / (t + 1))`` with ``tau = T / 4``, the average of the last half
of the iterates, and a privacy ridge that shrinks where noise dominates.
"""

import math
import numbers
from dataclasses import dataclass

import numpy as np

from ..._validation import Interval
from ...accounting import ApproxDPRelease, GaussianRelease, Repeated, Sequential
from ...mechanisms import MAX_GRAM_SIZE, NON_PRIVATE_RELEASE
from .._contract import (
    FRACTION,
    POSITIVE_INT,
    SCHEDULE,
    Capabilities,
    Solver,
    SolverResult,
    register_solver,
    report_progress,
)
from ..schedules import decaying_steps
from ._centring import centred_problem, release_row_mean, uncentred_coef
from ._exact import exact_minimizer
from ._noise import release_curvature, release_vector

__all__ = ["ClippedGD"]

# Largest clip multiplier: beyond it the noise (2 C / n per step, C about sqrt(d) times this)
# makes the steps pure noise, and its calibration could overflow; its inverse is the smallest
# (a subnormal clip would round the noise calibration).
MAX_CLIP_MULTIPLIER = 1e6


@register_solver
@dataclass(frozen=True)
class ClippedGD(Solver):
    """Full-batch clipped DP gradient descent on the coefficient matrix (see the module docstring).

    Parameters
    ----------
    n_steps : int, default=30
    clip_multiplier : float, default=1.0
        The clip ``C`` is this multiple of the released typical row norm.
    curvature_share : float, default=0.02
        Share of the budget (``mu^2``, or of epsilon for pure DP) for the curvature release.
    centre_share : float, default=0.1
        Share of the budget for the private row mean (only with an intercept, and only when the
        standardisation does not centre the columns; 0: no centring).
    shrinkage : float, default=0.1
        Multiplier of the privacy ridge ``8 p k (C / (n mu))^2 / curvature`` (0: none).
    schedule : {"practical", "theory"}
        Both run the same method (the paper's baseline has no constants of its own).
    """

    name = "clipped_gd"
    family = "interpolation"
    capabilities = Capabilities(unbounded_rows=True, pure_dp=True, matrix_penalty=True)
    n_steps: int = 30
    clip_multiplier: float = 1.0
    curvature_share: float = 0.02
    centre_share: float = 0.1
    shrinkage: float = 0.1
    schedule: str = "practical"

    _parameter_constraints = {
        "n_steps": [POSITIVE_INT],
        # The clip C = clip_multiplier * row scale is the sensitivity of every step.
        "clip_multiplier": [Interval(numbers.Real, 1.0 / MAX_CLIP_MULTIPLIER, MAX_CLIP_MULTIPLIER, closed="both")],
        "curvature_share": [FRACTION],
        "centre_share": [Interval(numbers.Real, 0, 1, closed="left")],
        "shrinkage": [Interval(numbers.Real, 0, math.inf, closed="left")],
        "schedule": [SCHEDULE],
    }

    @classmethod
    def from_options(cls, options):
        return cls(n_steps=options.max_iter or 30, schedule=options.schedule)

    def _check_parameter_relations(self):
        if not self.curvature_share + self.centre_share < 1.0:
            raise ValueError(f"curvature_share + centre_share must be below 1 (the rest of the budget goes to the "
                             f"gradient steps); got {self.curvature_share!r} + {self.centre_share!r}.")

    def check(self, spec):
        super().check(spec)
        if spec.n_coef > MAX_GRAM_SIZE:
            # The curvature release forms the p x p second-moment matrix (a public rule on p).
            raise ValueError(f"algorithm='clipped_gd' supports at most {MAX_GRAM_SIZE} coefficients per class "
                             f"(got {spec.n_coef}): its private step size needs the {spec.n_coef} x {spec.n_coef} "
                             "second-moment matrix. Reduce the number of features. Nothing was spent.")

    def _shares(self, spec):
        """Budget shares (curvature, centring, steps): no centring without an intercept or of centred rows."""
        centre = self.centre_share if spec.intercept and not spec.centred_rows else 0.0
        return self.curvature_share, centre, 1.0 - self.curvature_share - centre

    def _split(self, budget, spec):
        """(curvature, centring, steps) budgets as ("gaussian", mu) or ("pure", epsilon) pairs."""
        shares = self._shares(spec)
        if budget.pure:
            return tuple(("pure", share * budget.pure_epsilon) for share in shares)
        return tuple(("gaussian", math.sqrt(share) * budget.mu) for share in shares)

    def plan(self, spec, budget):
        curv, centre, steps = self._split(budget, spec)
        T = self.n_steps
        if curv[0] == "gaussian":
            def release(level, repeat=1):
                return GaussianRelease(1.0, math.sqrt(repeat) / level if math.isfinite(level) else 0.0)
        else:
            def release(level, repeat=1):
                return ApproxDPRelease(level / repeat, 0.0)
        events = [release(centre[1])] if centre[1] > 0 else []
        events.append(release(curv[1]))
        events.append(Repeated(release(steps[1], T), T))
        return Sequential(events)

    def run(self, spec, problem, budget, rng):
        n, p = problem.X.shape
        k = problem.n_outputs
        T = self.n_steps
        curv, centre, steps = self._split(budget, spec)
        noisy = math.isfinite(steps[1])
        releases = []
        mean = None
        if centre[1] > 0 and noisy:
            mean, event = release_row_mean(problem, centre, rng)
            releases.append(event)
            problem = centred_problem(problem, mean)
        elif centre[1] > 0:
            releases.append(NON_PRIVATE_RELEASE)
        lam, event, lam_noise = release_curvature(problem, curv, rng)
        releases.append(event)
        smooth = problem.outputs.step_curvature
        # A floor keeps a noisy estimate from giving an absurd step; whitened or
        # standardised rows have a top eigenvalue of about 1 or more.
        curvature = smooth * max(lam + 2.0 * lam_noise, 0.1 * problem.row_scale**2 / p, 1e-12)
        if not noisy:
            # epsilon = inf: the exact minimiser of the penalised loss, the limit of the private fits.
            coef = exact_minimizer(problem)
            releases.extend([NON_PRIVATE_RELEASE] * T)
            return SolverResult(coef, Sequential(releases), {"algorithm": self.name, "n_steps": T,
                                                             "clip_threshold": math.inf, "curvature": lam})
        C = self.clip_multiplier * problem.outputs.gradient_scale * problem.row_scale
        # Class weights multiply every row's clipped gradient, and the sensitivity by the largest one.
        sensitivity = 2.0 * C * problem.max_weight
        if steps[0] == "gaussian":
            step_budget = ("gaussian", steps[1] / math.sqrt(T))
            noise_per_coord = (sensitivity / n) / step_budget[1]
        else:
            step_budget = ("pure", steps[1] / T)
            noise_per_coord = math.sqrt(2.0) * (sensitivity / n) / step_budget[1]
        shrink = self.shrinkage * problem.outputs.privacy_ridge * 8.0 * p * k * noise_per_coord**2 / curvature
        free = np.ones(p)
        if problem.intercept:
            free[-1] = 0.0
        eta0 = 1.0 / (curvature + problem.max_penalty + shrink)
        W = np.zeros((k, p))
        avg = np.zeros((k, p))
        count = 0
        for t, eta in enumerate(decaying_steps(eta0, T, max(1.0, T / 4.0))):
            total = problem.clipped_gradient_sum(W, C)
            noisy_sum, event = release_vector(total.ravel(), sensitivity, step_budget, rng)
            releases.append(event)
            grad = noisy_sum.reshape(k, p) / n + problem.penalty_value_and_gradient(W)[1] + shrink * free * W
            W = W - eta * grad
            norm = float(np.linalg.norm(W))
            if norm > problem.radius:  # projection onto the public ball (post-processing)
                W *= problem.radius / norm
            if t >= T // 2:
                avg += W
                count += 1
            report_progress(t + 1, T, eta)
        coef = avg / max(count, 1)
        if mean is not None:
            coef = uncentred_coef(coef, mean, problem)
        schedule = {"algorithm": self.name, "n_steps": T, "clip_threshold": C, "step_size": eta0,
                    "privacy_ridge": shrink, "curvature": lam, "grad_evals": T * n,
                    "centred_columns": 0 if mean is None else int(np.count_nonzero(mean))}
        return SolverResult(coef, Sequential(releases), schedule)
