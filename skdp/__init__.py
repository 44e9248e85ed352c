"""skdp: scikit-learn estimators that learn with differential privacy."""

from ._validation import InvalidParameterError
from .accounting import (
    AmbiguousAccountantError,
    BudgetAccountant,
    BudgetExceededError,
    DetachedAccountantError,
    LowBudgetWarning,
    PrivacyLeakWarning,
)
from .linear_model import DPHeavyTailRegressor, DPInterpolatingClassifier
from .zeroth_order import DPZerothOrderRegressor

__version__ = "0.1.0.dev0"

__all__ = [
    "DPHeavyTailRegressor",
    "DPInterpolatingClassifier",
    "DPZerothOrderRegressor",
    "BudgetAccountant",
    "BudgetExceededError",
    "DetachedAccountantError",
    "AmbiguousAccountantError",
    "InvalidParameterError",
    "LowBudgetWarning",
    "PrivacyLeakWarning",
    "__version__",
]
