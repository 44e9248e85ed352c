"""Private class prior and private calibration of a linear classifier's probabilities.

A private linear classifier ranks well long before its scores are on a
log-odds scale: clipped gradient descent with a few noisy steps stops early,
and its coefficients are shrunk far below the logistic solution's (breast
cancer at epsilon = 1: a coefficient norm 0.0017 against 13.4 without noise), so
a logistic link on its scores gives probabilities near the prior for every row.
Two releases fix the probabilities, both read the training rows only through
the released model's scores and the labels:

* :func:`private_class_counts` — the number of rows of every class: one vector
  release (replacing a row moves one count down and another up: L2
  sensitivity ``sqrt(2)``, L1 sensitivity 2). The prior it gives
  (:func:`prior_from_counts`) is what a model that failed the fit check
  predicts, the baseline of that check, and the source of
  ``class_weight="balanced"``.
* :func:`private_calibration` — a map ``logits = a * z / s + b`` of the model's
  scores ``z``, folded into the coefficients (:meth:`Calibration.fold`), so
  that ``predict_proba`` is the logistic (two classes) or softmax (more)
  model of the calibrated decision function, as in ``LogisticRegression``:

  1. ``s``, the released median of the score magnitudes (``|z|``, or the norm
     of the centred score vector), an exponential-mechanism quantile on a log
     scale over ``[U / 10^6, U]``, where ``U`` bounds the magnitudes from
     released values (the model's norm times the released row bound in the
     solver's units): a range of six decades, not of the 24 a range that knows
     nothing would need, which at small ``epsilon * n`` the quantile's base
     measure would spread its draw over; the normalised scores ``u = z / s``
     are then clipped to ``[-c, c]`` (to norm ``c`` for several classes) with
     the public :data:`SCORE_CLIP`, so every row's influence below is bounded;
  2. two classes (Platt scaling): a histogram of ``(bin of u, label)`` over
     public bins of ``[-c, c]`` (:func:`histogram_bins`, :func:`histogram_edges`;
     adjacent sparse bins are pooled after the release, never into fewer than
     two pools, and a negative slope is set to 0) is released once
     (replacing a row moves one unit of count between two cells: L2
     sensitivity ``sqrt(2)``), and ``(a, b)`` solve the Platt score equations
     of the noisy histogram, which are linear in the counts and so unbiased
     under the noise, each pool's equation weighted by the share of its
     variance that is the rows' and not the noise's (so that the far tails,
     nearly all noise, do not pull the slope), with a ridge towards the prior
     whose weight is a small fraction of one cell's noise
     (:data:`PLATT_RIDGE_CELLS`): post-processing.
     (Alternating bisections of ``a`` and ``b`` were tried instead: the two
     are strongly coupled on imbalanced tables, and one pass of each stopped
     at a fifth of the best slope.)
  3. more classes (temperature scaling, ``b = 0``): every row's derivative of
     its log loss in ``a``, ``t_i(a) = sum_k p_ik(a) u_ik - u_i,y_i``, is
     increasing in ``a`` (its derivative is a variance), and so is its clip to
     ``[-tau, tau]`` (:data:`TERM_CLIP`); the mean of the clipped terms has
     sensitivity ``2 tau / n``, and :data:`BISECTION_STEPS` noisy releases of
     its sign bisect ``a`` on a public geometric range. The root is the
     minimiser of a log loss whose rows' slopes in ``a`` are capped at
     ``tau`` (a Huber-like loss in ``a``): the clip costs a little bias and
     divides the noise by ``2 c / tau``. A step raises ``a`` only when the
     released derivative is below :data:`BISECTION_CONFIDENCE` noise standard
     deviations under 0: an overconfident temperature can cost many nats a
     row, an underconfident one at most ``log k``, so where the noise cannot
     tell, the bisection goes down (on small tables it ends near uniform
     probabilities).

  Both fits minimise the mean log loss along the released direction, plus, when
  the caller gives it, a ridge on the calibrated coefficients
  ``(penalty / 2) (a / s)^2`` (``penalty = alpha ||W||^2``): the calibration is
  then a line search of the penalised logistic objective, and at its exact
  minimiser (epsilon = inf with the logistic loss) it returns ``a = s``,
  ``b = 0``, the model itself, instead of the more confident refit a
  training-set Platt scaling would give (wine: a test log loss 4.2 times
  LogisticRegression's).
  With class weights every row's term is multiplied by its weight and the
  sensitivities by the largest weight. Without noise (epsilon = inf) the
  scores and terms are not clipped and the bisections run to convergence:
  ``(a, b)`` is the exact minimiser, the limit of the private fits.

The budget of each part is a share of the fit's (see
:mod:`~skdp.linear_model._budget`); ``budget`` arguments below are
``("gaussian", mu)`` or ``("pure", epsilon)``.
"""

