"""Base classes for per-row losses of a linear prediction.

A loss of a linear model is a scalar function of the prediction ``z = x . w``
(plus intercept) and the label ``y``. Its gradient in the coefficients is
``derivative(z, y) * x``, so its per-sample Lipschitz constant over a
coefficient ball of radius ``R`` is ``sup_{|z| <= R ||x||} |derivative| * ||x||``
and its per-sample smoothness is ``smoothness * ||x||^2``.

The Lipschitzian extension with slope bound ``M`` (Asi, Chadha, Cheng and Duchi,
Definition 2.5; here in one dimension) keeps the loss where ``|derivative| <= M`` and continues it
linearly with slope ``M`` beyond. For a linear model with slope bound
``M = L / ||x||`` it is the infimal convolution of the row's loss with
``L ||.||`` in coefficient space, and its gradient is the per-sample gradient
clipped to norm ``L``: clipping *is* optimising a convex, L-Lipschitz
objective.

References
----------
H. Asi, K. Chadha, G. Cheng and J. C. Duchi, "Private optimization in the
interpolation regime: faster rates and hardness results", 2022, arXiv:2210.17070.
"""

import numpy as np

__all__ = ["Loss", "RegressionLoss", "MarginLoss"]


def _as_arrays(z, y):
    return np.asarray(z, dtype=float), np.asarray(y, dtype=float)


class Loss:
    """A per-row loss ``loss(z, y)`` of a linear prediction ``z``.

    Attributes
    ----------
    name : str
    smoothness : float
        ``sup |d^2 loss / dz^2|``; ``inf`` for losses with a kink.
    is_classification : bool
        True for margin losses, whose labels are -1 or +1.
    """

    name = "loss"
    smoothness = np.inf
    is_classification = False

    def value(self, z, y):
        """Loss of every row (array of shape ``z.shape``)."""
        raise NotImplementedError

    def derivative(self, z, y):
        """Derivative of every row's loss in its prediction (a subgradient at kinks)."""
        raise NotImplementedError

    def derivative_bound(self, prediction_bound, y):
        """``sup_{|z| <= prediction_bound} |derivative(z, y)|`` for every row."""
        raise NotImplementedError

    def lipschitz_bound(self, row_norms, y, radius):
        """Per-sample Lipschitz constant in the coefficients over the ball of ``radius``.

        This is computed from each row itself (a per-record quantity): it may be
        used to transform records one by one with a public threshold (as the
        known-Lipschitz reduction does), never released or aggregated as is.

        Parameters
        ----------
        row_norms : ndarray
            Norms of the feature rows (including any intercept column).
        y : ndarray
            Labels.
        radius : float
            Radius of the coefficient ball.
        """
        row_norms = np.asarray(row_norms, dtype=float)
        return self.derivative_bound(radius * row_norms, y) * row_norms

    def row_smoothness(self, row_norms):
        """Per-sample smoothness constant in the coefficients: ``smoothness * ||x||^2``."""
        return self.smoothness * np.asarray(row_norms, dtype=float) ** 2

    @staticmethod
    def extension_slope(row_norms, lipschitz):
        """Slope bound ``L / ||x||`` of the extension for a coefficient-space Lipschitz bound ``L``."""
        row_norms = np.asarray(row_norms, dtype=float)
        with np.errstate(divide="ignore"):
            return np.where(row_norms > 0, float(lipschitz) / row_norms, np.inf)

    def extended_value(self, z, y, slope_bound):
        """Value of the Lipschitzian extension with derivative bounded by ``slope_bound``."""
        raise NotImplementedError

    def extended_derivative(self, z, y, slope_bound):
        """Derivative of the extension: ``clip(derivative, -slope_bound, slope_bound)``."""
        return np.clip(self.derivative(z, y), -np.asarray(slope_bound), np.asarray(slope_bound))

    def __repr__(self):
        params = ", ".join(f"{k}={v!r}" for k, v in self._params().items())
        return f"{type(self).__name__}({params})"

    def _params(self):
        return {}

    def __eq__(self, other):
        return type(self) is type(other) and self._params() == other._params()

    def __hash__(self):
        return hash((type(self).__name__, tuple(sorted(self._params().items()))))


class RegressionLoss(Loss):
    """A loss ``psi(z - y)`` of the residual, with ``psi`` convex and ``psi'`` non-decreasing.

    Subclasses define ``_psi``, ``_dpsi`` and the break points
    ``_lower(M) = inf {r : psi'(r) >= -M}`` and ``_upper(M) = sup {r : psi'(r) <= M}``
    (``-inf`` / ``+inf`` when the derivative never leaves ``[-M, M]`` on that side).
    """

    def value(self, z, y):
        z, y = _as_arrays(z, y)
        return self._psi(z - y)

    def derivative(self, z, y):
        z, y = _as_arrays(z, y)
        return self._dpsi(z - y)

    def extended_value(self, z, y, slope_bound):
        z, y = _as_arrays(z, y)
        r = z - y
        M = np.broadcast_to(np.asarray(slope_bound, dtype=float), r.shape)
        lo, hi = self._lower(M), self._upper(M)
        lo_f = np.where(np.isfinite(lo), lo, 0.0)
        hi_f = np.where(np.isfinite(hi), hi, 0.0)
        below = r < lo
        above = r > hi
        M_f = np.where(np.isfinite(M), M, 0.0)
        out = self._psi(r)
        out = np.where(below, self._psi(lo_f) - M_f * (r - lo_f), out)
        out = np.where(above, self._psi(hi_f) + M_f * (r - hi_f), out)
        return out


class MarginLoss(Loss):
    """A classification loss ``phi(y z)`` of the margin, ``y`` in {-1, +1}, ``phi`` convex non-increasing.

    Subclasses define ``_phi``, ``_dphi`` and ``_lower(M) = inf {m : phi'(m) >= -M}``.
    The bounds (``derivative_bound``, ``lipschitz_bound``) assume ``|y| = 1``;
    the estimators encode labels as -1 and +1 before using them.
    """

    is_classification = True

    def value(self, z, y):
        z, y = _as_arrays(z, y)
        return self._phi(y * z)

    def derivative(self, z, y):
        z, y = _as_arrays(z, y)
        return y * self._dphi(y * z)

    def derivative_bound(self, prediction_bound, y):
        b = np.asarray(prediction_bound, dtype=float)
        return np.abs(self._dphi(-b)) * np.ones_like(np.asarray(y, dtype=float))

    def extended_value(self, z, y, slope_bound):
        z, y = _as_arrays(z, y)
        m = y * z
        M = np.broadcast_to(np.asarray(slope_bound, dtype=float), m.shape)
        lo = self._lower(M)
        lo_f = np.where(np.isfinite(lo), lo, 0.0)
        M_f = np.where(np.isfinite(M), M, 0.0)
        return np.where(m < lo, self._phi(lo_f) - M_f * (m - lo_f), self._phi(m))
