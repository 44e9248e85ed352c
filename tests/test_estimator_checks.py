"""scikit-learn's estimator checks, for every estimator configuration in one place.

The configurations cover each solver of DPHeavyTailRegressor (with the losses,
penalties and options that change its code path), the models, losses and
algorithms of DPZerothOrderRegressor, and the test-only ToyDPRidge
that proves the shared base. Private models are noisy by design; their tags say
so (``poor_score``).

Two warnings are expected here and ignored: the checks' datasets are tiny, so
budgets are starved (LowBudgetWarning); and the checks fit one estimator
several times with the same ``random_state`` on the implicit ledger to compare
the results, which is exactly the seed reuse that PrivacyLeakWarning reports.
"""

import pytest
from sklearn.utils.estimator_checks import parametrize_with_checks

from skdp import DPHeavyTailRegressor, DPInterpolatingClassifier, DPZerothOrderRegressor
from skdp.model_selection import DPRegularizationTuner
from toy_estimator import ToyDPRidge

HEAVY_TAIL = [
    DPHeavyTailRegressor(),
    DPHeavyTailRegressor(loss="huber", algorithm="one_pass_glm", alpha=0.1),
    DPHeavyTailRegressor(loss="quantile", quantile=0.7, algorithm="localized", max_iter=20),
    DPHeavyTailRegressor(loss="absolute", algorithm="known_lipschitz", fit_intercept=False, max_iter=20),
    DPHeavyTailRegressor(loss="huber", huber_delta=2.0, scaling="none"),
    DPHeavyTailRegressor(loss="absolute", algorithm="localized_subgradient", max_iter=20),
    DPHeavyTailRegressor(algorithm="accelerated"),
    DPHeavyTailRegressor(loss="huber", algorithm="averaged_sgd", alpha=0.1),
    DPHeavyTailRegressor(algorithm="proximal_sgd", alpha=0.1, l1_ratio=1.0),
    DPHeavyTailRegressor(alpha=0.1, l1_ratio=0.5),
]

# The default (linear) and the non-linear path (network, redescending loss with its warm-up and private
# residual scale). Each fit on the checks' tiny data costs about a second (the budget plan's calibration),
# so the solvers' other configurations are exercised in tests/zeroth_order and tests/solvers/zeroth_order
# instead of here.
ZEROTH_ORDER = [
    DPZerothOrderRegressor(),
    DPZerothOrderRegressor(model="mlp", hidden_units=3, loss="tukey", max_iter=10, algorithm="variance_reduced"),
]

TOY = [ToyDPRidge(), ToyDPRidge(epsilon=0.3, alpha=0.1, row_norm=3.0)]

SEED_REUSE = "ignore:.*a seed an earlier fit charged to the implicit ledger:skdp.PrivacyLeakWarning"


@pytest.mark.filterwarnings("ignore::skdp.LowBudgetWarning")
@pytest.mark.filterwarnings(SEED_REUSE)
@parametrize_with_checks(HEAVY_TAIL)
def test_heavy_tail_regressor(estimator, check):
    check(estimator)


@pytest.mark.filterwarnings("ignore::skdp.LowBudgetWarning")
@pytest.mark.filterwarnings(SEED_REUSE)
@parametrize_with_checks(ZEROTH_ORDER)
def test_zeroth_order_regressor(estimator, check):
    check(estimator)


@pytest.mark.filterwarnings(SEED_REUSE)
@parametrize_with_checks(TOY)
def test_toy_ridge(estimator, check):
    check(estimator)


TUNERS = [DPRegularizationTuner(),
          DPRegularizationTuner(DPHeavyTailRegressor(l1_ratio=1.0), method="path"),
          DPRegularizationTuner(DPInterpolatingClassifier(), alphas=(1e-3, 1e-1), method="select"),
          DPRegularizationTuner(method="bilevel", outer_steps=3)]


@pytest.mark.filterwarnings("ignore::skdp.LowBudgetWarning")
@pytest.mark.filterwarnings(SEED_REUSE)
@pytest.mark.filterwarnings("ignore:.*classes=None.*:skdp.PrivacyLeakWarning")
@parametrize_with_checks(TUNERS)
def test_tuner(estimator, check):
    check(estimator)