import math
from dataclasses import dataclass

import numpy as np
from scipy import optimize, special, stats

from ..accounting import ApproxDPRelease, GaussianRelease, Sequential
from ..mechanisms import budgeted_release, private_quantile
from ._rows import ChunkedRows, RowsInMemory

__all__ = ["Calibration", "ScoredRows", "private_class_counts", "prior_from_counts", "prior_share", "private_calibration",
           "SCORE_CLIP",
           "BISECTION_STEPS", "histogram_bins", "histogram_edges"]

# Normalised scores u = z / s are clipped to [-SCORE_CLIP, SCORE_CLIP] (two classes) or to that norm
# (more): s is the median magnitude, so only rows four times more extreme than the median are clipped.
SCORE_CLIP = 4.0
# Public range of the score scale s (a log-scale quantile).
SCORE_SCALE_RANGE = (1e-12, 1e12)
# Temperature range of the multiclass bisection (logits per unit of normalised score).
TEMPERATURE_RANGE = (1.0 / 64.0, 64.0)
BISECTION_STEPS = 8
# Each row's derivative term of the temperature bisection is clipped to [-TERM_CLIP, TERM_CLIP].
TERM_CLIP = 1.0
# A bisection step raises the temperature only when the released derivative is this many noise standard
# deviations below 0. Test log loss x LogisticRegression (8 splits) with 2 / 1 / 0.5: digits at epsilon 1
# 5.66 / 4.49-5.01 / 5.01, at epsilon 2 3.57 / 3.29 / 3.44, at epsilon 4 3.98 / 3.81; iris at epsilon 4
# 6.17 / 5.65 / 7.38; wine at epsilon 4 9.72 / 7.38 / 7.53 (accuracy unchanged: the temperature keeps
# the ranking).
BISECTION_CONFIDENCE = 1.0
# The score scale's quantile range spans this many decades below the public bound of the magnitudes.
SCORE_SCALE_DECADES = 6.0
# Ridge of the two-class fit towards the prior (a = 0, b = the prior's logit), in rows: this fraction of
# one histogram cell's noise standard deviation. It steadies the fit where the noise swamps the rows
# (small tables) and vanishes relative to them on large ones. A fixed 1e-3 per row (6 rows at n = 6000)
# shrank the slope by a fifth even without noise (a sharp map: the shrinkage grows with the slope) and
# cost 2-5% of test log loss on every real table at epsilon 0.5 to 4 (10 splits: rare binary at
# epsilon 1 1.21 -> 1.16 x LogisticRegression, counts 1.14 -> 1.10); with no ridge at all, breast
# cancer at epsilon 0.5 had splits at 33 x LogisticRegression's log loss (18 with the fixed ridge,
# 15 with this one).
PLATT_RIDGE_CELLS = 0.03
# The standard deviation of a centred normal whose magnitude has median 1 (1 / Phi^-1(3/4)).
MEDIAN_TO_SIGMA = 1.482602218505602
# Histogram bins are pooled until each pool's released total is this many noise standard deviations.
POOL_SIGMAS = 2.0
# Bisection steps without noise.
EXACT_STEPS = 60
# A class's released count is floored at this many rows before the prior is formed.
MIN_CLASS_COUNT = 1.0
# Public log-scale jitter of the score magnitudes before their quantile (ties, e.g. the few distinct
# scores of a one-hot table, would otherwise leave only zero-length intervals; see private_quantile).
_JITTER = 0.05


