"""Margin losses ``phi(y z)`` for labels in {-1, +1}."""

import numpy as np
from scipy import special

from ._base import MarginLoss

__all__ = ["LogisticLoss", "SquaredHingeLoss", "SmoothedHingeLoss", "ModifiedHuberLoss"]


class LogisticLoss(MarginLoss):
    """``log(1 + exp(-y z))``. Smoothness 1/4, derivative bounded by 1.

    Examples
    --------
    >>> import numpy as np
    >>> from skdp.losses import LogisticLoss
    >>> np.round(LogisticLoss().value([0.0, 2.0], [1, -1]), 4).tolist()
    [0.6931, 2.1269]
    """

    name = "logistic"
    smoothness = 0.25

    def _phi(self, m):
        return np.logaddexp(0.0, -m)

    def _dphi(self, m):
        return -special.expit(-m)

    def _lower(self, M):
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(M < 1.0, -special.logit(np.minimum(M, 1.0)), -np.inf)


class SquaredHingeLoss(MarginLoss):
    """``max(0, 1 - y z)^2``. Smoothness 2; its extension with slope 4 is the modified Huber loss.

    Examples
    --------
    >>> from skdp.losses import SquaredHingeLoss
    >>> SquaredHingeLoss().value([0.0, 2.0, -2.0], [1, 1, 1]).tolist()
    [1.0, 0.0, 9.0]
    """

    name = "squared_hinge"
    smoothness = 2.0

    def _phi(self, m):
        return np.maximum(0.0, 1.0 - m) ** 2

    def _dphi(self, m):
        return -2.0 * np.maximum(0.0, 1.0 - m)

    def _lower(self, M):
        return 1.0 - M / 2.0


class SmoothedHingeLoss(MarginLoss):
    """Hinge loss with a quadratic piece of width ``gamma`` (smoothness ``1 / gamma``).

    ``0`` for ``m >= 1``, ``(1 - m)^2 / (2 gamma)`` for ``1 - gamma < m < 1`` and
    ``1 - m - gamma / 2`` below.

    Parameters
    ----------
    gamma : float > 0

    Examples
    --------
    >>> from skdp.losses import SmoothedHingeLoss
    >>> SmoothedHingeLoss(1.0).value([2.0, 0.5, -1.0], [1, 1, 1]).tolist()
    [0.0, 0.125, 1.5]
    """

    name = "smoothed_hinge"

    def __init__(self, gamma=1.0):
        gamma = float(gamma)
        if not gamma > 0:
            raise ValueError(f"gamma must be positive; got {gamma!r}.")
        self.gamma = gamma
        self.smoothness = 1.0 / gamma

    def _params(self):
        return {"gamma": self.gamma}

    def _phi(self, m):
        g = self.gamma
        return np.where(m >= 1.0, 0.0, np.where(m <= 1.0 - g, 1.0 - m - g / 2.0, (1.0 - m) ** 2 / (2 * g)))

    def _dphi(self, m):
        return -np.clip((1.0 - m) / self.gamma, 0.0, 1.0)

    def _lower(self, M):
        return np.where(M < 1.0, 1.0 - self.gamma * M, -np.inf)


class ModifiedHuberLoss(MarginLoss):
    """scikit-learn's ``modified_huber``: ``max(0, 1 - m)^2`` for ``m >= -1``, ``-4 m`` below.

    Examples
    --------
    >>> from skdp.losses import ModifiedHuberLoss
    >>> ModifiedHuberLoss().value([0.0, -3.0], [1, 1]).tolist()
    [1.0, 12.0]
    """

    name = "modified_huber"
    smoothness = 2.0

    def _phi(self, m):
        return np.where(m >= -1.0, np.maximum(0.0, 1.0 - m) ** 2, -4.0 * m)

    def _dphi(self, m):
        return np.where(m >= -1.0, -2.0 * np.maximum(0.0, 1.0 - m), -4.0)

    def _lower(self, M):
        return np.where(M < 4.0, 1.0 - M / 2.0, -np.inf)
