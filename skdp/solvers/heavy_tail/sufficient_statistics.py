"""Ridge regression from privately released sufficient statistics (squared loss only).

The solver releases, once, the second-moment matrix of the augmented rows
``a_i = [x_i, clip(y_i, -B, B)]`` of the standardised problem,

``M = (1/n) sum_i a_i a_i^T = [[X'X, X'y], [y'X, y'y]] / n``,

and solves ``(G + P + r I) w = b`` with ``G = X'X / n``, ``b = X'y / n`` read
off the noisy ``M``, ``P`` the problem's ridge (``alpha`` of the estimator in
solver units) and ``r`` the *privacy ridge*, a public function of the noise
level. Every regularisation strength's model, and its validation loss
``(y'y - 2 w'b + w'G w) / 2``, follow from ``M`` by post-processing: that is
what :class:`~skdp.model_selection.DPRegularizationTuner` uses to tune
``alpha`` without paying per candidate.

Sensitivity (replace-one). The solver clips every label to the public bound
``B`` (``label_bound``, in target scales) and every augmented row ``a_i`` to
the norm ``A``: ``clip_multiplier`` times a private median of the augmented
row norms (:func:`~skdp.solvers.clip_threshold.private_clip`, one
exponential-mechanism release, epsilon-DP), at most ``sqrt(R^2 + B^2)`` for the
pipeline's row bound ``R``. (Clipping the whole augmented row weights the row,
``x`` and ``y`` alike, instead of distorting it; at the median norm it cuts the
noise several-fold against the pipeline's bound of 1.5 or more medians.) Then
``||a_i|| <= A`` and, released as the vector ``(M_kk, sqrt(2) M_kl for k < l)`` whose L2 norm is ``||M||_F``,

``||a a^T - a' a'^T||_F^2 = ||a||^4 + ||a'||^4 - 2 (a . a')^2 <= 2 A^4``,

so the L2 sensitivity is ``sqrt(2) A^2 / n``
(:func:`~skdp.mechanisms.second_moment_sensitivity`); the Gaussian mechanism
with noise ``sqrt(2) A^2 / (n mu)`` is exactly ``mu``-GDP. For pure DP
(``delta = 0``) the upper triangle gets Laplace noise: its L1 sensitivity is
``(q + 1) A^2 / n`` for ``q`` augmented coordinates
(:func:`~skdp.mechanisms.second_moment_l1_sensitivity`). ``A``, ``B`` and ``n``
are public or released before this step, so the noise scale is public. With
``alphas`` set (selection), the rows are split by a seeded permutation drawn
from the fit's generator (independent of the data) into two disjoint parts,
and each part's statistics are released once at the full budget: a replaced
row lies in one part, so the two releases compose in parallel (one release's
cost). Everything after the releases (the privacy ridge, the solves, the
validation losses, the choice of ``alpha``, the refit from the sum of the two
parts' statistics) is post-processing.

Never raising after the reservation: the noisy ``G`` may be indefinite. The
privacy ridge ``r = ridge_factor * sqrt(2 p) sigma`` (``sigma`` the standard
deviation of a diagonal entry of the noise; ``sqrt(2 p) sigma`` is the edge of
the noise's spectrum) is added to every coordinate, and the system is solved
through a symmetric eigendecomposition whose eigenvalues are floored at
``r / 2`` (or at a tiny multiple of the trace without noise), so the solve is
defined for every released matrix; a non-finite release (impossible for
finite bounds) maps to zero coefficients. Without noise (``epsilon = inf``)
``r = 0`` and nothing is clipped: the solution is the ridge/ElasticNet
solution at the estimator's ``alpha``.
"""

import math
import numbers
from dataclasses import dataclass

import numpy as np

from ...accounting import ExponentialMechanismRelease, GaussianRelease, LaplaceRelease, Parallel, Sequential
from ...losses import SquaredLoss
from ...mechanisms import private_second_moment, second_moment_l1_sensitivity, second_moment_sensitivity
from ..clip_threshold import private_clip
from .._contract import FRACTION, POSITIVE_TUPLE, PUBLIC_CLIP, Capabilities, Solver, SolverResult, register_solver
from ..._validation import Interval, Predicate

__all__ = ["SufficientStatistics", "ReleasedStatistics", "release_statistics", "ridge_solution",
           "validation_loss", "validation_noise"]

