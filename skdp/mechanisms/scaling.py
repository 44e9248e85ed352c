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
jitter of every unchanged record). Every jitter is drawn from a generator
seeded from the fit's through SHA-256
(:func:`~skdp.mechanisms.quantiles.jitter_generator`), never from the fit's
generator itself: the jitter is public, so the rows of a chunk held elsewhere
(a Dask worker) may reproduce their share of it from that generator's state,
which reveals nothing about the fit's noise.
"""

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import scipy.sparse as sp

from ..accounting import ExponentialMechanismRelease, Repeated
from ._random import check_generator
from .noise import gaussian_mechanism
from ._chunked_quantiles import chunk_uniforms
from ._columns import as_columns
from .quantiles import jitter_generator, private_quantile, quantile_columns

__all__ = ["private_robust_scaling", "robust_scaling_event", "private_pooled_scale",
           "pooled_scaling_event", "private_column_statistics", "column_statistics_event",
           "private_magnitude_check", "magnitude_check_sensitivity", "SCALE_PRIOR"]

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
    one_column = getattr(X, "ndim", 2) == 1
    if getattr(X, "chunked_columns", None) is None:
        X = np.asarray(X, dtype=float)
        X = X.reshape(X.shape[0], -1)
    source = as_columns(X)
    n, d = source.shape
    lower, upper = (float(b) for b in bounds)

    # One multiplicative jitter per record and column, shared by the log-scale
    # steps (public randomness; each release is DP given it).
    log_jitter = jitter_generator(rng).bit_generator.state
    s0, _ = private_quantile(source.values(d, _jittered_magnitudes, jitter, log_jitter), 0.5, epsilon,
                             (lower, upper), scale="log", nonzero=True, random_state=rng)
    s0 = np.atleast_1d(s0)
    if center:
        h = min(jitter, _CENTER_JITTER)
        centre_jitter = jitter_generator(rng).bit_generator.state
        m_t, _ = private_quantile(source.values(d, _asinh_values, s0, h, centre_jitter), 0.5, epsilon,
                                  (-_CENTER_LIMIT, _CENTER_LIMIT), random_state=rng)
        grid = _CENTER_GRID * s0
        centre = np.round(np.sinh(np.atleast_1d(m_t)) * s0 / grid) * grid
        rel, _ = private_quantile(source.values(d, _relative_deviations, centre, grid, s0, jitter, log_jitter),
                                  _DEVIATION_LEVEL, epsilon, _DEVIATION_BOUNDS, scale="log", nonzero=True,
                                  random_state=rng)
        scale = _Q60_TO_STD * np.maximum(np.atleast_1d(rel), _SCALE_FLOOR) * s0
    else:
        centre = np.zeros(d)
        scale = _MAD_TO_STD * s0
    event = robust_scaling_event(d, epsilon, center=center)
    if one_column:
        return float(centre[0]), float(scale[0]), event
    return centre, scale, event


# -- chunk functions of the robust scaling: per-record values of a block of rows --------------
def _uniforms(state, offset, width, shape):
    """The block's share of the public jitter stream ``state``: ``U(-width, width)`` of its rows."""
    return chunk_uniforms(state, offset * (shape[1] if len(shape) > 1 else 1), -width, width, shape)


def _float_rows(block):
    block = np.asarray(block, dtype=float)
    return block.reshape(block.shape[0], -1)


def _jittered_magnitudes(block, offset, width, state):
    x = _float_rows(block)
    return np.abs(x) * np.exp(_uniforms(state, offset, width, x.shape))


def _asinh_values(block, offset, s0, width, state):
    x = _float_rows(block)
    return np.arcsinh(x / s0) + _uniforms(state, offset, width, x.shape)


def _relative_deviations(block, offset, centre, grid, s0, width, state):
    x = _float_rows(block)
    dev = np.abs(x - centre)
    return np.where(dev < grid, 0.0, dev) / s0 * np.exp(_uniforms(state, offset, width, x.shape))


