"""The training rows held on a Dask cluster: every pass of a private fit as one reduction of chunk sums.

A private linear fit touches its rows only through sums of per-row terms, and
every noise draw and every step happens on the driver. :class:`ChunkedRows`
holds ``X`` and ``y`` as Dask arrays chunked by rows and offers one operation,
:meth:`ChunkedRows.sum`: apply a function of one chunk ``(X_c, y_c)`` (and of
public or released arguments) to every chunk and add the results on the driver.
The chunk functions below are the in-memory code applied to a block of rows,
so the Dask fit releases the same values as the in-memory fit of the same rows,
up to the order of floating-point summation, and the noise is drawn on the
driver from the fit's generator, in the same order: the same model and the same
privacy event (every release keeps its sensitivity: a sum over rows does not
depend on how the rows are split into chunks). Nothing brings rows to the
driver: only the per-chunk sums (vectors of ``p`` numbers, ``p x p`` Gram
matrices) travel. The in-memory path does not go through this module and is
unchanged.

Where the default path of :class:`~skdp.DPHeavyTailRegressor` (``algorithm``
"auto" -> "clipped_gd", ``scaling="auto"``) touches the rows, and the reduction
each becomes:

======================================  ==========================================  ===============
in-memory step                          per-chunk partial sum                       status
======================================  ==========================================  ===============
validation (finite values, shapes)      all-finite flags of the chunk               built
column statistics (4 quantiles per      histograms over public bins of the          refused
column; :func:`~skdp.mechanisms.         per-record values, then the values in the
private_column_statistics`)             few bins the mechanism can select (below)
magnitude check (exceedance counts)     counts of ``|z| > 10^k`` per column         refused
median row norm of ``[z, 1]``           as the column statistics                    refused
second-moment matrix of ``[z, 1]``      ``A_c^T A_c`` of the clipped rows           refused
(``_whitening`` is post-processing)
median norm of the whitened rows        as the column statistics                    refused
curvature (top eigenvalue of the        ``Z_c^T Z_c`` (squared clip factors as      built (rows
mean ``x x^T``)                         weights on whitened rows)                   clipped)
clip thresholds (median / quantile of   as the column statistics                    built
gradient norms, two stages)
Huber threshold (median ``|r|``)        as the column statistics                    built
``T`` noisy clipped gradient steps      ``Z_c^T clip(loss'(Z_c w, y_c))``           built
fit check (clipped residual sums)       sum of the clipped improvement terms        built
predict                                 ``X_c @ coef + intercept`` (lazy, no sum)   built
======================================  ==========================================  ===============

Quantiles. The library's quantiles are the exponential mechanism over the
intervals between the sorted values (:func:`~skdp.mechanisms.private_quantile`):
interval ``k`` has weight ``width_k exp(-epsilon |k - q n| / 2)``. Per-record
values of chunked rows (:class:`ChunkedValues`: gradient norms, absolute
residuals) are released by :mod:`skdp.mechanisms._chunked_quantiles` without
sorting the table: counts in public bins give every bin its ranks, and the
distinct values in the bins within ``80 / epsilon`` ranks of the target (a few
per rank, gathered with their counts: ``O(1 / epsilon)`` values whatever ``n``)
give the intervals there exactly; the tails' weight is bounded, and when the
bound could change the selection (probability about that bound, below
``1e-15``) every value is gathered, so the draw is exactly the exponential
mechanism's and equals the in-memory one up to rounding. The quantiles' jitter
(public per-record randomness, ``n x columns`` uniforms in row-major order from
a generator seeded from the fit's through SHA-256) is reproduced in each chunk
from that jitter generator's state advanced to the chunk's first row; the fit's
own generator never leaves the driver (its state would let anyone who sees the
task graph replay every noise of the fit). A quantile costs 3 passes (more when
the bins near the target are crowded: a data-dependent pass count, a timing
side channel outside the accounting). Still to do: the column statistics (their
per-record values are functions of the raw columns and of earlier releases,
with jitter drawn between the stages), the row-norm medians and the magnitude
check of the standardiser, hence every scaling mode but "none"; until then
those are refused on Dask input before anything is spent
(:func:`check_chunked_plan`).

Passes. A Dask fit of the supported configurations makes ``T + 3`` passes
(the validation, the curvature, one per gradient step, the fit check) plus 2
per private quantile (the clip thresholds, the Huber threshold); the in-memory
fit sweeps its arrays at least as often (two products per step). Each pass
recomputes the graph of ``X`` and ``y`` from their source unless the caller
persisted them (``X.persist()``): out-of-core tables are read once per pass.

Ledgers. A fit on Dask input runs on the driver (the client), whose ledger is
charged as for an in-memory fit. A fit that itself runs inside a Dask worker
(model selection under the joblib Dask backend) charges its explicit
accountant, the block it was copied in, or the block of the main thread when
the worker shares the user's process; otherwise it refuses before spending
(:func:`skdp.accounting.budget.resolve_default`).

The supported configurations today: :class:`~skdp.DPHeavyTailRegressor` with
``scaling="none"`` (features on a scale known without the data; rows clipped to
the public norm ``sqrt(d) + 3``) and ``algorithm`` "auto" or "clipped_gd" (any
built-in loss; private or public clip thresholds; penalties), no declared
bounds, a Gaussian budget (``delta > 0``).
"""

