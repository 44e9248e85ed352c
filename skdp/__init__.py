"""skdp: scikit-learn estimators that learn with differential privacy."""

from .accounting import BudgetAccountant, BudgetExceededError, PrivacyLeakWarning

__version__ = "0.1.0.dev0"

__all__ = ["BudgetAccountant", "BudgetExceededError", "PrivacyLeakWarning", "__version__"]
