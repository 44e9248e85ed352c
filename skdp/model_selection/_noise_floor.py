"""The hard threshold of a released linear model at its privacy noise floor: a candidate for the tuner.

``DPRegularizationTuner(method="noise_floor")`` fits the estimator once and offers
one candidate besides the fitted model: the fitted coefficients with those
its privacy noise alone could have produced set to zero. The candidate is
post-processing of released values: the coefficients and the scaling of the
fitted model, and the standard deviation ``s`` of the noise in its averaged
iterate (``schedule_["averaged_noise_sd"]`` of the clipped-gradient solver: a
function of the released clip threshold and the public step schedule, see
:func:`skdp.solvers.heavy_tail.clipped_gd.averaged_noise_sd`). The choice
between the two is the exponential-mechanism draw of ``_path.py`` (its privacy
argument); a test on the released coefficients (below) gives the candidate it
favours a head start of ``FLOOR_MARGIN`` Gumbel scales (a function of released
values: adaptive composition keeps the draw's guarantee).

Why a candidate and not a rule. In the estimator's standardised units
(``w_j = coef_j * feature_scale_j / target_scale``) each coefficient of a
private fit is its noiseless value plus noise of standard deviation about
``s``. When ``epsilon * n_samples`` is small, ``s`` is larger than most true
coefficients of a sparse model, and the dense fit carries ``d`` noise terms
into every prediction: zeroing the coefficients within ``NOISE_FLOOR_Z * s`` of
zero (the rule the estimator's own L1 mode applies) is then the better model.
When the true coefficients are dense, or the fit is shrunk by its privacy ridge
below the floor, the floor also removes the signal (a correlated ridge task at
2000 rows and epsilon 0.5: test R^2 0.50 dense, 0.06 thresholded). A test on the
released coefficients alone cannot tell these apart on correlated designs (the
noise lies in directions that matter little for the predictions, the signal in
those that matter), so the rows decide, through the private draw.

The test (the head start). If the ``k`` coefficients below the floor were pure
noise, ``w_j / s`` would be standard normal variables conditioned on
``|z| <= NOISE_FLOOR_Z``; energy beyond ``TEST_Z`` standard deviations of their
summed squares says that they hold signal. And if no more coefficients lie
above the floor than pure noise would put there, the candidate is about the
constant model, and the test says nothing about whether the fit beats a
constant. So the thresholded model gets the head start when the coefficients
below the floor look like noise and those above it like signal; the fitted
model gets it when those below the floor do not look like noise; neither
otherwise. On the sparse Lasso task the draw alone, at the small share it
gets, chose the thresholded model on half of the seeds where it was better on
test rows (its training-row gain is smaller than the test gain); where the test
is wrong on a correlated task, the rows' loss from thresholding is many Gumbel
scales.
"""

import math

import numpy as np
from scipy import stats

from ..solvers.heavy_tail.clipped_gd import NOISE_FLOOR_Z

__all__ = ["TEST_Z", "NoiseFloorCandidate", "threshold_at_noise_floor"]

# One-sided level of the energy test, in standard deviations of the summed squares under pure noise.
TEST_Z = 3.0
_TRUNCATED = stats.truncnorm(-NOISE_FLOOR_Z, NOISE_FLOOR_Z)
_M2 = float(_TRUNCATED.moment(2))
_V = float(_TRUNCATED.moment(4)) - _M2**2
# Probability that a pure-noise coefficient lies above the floor.
_P_ABOVE = float(2.0 * stats.norm.sf(NOISE_FLOOR_Z))


