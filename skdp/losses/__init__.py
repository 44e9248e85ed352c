"""Per-row losses of a linear prediction, vectorised.

Each loss gives its value and derivative in the prediction, a per-sample
Lipschitz bound over a coefficient ball, its smoothness constant and its
Lipschitzian extension.

Examples
--------
>>> from skdp.losses import get_loss
>>> get_loss("huber", delta=2.0)
HuberLoss(delta=2.0)
"""

from ._base import Loss, MarginLoss, RegressionLoss
from .callable import CallableLoss, ValueLoss
from .classification import LogisticLoss, ModifiedHuberLoss, SmoothedHingeLoss, SquaredHingeLoss
from .regression import AbsoluteLoss, HuberLoss, QuantileLoss, SquaredLoss
from .robust import CauchyLoss, TukeyLoss

LOSSES = {
    "squared": SquaredLoss,
    "huber": HuberLoss,
    "absolute": AbsoluteLoss,
    "quantile": QuantileLoss,
    "logistic": LogisticLoss,
    "squared_hinge": SquaredHingeLoss,
    "smoothed_hinge": SmoothedHingeLoss,
    "modified_huber": ModifiedHuberLoss,
}


def get_loss(name, **params):
    """Build a loss from its name and parameters.

    Parameters
    ----------
    name : str or Loss
        One of ``LOSSES`` (a Loss instance is returned unchanged).
    **params
        Passed to the loss (``delta`` for Huber, ``quantile`` for quantile,
        ``gamma`` for the smoothed hinge).
    """
    if isinstance(name, Loss):
        return name
    try:
        cls = LOSSES[name]
    except (KeyError, TypeError):
        raise ValueError(f"Unknown loss {name!r}; choose one of {sorted(LOSSES)}.") from None
    return cls(**params)


__all__ = [
    "Loss",
    "RegressionLoss",
    "MarginLoss",
    "SquaredLoss",
    "HuberLoss",
    "AbsoluteLoss",
    "QuantileLoss",
    "LogisticLoss",
    "SquaredHingeLoss",
    "SmoothedHingeLoss",
    "ModifiedHuberLoss",
    "TukeyLoss",
    "CauchyLoss",
    "CallableLoss",
    "ValueLoss",
    "LOSSES",
    "get_loss",
]
