"""Redescending robust losses of the residual ``r = z - y``: Tukey's biweight and the Cauchy loss.

Both are bounded-influence and non-convex: their derivative ``psi`` tends to 0
(Tukey: is 0 beyond ``c``) for large residuals, so a gross outlier pulls the
fit by nothing (Tukey) or by less and less (Cauchy), where a convex loss
(absolute, Huber) is pulled by a constant amount per outlier. Under an
asymmetric contamination this is what removes the bias of convex losses. The
price is a non-convex objective: a fit should start near the clean solution
(for example from a convex fit), which the zeroth-order regressor arranges.

They are Lipschitz in the prediction (``derivative_bound`` is a constant), so
their zeroth-order differences need no further bound; they have no
Lipschitzian extension (not convex), so only solvers that use loss values
(``skdp.solvers.zeroth_order``) take them.
"""

import math

import numpy as np

from ._base import Loss, _as_arrays

__all__ = ["TukeyLoss", "CauchyLoss"]


class _ResidualLoss(Loss):
    """A loss ``rho(z - y)`` given by ``_rho`` and ``_psi`` (its derivative)."""

    def __init__(self, c):
        c = float(c)
        if not c > 0 or not np.isfinite(c):
            raise ValueError(f"The tuning constant c must be a positive number; got {c!r}.")
        self.c = c

    def _params(self):
        return {"c": self.c}

    def value(self, z, y):
        z, y = _as_arrays(z, y)
        return self._rho(z - y)

    def derivative(self, z, y):
        z, y = _as_arrays(z, y)
        return self._psi(z - y)

    def derivative_bound(self, prediction_bound, y):
        shape = np.broadcast(np.asarray(prediction_bound), np.asarray(y)).shape
        return np.full(shape, self.max_derivative)


class TukeyLoss(_ResidualLoss):
    """Tukey's biweight: ``c^2 / 6 (1 - (1 - (r / c)^2)^3)`` for ``|r| <= c``, ``c^2 / 6`` beyond.

    ``c = 4.685`` residual standard deviations gives 95% efficiency at the normal.
    Its derivative ``r (1 - (r / c)^2)^2`` is 0 beyond ``c`` and at most
    ``16 c / (25 sqrt(5))`` (at ``|r| = c / sqrt(5)``).

    Parameters
    ----------
    c : float > 0, default=4.685

    Examples
    --------
    >>> from skdp.losses import TukeyLoss
    >>> loss = TukeyLoss(2.0)
    >>> [round(v, 6) for v in loss.value([0.0, 1.0, 5.0], [0.0, 0.0, 0.0]).tolist()]
    [0.0, 0.385417, 0.666667]
    >>> round(loss.max_derivative, 6)
    0.572433
    """

    name = "tukey"

    def __init__(self, c=4.685):
        super().__init__(c)

    @property
    def max_derivative(self):
        return 16.0 * self.c / (25.0 * math.sqrt(5.0))

    def _rho(self, r):
        c2 = self.c * self.c
        u = np.minimum((r * r) / c2, 1.0)
        return c2 / 6.0 * (1.0 - (1.0 - u) ** 3)

    def _psi(self, r):
        u = (r * r) / (self.c * self.c)
        return np.where(u < 1.0, r * (1.0 - u) ** 2, 0.0)


class CauchyLoss(_ResidualLoss):
    """The Cauchy (Lorentzian) loss ``c^2 / 2 log(1 + (r / c)^2)``.

    ``c = 2.385`` residual standard deviations gives 95% efficiency at the
    normal. Its derivative ``r / (1 + (r / c)^2)`` is at most ``c / 2`` (at
    ``|r| = c``) and decays as ``c^2 / r``.

    Parameters
    ----------
    c : float > 0, default=2.385

    Examples
    --------
    >>> from skdp.losses import CauchyLoss
    >>> loss = CauchyLoss(1.0)
    >>> [round(v, 6) for v in loss.value([0.0, 1.0], [0.0, 0.0]).tolist()]
    [0.0, 0.346574]
    >>> loss.max_derivative
    0.5
    """

    name = "cauchy"

    def __init__(self, c=2.385):
        super().__init__(c)

    @property
    def max_derivative(self):
        return self.c / 2.0

    def _rho(self, r):
        c2 = self.c * self.c
        return 0.5 * c2 * np.log1p((r * r) / c2)

    def _psi(self, r):
        return r / (1.0 + (r * r) / (self.c * self.c))