def _exact_event(budget):
    """The event of a release without noise (epsilon = inf) in the budget's kind."""
    return GaussianRelease(1.0, 0.0) if budget[0] == "gaussian" else ApproxDPRelease(math.inf, 0.0)


def _release(value, sensitivity_l2, sensitivity_l1, budget, rng):
    """``value`` plus Gaussian (L2 sensitivity) or Laplace (L1 sensitivity, per coordinate) noise."""
    return budgeted_release(value, budget, sensitivity_l2, l1_sensitivity=sensitivity_l1, random_state=rng)


def private_class_counts(labels, n_classes, budget, rng, weights=None):
    """The released number of rows of every class (L2 sensitivity ``sqrt(2)``, L1 sensitivity 2).

    Parameters
    ----------
    labels : ndarray of int of shape (n_samples,), or rows
        Class indices into the public list of classes, or rows whose ``y`` they
        are (:class:`~skdp.linear_model._rows.ChunkedRows`: one pass of per-chunk
        counts).
    n_classes : int
    budget : ("gaussian", mu) or ("pure", epsilon)
    rng : numpy Generator
    weights : None
        Counts are never weighted (they define the weights of ``"balanced"``).

    Returns
    -------
    counts : ndarray of shape (n_classes,)
    event : PrivacyEvent
    """
    rows = labels if isinstance(labels, (ChunkedRows, RowsInMemory)) else RowsInMemory(None, labels)
    counts = rows.sum(_class_counts, n_classes)
    return _release(counts, math.sqrt(2.0), 2.0, budget, rng)


def _class_counts(X, labels, n_classes):
    """The number of rows of every class among ``labels`` (one chunk's, or all)."""
    return np.bincount(np.asarray(labels, dtype=int), minlength=n_classes).astype(float)


def prior_share(n_samples, epsilon):
    """Share of a classifier's budget for the class counts (public rule).

    ``min(0.35, max(0.02, 40 / (epsilon n)))``.

    On small tables the fit check often falls back to the prior, whose most
    frequent class must then be right: the counts' noise (``sqrt(2) / mu`` rows)
    has to stay below the gaps between the class sizes.

    Examples
    --------
    >>> from skdp.linear_model._calibration import prior_share
    >>> prior_share(4000, 1.0), prior_share(133, 1.0)
    (0.02, 0.300...)
    """
    if math.isinf(epsilon):
        return 0.02
    return min(0.35, max(0.02, 40.0 / (epsilon * n_samples)))


def prior_from_counts(counts):
    """Class frequencies from released counts, each floored at :data:`MIN_CLASS_COUNT` rows."""
    floored = np.maximum(np.asarray(counts, dtype=float), MIN_CLASS_COUNT)
    return floored / floored.sum()


@dataclass(frozen=True)
class Calibration:
    """``logits = slope * z + offset`` for the model's scores ``z`` (``slope = a / s``).

    Attributes
    ----------
    slope : float
        Logits per unit of the model's score (``a / s``; 0 for a constant model).
    offset : float
        Added to the logit of the second class (two classes); 0 otherwise.
    temperature : float
        ``a``, logits per unit of normalised score.
    score_scale : float
        ``s``, the released median score magnitude.
    bins : int
        Histogram bins of the two-class fit (0 for the exact fit or several classes).
    """

    slope: float
    offset: float
    temperature: float
    score_scale: float
    bins: int = 0

    def fold(self, coef, intercept):
        """The calibrated linear model: ``slope * (coef, intercept)`` plus ``offset`` on the intercept."""
        return self.slope * np.asarray(coef, dtype=float), self.slope * np.asarray(intercept, dtype=float) \
            + self.offset

    def as_dict(self):
        return {"slope": float(self.slope), "offset": float(self.offset),
                "temperature": float(self.temperature), "score_scale": float(self.score_scale),
                "bins": int(self.bins)}


