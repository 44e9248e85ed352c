"""The exponential-mechanism quantile of :func:`~skdp.mechanisms.private_quantile` on chunked values.

The values are per-record quantities held where the rows are (a Dask cluster):
an object with ``n_rows``, ``n_columns``, ``sum(func, *args)`` (the sum over
chunks of ``func(values_c, row_offset, *args)``) and ``gather(func, *args)``
(the per-chunk results, in chunk order). Nothing else of the rows is read, and
the draw is the in-memory one:

* the jitter is the same public per-record randomness: the uniforms of rows
  ``[r0, r1)`` are the draws ``r0 k .. r1 k - 1`` (``k`` columns, row-major)
  of the quantile's jitter generator
  (:func:`~skdp.mechanisms.quantiles.jitter_generator`, seeded from the fit's
  generator through SHA-256), which a chunk reproduces from that generator's
  state advanced by ``r0 k``. Only that state is sent to the workers: it
  reveals the jitter (data-independent, public) and nothing of the fit's
  generator, which never leaves the driver;
* the uniform ``u`` that selects the interval and the draw inside it come from
  the fit's generator, in the in-memory order;
* the interval is selected from the same weights ``mass_k exp(-epsilon
  |rank_k - q n| / 2)`` without sorting the table: counts in public bins give
  every bin its ranks (one pass); the distinct values in the bins within
  ``80 / epsilon`` ranks of the target (plus the nearest value on each side)
  give the intervals there exactly (one pass; bins with too many values are
  first split by further counting passes, a rule on public constants). The
  intervals outside have total weight at most a bound ``B`` (their span times
  their largest factor). ``u`` locates the interval among the known ones for
  every value of the unknown tails in ``[0, B]`` except with probability about
  ``B / W``; then the tails are gathered too and the selection is exact. So the
  selected interval has exactly the exponential mechanism's distribution (the
  release is epsilon-DP, as in memory), and it is the in-memory selection up to
  floating-point rounding of the weights.

When the window would hold more than ``2^20 + 2`` values (a public rule:
:func:`~skdp.mechanisms._quantile_sampler.uses_sampler`), the quantile is
drawn instead by rejection from counts (:mod:`skdp.mechanisms._quantile_sampler`),
which gathers nothing and releases the in-memory draw bit for bit.

With ``epsilon = inf`` the exact empirical quantile is returned from the two
order statistics around it, as :func:`numpy.quantile` interpolates them.
"""

import math

import numpy as np

from ..accounting import ExponentialMechanismRelease, Repeated

__all__ = ["chunked_quantile_columns", "chunk_uniforms", "gathered_per_column", "window_gather_per_column"]

_BINS = 4096
_WINDOW_NATS = 40.0  # factors below exp(-40) ~ 4e-18 are left to the tail bound
_MAX_DISTINCT = 1 << 20  # distinct values gathered per column before a bin range is split further
_MAX_REFINE = 8


def window_gather_per_column(n_rows, epsilon):
    """How many values the windowed selection at ``epsilon`` gathers per column, at most (public).

    The values of the bins that hold the ranks within ``80 / epsilon`` of the
    target, plus the nearest value on each side: the bins are split until they
    hold at most ``2^20`` values, so up to that many even for a narrow window,
    and all ``n`` when the window covers every rank, as it does for
    ``epsilon`` near ``120 / n``, the default scaling's quantile budget.

    Examples
    --------
    >>> window_gather_per_column(20_000_000, 0.5), window_gather_per_column(20_000_000, 120 / 20_000_000)
    (1048578, 20000000)
    """
    if math.isinf(epsilon):
        return 2
    # Capped at n (the same count): 80 / epsilon overflows to inf for a subnormal epsilon.
    half = math.ceil(min(2.0 * _WINDOW_NATS / epsilon, float(n_rows))) + 1
    return int(min(n_rows, max(2 * half + 1, _MAX_DISTINCT) + 2))


def gathered_per_column(n_rows, epsilon):
    """How many values a quantile at ``epsilon`` gathers per column, at most (public: ``n`` and ``epsilon``).

    0 when the window would hold more than ``2^20 + 2`` values: the quantile
    is then drawn by rejection from counts
    (:mod:`skdp.mechanisms._quantile_sampler`; its exact fallback, which
    gathers the column, is data-dependent, unbounded and not counted here; it was
    not reached in any fit measured);
    else the values of the window (:func:`window_gather_per_column`), at most
    ``2^20 + 2``.

    Examples
    --------
    >>> gathered_per_column(20_000_000, 0.5), gathered_per_column(20_000_000, 120 / 20_000_000)
    (1048578, 0)
    >>> gathered_per_column(1_000_000, 120 / 1_000_000)  # the window: every value of the column
    1000000
    """
    from ._quantile_sampler import uses_sampler

    return 0 if uses_sampler(n_rows, epsilon) else window_gather_per_column(n_rows, epsilon)


