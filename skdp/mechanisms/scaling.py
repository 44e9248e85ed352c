"""Private robust centring and scaling of raw columns, for standardisation.

Raw data can have columns on any scale (1e-6 or 1e9), offsets much larger than
their spread (a year, a price), heavy tails, outliers, ties, constant columns
and many zeros (binary or one-hot columns). With an intercept every column gets
three exponential-mechanism medians, each epsilon-DP:

1. ``s0``: the median of the nonzero magnitudes ``|x|`` on a log scale over a
   huge public range. It sets the unit of the next two steps.
2. ``center``: the median of ``x``, estimated on ``asinh(x / s0)`` (which
   compresses any offset into a few units), mapped back and snapped to the
   grid ``2e-4 s0`` (post-processing). Values within one grid step of the
   centre count as tied with it: a cluster of equal values that contains the
   median (the zeros or the majority value of a binary column, a constant
   column) is then exactly at zero deviation.
3. ``scale``: the 0.6-quantile of the nonzero deviations ``|x - center|``
   divided by 0.8416 (its value for a normal column, so the scale is about the
   standard deviation), on a log scale relative to ``s0``. Leaving out the
   values tied with the centre gives two-valued and zero-inflated columns the
   size of their gap; the level 0.6 (rather than the median) still finds the
   gap of a balanced two-valued column whose centre fell next to one value.
   Scales are floored at ``1e-3 s0``.

Levels near the median are used because both empty tails of a public range are
then penalised by about half the values, so a starved quantile fails equally
rarely in either direction (high levels fail upwards much more often,
flattening good columns). The failure probability of one release is about
``(range in log units) * exp(-epsilon * n / 4)`` relative to the mass near the
median: about 1e-3 at ``epsilon * n = 50`` and 1e-6 at 80, which is what the
estimators require. Steps 2
and 3 search ranges of eight decades on each side of ``s0``, so they recover
from an ``s0`` that is off by a large factor in either direction (``asinh``
keeps the centre step well resolved when ``x / s0`` is huge).

The weak spot is a column with few nonzero values or few values away from its
centre (a rare category): its quantiles see only those values. Standardise such
columns with public knowledge and use the estimators' ``scaling="target"`` or
``"pooled"`` options.

Without an intercept the centre is 0 and the scale is 1.4826 times the median
nonzero magnitude (one release).

Values are jittered multiplicatively (log scale, by up to ``jitter``) or
additively (the centre, by up to 1e-4 asinh units) with independent public
randomness per record, so that ties do not create zero-length intervals; a
per-record randomised transform keeps the mechanism epsilon-DP (couple the
jitter of every unchanged record).
"""

import numpy as np

from ..accounting import ExponentialMechanismRelease, Repeated
from ._random import check_generator
from .quantiles import private_quantile

__all__ = ["private_robust_scaling", "robust_scaling_event", "private_pooled_scale",
           "pooled_scaling_event"]

