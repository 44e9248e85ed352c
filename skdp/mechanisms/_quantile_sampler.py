"""The exponential-mechanism quantile drawn by rejection from counts: no value is sorted or gathered.

The quantile of :func:`~skdp.mechanisms.private_quantile` draws a point ``x``
of the public range (in transformed units: ``log`` on the log scale) with
density ``base(x) exp(-epsilon dist(rank(x)) / 2)``, where ``rank(x)`` is the
number of (jittered, clipped) values below ``x``, ``dist(k) = |max(k -
n_absent, 0) - q n_present|`` and ``base`` is the uniform measure of the range
or the prior's pieces. Drawing an interval between sorted values and a point
inside it (the in-memory code) is one way to draw from that density; this
module draws from it exactly with counts only, which a table held in chunks
gives by one reduction per pass (:mod:`skdp.mechanisms._chunked_quantiles`):

1. Counting passes: the number of values below and at-or-below each edge
   of the bins (``_BINS`` equal bins of the range, then the heavy bins split
   into sub-bins) gives every bin ``[a, b]`` the range ``[C(<= a), C(< b)]``
   of ``rank(x)`` for ``x`` inside it (at an end, where a tie makes the rank
   ambiguous on a set of base measure zero, the rank is taken in that range). A bin whose factor can vary by more than
   ``_NATS`` nats inside it, and whose envelope is not negligible, is split
   by a further pass, at most ``_MAX_SPLITS`` of them.
2. The envelope of a bin is ``base(bin) exp(-epsilon d_min / 2)``, ``d_min``
   the smallest ``dist(k)`` over its ranks: it dominates the density
   everywhere in the bin.
3. Rounds of proposals: a bin from the envelope, a point ``x`` from the base
   measure restricted to it, a uniform ``v``; one counting pass gives
   ``rank(x)`` of every proposal of every column, and the first proposal (in
   proposal order) with ``v < exp(-epsilon (dist(rank(x)) - d_min) / 2)`` is
   the release. The first accepted of i.i.d. proposals has exactly the
   target density (the envelope, the bins and the number of rounds only
   change how long it takes). A column that accepts nothing in
   ``_MAX_ROUNDS`` rounds (public) is drawn by the exact in-memory
   selection from all of its values (``gather``): the release is then the
   exponential mechanism's draw too, so the mixture of both cases is exactly
   the mechanism's distribution. Where the bins that carry the envelope have
   factors varying by at most one nat, a proposal is accepted with
   probability about ``1/e`` or more (about 0.8 measured in default fits),
   and the 64 proposals of the first round all fail with probability below
   ``1e-12``. Whether the fallback runs depends on the data, and its gather
   is unbounded in memory and not counted by the plan's gather check (not
   reached in any fit measured).

Randomness. The proposals and the uniforms ``v`` are drawn from two
generators per column, seeded through SHA-256 from 32 bytes of the fit's
generator each (as the jitter: :func:`~skdp.mechanisms.quantiles.jitter_generator`)
and split per column by :class:`numpy.random.SeedSequence`. The fit's
generator advances by those 64 bytes whatever the number of rounds, so every
later draw of the fit (its noise) does not depend on the data through the
rejections; no state of any generator leaves the driver, and the proposals
carry nothing of the fit's generator (their generators are SHA-256 children).

What travels to the workers, not released. The split points and the
proposals are functions of the exact counts over all rows: the bins are split
where those counts put the target's ranks, and the envelope that places the
proposals comes from them, so every worker learns from them about the other
workers' rows (the split points bracket a column's heavily tied values ever
more tightly: two atoms at -1 and 1 to within ``2.3e-10`` after three split
passes in a measured case). A round ``r + 1`` exists only if every proposal
of round ``r`` was rejected, and once the release is published its place
among the proposals tells which of them were rejected. Each round's proposals are
sent sorted (the counts do not depend on their order; the ranks are mapped
back to proposal order on the driver), so the order sent does not show which
came before the accepted one, but the round structure (how many rounds, the
proposals of the rejected ones) still leaks as described. So whoever can read
the task graph, the scheduler or the workers' memory must be trusted like the
data, as for the other unreleased values sent to the workers
(``docs/dask.rst``). The uniforms ``v`` never leave the driver. Only the
accepted proposal is an output: the release is exactly the exponential
mechanism's draw, epsilon-DP as in memory; the rejected proposals and the
split points reach no output but the number of passes (below). Each column's draws do
not depend on the other columns, on the split of the rows into chunks or on
threads, and the counts are integers: the in-memory quantile (which sorts
each column once and counts with a binary search) and the chunked one (which
adds per-chunk counts) release bit-identical values.

Side channel. The number of passes (counting passes to split bins, rounds of
proposals, the fallback's gather) depends on the data; it is visible in the time a
fit takes and in a scheduler's task stream, and is not covered by the privacy
accounting (as the refinement passes of the windowed selection,
``docs/dask.rst``).

When. The library uses this sampler by a public rule, decided from ``n``,
``epsilon`` and constants before any value is read (:func:`uses_sampler`):
when the windowed selection of :mod:`skdp.mechanisms._chunked_quantiles` would
gather more than ``2^20 + 2`` values of a column. At the default scaling's
quantile budget (``epsilon`` about ``120 / n``) that is every table of more
than ``2^20 + 2`` rows. Below it both paths keep the windowed (chunked) and
sorted (in-memory) selection.
"""

