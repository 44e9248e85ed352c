"""Per-row L2 clipping, vectorised.

For linear models a per-sample gradient is ``derivative_i * x_i``; its clipped
sum is ``X.T @ (derivative * factor)`` with a per-row factor, so no ``n x d``
temporary is built.

Rows (or derivatives) with a non-finite entry are treated as zero vectors: a
fixed per-record rule that keeps the sensitivity bound and, unlike an error or a
NaN output, does not reveal that such a record exists.
"""

import numpy as np

__all__ = ["row_norms", "clip_factors", "clip_rows", "clipped_sum", "clipped_derivatives",
           "clipped_linear_gradient_sum"]


def row_norms(X):
    """Euclidean norm of every row of a 2-D array.

    Examples
    --------
    >>> import numpy as np
    >>> from skdp.mechanisms import row_norms
    >>> row_norms(np.array([[3.0, 4.0], [0.0, 0.0]])).tolist()
    [5.0, 0.0]
    """
    X = np.asarray(X, dtype=float)
    return np.sqrt(np.einsum("ij,ij->i", X, X))


def clip_factors(norms, max_norm):
    """``min(1, max_norm / norm)`` element-wise (1 where the norm is 0).

    Examples
    --------
    >>> import numpy as np
    >>> from skdp.mechanisms import clip_factors
    >>> clip_factors(np.array([0.0, 0.5, 4.0]), 2.0).tolist()
    [1.0, 1.0, 0.5]
    """
    norms = np.asarray(norms, dtype=float)
    max_norm = float(max_norm)
    if max_norm < 0:
        raise ValueError(f"max_norm must be non-negative; got {max_norm!r}.")
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        factors = np.where(norms > max_norm, max_norm / norms, 1.0)
    return factors


def _finite_rows(X):
    finite = np.isfinite(X).all(axis=1)
    if finite.all():
        return X
    return np.where(finite[:, None], X, 0.0)


def clip_rows(X, max_norm, copy=True):
    """Scale every row of ``X`` to L2 norm at most ``max_norm`` (returns a new array).

    With ``copy=False`` a float64 ``X`` with finite rows is scaled in place
    and returned (the same values: each entry is multiplied by its row's
    factor either way); this saves an array of the size of ``X`` where the
    caller owns ``X``.

    Examples
    --------
    >>> import numpy as np
    >>> from skdp.mechanisms import clip_rows
    >>> np.round(clip_rows(np.array([[3.0, 4.0], [0.3, 0.4]]), 1.0), 12).tolist()
    [[0.6, 0.8], [0.3, 0.4]]
    """
    X = _finite_rows(np.asarray(X, dtype=float))
    factors = clip_factors(row_norms(X), max_norm)[:, None]
    if copy:
        return X * factors
    X *= factors
    return X


def clipped_sum(V, max_norm):
    """Sum of the rows of ``V`` after clipping each to norm ``max_norm``.

    Replacing one row changes the result by at most ``2 * max_norm`` in L2.
    """
    V = _finite_rows(np.asarray(V, dtype=float))
    return clip_factors(row_norms(V), max_norm) @ V


def clipped_derivatives(derivative, norms, max_norm):
    """Per-row derivatives scaled so that every ``|derivative_i| * norms_i <= max_norm``.

    The clipped per-sample gradient of a linear model is ``result_i * x_i``.
    Every result is finite: a NaN derivative counts as 0, and a derivative or
    product that overflows gets the clipped value ``sign * max_norm / norm``
    (0 when the norm is 0 or not finite). Without this rule, an overflowing
    row would give ``inf * 0 = NaN`` and poison the whole sum.

    Examples
    --------
    >>> import numpy as np
    >>> from skdp.mechanisms import clipped_derivatives
    >>> clipped_derivatives(np.array([2.0, -np.inf, np.nan]), np.array([5.0, 2.0, 1.0]), 1.0).tolist()
    [0.2, -0.5, 0.0]
    """
    derivative = np.asarray(derivative, dtype=float)
    norms = np.asarray(norms, dtype=float)
    derivative = np.where(np.isnan(derivative), 0.0, derivative)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        products = np.abs(derivative) * norms
        scaled = derivative * clip_factors(products, max_norm)
        bad = ~np.isfinite(scaled) | ~np.isfinite(products)
        if bad.any():
            usable = np.isfinite(norms) & (norms > 0)
            capped = np.where(usable, np.sign(derivative) * (float(max_norm) / np.where(usable, norms, 1.0)), 0.0)
            scaled = np.where(bad, capped, scaled)
            scaled = np.where(np.isfinite(scaled), scaled, 0.0)
    return scaled


def clipped_linear_gradient_sum(X, derivative, max_norm, norms=None):
    """Sum over rows of the clipped per-sample gradients ``derivative_i * x_i``.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)
    derivative : ndarray of shape (n_samples,)
        Derivative of each row's loss in its prediction.
    max_norm : float
        Clip threshold on each per-sample gradient norm ``|derivative_i| * ||x_i||``.
    norms : ndarray of shape (n_samples,), optional
        Precomputed row norms of ``X``.

    Returns
    -------
    ndarray of shape (n_features,)
        Its replace-one L2 sensitivity is ``2 * max_norm``.

    Examples
    --------
    >>> import numpy as np
    >>> from skdp.mechanisms import clipped_linear_gradient_sum
    >>> X = np.array([[3.0, 4.0], [1.0, 0.0]])
    >>> g = clipped_linear_gradient_sum(X, np.array([2.0, -0.5]), max_norm=1.0)
    >>> np.round(g, 12).tolist()  # 0.6 * [3, 4] / 5 ... clipped to 1, minus 0.5 * [1, 0]
    [0.1, 0.8]
    """
    X = _finite_rows(np.asarray(X, dtype=float))
    if norms is None:
        norms = row_norms(X)
    return X.T @ clipped_derivatives(derivative, norms, max_norm)
