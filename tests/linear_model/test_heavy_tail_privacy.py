"""Privacy contract of DPHeavyTailRegressor end to end.

What a fit plans is what it releases (at every size, budget, mode and solver,
starved budgets included); refusals happen before any budget is spent; extreme
records cannot break a fit or its accounting. (Misbehaving user losses:
tests/losses/test_callable.py; the curvature release: tests/mechanisms/test_spectral.py.)
"""

import math
import warnings

import numpy as np
import pytest

from skdp import BudgetAccountant, DPHeavyTailRegressor, LowBudgetWarning


def _data(n, seed=0, d=4):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * np.arange(1, d + 1)
    y = X @ rng.normal(size=d) + rng.standard_t(2.5, size=n)
    return X, y


@pytest.mark.parametrize("algorithm", ["clipped_gd", "localized", "known_lipschitz", "one_pass_glm"])
@pytest.mark.parametrize("loss", ["squared", "huber"])
@pytest.mark.parametrize("n,epsilon", [(2000, 1.0), (300, 0.3)], ids=["funded", "starved"])
def test_every_fit_spends_exactly_its_target(algorithm, loss, n, epsilon):
    X, y = _data(n)
    acc = BudgetAccountant()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LowBudgetWarning)
        model = DPHeavyTailRegressor(epsilon=epsilon, loss=loss, algorithm=algorithm, accountant=acc,
                                     random_state=1).fit(X, y)
    spent = model.privacy_spent_.epsilon
    assert spent <= epsilon
    assert spent == pytest.approx(epsilon, rel=1e-6)
    assert acc.spent.epsilon == pytest.approx(spent, rel=1e-9)


@pytest.mark.parametrize("params", [dict(), dict(epsilon=np.inf), dict(loss="absolute"),
                                    dict(schedule="theory", moment_bound=1.0)])
def test_svt_sgd_refuses_before_anything_is_spent(params):
    """Its privacy proof fails when the changed row answers 'above' (see skdp.solvers.svt_sgd)."""
    X, y = _data(500)
    acc = BudgetAccountant()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # epsilon=inf warns before the refusal
        with pytest.raises(ValueError, match="svt_sgd' is disabled: its privacy proof does not hold"):
            DPHeavyTailRegressor(algorithm="svt_sgd", accountant=acc, **params).fit(X, y)
    assert acc.events == ()


def test_starved_huber_fit_reports_a_single_stage():
    X, y = _data(300)
    with pytest.warns(LowBudgetWarning):
        model = DPHeavyTailRegressor(epsilon=0.3, loss="huber", random_state=0).fit(X, y)
    assert model.schedule_["stages"] == [100]
    assert model.schedule_["huber_delta"] == pytest.approx(1.345)


@pytest.mark.parametrize("params", [
    dict(algorithm="one_pass_glm", loss="quantile"),
    dict(algorithm="one_pass_glm", loss="squared", schedule="theory", moment_bound=1.0, alpha=0.1),
    dict(algorithm="one_pass_glm", loss="squared", schedule="theory", moment_bound=1e-6,
         second_moment_bound=1e-6),
])
def test_refusals_come_before_any_budget_is_spent(params):
    X, y = _data(500)
    acc = BudgetAccountant()
    with pytest.raises(ValueError):
        DPHeavyTailRegressor(accountant=acc, random_state=0, **params).fit(X, y)
    assert acc.spent.epsilon == 0.0
    assert acc.spent.delta == 0.0


def test_theory_schedule_of_one_pass_glm_runs_on_public_smoothness():
    X, y = _data(2000)
    model = DPHeavyTailRegressor(algorithm="one_pass_glm", schedule="theory", moment_bound=3.0,
                                 random_state=0).fit(X, y)
    assert model.scaling_["mode"] == "robust"
    assert np.all(np.isfinite(model.coef_))


@pytest.mark.parametrize("algorithm", ["clipped_gd", "localized", "known_lipschitz"])
@pytest.mark.parametrize("scaling", ["auto", "target", "none"])
def test_extreme_records_give_finite_models(algorithm, scaling):
    X, y = _data(1000)
    X[0] = 1e307
    X[1, 2] = -1e307
    y[2] = 1.7e308
    y[3] = -1e307
    model = DPHeavyTailRegressor(epsilon=1.0, algorithm=algorithm, scaling=scaling, random_state=0).fit(X, y)
    assert np.all(np.isfinite(model.coef_)) and math.isfinite(model.intercept_)
    assert model.privacy_spent_.epsilon == pytest.approx(1.0, rel=1e-6)


_EXTREME = {
    "huge": lambda X, y: (X * 1e150, y * 1e150),
    "tiny": lambda X, y: (X * 1e-300, y * 1e-300),
    "zeros": lambda X, y: (np.zeros_like(X), np.zeros_like(y)),
    "constant": lambda X, y: (np.full_like(X, 7.0), np.full_like(y, -3.0)),
    "one wild row": lambda X, y: (np.vstack([X[:-1], np.full(X.shape[1], 1e300)]), np.r_[y[:-1], -1e300]),
    "duplicated row": lambda X, y: (np.repeat(X[:1], len(X), axis=0), np.repeat(y[:1], len(y))),
}


@pytest.mark.parametrize("case", sorted(_EXTREME))
@pytest.mark.parametrize("algorithm", ["clipped_gd", "localized", "known_lipschitz", "one_pass_glm",
                                       "localized_subgradient", "accelerated", "averaged_sgd",
                                       "proximal_sgd"])
def test_no_exception_after_the_budget_is_reserved(case, algorithm):
    """A fit either refuses before reserving anything or returns a finite model, even when numpy
    is told to raise on every floating-point event (an exception after reservation is a release)."""
    X, y = _EXTREME[case](*_data(300, seed=5))
    acc = BudgetAccountant()
    with warnings.catch_warnings(), np.errstate(all="raise"):
        warnings.simplefilter("ignore", LowBudgetWarning)
        model = DPHeavyTailRegressor(algorithm=algorithm, loss="huber", max_iter=10, accountant=acc,
                                     random_state=0).fit(X, y)
    assert len(acc.events) == 1
    assert np.all(np.isfinite(model.coef_)) and np.isfinite(model.intercept_)
