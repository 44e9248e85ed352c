"""Whitening of standardised columns from a released second-moment matrix (post-processing only).

The private standardiser releases the second-moment matrix ``G`` of the rows
``a_i = [z_i, 1]`` (``z = (x - c) / s`` with released column statistics,
rows clipped to a released bound) with Gaussian noise of standard deviation
``sigma`` (diagonal; ``sigma / sqrt(2)`` off it). Everything below uses only
``G``, ``sigma`` and public constants:

* column means ``m_j = G[j, int] / G[int, int]``, shrunk towards 0 by
  positive-part James-Stein (each carries noise of variance ``sigma^2 / 2``;
  unshrunk, that noise leaves the whitened columns with a common mean of
  squared norm ``~ d sigma^2 / 2``, a spike in the curvature that forces small
  steps); when a separate release of the column means is given (``mean``,
  with noise ``mean_std``: the block means of
  :mod:`~skdp.linear_model._standardise`), the two independent estimates are
  combined by inverse-variance weights before the shrinkage, which then uses
  the combined variance;
* variances ``v_j = max(C_jj, 2 sigma + 1e-8 max C)`` (a 0/1 column gets
  ``p (1 - p)``, a constant one the floor);
* when the predicted spectral norm of the noise in the correlation matrix,
  ``2 max_i sqrt(sum_j var R_ij)``, is at most 0.5 (and full whitening is
  allowed), the eigenvalue-floored correlation matrix whitens the columns
  jointly, otherwise only their variances are used;
* the intercept column gets the value ``kappa = 1 / sqrt(1 + (sigma^2 / 2)
  ||M||_F^2)``: the whitened columns keep means of that expected size from the
  noise, and this keeps their coupling with the intercept about 1
  (``kappa = 1`` without noise).

The map of a row is ``u = (z - m) M``. ``identified`` projects whitened
coefficients onto the directions the released moments support (eigenvalues, or
variances, above ``1e-6`` of the largest): along a degenerate one (an exact
collinearity, a constant column) the noise-free whitening amplifies by up to
``1e4``, and a solver that drifts there (rounding, the smoothing of a
zeroth-order method at the kinks of a loss) would move predictions on rows
outside the training data (an unseen level) by large amounts.
"""

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["Whitening", "whitening_from_second_moment"]

_DIAG_FLOOR = 2.0  # variances floored at this many noise standard deviations
_REL_FLOOR = 1e-8
_EIG_FLOOR = 1.0  # correlation eigenvalues floored at this many noise spectral norms
_MAX_CORRELATION_NOISE = 0.5
# Eigenvalues (or variances) below this fraction of the largest are degenerate: not identified.
_DEGENERATE = 1e-6


@dataclass(frozen=True)
class Whitening:
    """The released whitening map ``u = (z - mean) @ matrix`` and the intercept column's value."""

    mean: np.ndarray
    matrix: np.ndarray
    kappa: float
    full: bool
    noise_norm: float
    identified: np.ndarray = None


def whitening_from_second_moment(gram, sigma, n_features, full_allowed=True, mean=None, mean_std=0.0):
    """The :class:`Whitening` of ``d = n_features`` columns from a released ``(d + 1) x (d + 1)`` Gram.

    Parameters
    ----------
    gram : ndarray of shape (d + 1, d + 1)
        Released second moments of ``[z, 1]`` (the intercept last).
    sigma : float
        Standard deviation of its diagonal noise (0 without noise).
    n_features : int
    full_allowed : bool
        Whether joint (off-diagonal) whitening may be used; otherwise only the
        column variances are (for L1 penalties, which must stay separable).
    mean : ndarray of shape (d,) or None
        A separately released estimate of the column means (None: the
        means come from ``gram`` alone).
    mean_std : float
        Standard deviation of the noise of each entry of ``mean``.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> Z = rng.normal(size=(20_000, 2)) @ np.array([[1.0, 0.8], [0.0, 0.6]]) + [3.0, 0.0]
    >>> A = np.hstack([Z, np.ones((20_000, 1))])
    >>> W = whitening_from_second_moment(A.T @ A / 20_000, 0.0, 2)
    >>> U = (Z - W.mean) @ W.matrix
    >>> np.allclose(U.T @ U / 20_000, np.eye(2), atol=1e-6)
    True
    """
    d = int(n_features)
    k = d
    w_int = max(float(gram[k, k]), 0.5)  # mean of the squared clip factors (about 1)
    m = gram[:d, k] / w_int
    s2 = 0.5 * (sigma / w_int) ** 2  # the noise variance of every entry of m
    if mean is not None:
        # Inverse-variance weights of two independent unbiased estimates (an exact one alone).
        v = float(mean_std) ** 2
        weight = 1.0 if v == 0.0 else s2 / (s2 + v)
        m = weight * np.asarray(mean, dtype=float) + (1.0 - weight) * m
        s2 = weight * v
    if s2 > 0 and d > 2:
        m = m * max(0.0, 1.0 - (d - 2) * s2 / max(float(m @ m), 1e-300))
    C = gram[:d, :d] / w_int - np.outer(m, m)
    sig = sigma / w_int
    diag = np.diag(C).copy()
    floor = _DIAG_FLOOR * sig + _REL_FLOOR * max(float(np.max(diag, initial=0.0)), 1e-300)
    inv_sd = 1.0 / np.sqrt(np.maximum(diag, floor))
    # Noise of the correlation entry R_ij: std sig / sqrt(2) / sqrt(v_i v_j) (sig on the
    # diagonal); the spectral norm of such a Gaussian matrix is about 2 max_i sqrt(sum_j var_ij).
    noise_sd = (sig / math.sqrt(2.0)) * inv_sd[:, None] * inv_sd[None, :]
    noise_norm = 2.0 * float(np.max(np.sqrt((noise_sd**2).sum(axis=1)), initial=0.0)) if sig > 0 else 0.0
    full = bool(full_allowed and d > 1 and noise_norm <= _MAX_CORRELATION_NOISE)
    if full:
        R = C * inv_sd[:, None] * inv_sd[None, :]
        lam, V = np.linalg.eigh(0.5 * (R + R.T))
        top = max(float(lam[-1]), 1e-300)
        # Directions with a degenerate eigenvalue (an exact collinearity such as dummy coding
        # plus an intercept, or a constant column): only there does the floor amplify without
        # noise. With noise the floor at the noise level bounds the amplification instead, and
        # small but real directions (a rare level's contrast) must stay.
        kept = lam > _DEGENERATE * top
        lam = np.maximum(lam, _EIG_FLOOR * noise_norm + _REL_FLOOR * top)
        M = inv_sd[:, None] * ((V / np.sqrt(lam)) @ V.T)
        identified = V[:, kept] @ V[:, kept].T
    else:
        M = np.diag(inv_sd)
        largest = max(float(np.max(diag, initial=0.0)), 1e-300)
        identified = np.diag((diag > _DEGENERATE * largest).astype(float))
    kappa = 1.0 / math.sqrt(1.0 + 0.5 * sig * sig * float(np.sum(M * M)))
    return Whitening(m, M, kappa, full, noise_norm, identified)
