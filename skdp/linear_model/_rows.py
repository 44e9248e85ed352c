"""The training rows held on a Dask cluster: every pass of a private fit as one reduction of chunk sums.

A private linear fit touches its rows only through sums of per-row terms, and
every noise draw and every step happens on the driver. :class:`ChunkedRows`
holds ``X`` and ``y`` as Dask arrays chunked by rows and offers one operation,
:meth:`ChunkedRows.sum`: apply a function of one chunk ``(X_c, y_c)`` (and of
public or released arguments) to every chunk and add the results on the driver.
The chunk functions are the in-memory code applied to a block of rows: the
standardiser's steps read their rows through :class:`RowsInMemory` (the whole
table as one chunk) or :class:`ChunkedRows`, and the mechanisms theirs through a
column source (:mod:`skdp.mechanisms._columns`; :class:`ChunkedColumns` here),
so each step is written once. The Dask fit releases the same values as the
in-memory fit of the same rows, up to the order of floating-point summation,
and the noise is drawn on the driver from the fit's generator, in the same
order: the same model and the same privacy event (every release keeps its
sensitivity: a sum over rows does not depend on how the rows are split into
chunks). Only per-chunk results travel to the driver: vectors of ``p``
numbers, ``p x p`` Gram matrices, counts over public bins, and a quantile's
values within ``80 / epsilon`` ranks of its target when that window holds at
most ``2^20 + 2`` values (a wider one, as the default scaling's quantile budget
of ``epsilon`` about ``120 / n`` gives on more than ``2^20 + 2`` rows, is drawn
from counts alone): :func:`check_chunked_plan` refuses, before any spend, a plan
whose passes would gather more than :data:`MAX_GATHERED_VALUES` values.

Where the default path of :class:`~skdp.DPHeavyTailRegressor` (``algorithm``
"auto" -> "clipped_gd", ``scaling="auto"``) touches the rows, the chunk
function of each step and what it gets besides the chunk (released values and
public constants only):

======================================  ==========================================  ==============================
in-memory step                          per-chunk function (scaling / _rows)        shipped with it
======================================  ==========================================  ==============================
validation (finite values)              all-finite flags of the chunk               nothing
column statistics, per stage            ``_signed_log_values``, ``_deviations``,    earlier stages' centres and
(:func:`~skdp.mechanisms.               ``_relative_values`` (values ranked by the  scales, the stage's jitter
private_column_statistics`)             quantile: counts, then gathered values)     state (SHA-256 child)
magnitude check                         ``_exceedance_counts``                      released centres and scales
median norm of the rows ``[z, 1]``      ``_standardised_row_norms`` (values)        released centres and scales
second-moment matrix of ``[z, 1]``      ``_standardised_second_moments``            centres, scales, the released
                                                                                    clip
median norm of the whitened rows        ``_feature_norms`` (values)                 the released ``Scaling``
robust / pooled / minimal / target      ``_jittered_magnitudes``,                   released statistics, jitter
modes                                   ``_asinh_values``,                          states (SHA-256 children)
                                        ``_relative_deviations``,
                                        ``_jittered_row_rms``,
                                        ``_scaled_row_norms``
curvature (top eigenvalue)              ``_clipped_gram_chunk`` / ``_gram_chunk``   the ``Scaling``, the bound
clip thresholds, Huber threshold        ``_gradient_norms_chunk``,                  the ``Scaling``, the released
                                        ``_absolute_residuals_chunk`` (values)      coefficients
``T`` noisy clipped gradient steps      ``_gradient_chunk``                         ``Scaling``, loss, ``w``, clip
fit check                               ``_chunk_improvement_sum``                  released model and constant
predict                                 ``X_c @ coef + intercept`` (lazy, no sum)   released model
======================================  ==========================================  ==============================

Quantiles. The library's quantiles are the exponential mechanism over the
intervals between the sorted values (:func:`~skdp.mechanisms.private_quantile`):
interval ``k`` has weight ``width_k exp(-epsilon |k - q n| / 2)``. Per-record
values of chunked rows (:class:`ChunkedValues`) are released by
:mod:`skdp.mechanisms._chunked_quantiles` without sorting the table: counts in
public bins give every bin its ranks, and the distinct values in the bins
within ``80 / epsilon`` ranks of the target (gathered with their counts:
``O(1 / epsilon)`` values, all ``n`` when ``epsilon`` is near ``120 / n``) give the intervals there
exactly; the tails' weight is bounded, and when the bound could change the
selection (probability about that bound, below ``1e-15``) every value is
gathered, so the draw is exactly the exponential mechanism's and equals the
in-memory one up to rounding. When that window would hold more than
``2^20 + 2`` values (a public rule on ``n`` and ``epsilon``: the default
scaling's budget on more than ``2^20 + 2`` rows), the quantile is drawn by
rejection from counts alone (:mod:`skdp.mechanisms._quantile_sampler`:
counts below public bin edges, then rounds of proposals, each counted in one
pass), in memory as on the chunks, bit for bit. Every jitter (public per-record randomness: the
quantiles' own, and the column statistics' between their stages) is drawn from
a generator seeded from the fit's through SHA-256
(:func:`~skdp.mechanisms.quantiles.jitter_generator`) and reproduced in each
chunk from that generator's state advanced to the chunk's first row; the fit's
own generator never leaves the driver (its state would let anyone who sees the
task graph replay every noise of the fit). A quantile costs 2 passes (more when
the bins near the target are crowded; drawn from counts, about 2.4 on average
in default fits: a data-dependent pass count, a timing side channel outside
the accounting).

Passes. A default fit with ``d <= 64`` columns and ``n d < 4e5`` makes
``T + 29`` passes: the finite check, 2 per private quantile (10 in the
standardisation: 4 per column and 4 for ``y`` in the "columns" mode, all
columns of a block of 64 at once, and the two row-norm medians; 2 for the clip
thresholds, 1 more for an automatic Huber threshold), the magnitude check, the
Gram matrix, the curvature, the ``T`` steps and the fit check. From
``n d = 4e5`` the column statistics release two halves of the columns, each
with its own generator (a public rule of the in-memory code, which the chunked
fit follows to draw the same noise), from two driver threads: 4 more
quantiles, ``T + 37`` passes for up to 128 columns. The in-memory fit reads its
arrays as often in the standardisation (one computation of each quantile's
values, the counts, the Gram matrix) and sweeps them twice per step. Each pass
recomputes the graph of ``X`` and ``y`` from their source unless the caller
persisted them (``X.persist()``): out-of-core tables are read once per pass.

Ledgers. A fit on Dask input runs on the driver (the client), whose ledger is
charged as for an in-memory fit. A fit that itself runs inside a Dask worker
(model selection under the joblib Dask backend) charges its explicit
accountant, the block it was copied in, or the block of the main thread when
the worker shares the user's process; otherwise it refuses before spending
(:func:`skdp.accounting.budget.resolve_default`).

The supported configurations today: :class:`~skdp.DPHeavyTailRegressor` with
``algorithm`` "auto" or "clipped_gd" (any built-in loss; private or public clip
thresholds; penalties) and every scaling mode (the default included), no
declared bounds, a Gaussian budget (``delta > 0``);
:class:`~skdp.DPInterpolatingClassifier` with ``algorithm`` "auto" or
"clipped_gd", the public ``classes=``, a finite epsilon and ``delta > 0`` (any
loss, scaling mode, penalty and class weights; its chunk functions are listed in
:mod:`skdp.linear_model._chunked_classifier`); and
:class:`~skdp.DPZerothOrderRegressor` with its linear model, a built-in loss
and the practical full-batch "naive" schedule (its chunk functions and
refusals are in :mod:`skdp.zeroth_order._chunked`; the estimator checks its
solver through its ``_check_chunked_solver`` hook of :func:`check_chunked_plan`).
Declared bounds, the other solvers and the other estimators refuse Dask input
before anything is spent (:func:`check_chunked_estimator`,
:func:`check_chunked_plan`, the classifier's own checks of ``classes``,
``epsilon`` and ``delta``, and the zeroth-order regressor's of its model,
loss and schedule).
"""

