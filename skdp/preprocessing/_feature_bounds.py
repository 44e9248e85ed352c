"""Declared public bounds of the feature columns, with their one-hot blocks.

:class:`FeatureBounds` is what a user knows about the columns before seeing the
data: a range ``[lower, upper]`` per column (``nan`` for a column left
undeclared) and the one-hot blocks, groups of 0/1 columns that come from one
categorical, so that at most one of them is 1 in a row. The estimators'
``bounds=`` parameter takes it (or a pair of arrays, or a dict by feature
name); :func:`~skdp.preprocessing.bounds_for_column_transformer` builds it for
the output of a fitted ``ColumnTransformer``.

Everything here is public: it is validated and used without reading the data.
"""

import math
import numbers

import numpy as np

__all__ = ["FeatureBounds"]


class FeatureBounds:
    """Public per-column bounds and one-hot blocks of a feature matrix.

    Parameters
    ----------
    lower, upper : array-like of shape (n_features,)
        Finite bounds with ``lower <= upper``; ``nan`` in both for a column that
        is not declared (its centre and scale are then estimated privately).
    blocks : sequence of sequences of int, default=()
        Column indices of the one-hot blocks: each column of a block is
        declared ``(0, 1)`` and a row has at most one 1 in the block (a row's
        block is clipped to Euclidean norm 1, which leaves a one-hot row as it
        is). A column belongs to at most one block.
    feature_names : array-like of str, default=None
        Names of the columns; when given and the estimator's X has feature
        names, they must be the same.

    Attributes
    ----------
    n_features : int

    Examples
    --------
    >>> from skdp.preprocessing import FeatureBounds
    >>> fb = FeatureBounds([0, 17, 0, 0, 0], [1e5, 100, 1, 1, 1], blocks=[[2, 3, 4]],
    ...                    feature_names=["income", "age", "city_a", "city_b", "city_c"])
    >>> fb.n_features, fb.blocks
    (5, ((2, 3, 4),))
    """

    def __init__(self, lower, upper, blocks=(), feature_names=None):
        lower = np.array(lower, dtype=float).reshape(-1)
        upper = np.array(upper, dtype=float).reshape(-1)
        if lower.shape != upper.shape:
            raise ValueError(f"lower and upper must have the same length; got {lower.shape[0]} and "
                             f"{upper.shape[0]}.")
        undeclared = np.isnan(lower) | np.isnan(upper)
        if np.any(np.isnan(lower) != np.isnan(upper)):
            bad = np.flatnonzero(np.isnan(lower) != np.isnan(upper)).tolist()
            raise ValueError(f"A column is either declared (two finite bounds) or not (nan in both); columns "
                             f"{bad} have nan in only one of lower and upper.")
        finite = np.isfinite(lower) & np.isfinite(upper)
        if np.any(~finite & ~undeclared):
            bad = np.flatnonzero(~finite & ~undeclared).tolist()
            raise ValueError(f"Declared bounds must be finite; columns {bad} have an infinite bound (use nan in "
                             "both to leave a column undeclared).")
        if np.any(lower[finite] > upper[finite]):
            bad = np.flatnonzero(finite & (lower > upper)).tolist()
            raise ValueError(f"Declared bounds need lower <= upper; columns {bad} have lower > upper.")
        d = lower.shape[0]
        seen = np.zeros(d, dtype=bool)
        checked = []
        for block in blocks:
            idx = tuple(int(i) for i in np.asarray(block, dtype=int).reshape(-1))
            if not idx:
                continue
            if min(idx) < 0 or max(idx) >= d:
                raise ValueError(f"Block {list(idx)} has a column index outside [0, {d}).")
            if np.any(seen[list(idx)]) or len(set(idx)) != len(idx):
                raise ValueError(f"A column belongs to at most one block; block {list(idx)} repeats one.")
            if np.any(lower[list(idx)] != 0.0) or np.any(upper[list(idx)] != 1.0):
                raise ValueError(f"The columns of a one-hot block must be declared (0, 1); block {list(idx)} "
                                 "has other bounds.")
            seen[list(idx)] = True
            checked.append(idx)
        if feature_names is not None:
            feature_names = np.asarray(feature_names, dtype=object).reshape(-1)
            if feature_names.shape[0] != d:
                raise ValueError(f"feature_names has {feature_names.shape[0]} names for {d} columns.")
        self.lower = lower
        self.upper = upper
        self.blocks = tuple(checked)
        self.feature_names = feature_names

    @property
    def n_features(self):
        return int(self.lower.shape[0])

    @classmethod
    def from_dict(cls, bounds, feature_names):
        """Bounds by feature name: ``{name: (lower, upper)}``; columns not named stay undeclared.

        Examples
        --------
        >>> fb = FeatureBounds.from_dict({"age": (17, 100)}, ["income", "age"])
        >>> fb.lower.tolist(), fb.upper.tolist()
        ([nan, 17.0], [nan, 100.0])
        """
        names = [str(name) for name in feature_names]
        index = {name: i for i, name in enumerate(names)}
        unknown = [str(key) for key in bounds if str(key) not in index]
        if unknown:
            raise ValueError(f"bounds names unknown features {unknown}; the features are {names}.")
        lower, upper = np.full(len(names), np.nan), np.full(len(names), np.nan)
        for key, pair in bounds.items():
            lo, hi = _pair(pair, f"bounds[{key!r}]")
            lower[index[str(key)]], upper[index[str(key)]] = lo, hi
        return cls(lower, upper, feature_names=names)

    def __repr__(self):
        declared = int(np.count_nonzero(~np.isnan(self.lower)))
        return (f"FeatureBounds({declared} of {self.n_features} columns declared, "
                f"{len(self.blocks)} one-hot blocks)")


def _pair(pair, what):
    """A finite ``(lower, upper)`` pair of real numbers with ``lower <= upper``."""
    try:
        lo, hi = pair
    except (TypeError, ValueError):
        raise ValueError(f"{what} must be a pair (lower, upper); got {pair!r}.") from None
    for value in (lo, hi):
        if not isinstance(value, numbers.Real) or isinstance(value, bool) or not math.isfinite(float(value)):
            raise ValueError(f"{what} must hold two finite numbers; got {pair!r}.")
    if float(lo) > float(hi):
        raise ValueError(f"{what} needs lower <= upper; got {pair!r}.")
    return float(lo), float(hi)
