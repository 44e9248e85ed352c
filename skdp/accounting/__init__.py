"""Privacy accounting: immutable events, composition, conversions, calibration and budgets.

Events describe what a mechanism released (a Gaussian release with its
sensitivity and noise, a Laplace release, a zCDP or (epsilon, delta) guarantee)
and compose with :class:`Sequential`, :class:`Parallel`, :class:`Repeated` and
:class:`PoissonSampled`. Every event answers ``epsilon(delta)`` and
``delta(epsilon)`` with the tightest valid method for its shape.
:class:`BudgetAccountant` is the ledger that estimators charge;
:func:`default_delta` is the public rule behind the estimators' ``delta="auto"``.

The implementation needs numpy and scipy only. Google's dp-accounting serves as
the test oracle.
"""

from ._conversions import dp_to_gdp, dp_to_zcdp, gdp_to_dp, zcdp_to_dp
from ._default_delta import default_delta
from .budget import (
    AmbiguousAccountantError,
    BudgetAccountant,
    BudgetExceededError,
    DetachedAccountantError,
    LowBudgetWarning,
    PrivacyLeakWarning,
    PrivacySpent,
)
from .calibration import calibrate_gaussian, calibrate_laplace, calibrate_sampled_gaussian, calibrate_scale
from .events import (
    ApproxDPRelease,
    ExponentialMechanismRelease,
    GaussianRelease,
    LaplaceRelease,
    Parallel,
    PoissonSampled,
    PrivacyEvent,
    Repeated,
    Sequential,
    ZCDPRelease,
)

__all__ = [
    "PrivacyEvent",
    "GaussianRelease",
    "LaplaceRelease",
    "ExponentialMechanismRelease",
    "ZCDPRelease",
    "ApproxDPRelease",
    "Sequential",
    "Parallel",
    "Repeated",
    "PoissonSampled",
    "gdp_to_dp",
    "dp_to_gdp",
    "zcdp_to_dp",
    "dp_to_zcdp",
    "calibrate_gaussian",
    "calibrate_laplace",
    "calibrate_sampled_gaussian",
    "calibrate_scale",
    "default_delta",
    "AmbiguousAccountantError",
    "BudgetAccountant",
    "BudgetExceededError",
    "DetachedAccountantError",
    "LowBudgetWarning",
    "PrivacyLeakWarning",
    "PrivacySpent",
]
