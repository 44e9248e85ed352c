"""Full-batch clipped DP gradient descent with a private, adaptive clip threshold.

Every step releases the mean of the per-sample loss gradients, each clipped to
norm ``C``, plus Gaussian noise: sensitivity ``2 C / n`` (replace-one), so ``T``
steps with noise ``sqrt(T) * (2 C / n) / mu`` are exactly mu-GDP together. The
ridge gradient is added after the noise (it is data-independent) and iterates
are projected onto the public coefficient ball.

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
* steps decrease as ``eta0 * min(1, tau / (t + 1))`` from the start of each stage,
  which is robust to an unknown curvature; the output is the average of the
  last half of the iterates (noise averages out, bias has decayed).

Losses with a bounded derivative (absolute, quantile) use the public bound
``max|loss'| * row_bound`` as threshold: no quantile is spent and clipping
never changes the gradient (clipping would change the estimated quantile).
"""

import math

import numpy as np

from ..accounting import ExponentialMechanismRelease, GaussianRelease, Repeated, Sequential
from ..losses import HuberLoss, SquaredLoss
from ..mechanisms import private_quantile
from ._glm import SolverResult, project_ball

__all__ = ["ClippedGD"]

# Clip thresholds are searched in [1e-6, 10] x row_bound: per-sample gradient norms
# are |loss'| x ||x|| with ||x|| <= row_bound, and a short public range keeps a
# starved quantile from landing absurdly far from the data.
_CLIP_RANGE = (1e-6, 10.0)


def _bounded_derivative(loss):
    """Public bound on |loss'| (or None when the derivative is unbounded)."""
    if isinstance(loss, SquaredLoss):
        return None
    if isinstance(loss, HuberLoss):
        return None  # the automatic threshold is data-dependent; clip privately
    bound = loss.derivative_bound(np.array([np.inf]), np.array([0.0]))
    value = float(np.max(bound))
    return value if np.isfinite(value) else None


class ClippedGD:
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
        Initial step ``eta0`` (features are standardised by the estimator).
    step_decay : float
        ``tau`` of the step schedule ``eta0 * min(1, tau / (t + 1))``.
    huber_auto : bool
        For a Huber loss, set its threshold to 1.345 private robust standard
        deviations of the warm-up residuals.
    averaging : bool
        Return the average of the last half of the iterates (else the last).
    adaptive_clip : bool
        Re-estimate the clip threshold after the warm-up stage.
    shrinkage : bool
        Add the privacy-driven ridge described above.
    """

    name = "clipped_gd"

    def __init__(self, n_steps=200, warm_fraction=0.25, clip=None, clip_quantile=0.3, step_size=1.0,
                 step_decay=10.0, huber_auto=False, averaging=True, adaptive_clip=True, shrinkage=True):
        self.n_steps = int(n_steps)
        self.warm_fraction = float(warm_fraction)
        self.clip = clip
        self.clip_quantile = float(clip_quantile)
        self.step_size = float(step_size)
        self.step_decay = float(step_decay)
        self.huber_auto = bool(huber_auto)
        self.averaging = bool(averaging)
        self.adaptive_clip = bool(adaptive_clip)
        self.shrinkage = bool(shrinkage)

    # -- planning (public) -----------------------------------------------------------
    def _stages(self):
        if not self.adaptive_clip:
            return [self.n_steps]
        warm = max(1, int(round(self.n_steps * self.warm_fraction)))
        return [warm, max(1, self.n_steps - warm)]

    def n_quantiles(self, loss):
        if self.clip is not None or _bounded_derivative(loss) is not None:
            clips = 0
        else:
            clips = len(self._stages())
        huber = 1 if (self.huber_auto and isinstance(loss, HuberLoss)) else 0
        return clips + huber

    def event(self, loss, mu, eps_q, n_samples=None):
        """The event of a run with total Gaussian budget ``mu`` (exactly mu-GDP)."""
        T = sum(self._stages())
        gauss = Repeated(GaussianRelease(1.0, math.sqrt(T) / mu), T)
        k = self.n_quantiles(loss)
        parts = [gauss] + ([Repeated(ExponentialMechanismRelease(eps_q), k)] if k else [])
        return Sequential(parts)

    # -- solving ------------------------------------------------------------------------
    def solve(self, problem, mu, eps_q, random_state):
        rng = random_state
        n, p = problem.X.shape
        stages = self._stages()
        T = sum(stages)
        loss = problem.loss
        releases = []
        public_bound = _bounded_derivative(loss)
        free = problem.free_coordinates()
        shrinks = []
        w = np.zeros(p)
        avg = np.zeros(p)
        count = 0
        clips = []
        for s, steps in enumerate(stages):
            if s == 1 and self.huber_auto and isinstance(loss, HuberLoss):
                r = np.abs(problem.X @ w - problem.y)
                med, ev = private_quantile(r, 0.5, eps_q, (1e-6, 1e3), scale="log", random_state=rng)
                releases.append(ev)
                loss = HuberLoss(1.345 * 1.4826 * med)
                problem = problem.with_loss(loss)
            if self.clip is not None:
                C = float(self.clip)
            elif public_bound is not None:
                C = public_bound * problem.row_bound
            else:
                g_norms = np.abs(problem.derivatives(w)) * problem.norms
                bounds = (_CLIP_RANGE[0] * problem.row_bound, _CLIP_RANGE[1] * problem.row_bound)
                C, ev = private_quantile(g_norms, self.clip_quantile, eps_q, bounds, scale="log",
                                         random_state=rng)
                releases.append(ev)
            clips.append(C)
            shrink = 8.0 * p * (C / (n * mu)) ** 2 if self.shrinkage else 0.0
            shrinks.append(shrink)
            penalty = problem.penalty + shrink * free
            sigma = math.sqrt(T) * (2.0 * C / n) / mu
            releases.append(Repeated(GaussianRelease(2.0 * C / n, sigma), steps))
            for t in range(steps):
                grad = problem.clipped_gradient_sum(w, C) / n
                grad = grad + sigma * rng.standard_normal(p) + penalty * w
                eta = self.step_size * min(1.0, self.step_decay / (t + 1))
                w = project_ball(w - eta * grad, problem.radius)
                if s == len(stages) - 1 and t >= steps // 2:
                    avg += w
                    count += 1
        coef = avg / count if (self.averaging and count) else w
        schedule = {"algorithm": self.name, "n_steps": T, "stages": stages, "clip_thresholds": clips,
                    "grad_evals": T * n, "privacy_ridge": shrinks}
        if isinstance(loss, HuberLoss) and self.huber_auto:
            schedule["huber_delta"] = loss.delta
        return SolverResult(coef, Sequential(releases), schedule)
