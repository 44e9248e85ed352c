"""Regression losses of the residual ``r = z - y``."""

import numpy as np

from ._base import RegressionLoss

__all__ = ["SquaredLoss", "HuberLoss", "AbsoluteLoss", "QuantileLoss"]


class SquaredLoss(RegressionLoss):
    """``(z - y)^2 / 2``. Smooth (constant 1); its extension is the Huber loss.

    Examples
    --------
    >>> from skdp.losses import SquaredLoss
    >>> loss = SquaredLoss()
    >>> loss.value([3.0], [1.0]).tolist(), loss.derivative([3.0], [1.0]).tolist()
    ([2.0], [2.0])
    >>> loss.extended_value([3.0], [1.0], slope_bound=1.0).tolist()  # Huber with delta 1
    [1.5]
    """

    name = "squared"
    smoothness = 1.0

    def _psi(self, r):
        return 0.5 * r * r

    def _dpsi(self, r):
        return r

    def _lower(self, M):
        return -M

    def _upper(self, M):
        return M

    def derivative_bound(self, prediction_bound, y):
        return np.asarray(prediction_bound, dtype=float) + np.abs(np.asarray(y, dtype=float))


class HuberLoss(RegressionLoss):
    """Huber loss with threshold ``delta``: quadratic for ``|r| <= delta``, linear beyond.

    Parameters
    ----------
    delta : float > 0

    Examples
    --------
    >>> from skdp.losses import HuberLoss
    >>> HuberLoss(1.0).value([0.5, 3.0], [0.0, 0.0]).tolist()
    [0.125, 2.5]
    """

    name = "huber"
    smoothness = 1.0

    def __init__(self, delta=1.35):
        delta = float(delta)
        if not delta > 0:
            raise ValueError(f"The Huber threshold must be positive; got {delta!r}.")
        self.delta = delta

    def _params(self):
        return {"delta": self.delta}

    def _psi(self, r):
        a = np.abs(r)
        return np.where(a <= self.delta, 0.5 * r * r, self.delta * a - 0.5 * self.delta**2)

    def _dpsi(self, r):
        return np.clip(r, -self.delta, self.delta)

    def _lower(self, M):
        return np.where(M < self.delta, -M, -np.inf)

    def _upper(self, M):
        return np.where(M < self.delta, M, np.inf)

    def derivative_bound(self, prediction_bound, y):
        b = np.asarray(prediction_bound, dtype=float) + np.abs(np.asarray(y, dtype=float))
        return np.minimum(self.delta, b)


class AbsoluteLoss(RegressionLoss):
    """``|z - y|`` (least absolute deviation). Lipschitz with slope 1, not smooth.

    Examples
    --------
    >>> from skdp.losses import AbsoluteLoss
    >>> AbsoluteLoss().value([2.0, -1.0], [0.0, 0.0]).tolist()
    [2.0, 1.0]
    """

    name = "absolute"

    def _psi(self, r):
        return np.abs(r)

    def _dpsi(self, r):
        return np.sign(r)

    def _lower(self, M):
        return np.where(M < 1.0, 0.0, -np.inf)

    def _upper(self, M):
        return np.where(M < 1.0, 0.0, np.inf)

    def derivative_bound(self, prediction_bound, y):
        return np.ones(np.broadcast(np.asarray(prediction_bound), np.asarray(y)).shape)


class QuantileLoss(RegressionLoss):
    """Pinball loss of level ``quantile``: ``rho(y - z)`` with ``rho(u) = u (quantile - 1{u < 0})``.

    Its population minimiser is the conditional ``quantile``-quantile of ``y``,
    as for scikit-learn's ``QuantileRegressor``.

    Parameters
    ----------
    quantile : float in (0, 1)

    Examples
    --------
    >>> from skdp.losses import QuantileLoss
    >>> QuantileLoss(0.9).value([0.0, 0.0], [1.0, -1.0]).tolist()
    [0.9, 0.09999999999999998]
    """

    name = "quantile"

    def __init__(self, quantile=0.5):
        quantile = float(quantile)
        if not 0.0 < quantile < 1.0:
            raise ValueError(f"quantile must lie in (0, 1); got {quantile!r}.")
        self.quantile = quantile

    def _params(self):
        return {"quantile": self.quantile}

    def _psi(self, r):
        # r = z - y; under-prediction (r < 0) costs quantile, over-prediction 1 - quantile.
        return np.where(r < 0, -self.quantile * r, (1.0 - self.quantile) * r)

    def _dpsi(self, r):
        return np.where(r < 0, -self.quantile, np.where(r > 0, 1.0 - self.quantile, 0.0))

    def _lower(self, M):
        return np.where(M < self.quantile, 0.0, -np.inf)

    def _upper(self, M):
        return np.where(M < 1.0 - self.quantile, 0.0, np.inf)

    def derivative_bound(self, prediction_bound, y):
        shape = np.broadcast(np.asarray(prediction_bound), np.asarray(y)).shape
        return np.full(shape, max(self.quantile, 1.0 - self.quantile))
