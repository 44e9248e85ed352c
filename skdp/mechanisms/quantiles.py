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

Columns of more than ``2^20 + 2`` values at an epsilon whose window of
``80 / epsilon`` ranks would cover more than ``2^20`` of them (the default
scaling's budget on such columns) are drawn from the same distribution by
rejection from counts (:mod:`skdp.mechanisms._quantile_sampler`; a public rule
on ``n`` and ``epsilon``), as chunked values on a cluster are: both release the
same draw.
"""

import hashlib
import math
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ..accounting import ExponentialMechanismRelease, Repeated
from ._random import check_generator

__all__ = ["private_quantile", "private_scale"]


def _check_bounds(bounds, scale):
    lower, upper = (float(b) for b in bounds)
    if not lower < upper or not np.isfinite([lower, upper]).all() or not np.isfinite(upper - lower):
        # A width that overflows would make every interval's share of the range 0.
        raise ValueError(f"bounds must be finite with lower < upper and a finite width; got {bounds!r}.")
    if scale == "log" and lower <= 0:
        raise ValueError(f"scale='log' needs a positive lower bound; got {lower!r}.")
    return lower, upper


def private_quantile(values, quantile, epsilon, bounds, *, scale="linear", nonzero=False, prior=None,
                     jitter=0.0, random_state=None):
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
    prior : sequence of (lower, upper, weight), optional
        A public base measure instead of the uniform one: a mixture of uniform
        pieces (uniform on the chosen ``scale``) covering the range. Any fixed,
        data-independent base measure keeps the mechanism epsilon-DP; it
        decides where the estimate falls when the data cannot move it (a column
        with few values at this epsilon). A column with no value at all returns
        the geometric centre of the heaviest piece.
    jitter : float, default=0.0
        Half-width of a public random perturbation of every value before the
        release: a factor ``exp(U(-jitter, jitter))`` on the log scale, an
        added ``U(-jitter, jitter)`` on the linear one. Tied values leave only
        zero-length intervals between them, so a column whose values are all
        equal (the row norms of a one-hot table) would get an estimate drawn
        from the whole range; jitter spreads the ties over an interval of that
        width (zeros stay zero, so ``nonzero`` still leaves them out). A
        per-record map with public randomness: privacy is unchanged.
        Ignored at ``epsilon = inf``.
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

    A prior that favours ``[0.5, 2]`` decides the scale of a column whose
    nonzero values are too few for the budget (one in a thousand here):

    >>> rare = np.zeros((5000, 1))
    >>> rare[:5, 0] = 1.0
    >>> s, _ = private_quantile(rare, 0.5, 0.05, (1e-15, 1e15), scale="log", nonzero=True,
    ...                         prior=[(1e-15, 0.5, 1e-5), (0.5, 2.0, 0.999), (2.0, 1e15, 1e-3)],
    ...                         random_state=0)
    >>> bool(0.5 <= s <= 2.0)
    True
    """
    return quantile_columns(values, quantile, epsilon, bounds, scale=scale, nonzero=nonzero, prior=prior,
                            jitter=jitter, random_state=random_state)


def jitter_generator(rng):
    """The generator of a quantile's jitter, seeded from ``rng`` through SHA-256.

    The jitter is data-independent randomness of the mechanism (the exponential
    mechanism is private for every fixed jitter), so it may be shown to anyone,
    for example sent to the workers that hold the rows of a chunked input, who
    reproduce their rows' share of it from this generator's state. That state
    must reveal nothing about ``rng``, which draws every noise of the fit: it is
    derived from 32 bytes of ``rng`` by SHA-256 (a preimage-resistant map), never
    from ``rng``'s own state. ``rng`` advances by those 32 bytes whatever the
    input's size.

    Examples
    --------
    >>> import numpy as np
    >>> from skdp.mechanisms.quantiles import jitter_generator
    >>> a, b = np.random.default_rng(0), np.random.default_rng(0)
    >>> bool(np.array_equal(jitter_generator(a).random(3), jitter_generator(b).random(3)))
    True
    """
    digest = hashlib.sha256(rng.bytes(32)).digest()
    return np.random.Generator(np.random.PCG64(int.from_bytes(digest, "little")))


def quantile_columns(values, quantile, epsilon, bounds, *, scale="linear", nonzero=False, prior=None,
                     jitter=0.0, random_state=None, threads=2):
    """:func:`private_quantile` with the number of worker threads for large inputs.

    ``threads=1`` keeps the work in the calling thread (a caller that already
    runs column blocks in parallel); results do not depend on ``threads``.
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
    log_scale = scale == "log"
    pieces = None if prior is None else _check_prior(prior, (lower, upper), log_scale)
    if getattr(values, "chunked", False):  # per-record values held where the rows are (a Dask cluster)
        from ._chunked_quantiles import chunked_quantile_columns

        rng = None if np.isinf(epsilon) else check_generator(random_state)
        estimate, event = chunked_quantile_columns(values, quantile, epsilon, lower, upper, log_scale,
                                                   nonzero, pieces, float(jitter), rng)
        return (float(estimate[0]) if values.one_column else estimate), event
    if np.isinf(epsilon):
        return _exact_quantile(values, quantile, (lower, upper), nonzero, pieces, log_scale)
    rng = check_generator(random_state)

    x = np.asarray(values, dtype=float)
    one_column = x.ndim == 1
    x = x.reshape(x.shape[0], -1)
    n, n_columns = x.shape
    from ._quantile_sampler import SortedColumns, sample_quantiles, uses_sampler

    if uses_sampler(n, epsilon):  # a public rule (n, epsilon): the draw of the chunked quantile, bit for bit
        state = jitter_generator(rng).bit_generator.state if jitter > 0 else None
        spec = (lower, upper, log_scale, nonzero, float(jitter), state, False)
        lower_t, upper_t = (math.log(lower), math.log(upper)) if log_scale else (lower, upper)
        release = sample_quantiles(SortedColumns(x, spec, lower_t, upper_t), n, n_columns, quantile, epsilon,
                                   lower_t, upper_t, pieces, rng)
        estimate = np.exp(release) if log_scale else release
        event = Repeated(ExponentialMechanismRelease(epsilon), n_columns)
        return (float(estimate[0]) if one_column else estimate), event
    # Non-finite values get a fixed place (a per-record rule): NaN and -inf at the
    # lower bound, +inf at the upper. Raising instead would reveal the record.
    if not np.isfinite(x).all():
        x = np.nan_to_num(x, nan=lower, posinf=upper, neginf=lower)
    if jitter > 0:
        noise = jitter_generator(rng).uniform(-jitter, jitter, size=x.shape)
        if log_scale:
            x = x * np.exp(noise)  # zeros stay zero
        elif nonzero:
            x = np.where(x != 0, x + noise, 0.0)  # zeros stay absent
        else:
            x = x + noise
    # Work on columns as contiguous rows: sorting along the last axis is fast.
    x = np.ascontiguousarray(x.T)
    if nonzero:
        present = x != 0
        n_present = present.sum(axis=1).astype(float)
    else:
        n_present = np.full(n_columns, float(n))
    n_absent = n - n_present
    if log_scale:
        lower_t, upper_t = np.log(lower), np.log(upper)
    else:
        lower_t, upper_t = lower, upper

    # The interval of every column is drawn by inverse CDF (exactly the
    # exponential mechanism's distribution over intervals) from these uniforms,
    # then a point inside it from the base measure restricted to it. Drawing the
    # uniforms here, in column order, keeps the result independent of how the
    # columns are split between threads.
    # In (0, 1]: u = 0 could select a leading interval of zero weight.
    u = 1.0 - rng.random(n_columns)
    lo, hi = np.empty(n_columns), np.empty(n_columns)

    def draw_intervals(cols):
        """Write the drawn interval ``[lo, hi]`` of each column in ``cols``."""
        xc = x[cols]
        if nonzero:
            # Zeros sit at the lower edge, below every value that is present, where
            # they only create zero-length intervals; ranks are shifted past them.
            xc = np.where(xc != 0, np.clip(xc, lower, upper), lower)
        else:
            xc = np.clip(xc, lower, upper)
        if log_scale:
            np.log(xc, out=xc)
        xc.sort(axis=1)
        edges = np.empty((xc.shape[0], n + 2))
        edges[:, 0], edges[:, -1], edges[:, 1:-1] = lower_t, upper_t, xc
        del xc
        if pieces is None:
            # Widths as fractions of the public range (at most 1: no overflow below).
            mass = np.diff(edges, axis=1)
            mass /= upper_t - lower_t
        else:
            mass = _interval_masses(edges, pieces)  # at most 1 (normalised weights)
        # weight = mass * exp((epsilon / 2) * utility), utility = -|rank - q n| <= 0,
        # computed without logarithms of the masses.
        weight = np.arange(n + 1, dtype=float)[None, :] - n_absent[cols, None]
        np.maximum(weight, 0.0, out=weight)
        weight -= quantile * n_present[cols, None]
        np.abs(weight, out=weight)
        weight *= -0.5 * epsilon
        np.exp(weight, out=weight)
        weight *= mass
        np.cumsum(weight, axis=1, out=weight)
        # Where every positive-mass interval is so far from the target that its
        # factor underflows (large epsilon, heavy ties), redo the column on the log
        # scale, normalised by its largest log weight.
        for row in np.flatnonzero(~(weight[:, -1] > 1e-250)):
            ranks = np.maximum(np.arange(n + 1, dtype=float) - n_absent[cols[row]], 0.0)
            with np.errstate(divide="ignore"):
                log_weight = np.log(mass[row]) - 0.5 * epsilon * np.abs(ranks - quantile * n_present[cols[row]])
            top = log_weight.max()
            if not np.isfinite(top):  # no interval has positive mass: refuse rather than pick one
                raise ValueError("Every interval of the public range has zero base measure; check the "
                                 "bounds and the prior.")
            weight[row] = np.cumsum(np.exp(log_weight - top))
        for row, j in enumerate(cols):
            k = min(int(np.searchsorted(weight[row], u[j] * weight[row, -1], side="left")), n)
            lo[j], hi[j] = edges[row, k], edges[row, k + 1]

    # Blocks of about 4e6 values bound the memory of the work arrays.
    n_blocks = max(1, min(n_columns, -(-n_columns * (n + 2) // 4_000_000)))
    if threads > 1 and n * n_columns >= 400_000 and n_columns >= 2:
        # Large inputs: two threads (numpy releases the GIL) on balanced blocks;
        # every column's uniform was drawn above, so results do not depend on the split.
        chunks = np.array_split(np.arange(n_columns), max(2, 2 * (-(-n_blocks // 2))))
        with ThreadPoolExecutor(max_workers=2) as pool:
            list(pool.map(draw_intervals, chunks))
    else:
        chunks = np.array_split(np.arange(n_columns), n_blocks)
        for cols in chunks:
            draw_intervals(cols)
    if pieces is None:
        estimate = lo + rng.random(n_columns) * (hi - lo)
    else:
        estimate = _sample_within(lo, hi, pieces, rng)
    if log_scale:
        estimate = np.exp(estimate)
    event = Repeated(ExponentialMechanismRelease(epsilon), n_columns)
    return (float(estimate[0]) if one_column else estimate), event


def _check_prior(prior, bounds, log_scale):
    """Pieces ``(a, b, weight)`` in the transformed scale, weights normalised."""
    pieces = []
    for a, b, w in prior:
        a, b, w = float(a), float(b), float(w)
        if not (bounds[0] <= a < b <= bounds[1]) or not w > 0:
            raise ValueError(f"prior pieces must lie within the bounds {bounds} with positive weights; "
                             f"got {(a, b, w)!r}.")
        pieces.append((np.log(a), np.log(b), w) if log_scale else (a, b, w))
    total = sum(w for _, _, w in pieces)
    return [(a, b, w / total) for a, b, w in pieces]


def _piece_masses(edges, pieces):
    """Base-measure mass of every interval from each piece: shape (pieces, columns, intervals)."""
    return np.stack([w * np.clip(np.minimum(edges[:, 1:], b) - np.maximum(edges[:, :-1], a), 0.0, None)
                     / (b - a) for a, b, w in pieces])


def _interval_masses(edges, pieces):
    """Base-measure mass of every interval ``[edges[:, k], edges[:, k + 1]]``.

    Pieces that tile the range contiguously (the usual prior) give every interval
    inside one piece the mass ``width * density`` in one pass; only the few
    intervals that straddle a knot go through the general per-piece sum.
    """
    if edges.shape[0] == 0:  # no columns
        return np.empty((0, edges.shape[1] - 1))
    starts = np.array([a for a, _, _ in pieces])
    ends = np.array([b for _, b, _ in pieces])
    tiled = (np.all(np.diff(starts) > 0) and np.array_equal(starts[1:], ends[:-1])
             and starts[0] <= edges[0, 0] and ends[-1] >= edges[0, -1])
    if not tiled:
        return _piece_masses(edges, pieces).sum(axis=0)
    density = np.array([w / (b - a) for a, b, w in pieces])
    # Index of the piece that holds each interval's left edge (a few comparisons
    # per value are much faster than a search).
    left = np.zeros(edges[:, :-1].shape, dtype=np.intp)
    for start in starts[1:]:
        left += edges[:, :-1] >= start
    mass = np.diff(edges, axis=1)
    mass *= density[left]
    straddle = edges[:, 1:] > ends[left]
    if straddle.any():
        rows, cols = np.nonzero(straddle)
        pair = np.stack([edges[rows, cols], edges[rows, cols + 1]], axis=1)
        mass[rows, cols] = _piece_masses(pair, pieces).sum(axis=0)[:, 0]
    return mass


def _sample_within(lo, hi, pieces, rng):
    """A point of ``[lo, hi]`` (per column) from the base measure restricted to it."""
    edges = np.stack([lo, hi], axis=1)
    masses = _piece_masses(edges, pieces)[:, :, 0].T  # (columns, pieces)
    choice = rng.random(lo.size) * masses.sum(axis=1)
    piece = np.minimum((np.cumsum(masses, axis=1) < choice[:, None]).sum(axis=1), len(pieces) - 1)
    a = np.array([p[0] for p in pieces])[piece]
    b = np.array([p[1] for p in pieces])[piece]
    left, right = np.maximum(lo, a), np.minimum(hi, b)
    left, right = np.where(right > left, left, lo), np.where(right > left, right, hi)
    return left + rng.random(lo.size) * (right - left)


def _exact_quantile(values, quantile, bounds, nonzero, pieces=None, log_scale=False):
    """The non-private limit (epsilon = inf): the empirical quantile of the (clipped) values.

    With ``nonzero`` the zeros are dropped *before* clipping (clipping first would
    turn them into the positive lower bound of a log scale and count them).
    """
    x = np.asarray(values, dtype=float)
    one_column = x.ndim == 1
    x = x.reshape(x.shape[0], -1)
    out = np.empty(x.shape[1])
    if pieces is not None:
        a, b, _ = max(pieces, key=lambda piece: piece[2])
        empty = float(np.exp(0.5 * (a + b))) if log_scale else 0.5 * (a + b)
    else:
        empty = bounds[0]
    for j in range(x.shape[1]):
        col = x[:, j][x[:, j] != 0] if nonzero else x[:, j]
        out[j] = np.quantile(np.clip(col, *bounds), quantile) if col.size else empty
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