import math
import sys

import numpy as np

from ..mechanisms import clipped_derivatives, row_norms
from ..solvers import GLMProblem

__all__ = ["ChunkedRows", "ChunkedValues", "ChunkedDesign", "ChunkedProblem", "is_dask_collection",
           "check_chunked_estimator", "check_chunked_plan",
           "lazy_decision_function"]

_LABEL_LIMIT = 1e150  # as GLMProblem: labels in solver units beyond it are clipped (a per-record map)


def is_dask_collection(obj):
    """Whether ``obj`` is a Dask collection (never imports Dask: without it nothing can be one)."""
    dask = sys.modules.get("dask")
    return dask is not None and dask.is_dask_collection(obj)


def _as_row_chunked_array(obj, name, estimator):
    """A Dask array chunked by rows only, with known chunk sizes (a dataframe's lengths cost one pass)."""
    import dask.array as da

    if hasattr(obj, "to_dask_array"):  # dask.dataframe DataFrame or Series
        obj = obj.to_dask_array(lengths=True)
    if not isinstance(obj, da.Array):
        raise TypeError(f"{type(estimator).__name__} on Dask input needs {name} as a dask.array.Array or a "
                        f"dask.dataframe collection; got {type(obj).__name__}. Nothing was spent.")
    if any(math.isnan(c) for chunks in obj.chunks for c in chunks):
        obj = obj.compute_chunk_sizes()
    if obj.ndim == 2 and len(obj.chunks[1]) > 1:
        obj = obj.rechunk({1: -1})  # whole rows per chunk (public, lazy)
    return obj


