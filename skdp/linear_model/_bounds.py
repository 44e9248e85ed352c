"""Declared public bounds in a private fit: validation, the per-record clip, and what they make public.

A fit with ``bounds=`` (and ``y_bounds=`` for the regressors) resolves them
before anything is spent (:func:`resolve_bounds`: finite, ``lower <= upper``,
the right length or known feature names, one-hot blocks of ``(0, 1)``
columns) into a :class:`DeclaredBounds`, and then

* clips every declared value to its bounds, and every row's one-hot block to
  Euclidean norm 1 (:meth:`DeclaredBounds.clip`, :meth:`DeclaredBounds.clip_target`);
* gives each declared column a public centre and scale
  (:meth:`DeclaredBounds.centre_scale`): ``c`` is the point of ``[lower, upper]``
  nearest 0 and ``s`` the largest distance from ``c`` to a bound, so that
  ``z = (x - c) / s`` lies in ``[-1, 1]`` (in ``[0, 1]`` for a 0/1 column,
  which keeps a one-hot block's row norm at most 1 and a sparse X sparse); a
  declared target gets the midpoint and the half-width;
* bounds the norm of the standardised row ``[z, 1]`` publicly when every column
  is declared (:meth:`DeclaredBounds.gram_row_bound`): 1 for the intercept, 1
  per block, ``max z_j^2`` per other column.

Privacy. The clip is a per-record map with public parameters: a row's clipped
values depend on that row and on the bounds only, so replacing one row changes
one clipped row, and every sensitivity argument downstream (stated for any
input) holds unchanged on the clipped data. The public centres, scales and
row bound depend on the bounds only. Nothing here reads a data value before the
budget is reserved, and nothing here raises on data: the clip cannot fail.
"""

import math

import numpy as np
import scipy.sparse as sp

from ..preprocessing import FeatureBounds
from ..preprocessing._feature_bounds import _pair

__all__ = ["DeclaredBounds", "resolve_bounds"]

# With every column declared, the Gram's clip is the public bound when the rows have at most this many
# units (intercept, blocks, other columns); a wider table of standalone bounded columns has a public bound
# near sqrt(d) that its typical rows are far from, and a private median of the row norms (one quantile)
# then gives the tighter clip (capped at the public bound).
PUBLIC_GRAM_MAX_UNITS = 65


class DeclaredBounds:
    """Resolved, validated public bounds of one fit (see the module docstring)."""

    def __init__(self, features, target):
        self.features = features  # FeatureBounds, or None when only y is declared
        self.target = target  # (lower, upper) or None

    # -- public facts --------------------------------------------------------------------------
    @property
    def bounded(self):
        """Mask of the declared feature columns."""
        if self.features is None:
            return None
        return ~np.isnan(self.features.lower)

    def n_free(self, n_features):
        """Columns whose centre and scale stay private."""
        mask = self.bounded
        return int(n_features if mask is None else np.count_nonzero(~mask))

    @property
    def target_declared(self):
        return self.target is not None

    def centre_scale(self):
        """Public centre and scale of every declared column (``nan`` for the others)."""
        lo, hi = self.features.lower, self.features.upper
        centre = np.clip(0.0, lo, hi)
        scale = np.maximum(np.abs(lo - centre), np.abs(hi - centre))
        scale = np.where(scale > 0.0, scale, 1.0)  # a constant column: z = 0
        return centre, scale

    def target_centre_scale(self):
        lo, hi = self.target
        half = 0.5 * (hi - lo)
        return 0.5 * (lo + hi), (half if half > 0.0 else 1.0)

    def gram_units(self):
        """Squared public bound of ``[z, 1]`` in units: 1 (intercept) + blocks + ``max z_j^2`` of the rest."""
        if self.features is None or not np.all(self.bounded):
            return math.inf
        in_block = np.zeros(self.features.n_features, dtype=bool)
        for block in self.features.blocks:
            in_block[list(block)] = True
        centre, scale = self.centre_scale()
        reach = np.maximum(np.abs(self.features.lower - centre), np.abs(self.features.upper - centre)) / scale
        return 1.0 + len(self.features.blocks) + float(np.sum(reach[~in_block] ** 2))

    def gram_row_bound(self):
        """Public bound of the norm of ``[z, 1]`` (``inf`` unless every column is declared)."""
        return math.sqrt(self.gram_units())

    def public_gram_bound(self):
        """Whether the Gram's clip is the public bound (no private median of the row norms; public rule)."""
        return self.gram_units() <= PUBLIC_GRAM_MAX_UNITS

    # -- per-record maps -------------------------------------------------------------------------
    def clip(self, X):
        """Every declared value clipped to its bounds, every one-hot block to row norm 1 (a per-record map)."""
        if self.features is None:
            return X
        fb = self.features
        lo = np.where(np.isnan(fb.lower), -np.inf, fb.lower)
        hi = np.where(np.isnan(fb.upper), np.inf, fb.upper)
        if sp.issparse(X):
            X = sp.csr_matrix(X, copy=True)
            X.data = np.clip(X.data, lo[X.indices], hi[X.indices]).astype(X.dtype, copy=False)
            if fb.blocks:
                X = self._clip_blocks_sparse(X)
            return X
        X = np.clip(X, lo.astype(X.dtype), hi.astype(X.dtype))
        for block in fb.blocks:
            cols = list(block)
            norms = np.sqrt(np.einsum("ij,ij->i", X[:, cols], X[:, cols]))
            factor = 1.0 / np.maximum(norms, 1.0)
            X[:, cols] *= factor[:, None].astype(X.dtype)
        return X

    def _clip_blocks_sparse(self, X):
        d = self.features.n_features
        block_of = np.full(d, -1)
        for k, block in enumerate(self.features.blocks):
            block_of[list(block)] = k
        member = block_of >= 0
        indicator = sp.csr_matrix((np.ones(int(member.sum())), (np.flatnonzero(member), block_of[member])),
                                  shape=(d, len(self.features.blocks)))
        squares = np.asarray((X.multiply(X) @ indicator).todense())
        factors = 1.0 / np.maximum(np.sqrt(squares), 1.0)
        rows = np.repeat(np.arange(X.shape[0]), np.diff(X.indptr))
        blocks = block_of[X.indices]
        scale = np.where(blocks >= 0, factors[rows, np.maximum(blocks, 0)], 1.0)
        X.data = (X.data * scale).astype(X.dtype, copy=False)
        return X

    def clip_target(self, y):
        if self.target is None:
            return y
        return np.clip(y, self.target[0], self.target[1])


