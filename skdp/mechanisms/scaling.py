"""Private robust centring and scaling of raw columns, for standardisation.

Raw data can have columns on any scale (1e-6 or 1e9), offsets much larger than
their spread (a year, a price), heavy tails, outliers, ties and many zeros
(binary or one-hot columns). Every column gets three exponential-mechanism
quantiles, each epsilon-DP:

1. ``s0``: the median of the nonzero magnitudes ``|x|`` on a log scale over a
   huge public range. It only sets the unit of the next two steps.
2. ``center``: the median of ``x``, estimated on ``asinh(x / s0)`` (which
   compresses any offset into a few units) and mapped back.
3. ``scale``: 1.4826 times the median of the nonzero deviations ``|x - center|``
   (a MAD that ignores exact ties with the centre, so two-valued and
   zero-inflated columns get the scale of the values that differ), on a log
   scale relative to ``s0``.

Steps 2 and 3 search short ranges relative to ``s0`` (see the constants
below). A quantile is reliable when ``epsilon * n`` is about 50 or more; with
less, it can land in the empty part of its public range.

Medians are used throughout because both empty tails of the public range are
then penalised by half the rows; higher quantiles leave one tail cheap and fail
often at small budgets. Values are jittered multiplicatively (log scale) or
additively (asinh scale) by up to ``jitter`` before the quantiles, with
independent public randomness per record, so that ties do not create
zero-length intervals; a per-record randomised transform keeps the mechanism
epsilon-DP (couple the jitter of every unchanged record).
"""

import numpy as np

from ..accounting import ExponentialMechanismRelease, Repeated
from ._random import check_generator
from .quantiles import private_quantile

__all__ = ["private_robust_scaling", "robust_scaling_event"]

_MAD_TO_STD = 1.4826
# |median(x)| <= median(|x|) and median|x - median(x)| <= 2 median|x| hold exactly,
# so relative to s0 the centre lies in [-1, 1] and the MAD in [0, 2]; the ranges
# below leave room for s0 to be off by a factor 64 (centre) or 4 (MAD) while
# keeping the empty tails of the public ranges, where a starved quantile would
# land, short.
_CENTER_LIMIT = float(np.arcsinh(64.0))
_DEVIATION_BOUNDS = (1e-8, 8.0)


def robust_scaling_event(n_columns, epsilon, center=True):
    """The privacy event of :func:`private_robust_scaling` on ``n_columns`` columns."""
    per_column = 3 if center else 1
    return Repeated(ExponentialMechanismRelease(epsilon), per_column * int(n_columns))


def private_robust_scaling(X, epsilon, *, center=True, bounds=(1e-12, 1e12), jitter=0.05,
                           random_state=None):
    """Epsilon-DP robust centre and scale of every column of ``X``.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_columns) or (n_samples,)
    epsilon : float > 0
        Privacy parameter of each of the quantile releases (three per column
        with ``center=True``, one otherwise).
    center : bool, default=True
        Estimate a centre; otherwise the centre is 0 and the scale is 1.4826
        times the median nonzero magnitude.
    bounds : (float, float), default=(1e-12, 1e12)
        Public range of the column magnitudes.
    jitter : float, default=0.05
        Half-width of the uniform jitter, in log (scale) or asinh (centre) units.
    random_state : None, int or Generator

    Returns
    -------
    center : ndarray of shape (n_columns,)
    scale : ndarray of shape (n_columns,)
        Positive; about the standard deviation for normal columns.
    event : PrivacyEvent

    Examples
    --------
    >>> import numpy as np
    >>> from skdp.mechanisms import private_robust_scaling
    >>> rng = np.random.default_rng(0)
    >>> X = np.column_stack([rng.normal(2000, 3, 5000),           # offset >> spread
    ...                      rng.normal(0, 1e-4, 5000),           # tiny scale
    ...                      rng.random(5000) < 0.1])             # zero-inflated binary
    >>> c, s, event = private_robust_scaling(X, epsilon=0.5, random_state=0)
    >>> bool(abs(c[0] - 2000) < 1), np.round(s[:2] / [3, 1e-4], 1).tolist(), round(float(c[2]), 1)
    (True, [1.0, 1.0], 0.0)
    >>> event.epsilon(0.0)  # three quantiles per column at epsilon 0.5
    4.5
    """
    rng = check_generator(random_state)
    X = np.asarray(X, dtype=float)
    one_column = X.ndim == 1
    X = X.reshape(X.shape[0], -1)
    n, d = X.shape
    lower, upper = (float(b) for b in bounds)

    def log_jitter():
        return np.exp(rng.uniform(-jitter, jitter, size=(n, d)))

    s0, _ = private_quantile(np.abs(X) * log_jitter(), 0.5, epsilon, (lower, upper), scale="log",
                             nonzero=True, random_state=rng)
    s0 = np.atleast_1d(s0)
    if center:
        t = np.arcsinh(X / s0) + rng.uniform(-jitter, jitter, size=(n, d))
        m_t, _ = private_quantile(t, 0.5, epsilon, (-_CENTER_LIMIT, _CENTER_LIMIT), random_state=rng)
        centre = np.sinh(np.atleast_1d(m_t)) * s0
        dev = np.abs(X - centre) / s0 * log_jitter()
        rel, _ = private_quantile(dev, 0.5, epsilon, _DEVIATION_BOUNDS, scale="log", nonzero=True,
                                  random_state=rng)
        scale = _MAD_TO_STD * np.atleast_1d(rel) * s0
    else:
        centre = np.zeros(d)
        scale = _MAD_TO_STD * s0
    event = robust_scaling_event(d, epsilon, center=center)
    if one_column:
        return float(centre[0]), float(scale[0]), event
    return centre, scale, event
