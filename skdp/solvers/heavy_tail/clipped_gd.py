"""Full-batch clipped DP gradient descent with a private, adaptive clip threshold.

Every step releases the mean of the per-sample loss gradients, each clipped to
norm ``C``, plus Gaussian noise: sensitivity ``2 C / n`` (replace-one), so ``T``
steps with noise ``sqrt(T) * (2 C / n) / mu`` are exactly mu-GDP together. The
ridge gradient is added after the noise (it is data-independent) and iterates
are projected onto the public coefficient ball. An L1 penalty (``problem.l1``)
is handled by exact proximal steps (soft thresholding, then the projection),
which are post-processing of the noisy gradients.

Practical schedule (the defaults; they change accuracy, never the calibration):

* the clip threshold is a private quantile of the per-sample gradient norms,
  taken at the start and again after a warm-up stage at the warm-up iterate,
  where the residuals (and so the useful threshold) are much smaller than at 0;
* for the Huber loss with an automatic threshold, the threshold is 1.345 robust
  standard deviations of the residuals at the warm-up iterate (a private
  median of ``|r|``);
* a privacy-driven ridge ``8 p (C / (n mu))^2`` on the non-intercept
  coordinates shrinks the estimate where the noise would dominate the signal.
  It is the ridge that would be optimal for an averaged iterate whose noise has
  variance ``(4 C / (n mu))^2`` per coordinate (curvature about 1/2) if the
  standardised signal were spread evenly, ``||w||^2 = 1``. It vanishes as
  ``n * mu`` grows (and at epsilon = inf) and only changes accuracy;
* the step is set from a private estimate of the largest eigenvalue of the mean
  of ``x x^T`` (the smoothness of the squared loss), one scalar Gaussian release
  of sensitivity ``row_bound^2 / n`` (replacing a row changes the mean of
  rank-one matrices by a difference of two PSD terms of norm at most
  ``row_bound^2 / n``, and by Weyl's inequality so does the top eigenvalue) with
  2% of the solver's mu^2; ``eta0 = 1 / (lambda_hat + 2 sigma)``, floored in
  curvature at ``0.1 unit^2`` where ``unit`` is the typical coordinate size;
* steps decrease as ``eta0 * min(1, tau / (t + 1))`` from the start of each stage
  (``tau`` a quarter of the steps); the output is the average of the last half
  of the iterates (noise averages out, bias has decayed).

Losses with a bounded derivative (absolute, quantile) use the public bound
``max|loss'| * row_bound`` as threshold: no quantile is spent and clipping
never changes the gradient (clipping would change the estimated quantile).
"""

import math
import numbers
from dataclasses import dataclass

import numpy as np

from ..._validation import Interval, Options
from ...accounting import ExponentialMechanismRelease, GaussianRelease, Repeated, Sequential
from ...losses import HuberLoss
from ...mechanisms import (
    MAX_GRAM_SIZE,
    NON_PRIVATE_RELEASE,
    private_quantile,
    private_top_eigenvalue,
)
from .._contract import (
    FRACTION,
    POSITIVE,
    POSITIVE_INT,
    PUBLIC_CLIP,
    Capabilities,
    Solver,
    SolverResult,
    optional,
    register_solver,
    report_progress,
)
from ..clip_threshold import private_clip, public_derivative_bound
from ..descent import noisy_clipped_gradient
from ..schedules import decaying_steps

__all__ = ["NOISE_FLOOR_Z", "ClippedGD", "averaged_noise_sd"]

_CURVATURE_SHARE = 0.02
_WHITENED_CURVATURE_SHARE = 0.05
# Steps: 100, or 200 above this many coefficients on whitened rows (their conditioning is worse
# when only the diagonal is whitened, which is the case on wide tables).
_WIDE = 64
# clip_multiplier="auto": m_C = max(clip_floor, sqrt(nu / _CLIP_NU0)), nu = n mu_steps / p, clip_floor
# _CLIP_MIN by default and _BLOCK_CLIP_MIN on rows whose every column is in a declared one-hot block.
_CLIP_MIN, _CLIP_NU0 = 0.6, 50.0
_BLOCK_CLIP_MIN = 0.4
# Noise-floor threshold of L1 models, in standard deviations of the averaged iterate.
NOISE_FLOOR_Z = 3.0


