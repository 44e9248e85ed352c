"""Random directions of the zeroth-order estimators, and the sensitivity bound that goes with them.

A step draws ``m`` unit directions, evaluates every row's loss at
``theta +- delta u_j`` (or at two points shifted by ``delta u_j``) and combines
each row's vector of differences ``a_i`` into a per-row vector
``v_i = scale * sum_j a_ij u_ij``. The bound on ``||v_i||`` that the privacy
argument needs depends on how the directions were drawn and how ``a_i`` was
clipped, so one object decides both (:meth:`DirectionDraw.row_bound`): a
solver never pairs a clip rule with the sensitivity formula of another mode.

Two modes:

* ``"iid"`` (the paper's Algorithms 1, 2 and 6): every row gets its own ``m``
  directions, independent and uniform on the unit sphere (normalised
  Gaussians). Every difference is clipped on its own (``|a_ij| <= c``), and
  the triangle inequality gives ``||v_i|| <= scale * m * c``.
* ``"orth"`` [ours]: one Haar-random orthonormal frame of ``m <= d`` directions
  per step, shared by all rows (the rows of ``Q^T`` of a sign-corrected QR of a
  Gaussian matrix: every direction is uniform on the sphere, so the estimators
  stay unbiased). Each row's vector of differences is clipped *jointly*
  (``||a_i|| <= C``); the frame is orthonormal, so ``||v_i|| = scale ||a_i||
  <= scale * C`` (Pythagoras), ``sqrt(m)`` times less than a coordinate-wise
  clip at ``C / sqrt(m)`` would allow, and ``m`` times less than ``"iid"``.
  Sharing the frame across rows lets a step release the ``m`` numbers
  ``sum_i a_i`` (the frame is data-independent randomness, and the map to
  ``R^d`` is an isometry onto its span), which is what makes many directions
  per row cheap (Zhang et al., DP-ZO / DPZero; Tang et al., DP-AggZO).

Replacing one row changes a sum of per-row vectors by at most ``2 max ||v_i||``.
"""

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["DIRECTION_MODES", "DirectionDraw", "orthonormal_frame", "sphere_directions", "draw_directions"]

DIRECTION_MODES = ("orth", "coordinates", "iid")
# Modes whose directions form an orthonormal frame shared by the rows of a step.
_FRAMES = ("orth", "coordinates")


def orthonormal_frame(rng, m, d):
    """``m`` orthonormal rows of a Haar-random orthogonal ``d x d`` matrix (sign-corrected QR).

    Examples
    --------
    >>> import numpy as np
    >>> from skdp.solvers.zeroth_order.directions import orthonormal_frame
    >>> U = orthonormal_frame(np.random.default_rng(0), 3, 5)
    >>> U.shape, bool(np.allclose(U @ U.T, np.eye(3)))
    ((3, 5), True)
    """
    G = rng.standard_normal((d, m))
    Q, R = np.linalg.qr(G)
    # Without the sign correction the frame is not Haar-distributed (QR fixes diag(R) > 0 only
    # up to the LAPACK convention).
    signs = np.sign(np.diag(R))
    signs[signs == 0] = 1.0
    return (Q * signs).T


def sphere_directions(rng, shape, d):
    """Independent uniform unit vectors: normalised Gaussians of shape ``shape + (d,)``.

    A zero Gaussian draw (probability 0, but possible in floating point) is
    redrawn as the first basis vector, so every direction has norm 1.
    """
    G = rng.standard_normal(tuple(shape) + (d,))
    norms = np.linalg.norm(G, axis=-1, keepdims=True)
    zero = norms[..., 0] == 0
    if zero.any():
        G[zero] = np.eye(d)[0]
        norms[zero] = 1.0
    return G / norms


