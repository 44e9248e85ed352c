"""DPZerothOrderRegressor: accuracy limits, misbehaving callables, refusals before any spend, scikit-learn use."""

import math
import warnings

import numpy as np
import pytest
from sklearn.linear_model import QuantileRegressor
from sklearn.model_selection import GridSearchCV, cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from skdp import BudgetAccountant, DPZerothOrderRegressor, PrivacyLeakWarning
from skdp.solvers import SolverBudget
from skdp.solvers.zeroth_order import Naive
from skdp.zeroth_order import scalar_loss, scalar_model
from privacy_harness import CoupledZOProblem


def _data(n=3000, d=3, seed=0, noise="cauchy"):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * [1.0, 10.0, 0.1][:d] + [0.0, 5.0, -3.0][:d]
    w = np.array([1.0, -0.2, 4.0])[:d]
    e = rng.standard_cauchy(n) if noise == "cauchy" else rng.normal(size=n)
    return X, X @ w + 2.0 + e, w


def _fit(**params):
    X = params.pop("X")
    y = params.pop("y")
    params.setdefault("random_state", 0)
    params.setdefault("accountant", BudgetAccountant())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)  # epsilon = inf warns that it is not private
        return DPZerothOrderRegressor(**params).fit(X, y)


def test_epsilon_inf_recovers_least_absolute_deviations():
    X, y, _ = _data()
    qr = QuantileRegressor(alpha=0.0, solver="highs").fit(X, y)
    model = _fit(X=X, y=y, epsilon=math.inf)
    # The LAD objective at the fit is within 0.1% of the exact minimum, and so are the coefficients
    # (relative to their statistical error, about 0.03 here).
    objective = np.mean(np.abs(y - model.predict(X))) / np.mean(np.abs(y - qr.predict(X)))
    assert objective < 1.001
    np.testing.assert_allclose(model.coef_, qr.coef_, atol=0.01 * np.abs(qr.coef_).max())
    assert abs(model.intercept_ - qr.intercept_) < 0.05
    np.testing.assert_allclose(model.params_, np.append(model.coef_, model.intercept_))


def _median_error(n, epsilon, seeds=3):
    errors = []
    for seed in range(seeds):
        X, y, w = _data(n=n, seed=seed)
        errors.append(np.linalg.norm(_fit(X=X, y=y, epsilon=epsilon, random_state=seed).coef_ - w))
    return float(np.median(errors))


def test_error_falls_with_n_and_epsilon():
    # Median over 3 seeds; the expected factors are large (more than 2.5x for 8x the rows and for
    # 10x the budget at this small n), so the 1.5x margins hold on every seed set tried.
    small, large = _median_error(1000, 0.5), _median_error(8000, 0.5)
    assert large < small / 1.5
    assert _median_error(1000, 5.0) < small / 1.5


def test_pinball_loss_targets_the_quantile():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(20_000, 2))
    y = X @ [1.0, 2.0] + rng.normal(size=20_000)
    model = _fit(X=X, y=y, loss="pinball", quantile=0.9, epsilon=2.0)
    # Conditional 0.9-quantile: intercept 1.2816, slopes unchanged up to the private fit's shrinkage
    # (the slope of 2 came out 1.90-1.96 over six seeds).
    assert abs(model.intercept_ - 1.2816) < 0.1
    np.testing.assert_allclose(model.coef_, [1.0, 2.0], atol=0.15)


def test_tukey_ignores_an_asymmetric_contamination_that_biases_convex_losses():
    rng = np.random.default_rng(2)
    X = rng.normal(size=(10_000, 2))
    y = X @ [1.0, -1.0] + rng.normal(size=10_000)
    y[:2000] += 10.0
    tukey = _fit(X=X, y=y, loss="tukey", epsilon=2.0)
    absolute = _fit(X=X, y=y, epsilon=2.0)
    # The absolute loss's intercept moves to the mixture's median (about 0.3); Tukey's stays near 0.
    assert abs(tukey.intercept_) < 0.1 < abs(absolute.intercept_)
    assert tukey.schedule_["warm_steps"] > 0 and tukey.schedule_["residual_scale"] > 0