class ScoredRows:
    """A released model's scores on the training rows, with the rows' labels and weights, held in memory.

    The calibration and the fit check read the rows only through sums of per-row
    terms of ``(scores, labels, weights)`` and the per-row values of a quantile:
    :meth:`sum` and :meth:`values` apply a function of one chunk to all the rows
    at once (:class:`~skdp.linear_model._chunked_classifier.ChunkedScores` applies
    the same function to every chunk of rows on a cluster and adds the results).

    Examples
    --------
    >>> import numpy as np
    >>> from skdp.linear_model._calibration import ScoredRows
    >>> rows = ScoredRows(np.array([0.5, -1.0, 2.0]), np.array([1, 0, 1]))
    >>> rows.sum(lambda scores, labels, weights: np.array([np.sum(weights * labels)]))
    array([2.])
    """

    def __init__(self, scores, labels, weights=None):
        self.scores = np.asarray(scores, dtype=float)
        self.labels = np.asarray(labels, dtype=int)
        self.n_samples = self.labels.shape[0]
        self.ndim = self.scores.ndim
        self.weights = np.ones(self.n_samples) if weights is None else np.asarray(weights, dtype=float)

    def sum(self, func, *args):
        return func(self.scores, self.labels, self.weights, *args)

    values = sum


def _magnitudes(scores):
    if scores.ndim == 1:
        return np.abs(scores)
    return np.linalg.norm(scores - scores.mean(axis=1, keepdims=True), axis=1)


def _normalised(scores, scale, clip):
    """Scores divided by the released scale, clipped per row (non-finite rows become 0: a per-row map)."""
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        if scores.ndim == 1:
            u = scores / scale
            u = np.where(np.isfinite(u), np.clip(u, -clip, clip), 0.0)
            return u
        centred = scores - scores.mean(axis=1, keepdims=True)
        u = centred / scale
        ok = np.isfinite(u).all(axis=1)
        u = np.where(ok[:, None], u, 0.0)
        if math.isfinite(clip):
            norms = np.linalg.norm(u, axis=1)
            u *= np.minimum(1.0, clip / np.maximum(norms, 1e-300))[:, None]
        return u


def _magnitude_values(scores, labels, weights):
    """The per-row score magnitudes whose median is the score scale (a non-finite one is ``inf``)."""
    with np.errstate(invalid="ignore", over="ignore"):
        magnitudes = _magnitudes(scores)
    return np.where(np.isfinite(magnitudes), magnitudes, np.inf)


def _histogram_counts(scores, labels, weights, scale, clip, edges):
    """The weighted counts of ``(label, bin of the normalised score)`` over the public ``edges`` (2 x bins)."""
    bins = edges.shape[0] - 1
    u = _normalised(scores, scale, clip)
    index = np.clip(np.searchsorted(edges, u, side="right") - 1, 0, bins - 1)
    counts = np.zeros((2, bins))
    np.add.at(counts, (labels, index), weights)
    return counts


def _temperature_term_sum(scores, labels, weights, scale, clip, a, term_clip):
    """The sum of the rows' clipped, weighted derivatives of the log loss in the temperature ``a``."""
    u = _normalised(scores, scale, clip)
    return np.array([np.sum(weights * np.clip(_temperature_derivative(u, labels, a, 1.0), -term_clip, term_clip))])


def _temperature_derivative(u, labels, a, weights):
    """Per-row ``sum_k p_k(a) u_k - u_y`` times the row's weight (the derivative of the log loss in ``a``)."""
    p = special.softmax(a * u, axis=1)
    terms = (p * u).sum(axis=1) - u[np.arange(u.shape[0]), labels]
    return terms * weights