def chunk_uniforms(state, offset, low, high, shape):
    """``Generator.uniform(low, high, shape)`` as drawn after ``offset`` draws from the PCG64 ``state``.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> state = rng.bit_generator.state
    >>> whole = rng.uniform(-1.0, 1.0, size=(6, 2))  # the in-memory jitter of 6 rows, 2 columns
    >>> np.array_equal(chunk_uniforms(state, 2 * 2, -1.0, 1.0, (2, 2)), whole[2:4])  # rows 2 and 3
    True
    """
    bg = np.random.PCG64()
    bg.state = state
    bg.advance(int(offset))
    return np.random.Generator(bg).uniform(low, high, size=shape)


def _transformed(values_c, offset, spec):
    """The chunk's values as the in-memory code ranks them: ``(t, present)`` of shape ``(m, k)``."""
    lower, upper, log_scale, nonzero, jitter, state, exact = spec
    x = np.asarray(values_c, dtype=float)
    x = x.reshape(x.shape[0], -1)
    if exact:
        present = (x != 0) if nonzero else np.ones(x.shape, dtype=bool)
        return np.clip(x, lower, upper), present
    if not np.isfinite(x).all():
        x = np.nan_to_num(x, nan=lower, posinf=upper, neginf=lower)
    if jitter > 0:
        noise = chunk_uniforms(state, offset * x.shape[1], -jitter, jitter, x.shape)
        if log_scale:
            x = x * np.exp(noise)
        elif nonzero:
            x = np.where(x != 0, x + noise, 0.0)
        else:
            x = x + noise
    if nonzero:
        present = x != 0
        x = np.where(present, np.clip(x, lower, upper), lower)
    else:
        present = np.ones(x.shape, dtype=bool)
        x = np.clip(x, lower, upper)
    if log_scale:
        x = np.log(x)
    return x, present


def _counts_chunk(values_c, offset, spec, a, b, n_bins, skip_absent):
    """Per column: counts in ``n_bins`` bins of ``[a_j, b_j]``, below ``a_j``, above ``b_j``; presence."""
    t, present = _transformed(values_c, offset, spec)
    k = t.shape[1]
    out = np.zeros((k, n_bins + 3))
    for j in range(k):
        col = t[present[:, j], j] if skip_absent else t[:, j]
        below = col < a[j]
        above = col > b[j]
        inside = col[~(below | above)]
        width = (b[j] - a[j]) / n_bins
        if width <= 0:
            idx = np.zeros(inside.size, dtype=np.intp)
        else:
            # Bin k holds the values in [a + k width, a + (k + 1) width), its ends computed as _window
            # computes the ranges it gathers: a division could put a value a few ulps below an end
            # into the bin above it, out of the range gathered for that bin.
            idx = np.searchsorted(a[j] + np.arange(1, n_bins) * width, inside, side="right")
        out[j, :n_bins] = np.bincount(idx, minlength=n_bins)
        out[j, n_bins] = below.sum()
        out[j, n_bins + 1] = above.sum()
        out[j, n_bins + 2] = present[:, j].sum()
    return out


def _gather_chunk(values_c, offset, spec, a, b, skip_absent):
    """Per column: distinct values in ``[a_j, b_j]`` with counts; the count and nearest value on each side."""
    t, present = _transformed(values_c, offset, spec)
    out = []
    for j in range(t.shape[1]):
        col = t[present[:, j], j] if skip_absent else t[:, j]
        inside = col[(col >= a[j]) & (col <= b[j])]
        below = col[col < a[j]]
        above = col[col > b[j]]
        uniq, counts = np.unique(inside, return_counts=True)
        out.append((uniq, counts, below.size, below.max() if below.size else -np.inf,
                    above.size, above.min() if above.size else np.inf))
    return out


def _merge(parts, j):
    """The column's distinct values with counts, and the count and nearest value below and above."""
    values = np.concatenate([p[j][0] for p in parts])
    counts = np.concatenate([p[j][1] for p in parts]).astype(float)
    uniq, inverse = np.unique(values, return_inverse=True)
    merged = np.zeros(uniq.size)
    np.add.at(merged, inverse, counts)
    n_below = float(sum(p[j][2] for p in parts))
    below = max((p[j][3] for p in parts), default=-np.inf)
    n_above = float(sum(p[j][4] for p in parts))
    above = min((p[j][5] for p in parts), default=np.inf)
    return uniq, merged, n_below, below, n_above, above


