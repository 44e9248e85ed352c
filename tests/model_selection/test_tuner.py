"""DPRegularizationTuner: the choice without noise, accounting, neighbours, scikit-learn integration."""

import math

import numpy as np
import pytest
from sklearn.linear_model import LinearRegression
from sklearn.model_selection import cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from skdp import BudgetAccountant, DPHeavyTailRegressor, DPInterpolatingClassifier
from skdp.losses import SquaredLoss
from skdp.model_selection import DPRegularizationTuner
from skdp.model_selection._selection import release_scores, row_scores
from skdp.solvers import GLMProblem, SolverBudget, SufficientStatistics
from skdp.solvers.heavy_tail.sufficient_statistics import release_statistics
from privacy_harness import record_releases

GRID = (1e-3, 1e-2, 3e-2, 0.1, 0.3, 1.0, 3.0, 10.0)


def _regression(n=2000, d=5, seed=0, noise=3.0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    return X, X @ rng.normal(size=d) * 0.3 + noise * rng.normal(size=n)


@pytest.mark.parametrize("grid", [GRID, GRID[::-1]])
def test_without_noise_the_choice_is_the_grid_argmin_of_the_validation_loss(grid):
    # Few rows, weak coefficients: the validation loss has an interior minimum on this grid.
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 8))
    y = X @ rng.normal(size=8) * 0.3 + rng.normal(size=60)
    Xi = np.hstack([X, np.ones((len(y), 1))])
    problem = GLMProblem(Xi, y, SquaredLoss(), np.r_[np.ones(8), 0.0], radius=100.0,
                         row_bound=float(np.linalg.norm(Xi, axis=1).max()), intercept=True)
    solver = SufficientStatistics(alphas=grid)
    result = solver.run(None, problem, SolverBudget(math.inf), np.random.default_rng(5))
    val, train = solver.split(len(y), np.random.default_rng(5))
    losses = []
    for a in grid:
        # Ridge on the training part, the intercept column unpenalised (normal equations).
        P = np.diag(np.r_[np.full(8, a), 0.0])
        w = np.linalg.solve(Xi[train].T @ Xi[train] / len(train) + P, Xi[train].T @ y[train] / len(train))
        losses.append(0.5 * np.mean((y[val] - Xi[val] @ w) ** 2))
    best = int(np.argmin(losses))
    assert 0 < best < len(grid) - 1, losses  # an interior optimum: reached from either side
    assert result.schedule["alpha_index"] == best
    np.testing.assert_allclose(result.schedule["validation_scores"], losses, rtol=1e-8)


@pytest.mark.parametrize("method", ["auto", "select", "split"])
def test_total_equals_target_on_the_ledger(method):
    X, y = _regression(n=1500)
    acc = BudgetAccountant()
    # The estimator's own epsilon is overridden by the tuner.
    estimator = DPHeavyTailRegressor(algorithm="sufficient_statistics", epsilon=50.0)
    tuner = DPRegularizationTuner(estimator, alphas=(0.01, 0.1, 1.0), method=method, epsilon=0.7,
                                  accountant=acc, random_state=0).fit(X, y)
    assert tuner.privacy_spent_.epsilon == pytest.approx(0.7, rel=1e-6)
    assert tuner.privacy_spent_.epsilon <= 0.7
    assert len(acc.events) == 1
    assert acc.spent.epsilon == pytest.approx(0.7, rel=1e-6)
    assert tuner.alpha_ in (0.01, 0.1, 1.0)
    assert tuner.best_estimator_.alpha == tuner.alpha_


@pytest.mark.parametrize("method", ["select", "split"])
def test_pure_dp_total_equals_target(method):
    X, y = _regression(n=1500)
    acc = BudgetAccountant()
    tuner = DPRegularizationTuner(alphas=(0.01, 1.0), method=method, epsilon=0.8, delta=0.0, accountant=acc,
                                  random_state=0).fit(X, y)
    assert tuner.privacy_spent_.delta == 0.0 and acc.spent.delta == 0.0
    assert acc.spent.epsilon == pytest.approx(0.8, rel=1e-6) and acc.spent.epsilon <= 0.8


def test_general_select_with_a_classifier_delegates_and_spends_the_target():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(1200, 4))
    y = np.where(X @ [2.0, -1.0, 0.5, 0.0] + 0.5 * rng.normal(size=1200) > 0, "yes", "no")
    acc = BudgetAccountant()
    tuner = DPRegularizationTuner(DPInterpolatingClassifier(classes=["no", "yes"], C=10.0),
                                  alphas=(1e-3, 1e-1), method="select", epsilon=2.0, accountant=acc, random_state=0).fit(X, y)
    assert acc.spent.epsilon == pytest.approx(2.0, rel=1e-6)
    assert list(tuner.classes_) == ["no", "yes"]
    proba = tuner.predict_proba(X[:5])
    assert proba.shape == (5, 2) and np.allclose(proba.sum(axis=1), 1.0)
    assert tuner.score(X, y) > 0.75
    assert tuner.validation_scores_.shape == (2,)
    assert tuner.coef_.shape == (1, 4)


