"""Candidate models from one private fit, and one private draw among them.

``DPRegularizationTuner(method="path")`` spends most of its budget on one fit of
the estimator (at its own ``alpha``) and derives every candidate from the
released model, so tuning does not divide the budget among candidate fits:

1. **Candidates (post-processing).** In the standardised feature units of the
   fit's released scaling (coefficients times the released feature scales, a
   robust private scale per column, with the target in its own units),
   candidate ``k`` is the proximal map of the estimator's elastic-net penalty
   at strength ``lambda_k`` applied to the released coefficients ``w``::

       w_k = soft_threshold(w, lambda_k * l1_ratio) / (1 + lambda_k * (1 - l1_ratio))

   Its intercept keeps the prediction at the released feature centres, so only
   the slopes move. For a Lasso fit at ``alpha = 0`` of a design that is
   orthonormal in these units, the candidate is the Lasso at ``lambda_k`` (in
   these units, not ``alpha``'s: the strengths are reported apart). The
   strengths, a fixed number of them so that their count is public, form a
   geometric path below the strength that zeroes every coefficient, as
   ``LassoCV`` starts from its ``alpha_max`` (read from the released
   coefficients: post-processing).
2. **Choice (one exponential-mechanism draw).** Row ``i``'s score of
   candidate ``k`` is the change of its squared residual against the fitted
   model, in released target scales and clipped to ``[-SCORE_CLIP,
   SCORE_CLIP]`` (a per-record map)::

       s_ik = clip(((y_i - p_ik)^2 - (y_i - p_i0)^2) / s_y^2, -c, c)

   The fitted model itself is candidate 0 with the score 0 on every row and
   a public head start: its utility is ``KEEP_MARGIN`` Gumbel scales
   (``4 c / epsilon_s``) instead of 0. Replacing one row changes each
   candidate's summed score by at most ``2 c`` (the fitted model's by 0), so
   the utility ``u_k = -sum_i s_ik`` has sensitivity ``2 c``, and one index
   is drawn with probability proportional to ``exp(epsilon_s u_k / (4 c))``:
   the exponential mechanism,
   ``epsilon_s``-DP and ``epsilon_s^2 / 8``-zCDP (bounded range), whatever the
   number of candidates (a constant utility of one candidate changes
   nothing in that argument). Only the index is released. The head start
   keeps the fitted model unless a candidate's gain is well above the noise:
   where every candidate's gain is small the draw would otherwise be close to
   uniform over the candidates, and the strong ones would then cost accuracy.
   Scoring changes rather than the losses themselves is what makes this
   cheap: a squared residual is
   bounded only by the clip, while the difference between two nearby models
   is small on every row, so a small clip biases little, and the noise does
   not grow with ``n`` while the utility gaps (``n`` times the mean change)
   do.

The scores are computed on the rows the model was fitted on. The model's
noise is independent of the rows, so for ``n`` well above the number of
features the training and test changes agree up to the sampling error of
the fit; with few rows they favour the unshrunk model (it is closer to the
rows' own least-squares fit), which errs towards the fitted model.
"""

import math

import numpy as np

from ..mechanisms import exponential_mechanism

__all__ = ["FLOOR_MARGIN", "FLOOR_SCORE_SHARE", "KEEP_MARGIN", "PATH_MIN_EPSILON_ROWS", "PATH_SIZE", "SCORE_CLIP", "SCORE_SHARE",
           "ProximalPath",
           "choose", "score_changes", "score_sensitivity"]

# Strengths on the default path (besides the fitted model itself).
PATH_SIZE = 12
# The path spans this many decades below the strength that zeroes every coefficient (LassoCV's eps = 1e-3).
PATH_DECADES = 3.0
# Ridge-only penalties have no such strength: their path is this range of lambda (shrinkage 1/(1 + lambda)
# from 0.99 to 0.09).
RIDGE_PATH = (1e-2, 10.0)
# Per-row clip of the change of the squared residual, in squared released target scales. On the Lasso task at
# n = 20000 the typical change between the fitted model and a useful candidate is 0.1-0.4, so 1.0 keeps most
# rows unclipped; a clip of 0.5 gave larger utility gaps in noise units but chose weaker thresholds.
SCORE_CLIP = 1.0
# The fitted model's head start in the draw, in Gumbel scales: with 12 candidates of no gain, one of them
# wins with probability about 12 exp(-5) = 8%.
KEEP_MARGIN = 5.0
# Share of the zero-concentrated budget of the "noise_floor" draw (two candidates, no head start): on the Lasso
# task at n = 2000 and epsilon 1 the thresholded model's summed training gain is about 180 utility units, about 4
# Gumbel scales at this share; a correlated dense task's loss from thresholding is several times larger.
FLOOR_SCORE_SHARE = 0.05
# Head start of the candidate the noise-floor test favours (the thresholded model if the coefficients below the
# floor look like noise, else the fitted model), in Gumbel scales.
FLOOR_MARGIN = 3.0
# "auto" runs the path for the Lasso form from this epsilon * n_samples on. Below it the draw's utility gaps
# (which grow with n) are too close to the noise to move the choice off the fitted model, and the share the
# draw takes from the fit is a pure loss (benchmarks/tuning/results/path.md: the Lasso task at n = 2000 and
# epsilon 1 loses, n = 20000 wins on every seed).
PATH_MIN_EPSILON_ROWS = 10_000
# Share of the zero-concentrated budget spent on the choice; the fit gets the rest.
SCORE_SHARE = 0.1