def private_calibration(scores, labels, prior, budget, quantile_epsilon, rng, *, weights=None, max_weight=1.0,
                        score_bound=None, penalty=0.0):
    """Release the calibration map of a model's training-row ``scores`` (see the module docstring).

    Parameters
    ----------
    scores : ndarray of shape (n_samples,) or (n_samples, n_classes), or scored rows
        The released model's decision values on the training rows, or the rows
        with their scores, labels and weights (:class:`ScoredRows`, or
        :class:`~skdp.linear_model._chunked_classifier.ChunkedScores` for rows on
        a cluster; ``labels`` and ``weights`` are then unused).
    labels : ndarray of int of shape (n_samples,)
    prior : ndarray of shape (n_classes,)
        The released class prior (the anchor of the Platt ridge).
    budget : ("gaussian", mu) or ("pure", epsilon)
        Budget of the histogram (two classes) or of all the bisection steps.
    quantile_epsilon : float
        Epsilon of the score-scale quantile (``inf``: the exact median).
    rng : numpy Generator
    weights : ndarray of shape (n_samples,), optional
        Per-row weights (class weights of the rows' labels), at most ``max_weight``.
    max_weight : float, default=1.0
    score_bound : float, optional
        A bound of the score magnitudes from public or released values; the
        scale's range is its last :data:`SCORE_SCALE_DECADES` decades (None:
        :data:`SCORE_SCALE_RANGE`).
    penalty : float, default=0.0
        ``alpha ||W||^2`` of the released model (public): the calibrated
        model's ridge is ``(penalty / 2) (a / s)^2``.

    Returns
    -------
    calibration : Calibration
    event : PrivacyEvent
    """
    rows = scores if hasattr(scores, "values") and hasattr(scores, "n_samples") else ScoredRows(scores, labels,
                                                                                                 weights)
    exact = math.isinf(budget[1])
    magnitudes = rows.values(_magnitude_values)
    scale, scale_event = private_quantile(magnitudes, 0.5, quantile_epsilon, _scale_range(score_bound),
                                          scale="log", jitter=0.0 if exact else _JITTER, random_state=rng)
    scale = float(scale)
    clip = math.inf if exact else SCORE_CLIP
    ridge = float(penalty) / scale**2 if scale > 0 else 0.0  # the penalty in a, per unit of a^2 / 2
    if rows.ndim == 1:
        temperature, offset, bins, event = _platt_rows(rows, scale, clip, prior, budget, rng, max_weight, exact,
                                                       ridge)
    else:
        temperature, event = _temperature(rows, scale, clip, budget, rng, max_weight, exact, ridge)
        offset, bins = 0.0, 0
    calibration = Calibration(temperature / scale, offset, temperature, scale, bins)
    return calibration, Sequential([scale_event, event])


def _scale_range(score_bound):
    """The public range of the score scale: the last decades below ``score_bound`` (a released value)."""
    if score_bound is None or not (SCORE_SCALE_RANGE[0] * 10**SCORE_SCALE_DECADES < score_bound < math.inf):
        return SCORE_SCALE_RANGE
    return (score_bound * 10.0**-SCORE_SCALE_DECADES, float(score_bound))


def _step_budget(budget, steps):
    """The budget of each of ``steps`` releases that together spend ``budget``."""
    kind, level = budget
    return (kind, level / math.sqrt(steps)) if kind == "gaussian" else (kind, level / steps)


def _noise_std(sensitivity, budget):
    """Standard deviation of the noise of one release of ``sensitivity`` at ``budget`` (0 without noise)."""
    kind, level = budget
    if math.isinf(level):
        return 0.0
    return sensitivity / level * (1.0 if kind == "gaussian" else math.sqrt(2.0))