_MAD_TO_STD = 1.4826
_DEVIATION_LEVEL = 0.6
_Q60_TO_STD = 1.0 / 0.8416  # 0.6-quantile of |N(0, 1)|
# Ranges relative to s0: eight decades either way, so a wrong s0 is recovered.
_CENTER_LIMIT = float(np.arcsinh(1e8))
# The centre's jitter (asinh units) spreads ties; the snapping grid (relative to
# s0) must exceed the error the jitter can cause, 1e-4 |x| for an offset column.
_CENTER_JITTER = 1e-4
_CENTER_GRID = 2e-4
_DEVIATION_BOUNDS = (1e-8, 1e8)
_SCALE_FLOOR = 1e-3


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
        Privacy parameter of each quantile release (three per column with
        ``center=True``, one otherwise); ``inf`` gives the exact statistics.
    center : bool, default=True
        Estimate a centre; otherwise the centre is 0 and the scale is 1.4826
        times the median nonzero magnitude.
    bounds : (float, float), default=(1e-12, 1e12)
        Public range of the column magnitudes.
    jitter : float, default=0.05
        Half-width of the multiplicative jitter, in log units.
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
    >>> X = np.column_stack([rng.normal(2000, 30, 5000),          # offset >> spread
    ...                      rng.normal(0, 1e-4, 5000),           # tiny scale
    ...                      rng.random(5000) < 0.2,              # zero-inflated binary
    ...                      np.full(5000, 7.0)])                 # constant
    >>> c, s, event = private_robust_scaling(X, epsilon=0.5, random_state=0)
    >>> bool(abs(c[0] - 2000) < 30), np.round(c[1:], 1).tolist()  # within a standard deviation
    (True, [0.0, 0.0, 7.0])
    >>> np.round(s[:3] / [30, 1e-4, 1 / 0.8416], 1).tolist()
    [1.0, 1.0, 1.0]
    >>> bool(abs(X[0, 3] - c[3]) / s[3] < 5)  # a constant column stays bounded
    True
    >>> event.epsilon(0.0)  # three quantiles per column at epsilon 0.5
    6.0
    """
    rng = check_generator(random_state)
    X = np.asarray(X, dtype=float)
    one_column = X.ndim == 1
    X = X.reshape(X.shape[0], -1)
    n, d = X.shape
    lower, upper = (float(b) for b in bounds)

    # One multiplicative jitter per record and column, shared by the log-scale
    # steps (public randomness; each release is DP given it).
    shared_jitter = np.exp(rng.uniform(-jitter, jitter, size=(n, d)))

    def log_jitter():
        return shared_jitter

    s0, _ = private_quantile(np.abs(X) * log_jitter(), 0.5, epsilon, (lower, upper), scale="log",
                             nonzero=True, random_state=rng)
    s0 = np.atleast_1d(s0)
    if center:
        h = min(jitter, _CENTER_JITTER)
        t = np.arcsinh(X / s0) + rng.uniform(-h, h, size=(n, d))
        m_t, _ = private_quantile(t, 0.5, epsilon, (-_CENTER_LIMIT, _CENTER_LIMIT), random_state=rng)
        grid = _CENTER_GRID * s0
        centre = np.round(np.sinh(np.atleast_1d(m_t)) * s0 / grid) * grid
        dev = np.abs(X - centre)
        dev = np.where(dev < grid, 0.0, dev) / s0 * log_jitter()
        rel, _ = private_quantile(dev, _DEVIATION_LEVEL, epsilon, _DEVIATION_BOUNDS, scale="log",
                                  nonzero=True, random_state=rng)
        scale = _Q60_TO_STD * np.maximum(np.atleast_1d(rel), _SCALE_FLOOR) * s0
    else:
        centre = np.zeros(d)
        scale = _MAD_TO_STD * s0
    event = robust_scaling_event(d, epsilon, center=center)
    if one_column:
        return float(centre[0]), float(scale[0]), event
    return centre, scale, event


def pooled_scaling_event(epsilon):
    """The privacy event of :func:`private_pooled_scale`."""
    return ExponentialMechanismRelease(epsilon)


def private_pooled_scale(X, epsilon, *, bounds=(1e-12, 1e12), jitter=0.05, random_state=None):
    """One epsilon-DP scale shared by all columns: 1.4826 times the pooled median nonzero ``|x_ij|``.

    Replacing a row changes ``n_columns`` of the pooled values, so the quantile
    is run at ``epsilon / n_columns`` per value and is epsilon-DP per row (group
    privacy of the exponential mechanism). All columns share one ranking, so the
    utility range is that of a single column: one release instead of one to
    three per column, for features that share a scale (already standardised,
    or measured in one unit).

    Returns
    -------
    scale : float
    event : PrivacyEvent

    Examples
    --------
    >>> import numpy as np
    >>> from skdp.mechanisms import private_pooled_scale
    >>> X = np.random.default_rng(0).normal(scale=3.0, size=(2000, 10))
    >>> s, event = private_pooled_scale(X, epsilon=0.2, random_state=0)
    >>> bool(abs(s / 3.0 - 1) < 0.05), event.epsilon(0.0)
    (True, 0.2)
    """
    rng = check_generator(random_state)
    X = np.asarray(X, dtype=float)
    X = X.reshape(X.shape[0], -1)
    d = X.shape[1]
    values = (np.abs(X) * np.exp(rng.uniform(-jitter, jitter, size=X.shape))).ravel()
    lower, upper = (float(b) for b in bounds)
    s, _ = private_quantile(values, 0.5, epsilon / d, (lower, upper), scale="log", nonzero=True,
                            random_state=rng)
    return float(_MAD_TO_STD * s), pooled_scaling_event(epsilon)