import math
import sys
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from ..mechanisms import clip_factors, clipped_derivatives, row_norms
from ..mechanisms._columns import ArrayColumns
from ..solvers import GLMProblem

__all__ = ["ChunkedRows", "RowsInMemory", "ChunkedColumns", "ChunkedValues", "ChunkedDesign", "ChunkedProblem", "is_dask_collection",
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
        if hasattr(obj, "optimize"):
            # The optimised expression first: dask fuses the partitions of a small selection of
            # read_parquet (one column of a table) when it computes, and the lengths of the unoptimised
            # collection's partitions would then not match the partitions of its array.
            obj = obj.optimize()
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

    def __init__(self, X, y, feature_names=None, classes=None):
        self.X, self.y = X, y
        self.feature_names = feature_names
        # With public classes, y holds every row's class index (-1 for a label outside them, refused by
        # check_finite before anything is spent).
        self.classes = classes

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
    def from_inputs(cls, estimator, X, y, classes=None):
        """Validate the types, shapes and dtypes of Dask ``X`` and ``y`` (values: :meth:`check_finite`).

        With the public ``classes`` (a sorted array of labels), ``y`` holds
        labels of any dtype and becomes every row's class index (a lazy
        per-record map). Raises ``ValueError``/``TypeError`` before any spend:
        wrong types or shapes, non-numeric values, sparse chunks.
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
        if classes is not None:
            if (yd.dtype.kind in "biuf") != (np.asarray(classes).dtype.kind in "biuf"):
                raise ValueError(f"y holds labels of dtype {yd.dtype}, which cannot be the classes "
                                 f"{np.asarray(classes).tolist()}. Nothing was spent.")
            yd = yd.map_blocks(_class_indices, np.asarray(classes), dtype=np.int64,
                               meta=np.empty((0,), dtype=np.int64))
        elif yd.dtype.kind not in "biuf":
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
        return cls(Xd, yd, names, None if classes is None else np.asarray(classes))

    def check_finite(self):
        """Refuse non-finite values, as ``validate_data`` does (one pass; before anything is spent).

        With public classes, labels outside them are refused in the same pass.
        """
        import dask
        import dask.array as da

        valid_y = da.isfinite(self.y).all() if self.classes is None else (self.y >= 0).all()
        try:
            finite_x, finite_y = dask.compute(da.isfinite(self.X).all(), valid_y)
        except TypeError as error:  # labels that cannot be compared with the classes (None among strings)
            if self.classes is None:
                raise
            raise ValueError(f"y holds labels that cannot be compared with classes {self.classes.tolist()} "
                             f"({error}); every label must be one of them. Nothing was spent.") from None
        if not finite_x:
            raise ValueError("Input X contains NaN or infinity. Nothing was spent.")
        if not finite_y and self.classes is not None:
            raise ValueError("y contains labels that are not in classes; every label must be one of "
                             f"{self.classes.tolist()}. Nothing was spent.")
        if not finite_y:
            raise ValueError("Input y contains NaN or infinity. Nothing was spent.")

    def map(self, func, *args, offsets=False, add=False):
        """``[func(X_c, y_c, *args) for every chunk c]`` in chunk order: one pass.

        With ``offsets``, ``func(X_c, y_c, r0, *args)`` also gets the index of the
        chunk's first row. Results should be small (sums, counts, a few values).
        With ``add``, the results (ndarrays of one shape) are added on the driver
        in chunk order instead (a fixed order: the result does not depend on the
        scheduler), :data:`SUM_BATCH` chunks per Dask computation, so the driver
        holds at most that many partial results at once (a pass of 4096-bin
        counts over thousands of partitions would otherwise hold gigabytes).
        """
        import dask
        from dask import delayed

        xs = self.X.to_delayed().ravel()
        ys = self.y.to_delayed().ravel()
        starts = np.concatenate([[0], np.cumsum(self.X.chunks[0])[:-1]]).astype(int)
        run = _quietly if self.classes is None else _known_labels
        tasks = [delayed(run)(func, xc, yc, *((int(r0),) if offsets else ()), *args)
                 for xc, yc, r0 in zip(xs, ys, starts)]
        if not add:
            return list(dask.compute(*tasks))
        total = None
        for first in range(0, len(tasks), SUM_BATCH):
            for part in dask.compute(*tasks[first:first + SUM_BATCH]):
                total = np.array(part, dtype=float, copy=True) if total is None else total + part
        return total

    def sum(self, func, *args, offsets=False):
        """``sum_c func(X_c, y_c, *args)`` over the row chunks: one pass (:meth:`map` with ``add``)."""
        return self.map(func, *args, offsets=offsets, add=True)

    def values(self, func, *args):
        """The per-record values ``func(X_c, y_c, *args)`` (one column), for the private quantiles."""
        return ChunkedValues(self, 1, func, *args)

    def maximum(self, func, *args):
        """``max`` over every row of ``func(X_c, y_c, *args)`` (0 when all are smaller): one pass."""
        return max(self.map(_chunk_maximum, func, args))

    def columns(self, index=None, shift=None):
        """Columns ``index`` of ``X`` (all by default), minus a public ``shift``: a column source."""
        return ChunkedColumns(self, ("X", index, shift))

    def target(self, limit=None):
        """``y`` as one float column, clipped to ``+-limit`` when given: a column source."""
        return ChunkedColumns(self, ("y", limit))


class RowsInMemory:
    """The rows ``(X, y)`` held in memory, with the interface of :class:`ChunkedRows`: one chunk, all rows.

    The standardiser reads its rows through this interface, so each of its
    steps is one chunk function whether the rows are in memory (the function
    runs once, on every row) or on a cluster (once per chunk, results added).

    Examples
    --------
    >>> import numpy as np
    >>> from skdp.linear_model._rows import RowsInMemory
    >>> rows = RowsInMemory(np.arange(6.0).reshape(3, 2), np.array([1.0, 2.0, 3.0]))
    >>> rows.sum(lambda X, y: X.T @ y)
    array([16., 22.])
    >>> rows.target().shape
    (3, 1)
    """

    def __init__(self, X, y):
        self.X, self.y = X, y

    @property
    def shape(self):
        return self.X.shape

    def sum(self, func, *args):
        return func(self.X, self.y, *args)

    def values(self, func, *args):
        return func(self.X, self.y, *args)

    def maximum(self, func, *args):
        return _chunk_maximum(self.X, self.y, func, args)

    def columns(self, index=None, shift=None):
        return ArrayColumns(_selected(self.X, self.y, ("X", index, shift)))

    def target(self, limit=None):
        return ArrayColumns(_selected(self.X, self.y, ("y", limit)))


def _class_indices(labels, classes):
    """Every label's index in the sorted public ``classes``, -1 for a label outside them (a per-record map)."""
    labels = np.asarray(labels)
    index = np.clip(np.searchsorted(classes, labels), 0, classes.shape[0] - 1)
    return np.where(classes[index] == labels, index, -1).astype(np.int64)


def _quietly(func, *args):
    """A chunk function under IEEE arithmetic, as the driver runs the fit (``np.errstate(all="ignore")``).

    Overflow and invalid values are mapped by the chunk functions' per-record
    rules; a worker whose numpy settings raise on them (``np.seterr``) must not
    turn one record's value into an exception after the budget is reserved.
    """
    with np.errstate(all="ignore"):
        return func(*args)


def _known_labels(func, X, y, *args):
    """:func:`_quietly` with every label outside the public classes read as the first class (a per-record map).

    The pass that checks the values before the reservation refuses labels
    outside ``classes``; a source that yields other labels in a later pass (a
    table changed between passes, unseeded randomness in the graph) must not
    make a release raise after it, nor leave a chunk without rows. Mapping such
    a label to a public class is a per-record map: every release keeps its
    sensitivity.
    """
    labels = np.asarray(y)
    if labels.size and labels.min() < 0:
        labels = np.where(labels < 0, 0, labels)
    return _quietly(func, X, labels, *args)


def _chunk_maximum(X, y, func, args):
    return float(np.max(func(X, y, *args), initial=0.0))


def _selected(X, y, select):
    """The columns a column source reads from a chunk: ``X[:, index] - shift`` (dense), or ``y`` as a column."""
    if select[0] == "y":
        target = np.asarray(y, dtype=float)
        if select[1] is not None:
            target = np.clip(target, -select[1], select[1])
        return target.reshape(-1, 1)
    _, index, shift = select
    part = X if index is None else X[:, index]
    if shift is None:
        return part
    return (part.toarray() if sp.issparse(part) else np.asarray(part, dtype=float)) - shift


def _selected_values(X, y, offset, select, func, args):
    return func(_selected(X, y, select), offset, *args)


class ChunkedColumns:
    """Columns of chunked rows as a column source of the mechanisms (:mod:`skdp.mechanisms._columns`).

    A chunk function ``func(block, offset, *args)`` gets the selected columns
    of one chunk and the index of its first row; only ``func``, the selection
    and ``args`` (public constants, released values, jitter states) travel to
    the workers.
    """

    chunked_columns = True

    def __init__(self, rows, select):
        self.rows, self.select = rows, select
        if select[0] == "y":
            self.shape = (rows.shape[0], 1)
        else:
            index = select[1]
            self.shape = (rows.shape[0], rows.shape[1] if index is None else np.arange(rows.shape[1])[index].size)

    def columns(self, index):
        if self.select[0] == "y":
            if np.arange(1)[index].size != 1:  # pragma: no cover - the mechanisms select within their columns
                raise IndexError("The target is one column.")
            return self
        _, base, shift = self.select
        chosen = index if base is None else np.arange(self.rows.shape[1])[base][index]
        if shift is not None:
            shift = np.broadcast_to(np.asarray(shift, dtype=float), (self.shape[1],))[index]
        return ChunkedColumns(self.rows, ("X", chosen, shift))

    def values(self, n_columns, func, *args):
        return ChunkedValues(self.rows, n_columns, _selected_values, self.select, func, args, offsets=True)

    def sum(self, func, *args):
        return self.rows.sum(_selected_values, self.select, func, args, offsets=True)


class ChunkedValues:
    """Per-record values ``func(X_c, y_c, *args)`` of chunked rows, for the private quantiles.

    :func:`~skdp.mechanisms.private_quantile` recognises it (``chunked``) and
    releases the quantile from counts and a few gathered values
    (:mod:`skdp.mechanisms._chunked_quantiles`); the values are recomputed on the
    chunks in every pass and never collected.
    """

    chunked = True

    def __init__(self, rows, n_columns, func, *args, offsets=False):
        self.rows, self.func, self.args, self.offsets = rows, func, args, bool(offsets)
        self.n_rows, self.n_columns = rows.shape[0], int(n_columns)
        self.one_column = self.n_columns == 1

    def sum(self, func, *args):
        return self.rows.sum(_values_then, self.func, self.args, self.offsets, func, args, offsets=True)

    def gather(self, func, *args):
        return self.rows.map(_values_then, self.func, self.args, self.offsets, func, args, offsets=True)


def _values_then(X, y, offset, values_func, values_args, with_offset, func, args):
    values = values_func(X, y, offset, *values_args) if with_offset else values_func(X, y, *values_args)
    return func(values, offset, *args)


# -- per-chunk functions: the in-memory code on a block of rows --------------------------------
def _chunk_problem_rows(X, y, scaling, clip):
    """The solver rows and labels of a chunk, as :meth:`PrivateLinearModel._build_problem` forms them."""
    Z = scaling.rows(X, clip=clip, order="F")  # float64, column by column, in one copy
    t = np.clip(np.asarray(scaling.transform_target(y), dtype=float), -_LABEL_LIMIT, _LABEL_LIMIT)
    return Z, t


def _gram_chunk(X, y, scaling, clip):
    Z, _ = _chunk_problem_rows(X, y, scaling, clip)
    return Z.T @ Z


def _clipped_gram_chunk(X, y, scaling, clip, bound):
    """``Z_c^T diag(f^2) Z_c``, ``f`` the factors that clip the solver rows to ``bound`` (the curvature)."""
    Z, _ = _chunk_problem_rows(X, y, scaling, clip)
    weights = clip_factors(row_norms(Z), bound) ** 2
    return Z.T @ (Z * weights[:, None])


def _gradient_chunk(X, y, scaling, clip, loss, w, threshold):
    Z, t = _chunk_problem_rows(X, y, scaling, clip)
    return Z.T @ clipped_derivatives(loss.derivative(Z @ w, t), row_norms(Z), threshold)


def _gradient_norms_chunk(X, y, scaling, clip, loss, w):
    Z, t = _chunk_problem_rows(X, y, scaling, clip)
    return np.abs(loss.derivative(Z @ w, t)) * row_norms(Z)


def _absolute_residuals_chunk(X, y, scaling, clip, w):
    Z, t = _chunk_problem_rows(X, y, scaling, clip)
    return np.abs(Z @ w - t)


@dataclass(frozen=True)
class RowClipWeights:
    """The squared factors that clip every row to ``bound``, as row weights of a Gram matrix (formed per chunk)."""

    bound: float


class ChunkedDesign:
    """The solver's rows ``scaling.rows(X)`` of chunked rows, never formed (a design for the solvers)."""

    def __init__(self, rows, scaling, clip):
        self.rows, self.scaling, self.clip = rows, scaling, clip
        n, d = rows.shape
        self.shape = (n, d + int(scaling.fit_intercept))

    def weighted_gram(self, weights=None):
        """``Z^T Z``, or with :class:`RowClipWeights` the Gram matrix of the rows clipped to a bound (one pass)."""
        if weights is None:
            return self.rows.sum(_gram_chunk, self.scaling, self.clip)
        if isinstance(weights, RowClipWeights):
            return self.rows.sum(_clipped_gram_chunk, self.scaling, self.clip, weights.bound)
        raise NotImplementedError("Per-row weights of chunked rows are formed on the chunks "  # pragma: no cover
                                  "(RowClipWeights).")

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

    def gram_clip_weights(self, bound):
        """The rows' squared clip factors to ``bound``, formed on the chunks (:class:`RowClipWeights`)."""
        return RowClipWeights(float(bound))

    def _unsupported(self, *args, **kwargs):  # pragma: no cover - refused before any spend
        raise NotImplementedError("This row query is not built for chunked rows yet.")

    derivatives = subset = lipschitz_bounds = truncated = objective = _unsupported


_SUPPORTED = ("Supported on Dask input today: DPHeavyTailRegressor with algorithm='auto' or 'clipped_gd' "
              "(full-batch clipped gradient descent: any built-in loss, private or public clip thresholds, "
              "penalties), every scaling mode (the default 'auto' included), no declared bounds, delta > 0; "
              "DPInterpolatingClassifier with algorithm='auto' or 'clipped_gd', the public classes=, a finite "
              "epsilon, delta > 0, any loss, scaling, C, alpha and class_weight, no declared bounds; "
              "DPZerothOrderRegressor with model='linear', a built-in loss and the practical 'naive' "
              "schedule (skdp.zeroth_order._chunked). Nothing was spent.")


def check_chunked_estimator(estimator):
    """Refuse Dask input, before anything is read, for an estimator whose fit is not built on chunked rows."""
    if not getattr(estimator, "_dask_input", False):
        raise ValueError(f"{type(estimator).__name__} does not accept Dask input yet (it would need the "
                         f"whole table in memory). {_SUPPORTED}")
    if getattr(estimator, "bounds", None) is not None or getattr(estimator, "y_bounds", None) is not None:
        raise ValueError("Declared bounds (bounds=, y_bounds=) are not supported on Dask input yet (their "
                         "clipping and one-hot blocks are not built on chunked rows); pass bounds=None and "
                         "y_bounds=None to standardise privately on the cluster. " + _SUPPORTED)


def check_chunked_plan(estimator, plan, n_samples, n_features):
    """Refuse, before anything is spent, a plan whose releases are not built on chunked rows (public rule).

    Every scaling mode is built on chunked rows; the solvers other than
    full-batch clipped gradient descent (which walk rows in order, take row
    subsets or need per-row Lipschitz bounds) are not. An estimator of
    another solver family checks its planned solver itself
    (``estimator._check_chunked_solver(solver)``, raising ``ValueError``).

    Also refused: a plan whose private quantiles would gather more than
    :data:`MAX_GATHERED_VALUES` values to the driver in one pass
    (:func:`~skdp.mechanisms._chunked_quantiles.gathered_per_column`), which
    would fail after the reservation.

    Raises
    ------
    ValueError
        Naming what is not supported and what is.
    """
    check_chunked_estimator(estimator)
    solver = plan.solver
    own_check = getattr(estimator, "_check_chunked_solver", None)  # an estimator with other solvers
    if own_check is not None:
        own_check(solver)
    elif solver.name != "clipped_gd":
        raise ValueError(f"algorithm={solver.name!r} is not supported on Dask input yet (it reads rows one by "
                         f"one, in subsets or by per-row bounds, not by passes of sums). {_SUPPORTED}")
    gathered = _planned_gather(plan, n_samples, n_features)
    if gathered > MAX_GATHERED_VALUES:
        raise ValueError(
            f"This fit's private quantiles would bring about {gathered:,} values to the driver in one pass "
            f"(at most {MAX_GATHERED_VALUES:,} are allowed): each quantile of a column gathers the values within "
            f"80 / epsilon ranks of its target when that window holds at most 2^20 + 2 values (wider windows are "
            f"drawn from counts, gathering nothing), and this table has {n_features} columns whose quantiles are "
            f"released in one pass. Fit fewer rows (a sample) or columns, or scaling='none' with public clip "
            f"thresholds (no quantile). Nothing was spent.")


# Chunks per Dask computation of a sum (their partial results are held on the driver together).
SUM_BATCH = 256

# Values (with their counts) the chunked quantiles may bring to the driver in one pass: 2^26 pairs, about
# 1 GiB. A quantile gathers the values near its target (the window of 80 / epsilon ranks) only when the
# window holds at most 2^20 + 2 values; a wider one (the default scaling's, on more than 2^20 + 2 rows) is
# drawn by rejection from counts (skdp.mechanisms._quantile_sampler) and gathers nothing.
MAX_GATHERED_VALUES = 1 << 26


def _planned_gather(plan, n, d):
    """The most values one pass of the plan's chunked quantiles may gather (public: the plan, n and d).

    The column statistics release the quantiles of every column in one pass;
    every other quantile (the target's, the row norms', the solver's clip or
    threshold) has one column. At most ``2^20 + 2`` values per column
    (:func:`~skdp.mechanisms._chunked_quantiles.gathered_per_column`: none for
    a quantile drawn from counts, whose exact fallback, data-dependent and
    unbounded (not reached in any fit measured), is not counted).
    """
    from ..mechanisms._chunked_quantiles import gathered_per_column

    levels = [float(plan.standardiser.quantile_epsilon), float(plan.budget.quantile_epsilon)]
    columns = d if plan.standardiser.mode in ("columns", "coarse", "scale", "robust") else 1
    return max((columns * gathered_per_column(n, epsilon) for epsilon in levels if not math.isinf(epsilon)),
               default=0)


def lazy_decision_function(X, coef, intercept):
    """``X @ coef + intercept`` on a Dask array, as a lazy Dask array (post-processing).

    ``coef`` of shape ``(k, d)`` (a classifier's) gives ``X @ coef.T + intercept``,
    of shape ``(n, k)``, raveled when ``k = 1``.
    """
    coef = np.asarray(coef)
    if X.dtype not in (np.float64, np.float32):
        X = X.astype(np.float64)  # as validate_data converts
    dtype = X.dtype
    if coef.ndim == 2:
        intercept = np.asarray(intercept)

        def scores(chunk):
            chunk = np.asarray(chunk)
            out = np.asarray(chunk @ coef.T.astype(chunk.dtype, copy=False)) + intercept.astype(chunk.dtype)
            return out.ravel() if out.shape[1] == 1 else out

        if coef.shape[0] == 1:
            return X.map_blocks(scores, drop_axis=1, dtype=dtype, meta=np.empty((0,), dtype=dtype))
        return X.map_blocks(scores, chunks=(X.chunks[0], (coef.shape[0],)), dtype=dtype,
                            meta=np.empty((0, 0), dtype=dtype))

    def block(chunk):
        chunk = np.asarray(chunk)
        return np.asarray(chunk @ coef.astype(chunk.dtype, copy=False)).ravel() + chunk.dtype.type(intercept)

    return X.map_blocks(block, drop_axis=1, dtype=dtype, meta=np.empty((0,), dtype=dtype))
