"""The largest eigenvalue of a second-moment matrix, exactly and privately.

The step size of gradient descent on a linear model is set by the curvature of
its loss, the largest eigenvalue of ``X^T X / n``. Its release must be computed
by a method that returns the exact value (so that its sensitivity is the one
Weyl's inequality gives) and that cannot fail on finite input: an iterative
eigensolver that may not converge (ARPACK) raises depending on the data, and an
exception after the budget is charged is itself a release.
"""

import math

import numpy as np
import scipy.sparse as sp

from .noise import NON_PRIVATE_RELEASE, gaussian_mechanism

__all__ = ["top_eigenvalue", "private_top_eigenvalue", "MAX_GRAM_SIZE"]

# Above this many columns the Gram matrix (p x p doubles) is not formed; callers
# then use a public curvature bound instead (a public rule on the number of columns).
MAX_GRAM_SIZE = 4096


def top_eigenvalue(X, weights=None):
    """Largest eigenvalue of ``X^T diag(weights) X / n`` (exact up to rounding; never raises on finite input).

    The Gram matrix is formed and its eigenvalues computed by LAPACK's symmetric
    tridiagonal QR algorithm, which converges for every finite symmetric matrix.
    Should LAPACK still report a failure, the eigenvalue is found by bisection on
    the positive definiteness of ``t I - G`` (Cholesky), which cannot fail.

    Parameters
    ----------
    X : ndarray, sparse matrix or design of shape (n_samples, n_columns)
        Finite values; at most :data:`MAX_GRAM_SIZE` columns. A design object
        (:class:`~skdp.solvers.design.LinearDesign`) provides ``weighted_gram``.
    weights : ndarray of shape (n_samples,), optional
        Row weights (1 by default), e.g. squared clip factors.

    Returns
    -------
    float

    Examples
    --------
    >>> import numpy as np
    >>> from skdp.mechanisms import top_eigenvalue
    >>> top_eigenvalue(np.array([[2.0, 0.0], [0.0, 1.0]]))
    2.0
    """
    n, p = X.shape
    if p > MAX_GRAM_SIZE:
        raise ValueError(f"top_eigenvalue forms a {p} x {p} Gram matrix; at most {MAX_GRAM_SIZE} columns.")
    if hasattr(X, "weighted_gram"):
        gram = X.weighted_gram(weights)
    elif weights is None:
        gram = X.T @ X
    else:
        gram = X.T @ (X.multiply(weights[:, None]) if sp.issparse(X) else X * weights[:, None])
    gram = (gram.toarray() if sp.issparse(gram) else np.asarray(gram, dtype=float)) / n
    gram = 0.5 * (gram + gram.T)
    try:
        return float(np.linalg.eigvalsh(gram)[-1])
    except np.linalg.LinAlgError:  # pragma: no cover - LAPACK's QR does not fail on finite input
        return _bisection_top_eigenvalue(gram)


def _bisection_top_eigenvalue(gram, n_iter=200):
    """Largest eigenvalue of a PSD matrix by bisection on ``t I - G`` being positive definite."""
    lo, hi = 0.0, max(float(np.trace(gram)), 1e-300)  # lambda_max <= trace for a PSD matrix
    eye = np.eye(gram.shape[0])
    for _ in range(n_iter):
        mid = 0.5 * (lo + hi)
        try:
            np.linalg.cholesky(mid * eye - gram)
            hi = mid
        except np.linalg.LinAlgError:
            lo = mid
    return hi


def private_top_eigenvalue(X, row_bound, noise_std, random_state=None, weights=None):
    """Release the largest eigenvalue of ``X^T X / n`` with Gaussian noise.

    Replacing one row changes ``X^T X / n`` by ``(x' x'^T - x x^T) / n``: a
    difference of two PSD matrices of norm at most ``row_bound^2 / n``, so by
    Weyl's inequality the top eigenvalue moves by at most ``row_bound^2 / n``
    (its sensitivity). Rows must have norm at most ``row_bound``, or be clipped
    to it by ``weights`` (squared clip factors: row ``i`` then counts as
    ``sqrt(weights_i) x_i``).

    Parameters
    ----------
    X : ndarray or sparse matrix of shape (n_samples, n_columns)
    row_bound : float
        Public bound on every row norm.
    noise_std : float
    random_state : None, int or Generator

    Returns
    -------
    value : float
    event : GaussianRelease
    """
    if not math.isfinite(float(row_bound)):
        if noise_std > 0:
            raise ValueError("A noisy release of the top eigenvalue needs a finite row bound.")
        # No bound, no noise (epsilon = inf): released exactly and accounted as not private.
        value, event = gaussian_mechanism(top_eigenvalue(X, weights), 1.0, 0.0, random_state=random_state)
        assert event == NON_PRIVATE_RELEASE
        return value, event
    sensitivity = float(row_bound) ** 2 / X.shape[0]
    return gaussian_mechanism(top_eigenvalue(X, weights), sensitivity, noise_std, random_state=random_state)