def averaged_noise_sd(etas, sigma, curvature, start):
    """Standard deviation of the noise in the average of iterates ``start..T`` of noisy GD.

    Linearised per-coordinate dynamics ``e_{t+1} = (1 - eta_t h) e_t - eta_t sigma xi_t``
    with curvature ``h`` and independent standard normal ``xi_t``: every iterate is
    a linear combination of the draws, so the variance of the window average is
    ``sigma^2 * sum_s b_s^2`` with ``b_s`` its coefficient on ``xi_s``. Public
    inputs only (the step schedule, the noise scale and a curvature guess).
    """
    etas = np.asarray(etas, dtype=float)
    T = etas.size
    coeffs = np.zeros(T)  # coefficients of e_t on xi_0..xi_{T-1}
    total = np.zeros(T)
    count = 0
    for t in range(T):
        coeffs *= 1.0 - etas[t] * curvature
        coeffs[t] -= etas[t] * sigma
        if t >= start:
            total += coeffs
            count += 1
    return float(np.linalg.norm(total / max(count, 1)))


@register_solver
@dataclass(frozen=True)
class ClippedGD(Solver):
    """Full-batch clipped DP gradient descent (the library's practical default).

    Parameters
    ----------
    n_steps : int
        Number of noisy full-batch steps ``T``.
    warm_fraction : float
        Fraction of the steps in the warm-up stage.
    clip : float or None
        Public clip threshold; None chooses it privately (see module docstring).
    clip_quantile : float
        Quantile of the per-sample gradient norms used as threshold.
    step_size : float
        Multiplier of the initial step ``1 / curvature``.
    step_decay : float or None
        ``tau`` of the step schedule ``eta0 * min(1, tau / (t + 1))``; None
        uses a quarter of the steps of the stage.
    huber_auto : bool
        For a Huber loss, set its threshold to 1.345 private robust standard
        deviations of the warm-up residuals.
    averaging : bool
        Return the average of the last half of the iterates (else the last).
    adaptive_clip : bool
        Re-estimate the clip threshold after the warm-up stage.
    shrinkage : bool
        Add the privacy-driven ridge described above.
    curvature_release : bool
        Set the step from a private estimate of the curvature (else from the
        public bound ``2 p / row_bound^2``). Problems with more than
        :data:`skdp.mechanisms.MAX_GRAM_SIZE` coefficients always use the bound.
    clip_multiplier : None, "auto" or float
        None: the clip threshold is the ``clip_quantile`` of the gradient norms.
        Otherwise it is this multiple of their private median; "auto" is
        ``m_C = max(clip_floor, sqrt(nu / 50))`` with ``nu = n mu_steps / p`` the
        public budget per coefficient (infinite, no clipping, without noise). The
        rule of whitened rows (:meth:`for_whitened_rows`).
    clip_floor : float
        The floor of the "auto" clip multiplier: 0.6, and 0.4 on rows whose every
        column is in a declared one-hot block (:meth:`for_block_rows`). There
        the long whitened rows are those of rare levels; clipping one turns its
        contribution to its own level's coefficient into ``C`` times the sign of
        its residual, whose ratio to the noise (also proportional to ``C``) does
        not depend on ``C``, while the noise on the common levels' coefficients,
        whose rows are short and unclipped, falls with ``C``. (Sparse one-hot
        table, n = 10000, epsilon = 1, three seeds: test R^2 over Ridge's 0.905
        with 0.6, 0.925 with 0.4; 0.976 either way at n = 20000.)
    step_decay_fraction : float
        ``tau`` of the step schedule as a fraction of the stage's steps (when
        ``step_decay`` is None).
    project : bool
        Project the iterates onto the coefficient ball.
    curvature_share : float
        Share of the solver's ``mu^2`` spent on the curvature release.

    Notes
    -----
    On whitened rows (:meth:`for_whitened_rows`, the default on real tables)
    the rows are not clipped: a median-based clip that loosens as the budget
    grows bounds every per-sample gradient, the curvature is released from the
    rows clipped to the released row bound (only for that release), ridge
    penalties (vectors or matrices) are applied by exact proximal steps, there is
    no projection, ``n_steps`` defaults to 100 (200 above 64 coefficients) and
    without noise the fit is exact least squares (or Huber regression).
    """

    n_steps: int = None
    warm_fraction: float = 0.25
    clip: float = None
    clip_quantile: float = 0.3
    step_size: float = 1.0
    step_decay: float = None
    huber_auto: bool = False
    averaging: bool = True
    adaptive_clip: bool = True
    shrinkage: bool = True
    curvature_release: bool = True
    clip_multiplier: object = None
    step_decay_fraction: float = 0.25
    project: bool = True
    curvature_share: float = _CURVATURE_SHARE
    clip_floor: float = _CLIP_MIN

    name = "clipped_gd"
    family = "heavy_tail"
    capabilities = Capabilities(l1=True, public_clip=True, unbounded_rows=True, matrix_penalty=True,
                                implicit_design=True)

    # Before any spend: an infinite or NaN clip would release exact gradients, charged as free,
    # and a clip above MAX_PUBLIC_CLIP could overflow the noise calibration or the gradient sums.
    _parameter_constraints = {
        "n_steps": optional(POSITIVE_INT),
        "warm_fraction": [FRACTION],
        "clip": optional(PUBLIC_CLIP),
        "clip_quantile": [FRACTION],
        "step_size": [POSITIVE],
        "step_decay": optional(POSITIVE),
        "huber_auto": ["boolean"],
        "averaging": ["boolean"],
        "adaptive_clip": ["boolean"],
        "shrinkage": ["boolean"],
        "curvature_release": ["boolean"],
        "clip_multiplier": optional(Options({"auto"}), PUBLIC_CLIP),
        "step_decay_fraction": [Interval(numbers.Real, 0, 1, closed="right")],
        "project": ["boolean"],
        "curvature_share": [FRACTION],
        "clip_floor": [Interval(numbers.Real, 0.01, 100.0, closed="both")],
    }

    @classmethod
    def from_options(cls, options):
        return cls(n_steps=options.max_iter, huber_auto=options.huber_auto)

    def for_whitened_rows(self):
        return self.replace(clip_multiplier="auto" if self.clip_multiplier is None else self.clip_multiplier,
                            step_decay_fraction=0.5, project=False, curvature_share=_WHITENED_CURVATURE_SHARE)

    def for_block_rows(self):
        return self.replace(clip_floor=_BLOCK_CLIP_MIN) if self.clip_multiplier == "auto" else self

    def with_fewer_quantiles(self):
        # One clip threshold instead of two.
        return self.replace(adaptive_clip=False) if self.adaptive_clip else self

    def with_public_clip(self, clip):
        return self.replace(clip=float(clip), adaptive_clip=False)

    # -- planning (public) -----------------------------------------------------------
    def _total_steps(self, n_coef=None):
        if self.n_steps is not None:
            return int(self.n_steps)
        return 200 if (self.clip_multiplier is not None and n_coef is not None and n_coef > _WIDE) else 100

    def _stages(self, n_coef=None):
        T = self._total_steps(n_coef)
        if not self.adaptive_clip:
            return [T]
        warm = max(1, int(round(T * self.warm_fraction)))
        return [warm, max(1, T - warm)]

    def _releases_curvature(self, n_coef):
        # The curvature release forms the p x p Gram matrix (a public rule on p).
        return self.curvature_release and n_coef <= MAX_GRAM_SIZE

    def _quantile_clip(self, loss):
        return self.clip is None and public_derivative_bound(loss) is None

    def n_quantiles(self, spec):
        clips = len(self._stages(spec.n_coef)) if self._quantile_clip(spec.loss) else 0
        return clips + int(self._tunes_huber(spec.loss))

    def _tunes_huber(self, loss):
        # The Huber threshold is re-estimated at the warm-up iterate, so only a
        # run with a warm-up stage releases (and pays for) it.
        return self.huber_auto and isinstance(loss, HuberLoss) and len(self._stages()) > 1

    def _mu_split(self, mu, n_coef):
        """(mu of the curvature release, mu of the gradient steps): squares add to mu^2."""
        if not self._releases_curvature(n_coef):
            return 0.0, mu
        return math.sqrt(self.curvature_share) * mu, math.sqrt(1.0 - self.curvature_share) * mu

    def plan(self, spec, budget):
        """The event of a run with total Gaussian budget ``mu`` (exactly mu-GDP) and its quantiles."""
        T = sum(self._stages(spec.n_coef))
        mu_curv, mu_steps = self._mu_split(budget.mu, spec.n_coef)
        parts = [Repeated(GaussianRelease(1.0, math.sqrt(T) / mu_steps), T)]
        if self._releases_curvature(spec.n_coef):
            parts.append(GaussianRelease(1.0, 1.0 / mu_curv))
        k = self.n_quantiles(spec)
        if k:
            parts.append(Repeated(ExponentialMechanismRelease(budget.quantile_epsilon), k))
        return Sequential(parts)

    # -- solving ------------------------------------------------------------------------
    def _clip_multiplier(self, n, p, mu):
        if math.isinf(mu):
            return math.inf  # no noise: nothing is clipped
        if self.clip_multiplier != "auto":
            return float(self.clip_multiplier)
        return max(float(self.clip_floor), math.sqrt(n * mu / p / _CLIP_NU0))

    def run(self, spec, problem, budget, rng):
        eps_q = budget.quantile_epsilon
        n, p = problem.X.shape
        median_rule = self.clip_multiplier is not None
        stages = self._stages(p)
        T = sum(stages)
        loss = problem.loss
        releases = []
        public_bound = public_derivative_bound(loss)
        free = problem.free_coordinates()
        mu_curv, mu = self._mu_split(budget.mu, p)
        if self._releases_curvature(p):
            sigma_curv = problem.row_bound**2 / n / mu_curv if math.isfinite(mu_curv) else 0.0
            # Rows not clipped by the pipeline are clipped for this release only (its
            # sensitivity is row_bound^2 / n for rows of norm at most row_bound).
            weights = None if problem.rows_clipped else problem.gram_clip_weights(problem.row_bound)
            lam, ev = private_top_eigenvalue(problem.X, problem.row_bound, sigma_curv, random_state=rng,
                                             weights=weights)
            releases.append(ev)
            if median_rule:
                # Whitened rows: the curvature is about 1 or more.
                curvature = max(lam + sigma_curv, 1.0) * problem.loss_smoothness_or_one()
                eta0 = self.step_size / curvature
            else:
                # The top eigenvalue of the mean of x x^T is at least about unit^2 for data
                # whose coordinates have size unit; the floor keeps a noisy estimate from
                # giving an absurd step.
                curvature = (max(lam + 2.0 * sigma_curv, 0.1 * problem.unit**2)
                             * problem.loss_smoothness_or_one())
                eta0 = self.step_size / (curvature + float(np.max(problem.penalty, initial=0.0)))
        else:
            # The mean Hessian is at most the mean of x x^T, whose trace is at most
            # row_bound^2: for standardised rows (about sqrt(p) long) eta0 stays the
            # given step; for longer rows it shrinks.
            eta0 = min(self.step_size, 2.0 * p / problem.row_bound**2)
        ridge_prox = _RidgeProx(problem) if median_rule else None
        multiplier = self._clip_multiplier(n, p, mu) if median_rule else None
        shrinks = []
        w = np.zeros(p)
        avg = np.zeros(p)
        count = 0
        clips = []
        l1 = problem.has_l1
        point_sum = np.zeros(p)
        grad_sum = np.zeros(p)
        noise_floor = 0.0
        sigma = 0.0
        last_etas = []
        done = 0  # steps of all stages (progress)
        for s, steps in enumerate(stages):
            if s == 1 and self._tunes_huber(loss):
                r = problem.absolute_residuals(w)
                med, ev = private_quantile(r, 0.5, eps_q, (1e-6, 1e3), scale="log", jitter=0.05, random_state=rng)
                releases.append(ev)
                loss = HuberLoss(1.345 * 1.4826 * med)
                problem = problem.with_loss(loss)
            quantile_clip = self._quantile_clip(loss)
            if self.clip is not None:
                C = float(self.clip)
            elif public_bound is not None:
                C = public_bound * problem.row_bound
            elif median_rule and math.isinf(mu):
                C = math.inf  # no noise (epsilon = inf): nothing is clipped, the fit is exact
            elif median_rule:
                median, ev = private_clip(problem, 0.5, eps_q, rng, w=w)
                releases.append(ev)
                C = multiplier * median
            else:
                C, ev = private_clip(problem, self.clip_quantile, eps_q, rng, w=w)
                releases.append(ev)
            clips.append(C)
            shrink = 8.0 * p * (C / (n * mu)) ** 2 if (self.shrinkage and math.isfinite(C)) else 0.0
            shrinks.append(shrink)
            # A clip at the q-quantile of the gradient norms leaves about a fraction q
            # of the rows unclipped near the solution, so the clipped mean gradient has
            # about q times the curvature of the loss: the penalties are scaled by q so
            # that their balance with the loss (hence the target, e.g. Lasso's) is kept.
            # The median rule clips far less (and nothing without noise): no scaling.
            pen_scale = self.clip_quantile if (quantile_clip and not median_rule) else 1.0
            if median_rule:
                penalty = shrink * free  # the user's ridge is applied by its proximal step
            else:
                penalty = pen_scale * problem.penalty + shrink * free
            if math.isfinite(C):
                sigma = math.sqrt(T) * (2.0 * C / n) / mu if math.isfinite(mu) else 0.0
                releases.append(Repeated(GaussianRelease(2.0 * C / n, sigma), steps))
            elif math.isinf(mu):
                sigma = 0.0
                releases.append(Repeated(NON_PRIVATE_RELEASE, steps))
            else:  # pragma: no cover - check() and the branch above prevent it
                raise RuntimeError("An unclipped gradient release needs epsilon = inf.")
            tau = self.step_decay if self.step_decay is not None else max(1.0, steps * self.step_decay_fraction)
            last_etas = decaying_steps(eta0, steps, tau)
            for t, eta in enumerate(last_etas):
                grad, _ = noisy_clipped_gradient(problem, w, C, sigma, rng)
                grad = grad + penalty * w
                in_window = s == len(stages) - 1 and t >= steps // 2
                if in_window and l1:
                    point_sum += w
                    grad_sum += grad
                w = problem.prox(w - eta * grad, eta * pen_scale, project=self.project)
                if ridge_prox is not None:
                    w = ridge_prox(w, eta)
                if in_window:
                    avg += w
                    count += 1
                done += 1
                report_progress(done, T, eta)
        coef = avg / count if (self.averaging and count) else w
        # Public: the schedule, the released clip's noise scale and a curvature guess. Reported for every
        # averaged fit (the tuner's noise-floor test reads it from dense fits).
        noise_sd = (averaged_noise_sd(last_etas, sigma, pen_scale * problem.unit**2, stages[-1] // 2)
                    if (self.averaging and count) else None)
        if l1 and self.averaging and count:
            # Averaging proximal iterates blurs exact zeros. The minimiser is the fixed
            # point w = prox(w - eta0 g(w), eta0) for any step; one proximal step from
            # the averaged evaluation point with the averaged noisy gradient (both
            # post-processing of released values) restores the zeros of coordinates
            # whose averaged gradient is below their L1 weight.
            coef = problem.prox(point_sum / count - eta0 * grad_sum / count, eta0 * pen_scale,
                                project=self.project)
            if ridge_prox is not None:
                coef = ridge_prox(coef, eta0)
            # Coordinates within a few noise standard deviations of zero are zeroed:
            # there the privacy noise alone would make a zero coefficient nonzero.
            coef[(np.abs(coef) <= NOISE_FLOOR_Z * noise_sd) & (free > 0)] = 0.0
            noise_floor = NOISE_FLOOR_Z * noise_sd
        schedule = {"algorithm": self.name, "n_steps": T, "stages": stages, "clip_thresholds": clips,
                    "step_size": eta0, "grad_evals": T * n, "privacy_ridge": shrinks}
        if median_rule:
            schedule["clip_multiplier"] = multiplier
        if l1:
            schedule["noise_floor"] = noise_floor
        if noise_sd is not None:
            schedule["averaged_noise_sd"] = noise_sd
        if isinstance(loss, HuberLoss):
            schedule["huber_delta"] = loss.delta
        return SolverResult(coef, Sequential(releases), schedule)


class _RidgeProx:
    """The exact proximal step of the problem's ridge, ``v -> (I + eta A)^{-1} v`` (vector or matrix ``A``)."""

    def __init__(self, problem):
        self.matrix = problem.penalty_matrix
        self.vector = problem.penalty
        if self.matrix is not None:
            lam, self.vectors = np.linalg.eigh(0.5 * (self.matrix + self.matrix.T))
            self.values = np.maximum(lam, 0.0)

    def __call__(self, v, eta):
        if self.matrix is not None:
            return self.vectors @ ((self.vectors.T @ v) / (1.0 + eta * self.values))
        if not np.any(self.vector):
            return v
        return v / (1.0 + eta * self.vector)
