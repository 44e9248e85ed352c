"""Private regression from loss values only: :class:`DPZerothOrderRegressor` and its models.

* :mod:`~skdp.zeroth_order._regressor` — the estimator (parameters, routing, the
  problem in solver units, the released model);
* :mod:`~skdp.zeroth_order._models` — the linear model, the one-hidden-layer
  network and the adapters of a user's callables;
* :mod:`~skdp.zeroth_order._callables` — the check, on public synthetic rows,
  that a user's callables compute each row from that row alone.

The solvers are in :mod:`skdp.solvers.zeroth_order`.
"""

from ._models import scalar_loss, scalar_model
from ._regressor import DPZerothOrderRegressor

__all__ = ["DPZerothOrderRegressor", "scalar_model", "scalar_loss"]
