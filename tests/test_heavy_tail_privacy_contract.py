"""Privacy contract of DPHeavyTailRegressor end to end.

What a fit plans is what it releases (at every size, budget, mode and solver,
starved budgets included); refusals happen before any budget is spent; extreme
records and misbehaving user losses cannot break a fit or its accounting.
"""

import math
import warnings

import numpy as np
import pytest

from skdp import BudgetAccountant, DPHeavyTailRegressor, LowBudgetWarning
from skdp.accounting import GaussianRelease, Parallel, Sequential
from skdp.losses import HuberLoss
from skdp.mechanisms import clip_rows
from skdp.mechanisms import top_eigenvalue as _top_eigenvalue


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


def test_a_callable_that_raises_on_a_record_acts_as_a_zero_derivative():
    X, y = _data(400)
    y[:5] = 1e6  # the callable below cannot handle these records

    def fragile(z, t):
        if np.any(np.abs(t) > 1e5):
            raise OverflowError("label out of range")
        return 0.5 * (z - t) ** 2, z - t

    def zero_there(z, t):
        bad = np.abs(t) > 1e5
        return np.where(bad, np.nan, 0.5 * (z - t) ** 2), np.where(bad, 0.0, z - t)

    a = DPHeavyTailRegressor(loss=fragile, scaling="none", max_iter=20, random_state=3).fit(X, y)
    b = DPHeavyTailRegressor(loss=zero_there, scaling="none", max_iter=20, random_state=3).fit(X, y)
    np.testing.assert_array_equal(a.coef_, b.coef_)
    assert np.all(np.isfinite(a.coef_))


@pytest.mark.parametrize("seed", range(5))
def test_curvature_release_respects_its_sensitivity(seed):
    # ClippedGD releases the top eigenvalue of mean(x x^T) with sensitivity row_bound^2 / n.
    rng = np.random.default_rng(seed)
    n, d = 300, 6
    A = math.sqrt(d) + 3
    X = clip_rows(rng.standard_t(2, size=(n, d)), A)
    for _ in range(3):
        X2 = X.copy()
        i = rng.integers(n)
        X2[i] = clip_rows(rng.normal(size=(1, d)) * 10 ** rng.uniform(-3, 6), A)[0]
        gap = abs(_top_eigenvalue(X) - _top_eigenvalue(X2))
        assert gap <= A**2 / n * (1 + 1e-9)
    # The bound is attained in order: a tiny dataset dominated by one row.
    Z = np.zeros((10, d))
    Z2 = Z.copy()
    Z2[0, 0] = A
    assert abs(_top_eigenvalue(Z) - _top_eigenvalue(Z2)) == pytest.approx(A**2 / 10)


def test_the_curvature_release_never_uses_an_eigensolver_that_can_fail(monkeypatch):
    """ARPACK's eigsh raises ArpackNoConvergence depending on the data; it must not be called."""
    import scipy.sparse.linalg

    def no_convergence(*args, **kwargs):
        raise scipy.sparse.linalg.ArpackNoConvergence("no convergence", np.array([]), np.array([]))

    monkeypatch.setattr(scipy.sparse.linalg, "eigsh", no_convergence)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 300))  # more than 256 coefficients: the former Lanczos path
    y = X[:, :5].sum(axis=1) + rng.normal(size=400)
    acc = BudgetAccountant()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LowBudgetWarning)
        model = DPHeavyTailRegressor(algorithm="clipped_gd", accountant=acc, random_state=0).fit(X, y)
    assert np.all(np.isfinite(model.coef_)) and len(acc.events) == 1


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