def test_pipeline_and_cross_val_score_charge_a_shared_accountant():
    X, y = _regression(n=1200)
    acc = BudgetAccountant()
    tuner = DPRegularizationTuner(alphas=(0.0, 1.0), epsilon=0.5, accountant=acc)
    pipe = make_pipeline(StandardScaler(), tuner)
    scores = cross_val_score(pipe, X, y, cv=3)
    assert scores.shape == (3,)
    assert len(acc.events) == 3
    assert acc.spent.epsilon <= 1.5 + 1e-6


@pytest.mark.parametrize("params, data", [
    (dict(method="bilevel_sgd", estimator=DPHeavyTailRegressor(loss="huber")), None),
    (dict(estimator=DPHeavyTailRegressor(algorithm="sufficient_statistics", loss="huber")), None),
    (dict(estimator=DPHeavyTailRegressor(), method="select", delta=0.0), None),
    (dict(alphas=[-1.0]), None),
    (dict(), "tiny"),
])
def test_refusals_spend_nothing(params, data):
    X, y = _regression(n=300)
    if data == "tiny":
        X, y = X[:3], y[:3]
    acc = BudgetAccountant()
    with pytest.raises((ValueError, TypeError)) as info:
        DPRegularizationTuner(accountant=acc, **params).fit(X, y)
    if params.get("method") == "bilevel_sgd":
        assert "loss='squared'" in str(info.value) and "Nothing was spent" in str(info.value)
    assert len(acc.events) == 0


def test_coupled_neighbours_every_release_within_its_sensitivity():
    X, y = _regression(n=800, d=3)
    X2, y2 = X.copy(), y.copy()
    X2[17], y2[17] = 1e6, -1e6  # one row replaced by an extreme one
    logs = []
    for A, b in ((X, y), (X2, y2)):
        with record_releases() as log:
            DPRegularizationTuner(alphas=(0.0, 0.1, 1.0), epsilon=1.0, accountant=BudgetAccountant(),
                                  random_state=3).fit(A, b)
        logs.append(log)
    assert len(logs[0]) == len(logs[1]) > 0
    # The scales (quantiles, not logged) differ between the runs, and every later release is
    # computed at them, so its sensitivity is data-dependent only through released values; the
    # noise per unit of sensitivity is public and the same. Values are compared at fixed scales
    # in the next test.
    for a, b in zip(*logs):
        assert a.mechanism == b.mechanism
        assert a.event.mu == pytest.approx(b.event.mu, rel=1e-12)


def test_statistics_releases_of_the_tuner_on_neighbours_at_fixed_scales():
    # At fixed (released) scales and clip the two parts' releases differ in one part only, within
    # its sensitivity; the clip's own release is an exponential mechanism (tested with the quantiles).
    X, y = _regression(n=600, d=3)
    Xi = np.hstack([np.clip(X, -3, 3), np.ones((600, 1))])
    X2, y2 = Xi.copy(), y.copy()
    X2[5, :3], y2[5] = 3.0, -1e6
    val, train = SufficientStatistics(alphas=(0.0, 1.0)).split(600, np.random.default_rng(2))
    gaps = []
    for part in (val, train):
        logs = []
        for A, b in ((Xi, y), (X2, y2)):
            with record_releases() as log:
                release_statistics(A[part], b[part], 2.5, 4.0, SolverBudget(1.0), np.random.default_rng(0))
            logs.append(log[0])
        assert logs[0].event == logs[1].event
        gaps.append(np.linalg.norm(logs[0].value - logs[1].value) / logs[0].sensitivity)
    assert max(gaps) <= 1 + 1e-9 and min(gaps) == 0.0


@pytest.mark.filterwarnings("ignore::skdp.PrivacyLeakWarning")
def test_score_vector_release_within_its_sensitivity():
    X, y = _regression(n=400, d=3)
    models = [DPHeavyTailRegressor(epsilon=math.inf, algorithm="sufficient_statistics", alpha=a).fit(X, y)
              for a in (0.0, 1.0, 100.0)]
    y2 = y.copy()
    y2[0] = 1e9
    values = []
    for target in (y, y2):
        scores = np.column_stack([row_scores(m, X, target, False, 2.0) for m in models])
        with record_releases() as log:
            release_scores(scores, 4.0, 1.0, np.random.default_rng(0))
        values.append(log[0])
    assert values[0].sensitivity == pytest.approx(math.sqrt(3) * 4.0 / 400)
    assert np.linalg.norm(values[0].value - values[1].value) <= values[0].sensitivity * (1 + 1e-9)