class ChunkedRows:
    """The rows ``(X, y)`` as Dask arrays with the same row chunks; one operation: :meth:`sum`.

    Built by :meth:`from_inputs` (validation before anything is spent). Acts as
    ``X`` in the shared pipeline: ``shape``, ``dtype`` and ``ndim`` are public.

    Examples
    --------
    >>> import numpy as np
    >>> import dask.array as da
    >>> from skdp.linear_model._rows import ChunkedRows
    >>> X = da.from_array(np.arange(12.0).reshape(6, 2), chunks=(2, 2))
    >>> rows = ChunkedRows(X, da.ones(6, chunks=2))
    >>> rows.sum(lambda X_c, y_c: X_c.T @ y_c)  # one pass: X^T y from three partial sums
    array([30., 36.])
    """

    def __init__(self, X, y, feature_names=None):
        self.X, self.y = X, y
        self.feature_names = feature_names

    @property
    def shape(self):
        return tuple(int(s) for s in self.X.shape)

    @property
    def ndim(self):
        return 2

    @property
    def dtype(self):
        return self.X.dtype

    @classmethod
    def from_inputs(cls, estimator, X, y):
        """Validate the types, shapes and dtypes of Dask ``X`` and ``y`` (values: :meth:`check_finite`).

        Raises ``ValueError``/``TypeError`` before any spend: wrong types or
        shapes, non-numeric values, sparse chunks.
        """
        import dask.array as da

        columns = getattr(X, "columns", None)
        names = None
        if columns is not None and len(columns) and all(isinstance(c, str) for c in columns):
            names = np.asarray(list(columns), dtype=object)
        Xd = _as_row_chunked_array(X, "X", estimator)
        if y is None:
            raise ValueError(f"{type(estimator).__name__} requires y to be passed, but the target y is None.")
        yd = _as_row_chunked_array(y, "y", estimator) if is_dask_collection(y) else da.from_array(
            np.asarray(y), chunks=(Xd.chunks[0],))
        if Xd.ndim != 2:
            raise ValueError(f"Expected a 2D array for X; got {Xd.ndim} dimensions. Nothing was spent.")
        if yd.ndim == 2 and yd.shape[1] == 1:
            yd = yd[:, 0]
        if yd.ndim != 1:
            raise ValueError("y must be one-dimensional. Nothing was spent.")
        if Xd.shape[0] != yd.shape[0]:
            raise ValueError(f"Found input variables with inconsistent numbers of samples: "
                             f"[{Xd.shape[0]}, {yd.shape[0]}]. Nothing was spent.")
        if not isinstance(getattr(Xd, "_meta", np.empty(0)), np.ndarray):
            raise TypeError("Dask input with sparse or non-numpy chunks is not supported yet; use numpy "
                            "chunks. Nothing was spent.")
        if Xd.dtype not in (np.float64, np.float32):
            if Xd.dtype.kind not in "biuf":
                raise ValueError(f"X must be numeric; got dtype {Xd.dtype}. Nothing was spent.")
            Xd = Xd.astype(np.float64)  # as validate_data converts to its first dtype
        if yd.dtype.kind not in "biuf":
            raise ValueError(f"{type(estimator).__name__} needs a numeric target y; got values of dtype "
                             f"{yd.dtype}. Nothing was spent.")
        if Xd.shape[1] == 0:
            raise ValueError("0 feature(s) (shape=(%d, 0)) while a minimum of 1 is required." % Xd.shape[0])
        yd = yd.rechunk((Xd.chunks[0],))
        # Empty chunks (a filtered dataframe's empty partitions: whether a partition is empty depends on
        # the values) are dropped here, before any spend, so that no chunk function ever meets one.
        keep = [i for i, size in enumerate(Xd.chunks[0]) if size > 0]
        if not keep:
            raise ValueError(f"Found array with 0 sample(s) (shape=(0, {Xd.shape[1]})) while a minimum of 1 is "
                             "required. Nothing was spent.")
        if len(keep) < len(Xd.chunks[0]):
            Xd = da.concatenate([Xd.blocks[i] for i in keep], axis=0)
            yd = da.concatenate([yd.blocks[i] for i in keep], axis=0)
        return cls(Xd, yd, names)

    def check_finite(self):
        """Refuse non-finite values, as ``validate_data`` does (one pass; before anything is spent)."""
        import dask
        import dask.array as da

        finite_x, finite_y = dask.compute(da.isfinite(self.X).all(), da.isfinite(self.y).all())
        if not finite_x:
            raise ValueError("Input X contains NaN or infinity. Nothing was spent.")
        if not finite_y:
            raise ValueError("Input y contains NaN or infinity. Nothing was spent.")

    def map(self, func, *args, offsets=False):
        """``[func(X_c, y_c, *args) for every chunk c]`` in chunk order: one pass, one Dask computation.

        With ``offsets``, ``func(X_c, y_c, r0, *args)`` also gets the index of the
        chunk's first row. Results should be small (sums, counts, a few values).
        """
        import dask
        from dask import delayed

        xs = self.X.to_delayed().ravel()
        ys = self.y.to_delayed().ravel()
        starts = np.concatenate([[0], np.cumsum(self.X.chunks[0])[:-1]]).astype(int)
        tasks = [delayed(func)(xc, yc, *((int(r0),) if offsets else ()), *args)
                 for xc, yc, r0 in zip(xs, ys, starts)]
        return list(dask.compute(*tasks))

    def sum(self, func, *args):
        """``sum_c func(X_c, y_c, *args)`` over the row chunks: one pass, one Dask computation.

        ``func`` returns an ndarray of a fixed shape; the partial sums are added
        on the driver in chunk order (a fixed order: the result does not depend
        on the scheduler).
        """
        parts = self.map(func, *args)
        total = np.array(parts[0], dtype=float, copy=True)
        for part in parts[1:]:
            total += part
        return total


