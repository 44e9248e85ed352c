"""Where a mechanism reads its columns: one block in memory, or row chunks held elsewhere (a Dask cluster).

The mechanisms that standardise a table (:mod:`~skdp.mechanisms.scaling`) read
the rows only through per-record values (ranked by the private quantiles) and
sums (counts). Each such step is written once, as a function of one block of
rows (a *chunk function* ``func(block, offset, *args)``: ``block`` holds the
rows ``offset, offset + 1, ...`` of the columns, ``args`` are public constants
and released values), and a *combine*: the quantile mechanism, or a sum. A
column source applies the chunk function to its rows:

* ``shape``: ``(n_rows, n_columns)`` (public);
* ``columns(index)``: the source of some of the columns;
* ``values(n_columns, func, *args)``: the per-record values of every block, for
  :func:`~skdp.mechanisms.private_quantile`;
* ``sum(func, *args)``: the sum of ``func`` over the blocks.

:class:`ArrayColumns` holds an array (dense or sparse) as one block: its
``values`` is the chunk function's array, its ``sum`` the function's value, so
an in-memory release is exactly what the chunk function computes on the whole
array. ``skdp.linear_model._rows.ChunkedColumns`` holds Dask chunks: ``values``
stays on the cluster (the quantiles count over public bins there) and ``sum``
adds the per-chunk results on the driver. A per-record value depends on its own
row, on public constants and on released values only, and a block's jitter is
its rows' share of a public jitter stream
(:func:`~skdp.mechanisms._chunked_quantiles.chunk_uniforms`, from a generator
seeded through SHA-256: :func:`~skdp.mechanisms.quantiles.jitter_generator`),
so the values do not depend on how the rows are split into blocks.
"""

__all__ = ["ArrayColumns", "as_columns"]


class ArrayColumns:
    """The columns of an in-memory array (ndarray or sparse matrix) as one block starting at row 0.

    Examples
    --------
    >>> import numpy as np
    >>> from skdp.mechanisms._columns import ArrayColumns
    >>> source = ArrayColumns(np.arange(6.0).reshape(3, 2))
    >>> source.shape, source.columns([1]).shape
    ((3, 2), (3, 1))
    >>> source.sum(lambda block, offset: block.sum(axis=0))
    array([6., 9.])
    """

    chunked_columns = False

    def __init__(self, X):
        self.X = X

    @property
    def shape(self):
        return self.X.shape

    def columns(self, index):
        return ArrayColumns(self.X[:, index])

    def values(self, n_columns, func, *args):
        return func(self.X, 0, *args)

    def sum(self, func, *args):
        return func(self.X, 0, *args)


def as_columns(X):
    """``X`` itself when it is a column source, else :class:`ArrayColumns` of the array."""
    if getattr(X, "chunked_columns", None) is not None:
        return X
    return ArrayColumns(X)