def test_tuning_acts_at_finite_epsilon():
    # Many rows, few columns: the statistics are accurate, the least-squares fit is right and the
    # tuner must not pick a strong penalty (alpha = 1000 would predict about the constant).
    X, y = _regression(n=20000, d=5, noise=1.0)
    tuner = DPRegularizationTuner(epsilon=1.0, random_state=0, accountant=BudgetAccountant()).fit(X, y)
    ols = LinearRegression().fit(X, y).score(X, y)  # 0.141 on these rows
    assert tuner.alpha_ <= 0.1
    # 0.01 R^2 is about 10 noise standard deviations of the released statistics' effect here.
    assert tuner.score(X, y) > ols - 0.01


@pytest.mark.parametrize("method", ["auto", "default"])
def test_default_method_fits_the_default_model_with_the_whole_budget(method):
    X, y = _regression(n=1000, d=4)
    acc = BudgetAccountant()
    tuner = DPRegularizationTuner(method=method, epsilon=0.6, accountant=acc, random_state=0).fit(X, y)
    assert tuner.method_ == "default"
    assert len(acc.events) == 1
    assert acc.spent.epsilon == pytest.approx(0.6, rel=1e-6) and acc.spent.epsilon <= 0.6 + 1e-12
    final = tuner.best_estimator_
    # The library's default solver, at its own alpha, with the tuner's budget on the copy.
    assert isinstance(final, DPHeavyTailRegressor) and final.algorithm == "auto"
    assert final.epsilon == 0.6 and tuner.alpha_ == 0.0 and tuner.validation_scores_ is None
    # The event is the one the default estimator plans at this budget (nothing else is released).
    planned = DPHeavyTailRegressor(epsilon=0.6, delta=tuner.best_estimator_.delta)._planned_event(X, y)
    assert tuner.privacy_spent_.epsilon == pytest.approx(planned.epsilon(final.delta), rel=1e-9)
    np.testing.assert_allclose(tuner.predict(X[:3]), final.predict(X[:3]))


def test_auto_tunes_only_a_given_grid():
    X, y = _regression(n=1000, d=4)
    grid = DPRegularizationTuner(alphas=(0.0, 1.0), epsilon=1.0, accountant=BudgetAccountant(),
                                 random_state=0).fit(X, y)
    assert grid.method_ == "select" and grid.validation_scores_.shape == (2,)


def test_default_method_with_a_classifier_reports_its_mean_loss_alpha():
    rng = np.random.default_rng(2)
    X = rng.normal(size=(800, 3))
    y = (X[:, 0] + 0.5 * rng.normal(size=800) > 0).astype(int)
    acc = BudgetAccountant()
    tuner = DPRegularizationTuner(DPInterpolatingClassifier(classes=[0, 1], C=2.0), method="default",
                                  epsilon=1.0, accountant=acc, random_state=0).fit(X, y)
    assert tuner.alpha_ == pytest.approx(1.0 / (2.0 * 800))
    assert acc.spent.epsilon == pytest.approx(1.0, rel=1e-6) and len(acc.events) == 1
    assert tuner.predict_proba(X[:2]).shape == (2, 2)


def test_default_method_on_coupled_neighbours_releases_the_same_mechanisms_at_public_scales():
    X, y = _regression(n=800, d=3)
    X2, y2 = X.copy(), y.copy()
    X2[11], y2[11] = -1e6, 1e6
    logs = []
    for A, b in ((X, y), (X2, y2)):
        with record_releases() as log:
            DPRegularizationTuner(method="default", epsilon=1.0, accountant=BudgetAccountant(),
                                  random_state=4).fit(A, b)
        logs.append(log)
    assert len(logs[0]) == len(logs[1]) > 0
    for a, b in zip(*logs):
        assert a.mechanism == b.mechanism
        assert a.event.mu == pytest.approx(b.event.mu, rel=1e-12)


def test_default_method_refuses_an_invalid_estimator_before_spending():
    X, y = _regression(n=300)
    acc = BudgetAccountant()
    with pytest.raises(ValueError):
        DPRegularizationTuner(DPHeavyTailRegressor(algorithm="sufficient_statistics", loss="huber"),
                              method="default", accountant=acc).fit(X, y)
    assert len(acc.events) == 0