def score_sensitivity(clip=SCORE_CLIP):
    """Replace-one sensitivity of every candidate's summed clipped score (the utility)."""
    return 2.0 * clip


def _soft_threshold(w, threshold):
    return np.sign(w) * np.maximum(np.abs(w) - threshold, 0.0)


def _broadcast(value, d, default):
    if value is None:
        return np.full(d, default)
    arr = np.broadcast_to(np.asarray(value, dtype=float), (d,)).copy()
    arr[~np.isfinite(arr)] = default
    return arr


class ProximalPath:
    """The proximal candidates of one fitted linear model (post-processing of its release).

    Parameters
    ----------
    coef : ndarray of shape (n_features,)
        The released coefficients (input units).
    intercept : float
    scaling : dict
        The fit's released ``scaling_``: its ``feature_center`` and
        ``feature_scale`` (arrays, scalars or None) set the standardised units.
    l1_ratio : float in [0, 1]
        The estimator's elastic-net mixing: 1 is the Lasso's soft threshold,
        0 the ridge's uniform shrinkage.
    strengths : array-like of float >= 0 or None
        The ``lambda_k``; None is the default path (``PATH_SIZE`` values).

    Examples
    --------
    >>> import numpy as np
    >>> path = ProximalPath(np.array([2.0, -0.5, 0.1]), 1.0, {"feature_center": np.zeros(3),
    ...                     "feature_scale": np.ones(3)}, l1_ratio=1.0, strengths=[0.2, 1.0])
    >>> path.coefs()
    array([[ 1.8, -0.3,  0. ],
           [ 1. , -0. ,  0. ]])
    """

    def __init__(self, coef, intercept, scaling, *, l1_ratio, strengths=None):
        coef = np.asarray(coef, dtype=float).ravel()
        d = coef.size
        self.coef = np.where(np.isfinite(coef), coef, 0.0)
        self.intercept = float(intercept) if np.isfinite(intercept) else 0.0
        scale = _broadcast(scaling.get("feature_scale"), d, 1.0)
        self.scale = np.where(scale > 0, scale, 1.0)
        self.center = _broadcast(scaling.get("feature_center"), d, 0.0)
        self.l1_ratio = float(l1_ratio)
        standardised = self.coef * self.scale
        if strengths is None:
            if self.l1_ratio > 0:
                top = float(np.max(np.abs(standardised), initial=0.0)) / self.l1_ratio
                top = top if np.isfinite(top) and top > 0 else 1.0
                strengths = top * np.logspace(-PATH_DECADES, 0.0, PATH_SIZE)
            else:
                strengths = np.logspace(math.log10(RIDGE_PATH[0]), math.log10(RIDGE_PATH[1]), PATH_SIZE)
        self.strengths = np.asarray(strengths, dtype=float)
        self._standardised = standardised

    def coefs(self):
        """Candidates' coefficients in input units, shape ``(n_candidates, n_features)``."""
        lam = self.strengths[:, None]
        shrunk = _soft_threshold(self._standardised[None, :], lam * self.l1_ratio)
        shrunk = shrunk / (1.0 + lam * (1.0 - self.l1_ratio))
        return shrunk / self.scale[None, :]

    def intercepts(self, coefs):
        """Intercepts that keep each candidate's prediction at the feature centres."""
        return self.intercept + (self.coef[None, :] - coefs) @ self.center


def score_changes(X, y, coef, intercept, coefs, intercepts, target_scale, clip=SCORE_CLIP):
    """Per-row clipped changes of the squared residual, shape ``(n_samples, n_candidates)``.

    ``((y - p_k)^2 - (y - p_0)^2) / s_y^2`` clipped to ``[-clip, clip]``; a
    non-finite change counts as ``clip`` (against the candidate).
    """
    y = np.asarray(y, dtype=float)
    with np.errstate(all="ignore"):  # non-finite rows are mapped to the clip below
        base = np.asarray(X @ coef, dtype=float).ravel() + intercept
        candidates = np.asarray(X @ coefs.T, dtype=float) + intercepts[None, :]
        # (y - p_k)^2 - (y - p_0)^2 = (p_0 - p_k) (2 y - p_0 - p_k): no cancellation of large squares.
        change = (base[:, None] - candidates) * (2.0 * y[:, None] - base[:, None] - candidates)
        change = change / (target_scale * target_scale)
    return np.where(np.isfinite(change), np.clip(change, -clip, clip), clip)


def choose(changes, epsilon, rng, clip=SCORE_CLIP, margin=KEEP_MARGIN):
    """Draw a candidate by the exponential mechanism on the summed changes (``epsilon``-DP).

    Parameters
    ----------
    changes : ndarray of shape (n_samples, n_candidates)
        Per-row changes, each within ``[-clip, clip]`` (see :func:`score_changes`).
    epsilon : float > 0 or inf
        ``inf`` returns the exact best (no noise; not private).
    rng : numpy.random.Generator
    clip : float
    margin : float
        The fitted model's utility in Gumbel scales (public, or a function of released values only).

    Returns
    -------
    index : int
        ``-1`` for the fitted model, else the candidate's column.
    event : ExponentialMechanismRelease
    """
    gains = -np.sum(np.clip(changes, -clip, clip), axis=0)
    sensitivity = score_sensitivity(clip)
    # The fitted model's utility is public (sensitivity 0): margin Gumbel scales, 2 sensitivity / epsilon.
    head_start = 0.0 if math.isinf(epsilon) else margin * 2.0 * sensitivity / epsilon
    index, event = exponential_mechanism(np.r_[head_start, gains], sensitivity, epsilon, rng)
    return index - 1, event
