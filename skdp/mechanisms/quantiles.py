"""Private quantiles and scales with the exponential mechanism.

The output range ``[lower, upper]`` is public. Sorting the (clipped) values cuts
it into ``n + 1`` intervals; the interval with ``k`` values below it has utility
``-|k - q n|``, and a point is drawn with density proportional to
``exp(epsilon * utility / 2)`` (Smith 2011). Replacing one value moves every
rank by at most one, so the draw is epsilon-DP and epsilon-bounded-range
(``epsilon^2 / 8``-zCDP). Quantiles are equivariant under monotone maps, so a
``scale="log"`` estimate works on ``log(values)``: the right base measure for
positive quantities that span orders of magnitude (gradient norms, feature
scales), where a uniform base measure on a wide public range would waste the
budget on empty space.
"""

from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ..accounting import ExponentialMechanismRelease, Repeated
from ._random import check_generator

__all__ = ["private_quantile", "private_scale"]


def _check_bounds(bounds, scale):
    lower, upper = (float(b) for b in bounds)
    if not lower < upper or not np.isfinite([lower, upper]).all():
        raise ValueError(f"bounds must be finite with lower < upper; got {bounds!r}.")
    if scale == "log" and lower <= 0:
        raise ValueError(f"scale='log' needs a positive lower bound; got {lower!r}.")
    return lower, upper