def resolve_bounds(bounds, y_bounds, n_features, feature_names=None, sparse=False):
    """The :class:`DeclaredBounds` of a fit, or None when nothing is declared (public inputs only).

    Parameters
    ----------
    bounds : None, (lower, upper), dict or FeatureBounds
        ``lower`` and ``upper`` are scalars (every column) or arrays of length
        ``n_features`` (``nan`` in both leaves a column undeclared); a dict maps
        feature names to ``(lower, upper)`` and needs X with feature names.
    y_bounds : None or (lower, upper)
    n_features : int
    feature_names : ndarray of str or None
        ``feature_names_in_`` of the estimator.
    sparse : bool
        Whether X is sparse: a declared interval must then contain 0 (the
        implicit zeros are values too, and must stay inside their bounds).

    Raises
    ------
    ValueError
        On anything malformed, before anything is spent.

    Examples
    --------
    >>> import numpy as np
    >>> declared = resolve_bounds(([0, 17], [1, 100]), None, 2)
    >>> declared.clip(np.array([[2.0, 5.0]])).tolist()
    [[1.0, 17.0]]
    """
    if bounds is None and y_bounds is None:
        return None
    features = None
    if bounds is not None:
        features = _feature_bounds(bounds, n_features, feature_names)
        if sparse:
            lo, hi = features.lower, features.upper
            excluded = np.flatnonzero(~np.isnan(lo) & ((lo > 0.0) | (hi < 0.0)))
            if excluded.size:
                raise ValueError(
                    f"With a sparse X every declared interval must contain 0 (the implicit zeros are values); "
                    f"columns {excluded.tolist()[:10]} exclude it. Shift those columns, or pass a dense X. "
                    "Nothing was spent.")
    target = None if y_bounds is None else _pair(y_bounds, "y_bounds")
    return DeclaredBounds(features, target)


def _feature_bounds(bounds, d, names):
    names_list = None if names is None else [str(name) for name in names]
    if isinstance(bounds, FeatureBounds):
        if bounds.n_features != d:
            raise ValueError(f"bounds declares {bounds.n_features} columns; X has {d} features. Nothing was "
                             "spent.")
        if names_list is not None and bounds.feature_names is not None:
            theirs = [str(name) for name in bounds.feature_names]
            if theirs != names_list:
                differ = [(a, b) for a, b in zip(theirs, names_list) if a != b][:5]
                raise ValueError(f"bounds was built for other features than X's (first differences, bounds "
                                 f"vs X: {differ}). Nothing was spent.")
        return bounds
    if isinstance(bounds, dict):
        if names_list is None:
            raise ValueError("bounds given as a dict needs X with feature names (a DataFrame); for an array "
                             "pass (lower, upper) arrays or a FeatureBounds. Nothing was spent.")
        return FeatureBounds.from_dict(bounds, names_list)
    try:
        lower, upper = bounds
    except (TypeError, ValueError):
        raise ValueError(f"bounds must be None, a pair (lower, upper), a dict by feature name or a "
                         f"FeatureBounds; got {bounds!r}.") from None
    try:
        lower = np.broadcast_to(np.asarray(lower, dtype=float), (d,))
        upper = np.broadcast_to(np.asarray(upper, dtype=float), (d,))
    except (TypeError, ValueError):
        raise ValueError(f"bounds=(lower, upper) needs numbers or arrays of length n_features = {d}; got "
                         f"shapes {np.shape(lower)} and {np.shape(upper)}. Nothing was spent.") from None
    return FeatureBounds(lower, upper, feature_names=names_list)