import hashlib
import math

import numpy as np

from ._chunked_quantiles import (_BINS, _MAX_DISTINCT, _gather_chunk, _merge, _select, _transformed,
                                 window_gather_per_column)

__all__ = ["uses_sampler", "sample_quantiles", "SortedColumns", "ChunkedCounts"]

_SAMPLER_ABOVE = _MAX_DISTINCT + 2  # the sampler runs when the window would gather more values than this
_NATS = 1.0  # a bin whose factor may vary by more is split (acceptance about 1/e or more inside it)
_NEGLIGIBLE = 1e-9  # ... unless its share of the envelope is below this
_SPLIT_POINTS = 4096  # new edges per column and counting pass (the size of a pass's counts, as _BINS)
_MAX_SPLITS = 8  # counting passes that split bins
_FIRST_BATCH = 64  # proposals per column in the first round, doubled every round up to _MAX_BATCH
_MAX_BATCH = 4096
_MAX_ROUNDS = 12  # then the exact selection from every value of the column


def uses_sampler(n_rows, epsilon):
    """Whether a quantile of ``n_rows`` values at ``epsilon`` is drawn by this sampler (public rule).

    When the windowed selection would gather more than ``2^20 + 2`` values of
    a column: its window of ``80 / epsilon`` ranks is wider than ``2^20`` and
    the column holds more values than that.

    Examples
    --------
    >>> uses_sampler(20_000_000, 120 / 20_000_000), uses_sampler(20_000_000, 0.5), uses_sampler(10_000, 0.012)
    (True, False, False)
    """
    return not math.isinf(epsilon) and window_gather_per_column(n_rows, epsilon) > _SAMPLER_ABOVE


def _child_root(rng):
    """A 256-bit seed from 32 bytes of ``rng`` through SHA-256 (reveals nothing of ``rng``'s state)."""
    return int.from_bytes(hashlib.sha256(rng.bytes(32)).digest(), "little")


def _column_generator(root, j):
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence(root, spawn_key=(int(j),))))


def _distance(k, n_absent, target):
    """``|max(k - n_absent, 0) - q n_present|`` (``target = q n_present``), as the in-memory weights."""
    return np.abs(np.maximum(k - n_absent, 0.0) - target)