class ChunkedValues:
    """Per-record values ``func(X_c, y_c, *args)`` of chunked rows, for the private quantiles.

    :func:`~skdp.mechanisms.private_quantile` recognises it (``chunked``) and
    releases the quantile from counts and a few gathered values
    (:mod:`skdp.mechanisms._chunked_quantiles`); the values are recomputed on the
    chunks in every pass and never collected.
    """

    chunked = True

    def __init__(self, rows, n_columns, func, *args):
        self.rows, self.func, self.args = rows, func, args
        self.n_rows, self.n_columns = rows.shape[0], int(n_columns)
        self.one_column = True

    def sum(self, func, *args):
        parts = self.gather(func, *args)
        total = np.array(parts[0], dtype=float, copy=True)
        for part in parts[1:]:
            total += part
        return total

    def gather(self, func, *args):
        return self.rows.map(_values_then, self.func, self.args, func, args, offsets=True)


def _values_then(X, y, offset, values_func, values_args, func, args):
    return func(values_func(X, y, *values_args), offset, *args)


# -- per-chunk functions: the in-memory code on a block of rows --------------------------------
def _chunk_problem_rows(X, y, scaling, clip):
    """The solver rows and labels of a chunk, as :meth:`PrivateLinearModel._build_problem` forms them."""
    Z = np.asfortranarray(scaling.rows(X, clip=clip), dtype=float)
    t = np.clip(np.asarray(scaling.transform_target(y), dtype=float), -_LABEL_LIMIT, _LABEL_LIMIT)
    return Z, t


def _gram_chunk(X, y, scaling, clip):
    Z, _ = _chunk_problem_rows(X, y, scaling, clip)
    return Z.T @ Z


def _gradient_chunk(X, y, scaling, clip, loss, w, threshold):
    Z, t = _chunk_problem_rows(X, y, scaling, clip)
    return Z.T @ clipped_derivatives(loss.derivative(Z @ w, t), row_norms(Z), threshold)


def _gradient_norms_chunk(X, y, scaling, clip, loss, w):
    Z, t = _chunk_problem_rows(X, y, scaling, clip)
    return np.abs(loss.derivative(Z @ w, t)) * row_norms(Z)


def _absolute_residuals_chunk(X, y, scaling, clip, w):
    Z, t = _chunk_problem_rows(X, y, scaling, clip)
    return np.abs(Z @ w - t)


class ChunkedDesign:
    """The solver's rows ``scaling.rows(X)`` of chunked rows, never formed (a design for the solvers)."""

    def __init__(self, rows, scaling, clip):
        self.rows, self.scaling, self.clip = rows, scaling, clip
        n, d = rows.shape
        self.shape = (n, d + int(scaling.fit_intercept))

    def weighted_gram(self, weights=None):
        """``Z^T Z`` (one pass); row weights are not supported on chunked rows (the plan prevents them)."""
        if weights is not None:  # pragma: no cover - check_chunked_plan refuses unclipped rows before a spend
            raise NotImplementedError("Weighted Gram matrices of chunked rows are not built yet.")
        return self.rows.sum(_gram_chunk, self.scaling, self.clip)

    def gradient_norms(self, loss, w):
        return ChunkedValues(self.rows, 1, _gradient_norms_chunk, self.scaling, self.clip, loss,
                             np.asarray(w, dtype=float))

    def absolute_residuals(self, w):
        return ChunkedValues(self.rows, 1, _absolute_residuals_chunk, self.scaling, self.clip,
                             np.asarray(w, dtype=float))

    def clipped_gradient_sum(self, loss, w, threshold):
        return self.rows.sum(_gradient_chunk, self.scaling, self.clip, loss, np.asarray(w, dtype=float),
                             float(threshold))