# Default label clip in target scales (the standardised target has scale about 1).
LABEL_BOUND = 4.0
_FACTOR = Interval(numbers.Real, 1e-6, 1e6, closed="both")
_GRID = Predicate(lambda v: v is None or (isinstance(v, tuple) and len(v) > 0
                                          and all(isinstance(a, (int, float)) and math.isfinite(a) and a >= 0
                                                  for a in v)),
                  "None or a non-empty tuple of finite numbers >= 0")


@dataclass(frozen=True)
class ReleasedStatistics:
    """The released (noisy) statistics of ``n`` augmented rows, in solver units.

    Attributes
    ----------
    gram : ndarray of shape (p, p)
        ``X'X / n``.
    xty : ndarray of shape (p,)
        ``X'y / n``.
    yty : float
        ``y'y / n``.
    n : int
    noise_std : float
        Standard deviation of a diagonal entry of the Gram's noise (public).
    """

    gram: np.ndarray
    xty: np.ndarray
    yty: float
    n: int
    noise_std: float

    def __add__(self, other):
        """The statistics of the union of two disjoint parts (post-processing)."""
        n = self.n + other.n
        a, b = self.n / n, other.n / n
        return ReleasedStatistics(a * self.gram + b * other.gram, a * self.xty + b * other.xty,
                                  a * self.yty + b * other.yty, n,
                                  math.hypot(a * self.noise_std, b * other.noise_std))


def _noise_level(bound, n, q, budget):
    """(Gaussian std or None, Laplace scale or None, std of a diagonal entry) of one release (public)."""
    if budget.pure:
        if math.isinf(budget.pure_epsilon):
            return 0.0, None, 0.0
        scale = second_moment_l1_sensitivity(bound, n, q) / budget.pure_epsilon
        return None, scale, math.sqrt(2.0) * scale
    if math.isinf(budget.mu):
        return 0.0, None, 0.0
    std = second_moment_sensitivity(bound, n) / budget.mu
    return std, None, std


def release_statistics(X, y, bound, label_bound, budget, rng):
    """Release the statistics of the rows ``[x, clip(y, label_bound)]``, each clipped to norm ``bound``.

    Clipping the augmented row scales ``x`` and ``y`` together, so a clipped row
    enters ``X'X`` and ``X'y`` with the same weight (a weighted least-squares
    row, not a distorted one). ``bound = inf`` (only without noise) clips nothing.

    Returns
    -------
    stats : ReleasedStatistics
    event : GaussianRelease or LaplaceRelease
    """
    n, p = X.shape
    y = np.clip(np.asarray(y, dtype=float), -label_bound, label_bound)
    A = np.hstack([np.asarray(X, dtype=float), y[:, None]])
    std, scale, diag_std = _noise_level(bound, n, p + 1, budget)
    if scale is not None:
        M, event = private_second_moment(A, bound, 0.0, random_state=rng, laplace_scale=scale)
    else:
        M, event = private_second_moment(A, bound if std > 0 else math.inf, std, random_state=rng)
    return ReleasedStatistics(M[:p, :p], M[:p, p].copy(), float(M[p, p]), n, diag_std), event


def privacy_ridge(stats, factor):
    """The public ridge added against the noise: ``factor * sqrt(2 p) * noise_std`` (0 without noise)."""
    p = stats.gram.shape[0]
    return float(factor) * math.sqrt(2.0 * p) * stats.noise_std


def ridge_solution(stats, penalty, ridge):
    """``(G + penalty + ridge I)^{-1} b`` for a released ``G``, ``b`` (post-processing; never raises).

    ``penalty`` is a vector (diagonal) or a matrix. The eigenvalues of the
    symmetric system are floored at ``ridge / 2`` (at ``1e-12`` times the mean
    diagonal when ``ridge = 0``, and at 1e-150), so every released matrix gives
    a solution; a non-finite one gives zero coefficients.
    """
    p = stats.gram.shape[0]
    M = stats.gram + (np.diag(penalty) if np.ndim(penalty) == 1 else penalty) + ridge * np.eye(p)
    M = 0.5 * (M + M.T)
    if not (np.all(np.isfinite(M)) and np.all(np.isfinite(stats.xty))):
        return np.zeros(p)
    try:
        values, vectors = np.linalg.eigh(M)
    except np.linalg.LinAlgError:  # pragma: no cover - LAPACK failure on a finite symmetric matrix
        return np.zeros(p)
    scale = max(float(np.mean(np.abs(np.diag(M)))), 1e-300)
    floor = 0.5 * ridge if ridge > 0 else 1e-12 * scale
    values = np.maximum(values, max(floor, 1e-150))
    with np.errstate(all="ignore"):
        w = vectors @ ((vectors.T @ stats.xty) / values)
    # A degenerate release (a zero matrix without noise) maps to the zero model.
    return w if np.all(np.isfinite(w)) else np.zeros(p)