def test_network_beats_the_linear_model_on_a_non_linear_target():
    rng = np.random.default_rng(3)
    X = rng.uniform(-2, 2, size=(2000, 2))
    y = np.sin(2 * X[:, 0]) + X[:, 1] ** 2 + 0.1 * rng.normal(size=2000)
    mlp = _fit(X=X, y=y, model="mlp", hidden_units=8, epsilon=math.inf, max_iter=150)
    linear = _fit(X=X, y=y, epsilon=math.inf)
    assert mlp.score(X, y) > linear.score(X, y) + 0.3
    assert not hasattr(mlp, "coef_") and mlp.params_.shape == (8 * 2 + 2 * 8 + 1,)


# -- callables ------------------------------------------------------------------------------------
def _linear_callable(P, Z):
    return Z @ P[:, :-1].T + P[:, -1]


MISBEHAVING = {
    "huge": lambda P, Z: 1e300 * np.tanh(_linear_callable(P, Z)),
    "discontinuous": lambda P, Z: np.floor(4 * _linear_callable(P, Z)) / 4,
    "nan_for_some_rows": lambda P, Z: np.where(Z[:, :1] > 1.0, np.nan, _linear_callable(P, Z)),
    "raises_for_some_rows": lambda P, Z: (_ for _ in ()).throw(ValueError("bad row"))
    if np.any(Z[:, 0] > 2.0) else _linear_callable(P, Z),
    "inf_for_some_parameters": lambda P, Z: np.where(P[:, :1].T > 0.05, np.inf, _linear_callable(P, Z)),
}


@pytest.mark.parametrize("name", sorted(MISBEHAVING))
def test_misbehaving_callables_neither_raise_nor_overspend(name):
    X, y, _ = _data(n=600, noise="normal")
    accountant = BudgetAccountant()
    model = _fit(X=X, y=y, model=MISBEHAVING[name], n_params=4, epsilon=1.0, max_iter=20, accountant=accountant)
    assert model.privacy_spent_.epsilon == pytest.approx(1.0, rel=1e-6)
    assert accountant.spent.epsilon == pytest.approx(1.0, rel=1e-6)
    assert np.all(np.isfinite(model.params_))
    model.predict(X[:5])  # may be NaN for a callable that returns NaN there, but does not raise


def test_misbehaving_callable_loss():
    X, y, _ = _data(n=2000, noise="normal")

    def loss(prediction, t):
        if np.any(t > 30):
            raise RuntimeError("outlying label")
        return np.where(t < -5, np.nan, np.abs(prediction - t) ** 0.5)

    model = _fit(X=X, y=y, loss=loss, epsilon=1.0)
    assert model.privacy_spent_.epsilon == pytest.approx(1.0, rel=1e-6)
    assert np.all(np.isfinite(model.coef_))


def _imputing_model(P, Z):
    """Predictions of rows outside the model's domain imputed by the chunk's mean: row-wise on ordinary rows
    only (one out-of-range row's value moves with every other row)."""
    pred = _linear_callable(P, Z)
    outside = np.abs(Z[:, 0]) > 50.0
    pred[outside] = pred[~outside].mean(axis=0) if (~outside).any() else 0.0
    return pred


@pytest.mark.parametrize("kind", ["model", "loss", "imputing_model"])
def test_callables_that_read_other_rows_are_refused_before_any_spend(kind):
    X, y, _ = _data(n=500, noise="normal")
    accountant = BudgetAccountant()
    if kind == "model":
        params = dict(model=lambda P, Z: _linear_callable(P, Z) - _linear_callable(P, Z).mean(axis=0), n_params=4)
    elif kind == "imputing_model":
        params = dict(model=_imputing_model, n_params=4)
    else:
        params = dict(loss=lambda p, t: np.abs(p - t) / np.mean(np.abs(p - t) + 1.0))
    with pytest.raises(ValueError, match="from that row alone"):
        DPZerothOrderRegressor(accountant=accountant, **params).fit(X, y)
    assert accountant.spent.epsilon == 0.0


