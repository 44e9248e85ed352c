"""skdp: scikit-learn estimators that learn with differential privacy."""

from .accounting import BudgetAccountant, BudgetExceededError, LowBudgetWarning, PrivacyLeakWarning
from .linear_model import DPHeavyTailRegressor

__version__ = "0.1.0.dev0"

__all__ = [
    "DPHeavyTailRegressor",
    "BudgetAccountant",
    "BudgetExceededError",
    "LowBudgetWarning",
    "PrivacyLeakWarning",
    "__version__",
]