def _window(values, spec, lo_rank, hi_rank, skip_absent, ranges, first):
    """Per column, a range ``[a, b]`` holding the values of ranks ``lo_rank..hi_rank`` (1-based).

    Counting passes over ``_BINS`` bins, each narrowing the range to the bins
    of those ranks, until the bins hold at most ``_MAX_DISTINCT`` values (or
    ``_MAX_REFINE`` passes; distinct values are then gathered with their counts).
    ``first`` holds the counts of the first pass (over ``ranges``), made by the
    caller together with the number of values present.
    """
    k = values.n_columns
    a, b = ranges[0].copy(), ranges[1].copy()
    for refine in range(_MAX_REFINE):
        counts = first if refine == 0 else values.sum(_counts_chunk, spec, a, b, _BINS, skip_absent)
        done = True
        for j in range(k):
            hist, below = counts[j, :_BINS], counts[j, _BINS]
            cum = below + np.cumsum(hist)  # values <= the end of each bin
            first = int(np.searchsorted(cum, lo_rank[j], side="left"))
            last = int(np.searchsorted(cum, hi_rank[j], side="left"))
            first, last = min(first, _BINS - 1), min(last, _BINS - 1)
            width = (b[j] - a[j]) / _BINS
            held = cum[last] - (cum[first - 1] if first else below)
            new_a, new_b = a[j] + first * width, (a[j] + (last + 1) * width if last < _BINS - 1 else b[j])
            if held > _MAX_DISTINCT and new_b - new_a < b[j] - a[j]:
                done = False
            a[j], b[j] = new_a, new_b
        if done:
            break
    return a, b


def chunked_quantile_columns(values, quantile, epsilon, lower, upper, log_scale, nonzero, pieces, jitter,
                             rng):
    """:func:`~skdp.mechanisms.quantiles.quantile_columns` on chunked values (arguments already validated)."""
    from ._quantile_sampler import ChunkedCounts, sample_quantiles, uses_sampler
    from .quantiles import _interval_masses, _sample_within, jitter_generator

    n, k = values.n_rows, values.n_columns
    exact = math.isinf(epsilon)
    if exact:
        return _exact(values, quantile, lower, upper, nonzero, pieces, log_scale)
    # Only the jitter generator's state travels to the workers, never the fit's generator (which
    # draws every noise of the fit): see jitter_generator. It advances the fit's generator by the
    # same 32 bytes as the in-memory quantile, so every later draw is the in-memory one.
    state = jitter_generator(rng).bit_generator.state if jitter > 0 else None
    spec = (lower, upper, log_scale, nonzero, jitter, state, False)
    lower_t, upper_t = (math.log(lower), math.log(upper)) if log_scale else (lower, upper)
    if uses_sampler(n, epsilon):  # a public rule: the window would hold more than 2^20 + 2 values
        release = sample_quantiles(ChunkedCounts(values, spec, lower_t, upper_t), n, k, quantile, epsilon,
                                   lower_t, upper_t, pieces, rng)
        return (np.exp(release) if log_scale else release), Repeated(ExponentialMechanismRelease(epsilon), k)
    u = 1.0 - rng.random(k)
    full = (np.full(k, lower_t), np.full(k, upper_t))
    # One pass: the counts over the whole range, and the number of values present (nonzero).
    first = values.sum(_counts_chunk, spec, full[0], full[1], _BINS, False)
    n_present = first[:, _BINS + 2] if nonzero else np.full(k, float(n))
    n_absent = n - n_present
    target = n_absent + quantile * n_present  # the rank k of the best interval (before max(., 0))
    half = math.ceil(min(2.0 * _WINDOW_NATS / epsilon, float(n))) + 1  # capped: the same clipped ranks
    lo_rank = np.clip(np.floor(target) - half, 1, n)
    hi_rank = np.clip(np.ceil(target) + half + 1, 1, n)
    a, b = _window(values, spec, lo_rank, hi_rank, False, full, first)
    parts = values.gather(_gather_chunk, spec, a, b, False)
    lo, hi = np.empty(k), np.empty(k)
    retry = []
    for j in range(k):
        choice = _select(_merge(parts, j), n, n_absent[j], n_present[j], quantile, epsilon, lower_t, upper_t,
                         pieces, u[j], _interval_masses, exact_tails=False)
        if choice is None:
            retry.append(j)
        else:
            lo[j], hi[j] = choice
    if retry:  # the tails could change the selection (probability about B / W): gather every value
        parts = values.gather(_gather_chunk, spec, np.full(k, lower_t), np.full(k, upper_t), False)
        for j in retry:
            lo[j], hi[j] = _select(_merge(parts, j), n, n_absent[j], n_present[j], quantile, epsilon, lower_t,
                                   upper_t, pieces, u[j], _interval_masses, exact_tails=True)
    estimate = lo + rng.random(k) * (hi - lo) if pieces is None else _sample_within(lo, hi, pieces, rng)
    if log_scale:
        estimate = np.exp(estimate)
    return estimate, Repeated(ExponentialMechanismRelease(epsilon), k)


