"""The sufficient-statistics solver: exactness without noise, sensitivity on coupled neighbours, refusals."""

import math
import warnings

import numpy as np
import pytest
from sklearn.linear_model import ElasticNet, Ridge

from skdp import BudgetAccountant, DPHeavyTailRegressor, PrivacyLeakWarning
from skdp.losses import SquaredLoss
from skdp.solvers import GLMProblem, SufficientStatistics
from skdp.solvers.heavy_tail.sufficient_statistics import ReleasedStatistics, ridge_solution
from privacy_harness import assert_event_as_planned, neighbours, record_releases, run_as_planned


def _data(n=400, d=5, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * [1.0, 10.0, 100.0, 1.0, 0.1] + [0.0, 5.0, 1000.0, 0.0, 0.0]
    return X, X @ rng.normal(size=d) + rng.normal(size=n) + 7.0


@pytest.mark.filterwarnings("ignore::skdp.PrivacyLeakWarning")
@pytest.mark.parametrize("alpha", [0.01, 0.5])
@pytest.mark.parametrize("fit_intercept", [True, False])
def test_without_noise_it_is_ridge_in_elasticnet_units(alpha, fit_intercept):
    X, y = _data()
    model = DPHeavyTailRegressor(epsilon=math.inf, algorithm="sufficient_statistics", alpha=alpha,
                                 fit_intercept=fit_intercept).fit(X, y)
    # ElasticNet's alpha penalises the mean loss; Ridge's the summed loss.
    ridge = Ridge(alpha=alpha * len(y), fit_intercept=fit_intercept).fit(X, y)
    net = ElasticNet(alpha=alpha, l1_ratio=0.0, fit_intercept=fit_intercept, tol=1e-12,
                     max_iter=100_000).fit(X, y)
    np.testing.assert_allclose(model.coef_, ridge.coef_, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(model.intercept_, ridge.intercept_, rtol=1e-8, atol=1e-8)
    np.testing.assert_allclose(model.coef_, net.coef_, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("params", [dict(loss="huber"), dict(alpha=0.1, l1_ratio=0.5)])
def test_refused_before_spend(params):
    acc = BudgetAccountant()
    X, y = _data()
    with pytest.raises(ValueError):
        DPHeavyTailRegressor(algorithm="sufficient_statistics", accountant=acc, **params).fit(X, y)
    assert acc.events == [] or len(acc.events) == 0


def _problem(X, y, row_bound):
    return GLMProblem(X, y, SquaredLoss(), np.zeros(X.shape[1]), radius=10.0, row_bound=row_bound,
                      intercept=True)


# A huge clip multiplier makes the clip the public bound sqrt(R^2 + B^2), the same on both datasets
# (the private median would differ between them, and with it the sensitivity).
@pytest.mark.parametrize("solver", [SufficientStatistics(clip_multiplier=1e6),
                                    SufficientStatistics(alphas=(0.0, 1.0, 10.0), clip_multiplier=1e6)])
def test_releases_respect_their_sensitivity_on_neighbours(solver):
    X, y, X2, y2, bound, _ = neighbours(n=300, d=4, seed=1)
    logs = []
    for A, b in ((X, y), (X2, y2)):
        with record_releases() as log:
            result, planned = run_as_planned(solver, _problem(A, b, bound), 2.0, math.inf, 7)
        assert_event_as_planned(result.event, planned)
        logs.append(log)
    assert len(logs[0]) == len(logs[1]) == (1 if solver.alphas is None else 2)
    moved = 0
    for a, b in zip(*logs):
        assert a.event == b.event
        gap = np.linalg.norm(a.value - b.value)
        assert gap <= a.sensitivity * (1 + 1e-9)
        moved += gap > 0
    assert moved == 1  # the replaced row lies in exactly one part (or the one release)


def test_pure_release_respects_its_l1_sensitivity():
    X, y, X2, y2, bound, _ = neighbours(n=200, d=3, seed=2)
    values = []
    for A, b in ((X, y), (X2, y2)):
        problem = _problem(A, b, bound)
        with record_releases() as log:
            SufficientStatistics().run(None, problem, _pure_budget(1.0), np.random.default_rng(0))
        values.append(log[0])
    assert values[0].mechanism == "laplace"
    assert np.abs(values[0].value - values[1].value).sum() <= values[0].sensitivity * (1 + 1e-9)


def _pure_budget(epsilon):
    from skdp.solvers import SolverBudget

    return SolverBudget(0.0, math.inf, pure_epsilon=epsilon)


def test_pure_dp_fit_spends_epsilon_with_delta_zero():
    X, y = _data(n=3000)
    acc = BudgetAccountant()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = DPHeavyTailRegressor(epsilon=2.0, delta=0.0, algorithm="sufficient_statistics",
                                     accountant=acc, random_state=0).fit(X, y)
    assert model.privacy_spent_.delta == 0.0
    assert model.privacy_spent_.epsilon == pytest.approx(2.0, rel=1e-6)
    with pytest.raises(ValueError, match="delta"):
        DPHeavyTailRegressor(delta=0.0).fit(X, y)


def test_solve_never_raises_on_any_released_matrix():
    p = 4
    for gram in (-np.eye(p), np.zeros((p, p)), np.full((p, p), np.nan), np.diag([1.0, -1.0, 0.0, 1e-300])):
        stats = ReleasedStatistics(gram, np.ones(p), 1.0, 10, 0.1)
        w = ridge_solution(stats, np.zeros(p), 0.0)
        w2 = ridge_solution(stats, np.ones(p), 0.5)
        assert w.shape == w2.shape == (p,)
        assert np.all(np.isfinite(w)) and np.all(np.isfinite(w2))


def test_epsilon_inf_warns():
    X, y = _data()
    with pytest.warns(PrivacyLeakWarning):
        DPHeavyTailRegressor(epsilon=math.inf, algorithm="sufficient_statistics").fit(X, y)