class _Bins:
    """A column's bins: edges, the number of values below and at-or-below each edge, and the envelope.

    A point strictly inside bin ``[a, b]`` has a rank in ``[C(<= a), C(< b)]``;
    so do its ends, where the rank is ambiguous on a set of measure zero (a
    tie at an edge) and is taken in that range.
    """

    def __init__(self, edges, lt, le, n_absent, target, epsilon, lower_t, upper_t, pieces, interval_masses):
        self.edges, self.lt, self.le = edges, lt, le
        a, b = edges[:-1], edges[1:]
        self.k0, self.k1 = le[:-1], lt[1:]
        # The smallest distance over the integers k0 <= k <= k1: the distance falls to the target's rank
        # and rises after it, so one of the integers next to the target (clipped to the bin) attains it.
        centre = n_absent + target
        candidates = [self.k0, self.k1, np.clip(math.floor(centre), self.k0, self.k1),
                      np.clip(math.ceil(centre), self.k0, self.k1)]
        distances = [_distance(c, n_absent, target) for c in candidates]
        self.d_min = np.minimum.reduce(distances)
        self.spread = 0.5 * epsilon * (np.maximum(distances[0], distances[1]) - self.d_min)
        if pieces is None:
            mass = (b - a) / (upper_t - lower_t)
        else:
            mass = interval_masses(edges[None, :], pieces)[0]
        with np.errstate(divide="ignore"):
            log_w = np.log(mass) - 0.5 * epsilon * self.d_min
        top = np.max(log_w)
        self.weight = np.exp(log_w - top)  # mass > 0 somewhere: the range has positive base measure
        self.cumulative = np.cumsum(self.weight)

    def split_points(self):
        """New edges inside the bins whose factor varies by more than ``_NATS`` (the heaviest first)."""
        total = self.cumulative[-1]
        heavy = np.flatnonzero((self.spread > _NATS) & (self.weight > _NEGLIGIBLE * total))
        if heavy.size == 0:
            return np.empty(0)
        heavy = heavy[np.argsort(-self.weight[heavy], kind="stable")][:_SPLIT_POINTS]
        pieces = min(_BINS, max(2, _SPLIT_POINTS // heavy.size + 1))
        a, b = self.edges[heavy], self.edges[heavy + 1]
        points = (a[:, None] + (b - a)[:, None] * (np.arange(1, pieces) / pieces)[None, :]).ravel()
        inside = (points > np.repeat(a, pieces - 1)) & (points < np.repeat(b, pieces - 1))
        return np.unique(points[inside])  # none when the bins are a few ulps wide

    def propose(self, size, rng, pieces, sample_within):
        """``size`` proposals: bins from the envelope, points from the base measure within them."""
        u = rng.random(size) * self.cumulative[-1]
        bins = np.minimum(np.searchsorted(self.cumulative, u, side="right"), self.weight.size - 1)
        a, b = self.edges[bins], self.edges[bins + 1]
        if pieces is None:
            return bins, a + rng.random(size) * (b - a)
        return bins, sample_within(a, b, pieces, rng)


def _merged_edges(edges, lt, le, points, found):
    e = np.concatenate([edges, points])
    order = np.argsort(e, kind="stable")
    e = e[order]
    keep = np.concatenate([[True], np.diff(e) > 0])
    lt = np.concatenate([lt, found[0::2]])[order][keep]
    le = np.concatenate([le, found[1::2]])[order][keep]
    return e[keep], lt, le


def sample_quantiles(counts, n, k, quantile, epsilon, lower_t, upper_t, pieces, rng, trace=None):
    """The release of every column (transformed units), drawn by rejection from counts.

    ``counts`` holds the values: ``counts.below(points, both, with_present)``
    returns, per column ``j``, the number of values below each of
    ``points[j]`` (with ``both``, below and at-or-below, interleaved), and the
    number of values present per column (for ``nonzero``), in one pass;
    ``counts.all_values(columns)`` gathers the distinct values of those columns
    with their counts, in the form of :func:`~skdp.mechanisms._chunked_quantiles._merge`
    (the exact fallback). ``rng`` (the fit's generator) advances by 64 bytes.
    ``trace``, a dict, receives the number of passes of each kind, the
    proposals made per column and the columns drawn by the fallback (for
    tests and benchmarks).
    """
    from .quantiles import _interval_masses, _sample_within

    proposal_root, accept_root = _child_root(rng), _child_root(rng)
    grid = np.linspace(lower_t, upper_t, _BINS + 1)
    found, present = counts.below([grid] * k, True, True)
    n_present = np.asarray(present, dtype=float)
    n_absent = n - n_present
    target = quantile * n_present
    edges = [grid] * k
    lt = [f[0::2] for f in found]
    le = [f[1::2] for f in found]

    def bins(j):
        return _Bins(edges[j], lt[j], le[j], n_absent[j], target[j], epsilon, lower_t, upper_t, pieces,
                     _interval_masses)

    columns = [bins(j) for j in range(k)]
    trace = {} if trace is None else trace
    trace.update(split_passes=0, rounds=0, proposals=np.zeros(k, dtype=int), fallback=[])
    for _ in range(_MAX_SPLITS):
        points = [c.split_points() for c in columns]
        if not any(p.size for p in points):
            break
        found, _ = counts.below(points, True, False)
        trace["split_passes"] += 1
        for j in range(k):
            if points[j].size:
                edges[j], lt[j], le[j] = _merged_edges(edges[j], lt[j], le[j], points[j], found[j])
                columns[j] = bins(j)

    propose = [_column_generator(proposal_root, j) for j in range(k)]
    accept = [_column_generator(accept_root, j) for j in range(k)]
    release = np.full(k, np.nan)
    active = list(range(k))
    for round_ in range(_MAX_ROUNDS):
        if not active:
            break
        size = min(_MAX_BATCH, _FIRST_BATCH << round_)
        points = [np.empty(0)] * k
        drawn = {}
        for j in active:
            chosen, proposals = columns[j].propose(size, propose[j], pieces, _sample_within)
            # Sent sorted: the counts do not depend on the order, and the order sent does not show which
            # proposals came before the accepted one (the ranks are mapped back to proposal order here).
            order = np.argsort(proposals, kind="stable")
            points[j] = proposals[order]
            drawn[j] = chosen, accept[j].random(size), proposals, order
        ranks, _ = counts.below(points, False, False)
        trace["rounds"] += 1
        waiting = []
        for j in active:
            chosen, v, proposals, order = drawn[j]
            c = columns[j]
            rank = np.empty(size)
            rank[order] = ranks[j]
            # The rank of a proposal at an end of its bin is taken in the bin's range (see _Bins).
            rank = np.clip(rank, c.k0[chosen], c.k1[chosen])
            excess = _distance(rank, n_absent[j], target[j]) - c.d_min[chosen]
            accepted = np.flatnonzero(v < np.exp(-0.5 * epsilon * np.maximum(excess, 0.0)))
            trace["proposals"][j] += size if not accepted.size else accepted[0] + 1
            if accepted.size:
                release[j] = proposals[accepted[0]]
            else:
                waiting.append(j)
        active = waiting
    if active:  # data-dependent, unbounded (not reached in any fit measured): the exact selection
        merged = counts.all_values(active)
        trace["fallback"] = list(active)
        for j in active:
            u = 1.0 - accept[j].random()
            lo, hi = _select(merged[j], n, n_absent[j], n_present[j], quantile, epsilon, lower_t, upper_t,
                             pieces, u, _interval_masses, exact_tails=True)
            if pieces is None:
                release[j] = lo + accept[j].random() * (hi - lo)
            else:
                release[j] = _sample_within(np.array([lo]), np.array([hi]), pieces, accept[j])[0]
    return release


def _count(sorted_column, points, both):
    """Values of a sorted column below each point (with ``both``, below and at-or-below, interleaved)."""
    below = np.searchsorted(sorted_column, points, side="left")
    if not both:
        return below
    out = np.empty(2 * below.size, dtype=below.dtype)
    out[0::2], out[1::2] = below, np.searchsorted(sorted_column, points, side="right")
    return out


def _ranks_chunk(values_c, offset, spec, points, both, with_present):
    """Per column ``j``: the counts of :func:`_count` for the chunk's values and ``points[j]``, flat."""
    t, present = _transformed(values_c, offset, spec)
    parts = [_count(np.sort(t[:, j]), points[j], both) for j in range(t.shape[1]) if len(points[j])]
    if with_present:
        parts.append(present.sum(axis=0))
    return np.concatenate(parts).astype(float) if parts else np.empty(0)


def _split(flat, points, both, with_present, k):
    sizes = [len(p) * (2 if both else 1) for p in points]
    ends = np.cumsum(sizes)
    out = [flat[end - size:end] for size, end in zip(sizes, ends)]
    return out, (flat[ends[-1]:ends[-1] + k] if with_present else None)


class ChunkedCounts:
    """The counts of chunked values (:mod:`skdp.mechanisms._chunked_quantiles`): one reduction per call."""

    def __init__(self, values, spec, lower_t, upper_t):
        self.values, self.spec = values, spec
        self.lower_t, self.upper_t = lower_t, upper_t
        self.k = values.n_columns

    def below(self, points, both, with_present):
        points = tuple(np.asarray(p, dtype=float) for p in points)
        flat = self.values.sum(_ranks_chunk, self.spec, points, both, with_present)
        return _split(np.asarray(flat, dtype=float), points, both, with_present, self.k)

    def all_values(self, columns):
        a, b = np.full(self.k, np.inf), np.full(self.k, -np.inf)  # an empty range: nothing gathered
        a[columns], b[columns] = self.lower_t, self.upper_t
        parts = self.values.gather(_gather_chunk, self.spec, a, b, False)
        return {j: _merge(parts, j) for j in columns}


class SortedColumns:
    """The counts of in-memory values: every column sorted once, counted by binary search."""

    def __init__(self, x, spec, lower_t, upper_t):
        self.lower_t, self.upper_t = lower_t, upper_t
        t, present = _transformed(x, 0, spec)
        self.present = present.sum(axis=0)
        self.sorted = np.ascontiguousarray(t.T)  # a copy (one column per row), sorted in place
        del t, present
        self.sorted.sort(axis=1)

    def below(self, points, both, with_present):
        out = [_count(self.sorted[j], p, both).astype(float) if len(p) else np.empty(0)
               for j, p in enumerate(points)]
        return out, (self.present.astype(float) if with_present else None)

    def all_values(self, columns):
        # As ChunkedCounts: the values outside [lower_t, upper_t] split off (their count and nearest value).
        # A value clipped to the bound can lie an ulp outside the transformed bound (``log`` of an array
        # and of a scalar may differ by an ulp); kept among the values, it would form an interval of
        # negative width with the bound.
        merged = {}
        for j in columns:
            column = self.sorted[j]
            lo = int(np.searchsorted(column, self.lower_t, side="left"))
            hi = int(np.searchsorted(column, self.upper_t, side="right"))
            uniq, counts = np.unique(column[lo:hi], return_counts=True)
            merged[j] = (uniq, counts.astype(float), float(lo), column[lo - 1] if lo else -np.inf,
                         float(column.size - hi), column[hi] if hi < column.size else np.inf)
        return merged