def _min_distance(k0, k1, n_absent, n_present, quantile):
    """``min |max(k - n_absent, 0) - q n_present|`` over integers ``k0 <= k <= k1`` (the best tail factor)."""
    target = n_absent + quantile * n_present
    candidates = {k0, k1, min(max(math.floor(target), k0), k1), min(max(math.ceil(target), k0), k1)}
    return min(abs(max(k - n_absent, 0.0) - quantile * n_present) for k in candidates)


def _select(merged, n, n_absent, n_present, quantile, epsilon, lower_t, upper_t, pieces, u, interval_masses,
            exact_tails):
    """The interval ``(lo, hi)`` the uniform ``u`` selects, or None when the unknown tails could change it.

    Interval ``k`` lies between the ``k``-th and ``(k + 1)``-th smallest values
    (the public ends outside). Known: the intervals from the nearest value
    below the window to the nearest above; between tied values they have no
    width and no weight, so only those between distinct values are formed.
    """
    uniq, counts, n_below, below, n_above, above = merged
    first = below if n_below else lower_t
    last = above if n_above else upper_t
    edges = np.concatenate([[first], uniq, [last]])
    ranks = n_below + np.concatenate([[0.0], np.cumsum(counts)])  # values <= each edge but the last
    if pieces is None:
        mass = np.diff(edges) / (upper_t - lower_t)
    else:
        mass = interval_masses(edges[None, :], pieces)[0]
    with np.errstate(divide="ignore"):
        distance = np.abs(np.maximum(ranks - n_absent, 0.0) - quantile * n_present)
        log_w = np.log(mass) - 0.5 * epsilon * distance
    top = float(np.max(log_w, initial=-np.inf))
    if not np.isfinite(top):
        if not exact_tails:
            return None
        return lower_t, upper_t  # pragma: no cover - a public range of positive width always has mass
    weight = np.cumsum(np.exp(log_w - top))
    total = weight[-1]

    def tail_bound(span_lo, span_hi, k0, k1):
        if k1 < k0:
            return 0.0
        span = (span_hi - span_lo) / (upper_t - lower_t) if pieces is None else float(
            interval_masses(np.array([[span_lo, span_hi]]), pieces)[0, 0])
        if span <= 0:
            return 0.0
        nearest = _min_distance(k0, k1, n_absent, n_present, quantile)
        return math.exp(math.log(span) - 0.5 * epsilon * nearest - top)

    left = tail_bound(lower_t, first, 0, n_below - 1) if n_below else 0.0
    right = tail_bound(last, upper_t, n - n_above + 1, n) if n_above else 0.0
    if exact_tails or (left == 0.0 and right == 0.0):
        j = min(int(np.searchsorted(weight, u * total, side="left")), edges.size - 2)
        return edges[j], edges[j + 1]
    s_min, s_max = u * total - (1.0 - u) * left, u * total + u * right
    if not (s_min > 0.0 and s_max <= total):
        return None
    j_lo = int(np.searchsorted(weight, s_min, side="left"))
    j_hi = int(np.searchsorted(weight, s_max, side="left"))
    if j_lo != j_hi:
        return None
    return edges[j_lo], edges[j_lo + 1]


def _exact(values, quantile, lower, upper, nonzero, pieces, log_scale):
    """The non-private limit: :func:`numpy.quantile` of the (nonzero) clipped values."""
    k = values.n_columns
    spec = (lower, upper, log_scale, nonzero, 0.0, None, True)
    full = (np.full(k, lower), np.full(k, upper))
    first = values.sum(_counts_chunk, spec, full[0], full[1], _BINS, True)
    m = first[:, _BINS + 2]
    h = quantile * np.maximum(m - 1, 0)
    f = np.floor(h)
    a, b = _window(values, spec, f + 1, np.minimum(f + 2, np.maximum(m, 1)), True, full, first)
    parts = values.gather(_gather_chunk, spec, a, b, True)
    if pieces is not None:
        top = max(pieces, key=lambda piece: piece[2])
        empty = float(np.exp(0.5 * (top[0] + top[1]))) if log_scale else 0.5 * (top[0] + top[1])
    else:
        empty = lower
    out = np.empty(k)
    for j in range(k):
        if m[j] == 0:
            out[j] = empty
            continue
        uniq, counts, n_below, _, _, _ = _merge(parts, j)
        cum = n_below + np.cumsum(counts)

        def order_statistic(rank):
            return uniq[min(int(np.searchsorted(cum, rank, side="left")), uniq.size - 1)]

        pair = np.array([order_statistic(f[j] + 1), order_statistic(min(f[j] + 2, m[j]))])
        out[j] = np.quantile(pair, h[j] - f[j])
    return out, Repeated(ExponentialMechanismRelease(np.inf), k)