def validation_loss(stats, w):
    """Half the mean squared error of ``w`` on released statistics (post-processing)."""
    return 0.5 * (stats.yty - 2.0 * float(w @ stats.xty) + float(w @ stats.gram @ w))


def validation_noise(stats, w):
    """Standard deviation of the noise of :func:`validation_loss` for a ``w`` independent of it (public).

    The Gaussian release has noise of standard deviation ``s`` on the diagonal
    and ``s / sqrt(2)`` off it; then ``Var(w'E w) = s^2 ||w||^4``,
    ``Var(w'e) = s^2 ||w||^2 / 2`` and the noise of ``y'y`` has variance
    ``s^2``, so the score's is ``s^2 (1 + ||w||^2)^2 / 4``. (The Laplace
    release's off-diagonal noise is larger by ``sqrt(2)``; the rule is then a
    slight under-estimate.)
    """
    return 0.5 * stats.noise_std * (1.0 + float(w @ w))


@register_solver
@dataclass(frozen=True)
class SufficientStatistics(Solver):
    """Ridge regression from one private release of ``X'X``, ``X'y`` and ``y'y`` (see the module docstring).

    Parameters
    ----------
    label_bound : float > 0, default=4.0
        Public clip of the standardised labels (target scales); not applied
        without noise.
    ridge_factor : float > 0, default=1.0
        The privacy ridge in units of the noise spectrum's edge ``sqrt(2 p) sigma``.
    alphas : tuple of float >= 0 or None, default=None
        Selection: multipliers of the problem's ridge to choose from on a
        validation part (the estimator's ``alpha`` is then the unit).
    validation_fraction : float in (0, 1), default=0.5
        Share of the rows in the validation part (selection only).
    ridge_multipliers : tuple of float > 0, default=(0.25, 0.5, 1.0)
        Selection: the privacy ridge factors tried with every ``alpha``, as
        multiples of ``ridge_factor`` (the noise is isotropic, a penalty in
        the original units is not, so the two are chosen together).
    clip_quantile : float in (0, 1), default=0.5
        The augmented rows ``[x, clip(y)]`` are clipped at ``clip_multiplier``
        times this private quantile of their norms (one exponential-mechanism
        release at the plan's quantile epsilon), at most ``sqrt(R^2 + B^2)``.
    clip_multiplier : float > 0, default=1.0
    score_margin : float >= 0, default=2.0
        Selection: ``alpha`` minimises the validation loss plus this many
        standard deviations of its noise (:func:`validation_noise`).
    """

    label_bound: float = LABEL_BOUND
    ridge_factor: float = 1.0
    alphas: tuple = None
    validation_fraction: float = 0.5
    ridge_multipliers: tuple = (0.25, 0.5, 1.0)
    clip_quantile: float = 0.5
    clip_multiplier: float = 1.0
    score_margin: float = 2.0

    name = "sufficient_statistics"
    family = "heavy_tail"
    capabilities = Capabilities(matrix_penalty=True, pure_dp=True, smooth_only=True)
    # Public ranges, so that no bound, ridge or margin can overflow or underflow after the reservation.
    _parameter_constraints = {
        "label_bound": [PUBLIC_CLIP],
        "ridge_factor": [_FACTOR],
        "alphas": [_GRID],
        "validation_fraction": [FRACTION],
        "ridge_multipliers": [Predicate(lambda v: POSITIVE_TUPLE.is_satisfied_by(v)
                                        and all(_FACTOR.is_satisfied_by(x) for x in v),
                                        "a non-empty tuple of numbers in [1e-6, 1e6]")],
        "clip_quantile": [FRACTION],
        "clip_multiplier": [_FACTOR],
        "score_margin": [Interval(numbers.Real, 0, 1e6, closed="both")],
    }

    def check(self, spec):
        super().check(spec)
        if not isinstance(spec.loss, SquaredLoss):
            name = getattr(spec.loss, "name", "?")
            raise ValueError(f"algorithm='sufficient_statistics' needs loss='squared' (the model follows from "
                             f"X'X and X'y only for the squared loss); got the {name} loss. Nothing was spent.")
        if spec.n_outputs != 1:
            raise ValueError("algorithm='sufficient_statistics' fits one output.")
        if self.alphas is not None and spec.n_samples < 4:
            raise ValueError("Selection over alphas needs at least 4 rows (two in each part).")

    def _one_release(self, budget):
        if budget.pure:
            return LaplaceRelease(1.0, 1.0 / budget.pure_epsilon) if math.isfinite(budget.pure_epsilon) \
                else GaussianRelease(1.0, 0.0)
        return GaussianRelease(1.0, 0.0 if math.isinf(budget.mu) else 1.0 / budget.mu)

    def n_quantiles(self, spec):
        return 1  # the clip of the augmented rows

    def plan(self, spec, budget):
        # With alphas, the run releases Parallel([one, one]) (two disjoint parts at the same
        # noise multiplier), which costs exactly one release: the plan states that cost as one
        # release, whose composition is much cheaper to calibrate.
        return Sequential([ExponentialMechanismRelease(budget.quantile_epsilon), self._one_release(budget)])

    def split(self, n, rng):
        """The validation and training rows: a seeded permutation (public rule, independent of the data)."""
        n_val = min(max(int(round(self.validation_fraction * n)), 2), n - 2)
        order = rng.permutation(n)
        return np.sort(order[:n_val]), np.sort(order[n_val:])

    def run(self, spec, problem, budget, rng):
        noisy = math.isfinite(budget.pure_epsilon) if budget.pure else math.isfinite(budget.mu)
        label_bound = self.label_bound if noisy else math.inf
        if noisy:
            upper = math.hypot(problem.row_bound, label_bound)
            norms = np.hypot(problem.norms, np.minimum(np.abs(problem.y), label_bound))
            median, q_event = private_clip(problem, self.clip_quantile, budget.quantile_epsilon, rng,
                                           values=norms, upper=upper)
            bound, released = min(upper, self.clip_multiplier * median), [q_event]
        else:
            bound, released = math.inf, []
        penalty = problem.penalty_matrix if problem.penalty_matrix is not None else problem.penalty
        X = np.asarray(problem.X)
        info = {"label_bound": label_bound, "clip": bound}
        if self.alphas is None:
            stats, event = release_statistics(X, problem.y, bound, label_bound, budget, rng)
            ridge = privacy_ridge(stats, self.ridge_factor)
            coef = ridge_solution(stats, penalty, ridge)
            return SolverResult(coef, Sequential([*released, event]),
                                {**info, "privacy_ridge": ridge, "noise_std": stats.noise_std})
        val, train = self.split(problem.n_samples, rng)
        s_val, ev_val = release_statistics(X[val], problem.y[val], bound, label_bound, budget, rng)
        s_train, ev_train = release_statistics(X[train], problem.y[train], bound, label_bound, budget, rng)
        factors = [self.ridge_factor * m for m in self.ridge_multipliers]
        scores = np.full((len(factors), len(self.alphas)), np.inf)
        upper = np.full_like(scores, np.inf)
        for i, factor in enumerate(factors):
            ridge_train = privacy_ridge(s_train, factor)
            for j, a in enumerate(self.alphas):
                w = ridge_solution(s_train, a * penalty, ridge_train)
                scores[i, j] = validation_loss(s_val, w)
                # The noise of a score grows with ||w||^2 (its standard deviation is about
                # noise_std (1 + ||w||^2) / 2), so the plain argmin favours the weakest
                # penalties by chance: choose by an upper bound of the score instead.
                upper[i, j] = scores[i, j] + self.score_margin * validation_noise(s_val, w)
        upper = np.where(np.isfinite(upper), upper, np.inf)
        i_best, best = np.unravel_index(int(np.argmin(upper)), upper.shape)
        full = s_val + s_train
        ridge = privacy_ridge(full, factors[i_best])
        coef = ridge_solution(full, self.alphas[best] * penalty, ridge)
        scores = scores[i_best]
        return SolverResult(coef, Sequential([*released, Parallel([ev_val, ev_train])]),
                            {**info, "privacy_ridge": ridge, "noise_std": full.noise_std,
                             "alpha_index": int(best), "ridge_factor": factors[i_best],
                             "validation_scores": scores, "n_validation": int(val.size)})