def pooled_scaling_event(epsilon):
    """The privacy event of :func:`private_pooled_scale`."""
    return ExponentialMechanismRelease(epsilon)


def private_pooled_scale(X, epsilon, *, bounds=(1e-12, 1e12), jitter=0.05, random_state=None):
    """One epsilon-DP scale shared by all columns: the median over rows of their nonzero RMS.

    Each row contributes one value, the root mean square of its nonzero
    entries (all-zero rows contribute nothing), so replacing a row changes one
    value and the log-scale median is epsilon-DP at the full epsilon. For
    Gaussian columns it is about their standard deviation; for one-hot blocks
    and 0/1 columns next to standardised numerics it is about 1 (a pooled
    median over entries would be 0 on a mostly-zero matrix, and a median per
    entry at ``epsilon / n_columns`` fails on sparse rows). For features that
    share a scale (already standardised, or measured in one unit).

    Returns
    -------
    scale : float
    event : PrivacyEvent

    Examples
    --------
    >>> import numpy as np
    >>> from skdp.mechanisms import private_pooled_scale
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(scale=3.0, size=(2000, 10))
    >>> s, event = private_pooled_scale(X, epsilon=0.2, random_state=0)
    >>> bool(abs(s / 3.0 - 1) < 0.1), event.epsilon(0.0)
    (True, 0.2)
    >>> onehot = np.eye(50)[rng.integers(50, size=2000)]  # a dummy-coded 50-level categorical
    >>> s, _ = private_pooled_scale(np.hstack([rng.normal(size=(2000, 3)), onehot]), 0.2, random_state=0)
    >>> bool(0.7 < s < 1.3)
    True
    """
    rng = check_generator(random_state)
    source = as_columns(X)
    state = jitter_generator(rng).bit_generator.state
    values = source.values(1, _jittered_row_rms, jitter, state)
    lower, upper = (float(b) for b in bounds)
    s, _ = private_quantile(values, 0.5, epsilon, (lower, upper), scale="log", nonzero=True, random_state=rng)
    return float(s), pooled_scaling_event(epsilon)


def _jittered_row_rms(block, offset, width, state):
    """Per row of the block: the RMS of its nonzero entries (0 for an all-zero row), jittered."""
    # Entries beyond 1e150 are clipped (a per-record map) so that squares stay finite.
    if sp.issparse(block):
        X = sp.csr_matrix(block, dtype=float)
        X.data = np.clip(X.data, -1e150, 1e150)
        squares = np.asarray(X.multiply(X).sum(axis=1)).ravel()
        counts = np.asarray((X != 0).sum(axis=1)).ravel()
    else:
        X = np.clip(np.asarray(block, dtype=float), -1e150, 1e150)
        X = X.reshape(X.shape[0], -1)
        squares = np.einsum("ij,ij->i", X, X)
        counts = np.count_nonzero(X, axis=1)
    # Per-row value: depends on its own row (and public jitter) only.
    rms = np.sqrt(np.divide(squares, counts, out=np.zeros_like(squares), where=counts > 0))
    return rms * np.exp(_uniforms(state, offset, width, rms.shape))


# --------------------------------------------------------------------------------------------
# Column statistics for real tables: a centre and a scale that neither collapse on 0/1 columns
# nor lose large offsets.
# --------------------------------------------------------------------------------------------

# A public base measure for scales: "a column whose data cannot move the mechanism is a 0/1
# column" (gap 1). Errors go upwards (a column looks small and is merely down-weighted) far more
# often than downwards (it would look huge).
SCALE_PRIOR = ((1e-15, 0.5, 1e-5), (0.5, 2.0, 0.99899), (2.0, 1e15, 1e-3))
_STAT_BOUNDS = (1e-15, 1e15)  # public range of magnitudes; values beyond are clipped (accuracy only)
_UNIT0 = 1e-15  # the public unit of the signed log of stage (a)
_T1_BOUND = 70.0  # asinh(1e15 / 1e-15) = 69.1
_JITTER_T1, _JITTER_T2, _JITTER_LOG = 1e-3, 1e-5, 0.05
_BLOCK = 64
_PARALLEL_SIZE = 400_000  # values; smaller tables are done in one thread