def _bisect(mean_term, lo, hi, steps, sensitivity, budget, rng, *, geometric, margin=0.0, public_slope=0.0):
    """Bisect the root of an increasing function of one parameter from noisy releases of its value.

    ``mean_term(t)`` is the mean over the rows of per-row terms whose mean has
    replace-one sensitivity ``sensitivity``; each of the ``steps`` releases spends
    its share of ``budget``. The root is taken to be above ``t`` only when the
    released value (plus the public ``public_slope * t``) is below ``-margin``.
    Returns the midpoint of the last interval and the events.
    """
    step_budget = _step_budget(budget, steps)
    events = []
    for _ in range(steps):
        mid = 0.5 * (lo + hi)
        t = math.exp(mid) if geometric else mid
        noisy, event = _release(mean_term(t), sensitivity, sensitivity, step_budget, rng)
        events.append(event)
        if float(noisy) + public_slope * t < -margin:  # still falling here: the root is above
            lo = mid
        else:
            hi = mid
    mid = 0.5 * (lo + hi)
    return (math.exp(mid) if geometric else mid), events


def histogram_bins(n_samples, budget):
    """Bins of the two-class histogram (public): about ``n mu / 32`` (``n epsilon / 32``), between 4 and 32.

    Each cell then expects several noise standard deviations (``sqrt(2) / mu``
    per cell) of rows when the rows spread over the bins; on the tests' tables
    of 8000 rows at epsilon = 1 (14 bins) the fitted Platt maps came closer to
    the best ones than with 32 bins or 4.
    """
    level = budget[1]
    if math.isinf(level):
        return 0
    return int(min(32, max(4, math.floor(n_samples * level / 32.0))))


def _platt_equations(centres, positives, totals, ridge, penalty, anchor, max_iter=100):
    """``(a, b)`` solving the penalised Platt score equations (Newton's method on the estimating equations).

    The root of ``sum_m [totals_m expit(a m + b) - positives_m] (m, 1) + penalty (a, 0)``
    ``+ ridge ((a, b) - anchor)`` (per row). The Jacobian uses the totals
    clipped at 0, so each step is a descent direction of a convex loss; steps
    are capped.
    """
    theta = np.array(anchor, dtype=float)
    design = np.column_stack([centres, np.ones_like(centres)])
    lam = np.diag([ridge + penalty, ridge])
    for _ in range(max_iter):
        p = special.expit(design @ theta)
        grad = design.T @ (totals * p - positives) + lam @ theta - ridge * np.asarray(anchor)
        hess = (design * (np.maximum(totals, 0.0) * p * (1.0 - p))[:, None]).T @ design + lam
        step = np.linalg.solve(hess, grad)
        length = float(np.linalg.norm(step))
        if length > 4.0:  # a full Newton step on a logistic loss can overshoot far from the root
            step *= 4.0 / length
        theta = theta - step
        if length < 1e-12:
            break
    return float(theta[0]), float(theta[1])


