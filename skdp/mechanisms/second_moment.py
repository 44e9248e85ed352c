"""A private second-moment (Gram) matrix of rows clipped to a bound."""

import math

import numpy as np

from ..accounting import GaussianRelease
from ._audit import notify
from ._random import check_generator
from .clipping import clip_factors, row_norms
from .noise import NON_PRIVATE_RELEASE, laplace_mechanism

__all__ = ["private_second_moment", "clipped_second_moment_sum", "release_second_moment",
           "second_moment_sensitivity", "second_moment_l1_sensitivity"]


def second_moment_sensitivity(bound, n_samples):
    """Replace-one Frobenius sensitivity ``sqrt(2) bound^2 / n`` of the mean of ``a a^T``, ``||a|| <= bound``.

    ``||u u^T - v v^T||_F^2 = ||u||^4 + ||v||^4 - 2 (u . v)^2 <= 2 bound^4``.
    """
    return math.sqrt(2.0) * float(bound) ** 2 / n_samples


def second_moment_l1_sensitivity(bound, n_samples, dim):
    """Replace-one L1 sensitivity ``(dim + 1) bound^2 / n`` of the upper triangle (diagonal included) of the mean of ``a a^T``.

    For ``||a||_2 <= bound`` in ``R^dim``: ``sum_{i <= j} |a_i a_j| = (||a||_1^2 + ||a||_2^2) / 2
    <= (dim + 1) bound^2 / 2``, and a replaced row changes the sum of two such terms.
    """
    return (int(dim) + 1) * float(bound) ** 2 / n_samples


def private_second_moment(rows, bound, noise_std, *, random_state=None, laplace_scale=None):
    """Release ``(1/n) sum_i a_i a_i^T`` of rows clipped to norm ``bound``, with Gaussian noise.

    The released vector is ``(G_ii, sqrt(2) G_ij for i < j)``, whose L2 norm is
    ``||G||_F``, so :func:`second_moment_sensitivity` applies; its noise makes
    the symmetric matrix noise of standard deviation ``noise_std`` on the
    diagonal and ``noise_std / sqrt(2)`` off it.

    Parameters
    ----------
    rows : ndarray of shape (n_samples, p), or an iterable of such blocks
        The rows (any finite values; each is clipped to ``bound``).
    bound : float > 0 (``inf``: no clipping, and then ``noise_std`` must be 0)
    noise_std : float >= 0
    random_state : None, int or Generator
    laplace_scale : float >= 0 or None, default=None
        For a pure-DP release: Laplace noise of this scale on every entry of
        the upper triangle (diagonal included, entries unscaled), whose L1
        sensitivity is :func:`second_moment_l1_sensitivity`; ``noise_std`` is
        then ignored.

    Returns
    -------
    gram : ndarray of shape (p, p), symmetric
    event : GaussianRelease (LaplaceRelease with ``laplace_scale``)

    Examples
    --------
    >>> import numpy as np
    >>> from skdp.mechanisms import private_second_moment
    >>> A = np.random.default_rng(0).normal(size=(10_000, 3))
    >>> G, event = private_second_moment(A, bound=5.0, noise_std=1e-3, random_state=0)
    >>> np.allclose(G, np.eye(3), atol=0.05)
    True
    """
    bound = float(bound)
    if not math.isfinite(bound) and noise_std > 0:
        raise ValueError("A noisy release of the second moments needs a finite bound on the row norms.")
    gram, n = clipped_second_moment_sum(rows, bound)
    return release_second_moment(gram, n, bound, noise_std, random_state=random_state,
                                 laplace_scale=laplace_scale)


def clipped_second_moment_sum(rows, bound):
    """``(sum_i a_i a_i^T, n)`` of the rows clipped to norm ``bound`` (``inf``: not clipped).

    The part of :func:`private_second_moment` that reads the rows: a sum over
    rows, so a chunk of rows (a block in memory, a Dask chunk) gives its partial
    sum and the release adds them (:func:`release_second_moment`). A row with a
    non-finite value counts as 0 (a per-record map).

    Parameters
    ----------
    rows : ndarray of shape (n_samples, p), or an iterable of such blocks
    bound : float > 0 or inf

    Returns
    -------
    gram_sum : ndarray of shape (p, p)
    n_rows : int
    """
    bound = float(bound)
    blocks = [rows] if isinstance(rows, np.ndarray) else rows
    gram, n = None, 0
    for block in blocks:
        block = np.asarray(block, dtype=float)
        # A row with a non-finite value becomes 0 (a per-record map), so that one
        # record cannot turn the whole release into NaN.
        block = np.where(np.isfinite(block).all(axis=1, keepdims=True), block, 0.0)
        block = block * clip_factors(row_norms(block), bound)[:, None] if math.isfinite(bound) else block
        gram = block.T @ block if gram is None else gram + block.T @ block
        n += block.shape[0]
    return gram, n


def release_second_moment(gram_sum, n, bound, noise_std, *, random_state=None, laplace_scale=None):
    """The noisy release of :func:`private_second_moment` from the sum of the clipped rows' ``a a^T``.

    ``gram_sum`` is :func:`clipped_second_moment_sum` of the ``n`` rows (or the
    sum of its values over chunks of them); every number of the release and its
    event is as :func:`private_second_moment` describes.
    """
    bound = float(bound)
    if not math.isfinite(bound) and noise_std > 0:
        raise ValueError("A noisy release of the second moments needs a finite bound on the row norms.")
    gram = gram_sum / n
    p = gram.shape[0]
    upper = np.triu_indices(p)
    if laplace_scale is not None:
        if not math.isfinite(bound):
            raise ValueError("A Laplace release of the second moments needs a finite bound on the row norms.")
        released, event = laplace_mechanism(gram[upper], second_moment_l1_sensitivity(bound, n, p),
                                            float(laplace_scale), random_state=random_state)
        out = np.zeros((p, p))
        out[upper] = released
        return out + np.triu(out, 1).T, event
    # Without a bound (and without noise, epsilon = inf) the release is accounted as not private.
    event = (GaussianRelease(second_moment_sensitivity(bound, n), noise_std) if math.isfinite(bound)
             else NON_PRIVATE_RELEASE)
    released = gram[upper] * np.where(upper[0] == upper[1], 1.0, math.sqrt(2.0))
    notify("gaussian", released, event)
    if noise_std > 0:
        rng = check_generator(random_state)
        released = released + noise_std * rng.standard_normal(released.shape)
    out = np.zeros((p, p))
    out[upper] = released * np.where(upper[0] == upper[1], 1.0, 1.0 / math.sqrt(2.0))
    return out + np.triu(out, 1).T, event