def _signed_log(x):
    """``asinh(x / 1e-15)``, computed as ``sign(x) log(2 |x| / 1e-15)`` where that is exact.

    For ``|x / unit| > 1e8`` the two differ by a relative ``1 / (4 (x / unit)^2)``,
    below the rounding error, and the logarithm is several times faster than
    ``arcsinh`` on large inputs; smaller values use ``arcsinh``.
    """
    magnitude = np.abs(x)
    large = magnitude > 1e8 * _UNIT0
    with np.errstate(divide="ignore"):
        t = np.log(magnitude)
    t += np.log(2.0 / _UNIT0)
    t = np.copysign(t, x, out=t)
    if not large.all():
        t[~large] = np.arcsinh(x[~large] / _UNIT0)
    return t


def column_statistics_event(n_columns, epsilon, stages=4):
    """The privacy event of :func:`private_column_statistics`."""
    return Repeated(ExponentialMechanismRelease(epsilon), int(stages) * int(n_columns))


def private_column_statistics(X, epsilon, *, stages=4, random_state=None):
    """Epsilon-DP centre and scale of every column, right for binary, one-hot, offset and heavy columns.

    Every release is an exponential-mechanism quantile on a rank utility of
    sensitivity 1 over per-record values (each value depends on its own record,
    on public jitter and on earlier releases only), so each is epsilon-DP and a
    column costs ``stages`` of them. For one column ``x`` (values beyond
    ``+-1e15`` clipped, a public per-record map):

    (a) coarse centre ``c1``: the median of ``asinh(x / 1e-15)`` (a signed log
        with a public tiny unit, so no scale is needed first) with a jitter of
        1e-3: any offset up to 1e15 to a relative precision of about 1e-3; a
        median inside the jitter cluster at 0 gives ``c1 = 0`` exactly;
    (b) coarse scale ``s1``: the median of the nonzero ``|x - c1|`` (values
        within ``2e-3 |c1|`` of ``c1`` count as tied with it) on a log scale, with
        the public prior :data:`SCALE_PRIOR`: a column with too few nonzero
        deviations for the budget (a rare level of a one-hot block, a constant
        column) gets a scale near 1, the gap of a 0/1 column;
    (c) centre ``c``: the median of ``x`` on a linear scale within
        ``c1 +- 20 (1e-3 |c1| + s1)``: within a fraction of a spread even at
        offsets of 1e6 spreads;
    (d) scale ``s``: the median of the nonzero ``|x - c|``, with the prior,
        floored at ``1e-5`` of the stage-(c) range (a constant column stays
        within ``|z| <= 1``).

    Parameters
    ----------
    X : array-like or sparse matrix of shape (n_samples, n_columns)
    epsilon : float > 0
        Epsilon of each quantile (``inf``: exact statistics, no jitter).
    stages : {4, 2, 1}, default=4
        4: (a)-(d); 2: (a)-(b), the scale floored at ``2e-3 |c1|`` (an offset
        column is compressed, never blown up); 1: (b) with ``c1 = 0`` (scales only).
    random_state : None, int or Generator

    Returns
    -------
    center, scale : ndarray of shape (n_columns,)
    event : PrivacyEvent

    Examples
    --------
    >>> import numpy as np
    >>> from skdp.mechanisms import private_column_statistics
    >>> rng = np.random.default_rng(0)
    >>> X = np.column_stack([rng.normal(1e4, 1.0, 10_000),      # offset >> spread
    ...                      rng.random(10_000) < 0.05,          # rare binary
    ...                      np.full(10_000, 3.0)])              # constant
    >>> c, s, event = private_column_statistics(X, epsilon=0.01, random_state=0)
    >>> bool(abs(c[0] - 1e4) < 0.5), bool(abs(c[1]) < 1e-3), bool(abs(c[2] - 3.0) < 1e-3)
    (True, True, True)
    >>> bool(0.5 < s[0] < 1.5), bool(0.5 <= s[1] <= 2.0)
    (True, True)
    >>> event.epsilon(0.0)  # four quantiles per column at epsilon 0.01
    0.12
    """
    if stages not in (1, 2, 4):
        raise ValueError(f"stages must be 1, 2 or 4; got {stages!r}.")
    rng = check_generator(random_state)
    source = as_columns(X)
    n, d = source.shape
    if n * d < _PARALLEL_SIZE or d < 2 or np.isinf(epsilon):
        centre, scale = _column_statistics(source, epsilon, stages, rng, threads=2)
    else:
        # Two halves of the columns in two threads (numpy releases the GIL), each
        # with its own generator seeded from ``rng``: the split depends on the
        # shape only, so results are reproducible. Columns are released
        # independently, so the split does not change the event.
        seeds = rng.integers(0, 2**63 - 1, size=2)
        halves = (slice(0, d // 2), slice(d // 2, d))
        with ThreadPoolExecutor(max_workers=2) as pool:
            parts = list(pool.map(
                lambda job: _column_statistics(source.columns(job[0]), epsilon, stages,
                                               np.random.default_rng(job[1]), threads=1), zip(halves, seeds)))
        centre, scale = (np.concatenate([part[i] for part in parts]) for i in range(2))
    return centre, scale, column_statistics_event(d, epsilon, stages)


def _column_statistics(source, epsilon, stages, rng, threads):
    """Centres and scales of the columns of a column source (the body of :func:`private_column_statistics`).

    Every stage is a chunk function (the per-record values of a block of rows,
    from the raw values, the released statistics of the earlier stages and the
    block's share of a public jitter stream) and a quantile.
    """
    d = source.shape[1]
    exact = np.isinf(epsilon)
    h1, h2, jl = (0.0, 0.0, 0.0) if exact else (_JITTER_T1, _JITTER_T2, _JITTER_LOG)
    lo = _STAT_BOUNDS[0]
    centre, scale = np.empty(d), np.empty(d)

    def quantile(values, bounds, log):
        kwargs = dict(scale="log", nonzero=True, prior=SCALE_PRIOR) if log else {}
        return np.atleast_1d(quantile_columns(values, 0.5, epsilon, bounds, random_state=rng, threads=threads,
                                              **kwargs)[0])

    def jitter(width):
        """The state of a fresh public jitter stream (drawn from ``rng`` before the quantile, as its noise)."""
        return jitter_generator(rng).bit_generator.state if width else None

    for j0 in range(0, d, _BLOCK):
        j1 = min(d, j0 + _BLOCK)
        block = source.columns(slice(j0, j1))
        k = j1 - j0
        if stages == 1:
            centre[j0:j1] = 0.0
            state = jitter(jl)
            scale[j0:j1] = np.maximum(quantile(block.values(k, _deviations, 0.0, None, jl, state),
                                               _STAT_BOUNDS, True), lo)
            continue
        state = jitter(h1)
        m1 = quantile(block.values(k, _signed_log_values, h1, state), (-_T1_BOUND, _T1_BOUND), False)
        c1 = np.where(np.abs(m1) <= 2 * _JITTER_T1, 0.0, _UNIT0 * np.sinh(m1))
        state = jitter(jl)
        s1 = quantile(block.values(k, _deviations, c1, 2 * _JITTER_T1 * np.abs(c1), jl, state), _STAT_BOUNDS,
                      True)
        if stages == 2:
            centre[j0:j1] = c1
            scale[j0:j1] = np.maximum(s1, np.maximum(2 * _JITTER_T1 * np.abs(c1), lo))
            continue
        R2 = 20.0 * (_JITTER_T1 * np.abs(c1) + s1)
        state = jitter(h2)
        c2 = c1 + R2 * quantile(block.values(k, _relative_values, c1, R2, h2, state), (-1.0, 1.0), False)
        state = jitter(jl)
        s2 = quantile(block.values(k, _deviations, c2, 2 * _JITTER_T2 * R2, jl, state), _STAT_BOUNDS, True)
        centre[j0:j1] = c2
        scale[j0:j1] = np.maximum(s2, np.maximum(_JITTER_T2 * R2, lo))
    return centre, scale


# -- chunk functions of the column statistics: per-record values of a block of rows ------------
def _clipped_block(block):
    """The block as dense floats, values beyond ``+-1e15`` clipped (a per-record map)."""
    hi = _STAT_BOUNDS[1]
    return np.clip(block.toarray() if hasattr(block, "toarray") else np.asarray(block, dtype=float), -hi, hi)


def _signed_log_values(block, offset, width, state):
    """Stage (a): ``asinh(x / 1e-15)``, additively jittered."""
    t1 = _signed_log(_clipped_block(block))
    return t1 + _uniforms(state, offset, width, t1.shape) if width else t1


def _deviations(block, offset, centre, tie, width, state):
    """Stages (b), (d) and the scale-only stage: ``|x - centre|``, 0 within ``tie``, multiplicatively jittered."""
    dev = np.abs(_clipped_block(block) - centre)
    if tie is not None:
        dev = np.where(dev <= tie, 0.0, dev)
    return dev * np.exp(_uniforms(state, offset, width, dev.shape)) if width else dev


def _relative_values(block, offset, c1, R2, width, state):
    """Stage (c): ``(x - c1) / R2``, additively jittered."""
    x2 = (_clipped_block(block) - c1) / R2
    return x2 + _uniforms(state, offset, width, x2.shape) if width else x2


def magnitude_check_sensitivity(n_columns, decades=4):
    """L2 sensitivity of :func:`private_magnitude_check`'s counts: ``sqrt(decades * n_columns)``."""
    return float(np.sqrt(decades * n_columns))


def private_magnitude_check(X, center, scale, noise_std, *, decades=4, random_state=None):
    """Per column, the decades by which a released scale is too small, from private exceedance counts.

    For ``k = 1..decades`` the number of rows with ``|x - center| / scale > 10^k``
    is released with Gaussian noise; replacing a row changes every count by at
    most 1, so the ``decades x n_columns`` counts have L2 sensitivity
    ``sqrt(decades n_columns)``. A column whose noisy counts exceed
    ``3.5 noise_std + 0.002 n`` for the first ``k`` decades gets ``k`` (post-
    processing): its scale should be multiplied by ``10^k``. It catches scales
    the quantiles cannot see (a zero-inflated column of large amounts, whose
    nonzero values are too few for the budget).

    Returns
    -------
    decades_off : ndarray of int, shape (n_columns,)
    event : GaussianRelease
    """
    source = as_columns(X)
    n, d = source.shape
    thresholds = 10.0 ** np.arange(1, decades + 1)
    counts = source.sum(_exceedance_counts, np.asarray(center), np.asarray(scale), thresholds)
    sensitivity = magnitude_check_sensitivity(d, decades)
    noisy, event = gaussian_mechanism(counts, sensitivity, noise_std, random_state=random_state)
    tau = 3.5 * float(noise_std) + 0.002 * n
    return np.cumprod(noisy > tau, axis=1).sum(axis=1).astype(int), event


def _exceedance_counts(block, offset, center, scale, thresholds):
    """Chunk function of the magnitude check: per column and threshold, the rows with ``|x - c| / s`` above it."""
    counts = np.zeros((block.shape[1], thresholds.size))
    for i0 in range(0, block.shape[0], 4096):
        part = block[i0:i0 + 4096]
        part = part.toarray() if hasattr(part, "toarray") else np.asarray(part, dtype=float)
        z = np.abs((part - center) / scale)
        counts += (z[:, :, None] > thresholds[None, None, :]).sum(axis=0)
    return counts