def test_stateful_and_failing_callables_are_refused_before_any_spend():
    X, y, _ = _data(n=500, noise="normal")
    accountant = BudgetAccountant()
    calls = [0]

    def stateful(P, Z):
        calls[0] += 1
        return _linear_callable(P, Z) + calls[0]

    with pytest.raises(ValueError, match="from that row alone"):
        DPZerothOrderRegressor(model=stateful, n_params=4, accountant=accountant).fit(X, y)
    with pytest.raises(ValueError, match="wrong|shape"):
        DPZerothOrderRegressor(model=lambda P, Z: P @ np.ones(4), n_params=4, accountant=accountant).fit(X, y)
    assert accountant.spent.epsilon == 0.0


def test_callable_privacy_on_coupled_neighbours():
    """The problem the estimator builds for a callable model: every query moves by at most its bound."""
    X, y, _ = _data(n=600, noise="normal")
    X2, y2 = X.copy(), y.copy()
    X2[3], y2[3] = 1e6, -1e9
    est = DPZerothOrderRegressor(model=MISBEHAVING["discontinuous"], n_params=4, epsilon=1.0, random_state=0,
                                 accountant=BudgetAccountant())
    problems = []
    original = est._build_problem

    def capture(scaling, X_, y_, solver, released=None):
        problems.append(original(scaling, X_, y_, solver, released))
        problems.append(original(scaling, np.where(np.arange(len(y_))[:, None] == 3, X2, X_),
                                 np.where(np.arange(len(y_)) == 3, y2, y_), solver, released))
        return problems[0]

    est._build_problem = capture
    est.fit(X, y)
    coupled = CoupledZOProblem(problems[0], problems[1])
    spec = est._problem_spec(None, 600, 3, "columns")
    Naive(n_steps=10, directions="orth", n_directions=3).run(spec, coupled, SolverBudget(1.0),
                                                             np.random.default_rng(0))
    assert max(coupled.checks) <= 1.0 + 1e-9


def test_scalar_adapters():
    X, y, _ = _data(n=300, noise="normal")
    model = _fit(X=X, y=y, model=scalar_model(lambda th, x: float(x @ th[:3] + th[3])), n_params=4,
                 loss=scalar_loss(lambda p, t: abs(p - t)), max_iter=3, epsilon=1.0)
    assert model.params_.shape == (4,)


# -- refusals before any spend, attributes, scikit-learn use ----------------------------------------
@pytest.mark.parametrize("params,match", [
    (dict(model=lambda P, Z: Z @ P.T), "n_params"),
    (dict(init=[0.0, 1.0]), "init"),
    (dict(model="mlp", init=[0.0, 1.0]), "init must hold"),
    (dict(delta=0.0), "delta"),
    (dict(loss="squared"), "loss"),
    (dict(directions="sphere"), "directions"),
    (dict(lipschitz=float("inf")), "lipschitz"),
    (dict(lipschitz=1e308), "lipschitz"),  # finite, but its sensitivity and noise would overflow
    (dict(loss="huber", loss_constant=1e307), "loss_constant"),
])
def test_bad_parameters_refuse_before_any_spend(params, match):
    X, y, _ = _data(n=200)
    accountant = BudgetAccountant()
    with pytest.raises(ValueError, match=match):
        DPZerothOrderRegressor(accountant=accountant, **params).fit(X, y)
    assert accountant.spent.epsilon == 0.0