class NoiseFloorCandidate:
    """The thresholded model (post-processing of released values).

    Attributes
    ----------
    coef, intercept : ndarray, float
        The candidate (the fitted model unchanged when no threshold applies).
    threshold : float or None
        The threshold in standardised units, or None when none applies.
    n_zeroed : int
    energy_ratio : float
        Summed squares of the standardised coefficients below the floor over
        their expectation under pure noise (nan when none applies).
    looks_like_noise : bool
        Whether those summed squares stay below ``k m2 + TEST_Z sqrt(k v)``, their mean plus
        ``TEST_Z`` standard deviations under pure noise (``k`` coefficients, ``m2`` and ``v``
        the moments of ``z^2`` for a standard normal ``z`` conditioned on ``|z| <= NOISE_FLOOR_Z``).
    signal_above_floor : bool
        Whether more coefficients lie above the floor than pure noise would put there
        (``m > d p + TEST_Z sqrt(d p)`` for ``d`` coefficients, ``p = P(|z| > NOISE_FLOOR_Z)``):
        otherwise the candidate is about the constant model.
    reason : str
    """

    def __init__(self, coef, intercept, threshold, n_zeroed, energy_ratio, reason, looks_like_noise=False,
                 signal_above_floor=False):
        self.coef, self.intercept = coef, intercept
        self.threshold, self.n_zeroed, self.energy_ratio, self.reason = threshold, n_zeroed, energy_ratio, reason
        self.looks_like_noise, self.signal_above_floor = looks_like_noise, signal_above_floor


def threshold_at_noise_floor(coef, intercept, scaling, noise_sd):
    """Zero the coefficients of a released model within its noise floor.

    Never raises on released values (non-finite ones are left alone).

    Parameters
    ----------
    coef : ndarray of shape (n_features,)
    intercept : float
    scaling : dict
        The fitted model's ``scaling_`` (column-wise modes only: the noise of a
        whitened model is not per coordinate of ``coef``, so it is returned
        unchanged).
    noise_sd : float or None
        Standard deviation of the noise in the standardised coefficients.

    Returns
    -------
    NoiseFloorCandidate

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> coef = np.r_[5.0, -4.0, rng.normal(scale=0.1, size=198)]  # two signals, 198 noise terms
    >>> scaling = {"feature_scale": np.ones(200), "target_scale": 1.0, "feature_center": np.zeros(200)}
    >>> out = threshold_at_noise_floor(coef, 0.0, scaling, noise_sd=0.1)
    >>> int(np.count_nonzero(out.coef)), round(out.threshold, 6), out.looks_like_noise
    (2, 0.3, True)
    >>> dense = rng.normal(scale=0.2, size=200)  # every coefficient a signal twice the noise
    >>> threshold_at_noise_floor(dense, 0.0, scaling, noise_sd=0.1).looks_like_noise
    False
    """
    coef = np.asarray(coef, dtype=float)
    unchanged = NoiseFloorCandidate(coef, intercept, None, 0, math.nan, "")
    if coef.ndim != 1 or "whitening_matrix" in scaling:
        unchanged.reason = "not a column-wise model"
        return unchanged
    if noise_sd is None or not math.isfinite(noise_sd) or noise_sd <= 0.0:
        unchanged.reason = "no noise estimate (or no noise)"
        return unchanged
    with np.errstate(all="ignore"):
        feature_scale = np.broadcast_to(np.asarray(scaling.get("feature_scale", 1.0), dtype=float), coef.shape)
        target_scale = float(scaling.get("target_scale", 1.0))
        w = coef * feature_scale / target_scale
        eligible = np.isfinite(w) & (feature_scale > 0)
        if not (math.isfinite(target_scale) and target_scale > 0 and eligible.any()):
            unchanged.reason = "no finite standardised coefficients"
            return unchanged
        threshold = NOISE_FLOOR_Z * noise_sd
        below = eligible & (np.abs(w) <= threshold)
        k = int(below.sum())
        energy = float(np.sum((w[below] / noise_sd) ** 2))
        ratio = energy / (k * _M2) if k else math.nan
        looks_like_noise = bool(k and energy <= k * _M2 + TEST_Z * math.sqrt(k * _V))
        n_eligible = int(eligible.sum())
        expected_above = n_eligible * _P_ABOVE
        signal_above = n_eligible - k > expected_above + TEST_Z * math.sqrt(expected_above)
        new = np.where(below, 0.0, coef)
        center = np.broadcast_to(np.asarray(scaling.get("feature_center", 0.0), dtype=float), coef.shape)
        # The intercept keeps the prediction at the released feature centre (only the slopes move).
        moved = float(np.sum(np.where(below, coef * center, 0.0)))
        new_intercept = float(intercept) + moved if math.isfinite(moved) else float(intercept)
    return NoiseFloorCandidate(new, new_intercept, threshold, k, ratio, f"{k} coefficients below {threshold:.3g}",
                               looks_like_noise, signal_above)