class ChunkedProblem(GLMProblem):
    """A :class:`~skdp.solvers.GLMProblem` whose rows stay on the cluster (``X`` a :class:`ChunkedDesign`).

    Only full-batch clipped gradient sums and the curvature are available; the
    other row queries (per-row derivatives, subsets, objectives) refuse, and
    :func:`check_chunked_plan` keeps every solver that would ask for them from
    being planned on chunked rows.
    """

    def __post_init__(self):
        self.penalty = np.asarray(self.penalty, dtype=float)
        self.l1 = np.zeros(self.X.shape[1]) if self.l1 is None else np.asarray(self.l1, dtype=float)

    def clipped_gradient_sum(self, w, clip, rows=None):
        if rows is not None:  # pragma: no cover - refused before any spend
            raise NotImplementedError("Row subsets of chunked rows are not built yet.")
        return self.X.clipped_gradient_sum(self.loss, w, clip)

    def gradient_norms(self, w, rows=None):
        """The per-sample gradient norms as chunked values (for private quantiles only)."""
        if rows is not None:  # pragma: no cover - refused before any spend
            raise NotImplementedError("Row subsets of chunked rows are not built yet.")
        return self.X.gradient_norms(self.loss, w)

    def absolute_residuals(self, w):
        return self.X.absolute_residuals(w)

    def _unsupported(self, *args, **kwargs):  # pragma: no cover - refused before any spend
        raise NotImplementedError("This row query is not built for chunked rows yet.")

    derivatives = subset = lipschitz_bounds = truncated = objective = _unsupported


_SUPPORTED = ("Supported on Dask input today: DPHeavyTailRegressor with scaling='none' (features on a scale "
              "known without the data) and algorithm='auto' or 'clipped_gd' (any built-in loss, private or "
              "public clip thresholds), no declared bounds and delta > 0. Nothing was spent.")


def check_chunked_estimator(estimator):
    """Refuse Dask input, before anything is read, for an estimator whose fit is not built on chunked rows."""
    if not getattr(estimator, "_dask_input", False):
        raise ValueError(f"{type(estimator).__name__} does not accept Dask input yet (it would need the "
                         f"whole table in memory). {_SUPPORTED}")
    if getattr(estimator, "bounds", None) is not None or getattr(estimator, "y_bounds", None) is not None:
        raise ValueError("Declared bounds (bounds=, y_bounds=) are not supported on Dask input yet. "
                         + _SUPPORTED)


def check_chunked_plan(estimator, plan):
    """Refuse, before anything is spent, a plan whose releases are not built on chunked rows (public rule).

    Raises
    ------
    ValueError
        Naming what is not supported and what is.
    """
    supported = _SUPPORTED
    check_chunked_estimator(estimator)
    mode = plan.standardiser.mode
    if mode != "none":
        raise ValueError(
            f"scaling={mode!r} (planned from scaling={getattr(estimator, 'scaling', 'auto')!r}) is not "
            "supported on Dask input yet: its private centres and scales are quantiles, whose distributed "
            f"form (histograms over public bins) is not built. {supported}")
    solver = plan.solver
    if solver.name != "clipped_gd":
        raise ValueError(f"algorithm={solver.name!r} is not supported on Dask input yet. {supported}")


def lazy_decision_function(X, coef, intercept):
    """``X @ coef + intercept`` on a Dask array, as a lazy Dask array (post-processing)."""
    coef = np.asarray(coef)
    if X.dtype not in (np.float64, np.float32):
        X = X.astype(np.float64)  # as validate_data converts

    def block(chunk):
        chunk = np.asarray(chunk)
        return np.asarray(chunk @ coef.astype(chunk.dtype, copy=False)).ravel() + chunk.dtype.type(intercept)

    dtype = X.dtype
    return X.map_blocks(block, drop_axis=1, dtype=dtype, meta=np.empty((0,), dtype=dtype))