def test_public_schedule_and_attributes():
    X, y, _ = _data(n=2000)
    model = _fit(X=X, y=y, epsilon=1.0)
    assert model.algorithm_ == "naive" and model.n_iter_ == 50
    assert model.n_function_evals_ == 50 * 2 * 4 * 2000  # steps x 2 x (3 features + intercept) x rows
    assert model.schedule_["directions"] == "coordinates" and model.schedule_["n_directions"] == 4
    assert model.lipschitz_ > 0 and model.privacy_event_ is not None
    theory = _fit(X=X, y=y, epsilon=1.0, schedule="theory")
    assert theory.algorithm_ == "variance_reduced" and theory.schedule_["directions"] == "iid"
    assert theory.schedule_["n_rows_used"] <= 2000


def test_verbose_prints_only_public_counts(capsys):
    X, y, _ = _data(n=500)
    # Solver progress is the verbose=2 level of the shared printer (skdp/linear_model/_verbose.py).
    _fit(X=X, y=y, epsilon=1.0, verbose=2, max_iter=10)
    lines = [line for line in capsys.readouterr().out.splitlines() if " iteration " in line]
    assert lines and lines[-1].startswith("[DPZerothOrderRegressor] solver naive: iteration 10/10, ")
    assert lines[-1].endswith(f"{10 * 2 * 4 * 500:.3g} function evaluations")


def test_shared_accountant_in_pipeline_grid_search_and_cross_validation():
    X, y, _ = _data(n=900)
    accountant = BudgetAccountant()
    pipe = make_pipeline(StandardScaler(), DPZerothOrderRegressor(epsilon=0.5, accountant=accountant,
                                                                  max_iter=10))
    scores = cross_val_score(pipe, X, y, cv=3)
    assert np.all(np.isfinite(scores))
    search = GridSearchCV(DPZerothOrderRegressor(epsilon=0.5, accountant=accountant, max_iter=10),
                          {"loss": ["absolute", "huber"]}, cv=2).fit(X, y)
    assert search.best_estimator_.privacy_spent_.epsilon <= 0.5
    # 3 folds, then 2 settings x 2 folds and the refit: 8 fits of epsilon 0.5 composed on one ledger.
    assert len(accountant.events) == 8
    assert 0.5 < accountant.spent.epsilon <= 8 * 0.5


def test_residual_scale_survives_a_model_that_raises_on_a_real_row():
    """The residual-scale release (loss constant "auto") predicts through the oracles' rules: a user's
    model that raises on one real row (outside the public synthetic rows' range) must not make the fit
    raise after the budget is reserved."""
    X, y, _ = _data(n=600, noise="normal")
    X = X.copy()
    X[-1, 0] = 1e4  # far outside the synthetic rows of the row-wise check

    def model(P, Z):
        if np.any(np.abs(Z) > 100.0):
            raise ValueError("feature outside the model's domain")
        return _linear_callable(P, Z)

    for loss in ("huber", "tukey"):
        accountant = BudgetAccountant()
        fitted = DPZerothOrderRegressor(model=model, n_params=4, loss=loss, max_iter=10, epsilon=1.0,
                                        accountant=accountant, random_state=0).fit(X, y)
        assert accountant.spent.epsilon == pytest.approx(1.0, rel=1e-6)
        assert np.isfinite(fitted.schedule_["residual_scale"])


def test_a_one_step_robust_fit_spends_exactly_its_budget():
    # One step leaves no warm-up, so the residual-scale quantile is not made and not planned.
    X, y, _ = _data(n=600, noise="normal")
    for max_iter in (1, 2):
        accountant = BudgetAccountant()
        _fit(X=X, y=y, loss="tukey", max_iter=max_iter, epsilon=1.0, accountant=accountant)
        assert accountant.spent.epsilon == pytest.approx(1.0, rel=1e-6)


def test_row_wise_random_directions_too_large_for_memory_are_refused_before_any_spend(monkeypatch):
    from skdp.solvers.zeroth_order import naive
    monkeypatch.setattr(naive, "MAX_IID_ELEMENTS", 1000)
    X, y, _ = _data(n=200)
    accountant = BudgetAccountant()
    with pytest.raises(ValueError, match="directions='iid'"):
        DPZerothOrderRegressor(directions="iid", accountant=accountant).fit(X, y)
    assert accountant.spent.epsilon == 0.0