def private_quantile(values, quantile, epsilon, bounds, *, scale="linear", nonzero=False,
                     random_state=None):
    """Epsilon-DP estimate of a quantile of every column of ``values``.

    Parameters
    ----------
    values : array-like of shape (n_samples,) or (n_samples, n_columns)
    quantile : float in [0, 1]
    epsilon : float > 0
        Privacy parameter of each column's estimate; ``inf`` returns the exact
        empirical quantile (not private).
    bounds : (float, float)
        Public output range; values outside it are clipped to it (NaN and
        ``-inf`` count as the lower bound, ``+inf`` as the upper).
    scale : {"linear", "log"}, default="linear"
        ``"log"`` draws uniformly in ``log`` space within each interval; values at
        or below ``lower`` are treated as ``lower``.
    nonzero : bool, default=False
        Target the quantile of the *nonzero* values of each column (zeros are
        left out of both the ranks and the target count). For zero-inflated or
        discrete columns, where ordinary quantiles of magnitudes are 0, this
        gives the scale of the values that are present. The utility keeps
        sensitivity 1: replacing a row moves every rank by at most one and the
        target ``quantile * n_nonzero`` by at most ``quantile``, in opposite
        cases, so the change is at most ``max(quantile, 1 - quantile)``.
    random_state : None, int or Generator

    Returns
    -------
    estimate : float or ndarray of shape (n_columns,)
    event : PrivacyEvent
        ``ExponentialMechanismRelease(epsilon)`` repeated once per column.

    Examples
    --------
    >>> import numpy as np
    >>> from skdp.mechanisms import private_quantile
    >>> x = np.random.default_rng(0).normal(size=5000)
    >>> median, event = private_quantile(x, 0.5, epsilon=1.0, bounds=(-10, 10), random_state=0)
    >>> bool(abs(median) < 0.1)
    True
    >>> event
    Repeated(event=ExponentialMechanismRelease(epsilon=1.0), count=1)
    """
    if scale not in ("linear", "log"):
        raise ValueError(f"scale must be 'linear' or 'log'; got {scale!r}.")
    quantile = float(quantile)
    if not 0.0 <= quantile <= 1.0:
        raise ValueError(f"quantile must lie in [0, 1]; got {quantile!r}.")
    epsilon = float(epsilon)
    if not epsilon > 0:
        raise ValueError(f"epsilon must be positive; got {epsilon!r}.")
    lower, upper = _check_bounds(bounds, scale)
    if np.isinf(epsilon):
        return _exact_quantile(values, quantile, (lower, upper), nonzero)
    rng = check_generator(random_state)

    x = np.asarray(values, dtype=float)
    one_column = x.ndim == 1
    x = x.reshape(x.shape[0], -1)
    n, n_columns = x.shape
    # Non-finite values get a fixed place (a per-record rule): NaN and -inf at the
    # lower bound, +inf at the upper. Raising instead would reveal the record.
    x = np.nan_to_num(x, nan=lower, posinf=upper, neginf=lower)
    # Work on columns as contiguous rows: sorting along the last axis is fast.
    x = np.ascontiguousarray(x.T)
    if nonzero:
        present = x != 0
        n_present = present.sum(axis=1).astype(float)
    else:
        n_present = np.full(n_columns, float(n))
    n_absent = n - n_present
    log_scale = scale == "log"
    if log_scale:
        lower_t, upper_t = np.log(lower), np.log(upper)
    else:
        lower_t, upper_t = lower, upper

    def intervals(cols):
        """Edges, lengths and cumulative weights of the intervals of some columns."""
        xc = x[cols]
        if nonzero:
            # Zeros sit at the lower edge, below every value that is present, where
            # they only create zero-length intervals; ranks are shifted past them.
            xc = np.where(xc != 0, np.clip(xc, lower, upper), lower)
        else:
            xc = np.clip(xc, lower, upper)
        if log_scale:
            xc = np.log(xc)
        xc.sort(axis=1)
        edges = np.empty((xc.shape[0], n + 2))
        edges[:, 0], edges[:, -1], edges[:, 1:-1] = lower_t, upper_t, xc
        lengths = np.diff(edges, axis=1)  # (columns, n + 1)
        ranks = np.arange(n + 1, dtype=float)[None, :] - n_absent[cols, None]
        utility = -np.abs(np.maximum(ranks, 0.0) - quantile * n_present[cols, None])
        with np.errstate(divide="ignore"):
            log_weight = np.log(lengths) + 0.5 * epsilon * utility
        log_weight -= log_weight.max(axis=1, keepdims=True)
        return edges, lengths, np.cumsum(np.exp(log_weight), axis=1)

    if n * n_columns >= 400_000 and n_columns >= 2:
        # Large inputs: two threads (numpy releases the GIL); the random draws
        # below stay in the main thread, in column order, so results do not depend
        # on the split.
        halves = [np.arange(0, n_columns // 2), np.arange(n_columns // 2, n_columns)]
        with ThreadPoolExecutor(max_workers=2) as pool:
            parts = list(pool.map(intervals, halves))
        edges, lengths, cumulative = (np.vstack([part[i] for part in parts]) for i in range(3))
    else:
        edges, lengths, cumulative = intervals(np.arange(n_columns))
    # Sample an interval per column by inverse CDF (exactly the exponential
    # mechanism's distribution over intervals), then a point uniformly inside.
    u = rng.random(n_columns) * cumulative[:, -1]
    k = np.array([min(int(np.searchsorted(cumulative[j], u[j], side="left")), n)
                  for j in range(n_columns)], dtype=int)
    cols = np.arange(n_columns)
    estimate = edges[cols, k] + rng.random(n_columns) * lengths[cols, k]
    if log_scale:
        estimate = np.exp(estimate)
    event = Repeated(ExponentialMechanismRelease(epsilon), n_columns)
    return (float(estimate[0]) if one_column else estimate), event


def _exact_quantile(values, quantile, bounds, nonzero):
    """The non-private limit (epsilon = inf): the empirical quantile of the clipped values."""
    x = np.asarray(values, dtype=float)
    one_column = x.ndim == 1
    x = np.clip(x.reshape(x.shape[0], -1), *bounds)
    out = np.empty(x.shape[1])
    for j in range(x.shape[1]):
        col = x[:, j][x[:, j] != 0] if nonzero else x[:, j]
        out[j] = np.quantile(col, quantile) if col.size else bounds[0]
    event = Repeated(ExponentialMechanismRelease(np.inf), x.shape[1])
    return (float(out[0]) if one_column else out), event


def private_scale(X, epsilon, *, quantile=0.9, bounds=(1e-8, 1e8), center=None, random_state=None):
    """Epsilon-DP per-column scale: a quantile of ``|X - center|`` on a log scale.

    Parameters
    ----------
    X : array-like of shape (n_samples,) or (n_samples, n_columns)
    epsilon : float > 0
        Privacy parameter of each column's estimate.
    quantile : float in (0, 1), default=0.9
    bounds : (float, float), default=(1e-8, 1e8)
        Public range of the scale.
    center : float or array-like of shape (n_columns,), optional
        A public (or previously privatised) centre; 0 by default.
    random_state : None, int or Generator

    Returns
    -------
    scale : float or ndarray
    event : PrivacyEvent

    Examples
    --------
    >>> import numpy as np
    >>> from skdp.mechanisms import private_scale
    >>> X = np.random.default_rng(0).normal(scale=[1.0, 1000.0], size=(5000, 2))
    >>> s, event = private_scale(X, epsilon=1.0, quantile=0.5, random_state=0)
    >>> np.round(s / [1.0, 1000.0], 1).tolist()  # the median of |N(0, 1)| is 0.674
    [0.7, 0.7]
    """
    X = np.asarray(X, dtype=float)
    deviations = np.abs(X - (0.0 if center is None else np.asarray(center, dtype=float)))
    return private_quantile(deviations, quantile, epsilon, bounds, scale="log", random_state=random_state)