def _weighted_platt_equations(centres, positives, totals, cells, noise_var, ridge, anchor, start):
    """``(a, b)`` solving the Platt equations with noise-aware weights, or None when no root is found.

    The root of ``sum_m w_m [totals_m expit(a m + b) - positives_m] (m, 1)``
    ``+ ridge ((a, b) - anchor)`` with
    ``w_m = v_m / (v_m + cells_m noise_var ((1 - p_m)^2 + p_m^2))``,
    ``v_m = totals_m p_m (1 - p_m)``: the share of the pool's residual variance
    that comes from its rows rather than from the noise of
    ``positives_m - p_m totals_m`` (``noise_var``: one cell's noise variance in
    the units of the counts; ``cells``: the cells of every pool). Any fixed
    weights leave the equations unbiased when the calibration is logistic;
    these keep the noise of the far tails, where nearly no row of one class
    lies and the noise has the largest lever, from pulling the slope. The
    weights move with ``(a, b)``, so the root is found by a hybrid Powell
    solver (finite-difference Jacobian) from ``start``.
    """
    design = np.column_stack([centres, np.ones_like(centres)])
    clipped = np.maximum(totals, 0.0)
    anchor = np.asarray(anchor, dtype=float)
    # Scaled to order one: the equations are per row and of the size of the noise variance.
    scale = 1.0 / max(float(np.sum(clipped)) * 0.25, 1e-300)

    def equations(theta):
        p = special.expit(design @ theta)
        rows = clipped * p * (1.0 - p)
        weight = rows / np.maximum(rows + cells * noise_var * ((1.0 - p) ** 2 + p**2), 1e-300)
        return scale * (design.T @ (weight * (totals * p - positives)) + ridge * (theta - anchor))

    # From the given start, then from a twice steeper one and from the anchor (the clipped fit's slope
    # is biased low, and the solver can stall far from the root).
    for first in (np.asarray(start, dtype=float), 2.0 * np.asarray(start, dtype=float), anchor):
        try:  # post-processing after the reservation: a solver failure means "no root", never an error
            with np.errstate(all="ignore"):
                result = optimize.root(equations, first, method="hybr")
        except (ValueError, ArithmeticError, np.linalg.LinAlgError):
            continue
        theta = result.x
        if result.success and np.all(np.isfinite(theta)) and np.linalg.norm(equations(theta)) <= 1e-8:
            return float(theta[0]), float(theta[1])
    return None


def _platt(u, labels, prior, budget, rng, weights, max_weight, exact, penalty):
    """Platt scaling ``expit(a u + b)`` of normalised, clipped scores ``u`` held in memory."""
    return _platt_rows(ScoredRows(u, labels, weights), 1.0, math.inf, prior, budget, rng, max_weight, exact,
                       penalty)


def _platt_rows(rows, scale, clip, prior, budget, rng, max_weight, exact, penalty):
    """Platt scaling ``expit(a u + b)`` from one released histogram of ``(bin of u, label)``.

    ``u`` are the rows' scores normalised by the released ``scale`` and clipped
    at ``clip``. Without noise the scores of every row are read (rows in memory
    only: the chunked fit refuses ``epsilon = inf`` before anything is spent).
    """
    n = rows.n_samples
    anchor = (0.0, float(np.log(prior[1] / prior[0])))
    if exact:
        u, labels, weights = _normalised(rows.scores, scale, clip), rows.labels, rows.weights
        positives = np.where(labels == 1, weights, 0.0) / n
        a, b = _platt_equations(u, positives, weights / n, 1e-9, penalty, anchor)
        return a, b, 0, _exact_event(budget)
    bins = histogram_bins(n, budget)
    edges = histogram_edges(bins)
    counts = rows.sum(_histogram_counts, scale, clip, edges)  # one pass on chunked rows
    noisy, event = _release(counts.ravel(), math.sqrt(2.0) * max_weight, 2.0 * max_weight, budget, rng)
    cell_std = _noise_std(math.sqrt(2.0) * max_weight, budget)
    centres, positives, totals, cells = _pooled(noisy.reshape(2, bins), 0.5 * (edges[:-1] + edges[1:]),
                                                cell_std)
    ridge = PLATT_RIDGE_CELLS * cell_std / n
    # The counts as released (unbiased), each pool weighted by how much of it is rows rather than noise.
    # Measured against the unweighted equations on counts clipped at 0 (10 splits, epsilon = 1): the
    # slope's mean over 200 noise draws on one model's scores 4.7 -> 6.5 (6.8 without noise); test log
    # loss x LogisticRegression: counts 1.10 -> 1.06, rare binary 1.16 -> 1.06, one-hot 50 1.20 -> 1.17.
    # Started from (and, when no root is found, replaced by: a public rule on released values) the
    # unweighted equations on the counts clipped at 0, whose loss is convex and bounded below.
    pos, neg = np.maximum(positives, 0.0), np.maximum(totals - positives, 0.0)
    start = _platt_equations(centres, pos / n, (pos + neg) / n, ridge, penalty, anchor)
    fit = _weighted_platt_equations(centres, positives / n, totals / n, cells, (cell_std / n) ** 2,
                                    ridge, anchor, start) if penalty == 0.0 else None
    a, b = start if fit is None else fit
    # The map never reverses the released model's ranking (a public rule on released values): a
    # negative slope is noise, and the flat map at the prior is then the honest answer.
    return max(a, 0.0), b, bins, event


