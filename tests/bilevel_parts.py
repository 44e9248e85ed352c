"""A small clipped regression table split in two parts, for the bilevel tuners' tests."""

import numpy as np


def clipped_parts(seed=1, n_train=200, n_val=100, p=5, row_bound=4.0, label_bound=3.0, coef_scale=1.0,
                  noise=2.0):
    """Clipped rows (last column the intercept) split in two parts, and their mean statistics."""
    rng = np.random.default_rng(seed)
    n = n_train + n_val
    A = np.c_[rng.normal(size=(n, p - 1)), np.ones(n)]
    b = A @ (coef_scale * rng.normal(size=p)) + noise * rng.normal(size=n)
    A /= np.maximum(1.0, np.linalg.norm(A, axis=1) / row_bound)[:, None]
    b = np.clip(b, -label_bound, label_bound)
    tr, va = slice(0, n_train), slice(n_train, n)
    stats = (A[tr].T @ A[tr] / n_train, A[tr].T @ b[tr] / n_train, A[va].T @ A[va] / n_val,
             A[va].T @ b[va] / n_val)
    return A, b, stats