@dataclass(frozen=True)
class DirectionDraw:
    """The directions of one step and the clip rule that goes with them.

    Attributes
    ----------
    mode : {"orth", "coordinates", "iid"}
    directions : ndarray
        ``(m, d)`` for a shared frame, ``(n_rows, m, d)`` for per-row
        directions (``"iid"``, or orthonormal frames drawn per row).
    coordinates : ndarray of int or None
        The axes of a ``"coordinates"`` frame (``directions`` are their unit
        vectors).
    """

    mode: str
    directions: np.ndarray
    coordinates: np.ndarray = None

    @property
    def shared(self):
        return self.directions.ndim == 2

    @property
    def n_directions(self):
        return self.directions.shape[-2]

    @property
    def dim(self):
        return self.directions.shape[-1]

    def subset(self, rows):
        """The draw restricted to some rows (per-row directions only; a shared frame is unchanged)."""
        return self if self.shared else DirectionDraw(self.mode, self.directions[rows], self.coordinates)

    def clip(self, A, threshold):
        """Clip the rows' differences ``A`` (shape ``(n_rows, m)``) by this mode's rule.

        Non-finite differences become 0 first (a fixed per-record rule: a NaN or
        an infinity from a user's callable reveals nothing and cannot poison a
        sum). The frames (``"orth"``, ``"coordinates"``) scale each row to norm
        at most ``threshold``; ``"iid"`` clips each entry to
        ``[-threshold, threshold]``.
        """
        if self.mode not in _FRAMES:
            # np.clip keeps NaN: map it to 0 after (infinities are clipped to the threshold).
            return np.nan_to_num(np.clip(A, -threshold, threshold), nan=0.0)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            norms = np.sqrt(np.einsum("ij,ij->i", A, A))
            bad = ~np.isfinite(norms)  # a row with a NaN or an infinity (or overflowing squares)
            if bad.any():
                A = A.copy()
                A[bad] = np.where(np.isfinite(A[bad]), A[bad], 0.0)
                norms[bad] = np.sqrt(np.einsum("ij,ij->i", A[bad], A[bad]))
            factors = np.where(norms > threshold, threshold / norms, 1.0)
        # An overflowing norm (entries near 1e308) gives factor 0 or NaN: such a row counts as 0.
        factors = np.where(np.isfinite(factors), factors, 0.0)
        if (factors == 1.0).all():
            return A
        return A * factors[:, None]

    def grad_threshold(self, lipschitz, smoothing):
        """Clip threshold of the two-point differences ``f(x + delta u) - f(x - delta u)``.

        ``"iid"``: ``2 L delta`` per difference (the Lipschitz bound, Algorithm 1);
        the frames: ``2 delta L sqrt(m / d)`` per row (:func:`orth_grad_clip`).
        """
        if self.mode not in _FRAMES:
            return 2.0 * float(lipschitz) * float(smoothing)
        return orth_grad_clip(lipschitz, smoothing, self.n_directions, self.dim)

    def diff_threshold(self, lipschitz, distance, symmetric):
        """Clip threshold of the differences between two points ``distance`` apart.

        One-sided ``f(x + delta u) - f(y + delta u)`` is at most ``L ||x - y||``
        (Algorithm 2); the symmetric difference of the two two-point
        differences at most twice that. ``"iid"`` clips each difference there;
        the frames clip the row's vector at ``sqrt(m)`` times it (for a linear
        prediction every direction moves the loss by about the same amount, so
        no smaller joint bound holds).
        """
        per_direction = (2.0 if symmetric else 1.0) * float(lipschitz) * float(distance)
        return per_direction if self.mode not in _FRAMES else math.sqrt(self.n_directions) * per_direction

    def row_bound(self, threshold):
        """Bound on ``||sum_j a_ij u_ij||`` for a row clipped at ``threshold`` (before the scale).

        The frames: ``threshold`` (orthonormal directions, joint clip);
        ``"iid"``: ``m * threshold`` (``m`` unit vectors, each coefficient at
        most ``threshold``).
        """
        return float(threshold) if self.mode in _FRAMES else self.n_directions * float(threshold)

    def combine(self, A):
        """``sum_i sum_j a_ij u_ij``: the sum over rows of the per-row vectors (before the scale)."""
        if self.shared:
            return self.directions.T @ A.sum(axis=0)
        return np.einsum("im,imd->d", A, self.directions)


def draw_directions(mode, rng, n_rows, m, d):
    """The directions of one step: a shared frame (``"orth"``, ``"coordinates"``) or per-row ones (``"iid"``).

    Examples
    --------
    >>> import numpy as np
    >>> from skdp.solvers.zeroth_order.directions import draw_directions
    >>> draw = draw_directions("iid", np.random.default_rng(0), n_rows=4, m=2, d=3)
    >>> draw.directions.shape, draw.row_bound(1.0)
    ((4, 2, 3), 2.0)
    >>> draw_directions("orth", np.random.default_rng(0), n_rows=4, m=2, d=3).row_bound(1.0)
    1.0
    """
    if mode == "orth":
        if m > d:
            raise ValueError(f"An orthonormal frame has at most d = {d} directions; got {m}.")
        return DirectionDraw("orth", orthonormal_frame(rng, m, d))
    if mode == "coordinates":
        if m > d:
            raise ValueError(f"A coordinate frame has at most d = {d} directions; got {m}.")
        axes = np.sort(rng.choice(d, size=m, replace=False))
        return DirectionDraw("coordinates", np.eye(d)[axes], axes)
    if mode == "iid":
        return DirectionDraw("iid", sphere_directions(rng, (n_rows, m), d))
    raise ValueError(f"Unknown direction mode {mode!r}; choose one of {DIRECTION_MODES}.")


def orth_grad_clip(lipschitz, smoothing, m, d):
    """The joint clip of a row's ``m`` two-point differences along a frame: ``2 delta L sqrt(m / d)``.

    For a loss of a linear prediction that is ``G``-Lipschitz in the prediction
    and a row ``x`` with ``G ||x|| <= L``, the differences along an orthonormal
    frame are ``a_j = l(z + delta <u_j, x>) - l(z - delta <u_j, x>)``, so
    ``||a|| <= 2 delta G ||U x|| <= 2 delta L``: with the full frame (``m = d``)
    the clip never binds. With fewer directions ``2 delta L sqrt(m / d)`` is the
    size of the projection of a gradient of norm ``L`` on a random
    ``m``-dimensional subspace, on average; rows whose gradient happens to lie
    in the drawn span are clipped, as in clipped DP-SGD (bias, never privacy).
    """
    return 2.0 * float(smoothing) * float(lipschitz) * math.sqrt(m / d)