def histogram_edges(bins):
    """Public bin edges of the normalised scores: equal-probability bins of a normal with median magnitude 1.

    The scale ``s`` is the released median magnitude, so about half of the rows
    have ``|u| <= 1``. Equal-width bins of ``[-c, c]`` put nearly every row into
    the two central bins when there are few bins (small tables), and pooling
    then merged everything into one pool: the slope was lost. These edges (the
    quantiles of ``N(0, 1.4826^2)``, whose magnitude has median 1, with the end
    edges at ``-c`` and ``c``) spread the rows of a centred score distribution
    about evenly over the bins at any bin count.
    """
    inner = stats.norm.ppf(np.arange(1, bins) / bins) * MEDIAN_TO_SIGMA
    return np.concatenate([[-SCORE_CLIP], np.clip(inner, -SCORE_CLIP, SCORE_CLIP), [SCORE_CLIP]])


def _pooled(noisy, centres, cell_std):
    """Adjacent bins pooled until each pool's released total is :data:`POOL_SIGMAS` noise deviations.

    Post-processing of the released histogram: sparse bins (the rare class's far
    tail) hold mostly noise, and a pool of ``k`` cells has ``sqrt(k)`` times one
    cell's noise but ``k`` times its rows. Within a pool the counts are summed
    (not clipped: a class count of a tail pool may be negative), and the centre
    is the released-count weighted mean of the bins' centres. Returns the
    centres, the positives, the totals and the number of cells of every pool.
    """
    totals = noisy.sum(axis=0)
    pools, current = [], []
    for j in range(totals.shape[0]):
        current.append(j)
        if totals[current].sum() >= POOL_SIGMAS * cell_std * math.sqrt(2.0 * len(current)):
            pools.append(current)
            current = []
    if current:
        if pools:
            pools[-1] = pools[-1] + current
        else:
            pools.append(current)
    if len(pools) == 1 and totals.shape[0] > 1:
        # One pool cannot identify a slope: split it at the middle bin (a public rule).
        middle = totals.shape[0] // 2
        pools = [list(range(middle)), list(range(middle, totals.shape[0]))]
    pos = np.array([float(noisy[1, pool].sum()) for pool in pools])
    neg = np.array([float(noisy[0, pool].sum()) for pool in pools])
    weight = [np.maximum(totals[pool], 0.0) for pool in pools]
    mids = np.array([float(np.average(centres[pool], weights=w)) if w.sum() > 0 else float(centres[pool].mean())
                     for pool, w in zip(pools, weight)])
    return mids, pos, pos + neg, np.array([len(pool) for pool in pools], dtype=float)


def _temperature(rows, scale, score_clip, budget, rng, max_weight, exact, penalty):
    """Temperature scaling ``softmax(a u)`` by a bisection of ``a`` (each step one pass on chunked rows)."""
    n = rows.n_samples
    steps = EXACT_STEPS if exact else BISECTION_STEPS
    clip = math.inf if exact else TERM_CLIP

    def term(a):
        return float(rows.sum(_temperature_term_sum, scale, score_clip, a, clip)[0]) / n

    sensitivity = 2.0 * TERM_CLIP * max_weight / n
    margin = BISECTION_CONFIDENCE * _noise_std(sensitivity, _step_budget(budget, steps))
    lo, hi = (math.log(t) for t in TEMPERATURE_RANGE)
    a, events = _bisect(term, lo, hi, steps, sensitivity, budget, rng, geometric=True, margin=margin,
                        public_slope=penalty)
    return a, Sequential(events)
