"""The default DPZerothOrderRegressor on the awkward real-world table shapes of ``tests/real_tables.py``.

With ``epsilon=inf`` the default must match the non-private fit of the same loss on the same
features: test pinball (absolute) loss at most 1.02 x that of ``QuantileRegressor(alpha=0,
solver="highs")``, one data seed per table (the private standardisation, the clipping and the
zeroth-order steps must not cost accuracy by themselves). The epsilon = 1 comparison with
``DPHeavyTailRegressor(loss="absolute")`` at n = 10000 is in ``benchmarks/zeroth_order``
(``real_tables.md``): it needs minutes, not seconds.
"""

import functools
import math
import warnings

import numpy as np
import pytest
from sklearn.linear_model import QuantileRegressor
from threadpoolctl import threadpool_limits

from skdp import BudgetAccountant, DPZerothOrderRegressor, PrivacyLeakWarning
import real_tables as rt

N = 2000
SEED = 0


@pytest.fixture(autouse=True)
def one_blas_thread():
    with threadpool_limits(limits=1):
        yield


@functools.lru_cache(maxsize=None)
def table(name):
    return rt.TABLES[name](N, SEED)


def absolute_loss(data, predictions):
    return float(np.mean(np.abs(data["y_test"] - np.asarray(predictions, dtype=float))))


@pytest.mark.parametrize("name", list(rt.TABLES))
def test_epsilon_inf_matches_quantile_regression(name):
    data = table(name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # HiGHS and epsilon = inf warnings
        reference = absolute_loss(data, rt.fit_predict(data, QuantileRegressor(alpha=0.0, solver="highs"))[1])
        estimator = DPZerothOrderRegressor(epsilon=math.inf, random_state=SEED, accountant=BudgetAccountant())
        warnings.simplefilter("ignore", PrivacyLeakWarning)
        loss = absolute_loss(data, rt.fit_predict(data, estimator)[1])
    assert loss <= 1.02 * reference, (
        f"{name} (n={N}): epsilon=inf test absolute loss {loss:.6g} is {loss / reference:.4g}x that of "
        f"QuantileRegressor ({reference:.6g}); must be at most 1.02x")
