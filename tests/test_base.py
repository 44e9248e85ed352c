"""The shared estimator base, proven with a small test-only estimator (its scikit-learn checks are in
test_estimator_checks.py)."""

import pickle
import warnings

import joblib
import numpy as np
import pytest
from sklearn.base import clone
from sklearn.model_selection import GridSearchCV, cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import FunctionTransformer

from skdp import BudgetAccountant, BudgetExceededError, PrivacyLeakWarning
from skdp._validation import InvalidParameterError
from skdp.accounting import GaussianRelease, PrivacySpent, ZCDPRelease, default_delta
from toy_estimator import ToyDPRidge


def _data(n=400, d=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) / np.sqrt(d)
    y = np.clip(X @ np.array([0.5, -0.3, 0.2]) + 0.05 * rng.normal(size=n), -1, 1)
    return X, y


def test_privacy_attributes_report_the_calibrated_target():
    X, y = _data()
    est = ToyDPRidge(epsilon=0.7, delta=1e-6, random_state=0).fit(X, y)
    assert isinstance(est.privacy_event_, GaussianRelease)
    assert est.privacy_spent_ == PrivacySpent(pytest.approx(0.7, rel=1e-6), 1e-6)
    assert est.privacy_spent_.epsilon <= 0.7


def test_grid_search_charges_the_shared_accountant_for_every_fit():
    X, y = _data()
    acc = BudgetAccountant()
    grid = GridSearchCV(ToyDPRidge(epsilon=0.5, accountant=acc, random_state=0),
                        {"alpha": [0.1, 1.0, 10.0]}, cv=3)
    grid.fit(X, y)
    assert len(acc.events) == 3 * 3 + 1  # nine fold fits and the refit
    assert grid.best_estimator_.accountant is acc


def test_cross_val_score_and_pipeline_charge_the_same_ledger():
    X, y = _data()
    acc = BudgetAccountant(delta=1e-5)
    pipe = make_pipeline(FunctionTransformer(), ToyDPRidge(accountant=acc, random_state=0))
    cross_val_score(pipe, X, y, cv=4)
    assert len(acc.events) == 4
    pipe.fit(X, y)
    assert len(acc.events) == 5
    assert clone(pipe).steps[-1][1].accountant is acc
    assert pickle.loads(pickle.dumps(pipe)).steps[-1][1].accountant is acc


def test_threaded_model_selection_charges_the_ledger():
    X, y = _data()
    acc = BudgetAccountant()
    with joblib.parallel_backend("threading"):
        GridSearchCV(ToyDPRidge(accountant=acc, random_state=0), {"alpha": [0.5, 2.0]}, cv=2,
                     n_jobs=2).fit(X, y)
    assert len(acc.events) == 2 * 2 + 1


def test_process_workers_charge_the_shared_ledger():
    X, y = _data(n=60)
    acc = BudgetAccountant()
    GridSearchCV(ToyDPRidge(accountant=acc, random_state=0), {"alpha": [0.5, 2.0]}, cv=2,
                 n_jobs=2).fit(X, y)
    assert len(acc.events) == 2 * 2 + 1
    assert acc.shared


def test_default_accountant_is_resolved_at_fit_time():
    X, y = _data()
    est = ToyDPRidge(random_state=0)  # built before the block
    with BudgetAccountant(epsilon=2.5, delta=1e-5) as acc:
        est.fit(X, y)
        clone(est).fit(X, y)
    assert len(acc.events) == 2
    assert est.accountant is None  # the parameter is never written


def test_budget_exceeded_before_the_solver_runs(monkeypatch):
    X, y = _data()
    calls = []
    import toy_estimator

    original = toy_estimator.output_perturbation

    def spy(*args, **kwargs):
        calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(toy_estimator, "output_perturbation", spy)
    acc = BudgetAccountant(epsilon=1.0, delta=1e-5)
    ToyDPRidge(epsilon=0.6, accountant=acc, random_state=0).fit(X, y)
    assert calls == [1]
    # Two Gaussian fits at 0.6 compose to about 0.88 < 1 (tightly, not 1.2) ...
    ToyDPRidge(epsilon=0.6, accountant=acc, random_state=0).fit(X, y)
    assert calls == [1, 1]
    # ... but a third (about 1.09) does not fit, and the solver never runs.
    with pytest.raises(BudgetExceededError):
        ToyDPRidge(epsilon=0.6, accountant=acc, random_state=0).fit(X, y)
    assert calls == [1, 1]
    assert len(acc.events) == 2


def test_invalid_parameters_are_rejected_in_fit_not_init():
    X, y = _data()
    for params in [dict(epsilon=0.0), dict(epsilon=-1.0), dict(delta=1.0), dict(delta=-1e-5),
                   dict(accountant="shared"), dict(random_state="seed"), dict(alpha=0)]:
        est = ToyDPRidge(**params)  # stores, never checks
        with pytest.raises(InvalidParameterError, match=repr(next(iter(params)))):
            est.fit(X, y)


def test_delta_auto_is_resolved_by_the_public_rule_and_reported():
    X, y = _data(n=20_000)
    acc = BudgetAccountant()
    est = ToyDPRidge(delta="auto", accountant=acc, random_state=0).fit(X, y)
    assert est.delta == "auto"  # the parameter is never written
    assert est.privacy_spent_.delta == default_delta(20_000) == 5e-6
    assert est.privacy_spent_.epsilon == pytest.approx(1.0, rel=1e-6)  # calibrated at the resolved delta
    assert acc.spent.delta == 5e-6  # the ledger was charged at the resolved delta too
    explicit = ToyDPRidge(delta=5e-6, accountant=BudgetAccountant(), random_state=0).fit(X, y)
    np.testing.assert_array_equal(est.coef_, explicit.coef_)


def test_delta_auto_equals_1e_5_on_small_tables():
    X, y = _data(n=400)
    a = ToyDPRidge(delta="auto", accountant=BudgetAccountant(), random_state=0).fit(X, y)
    b = ToyDPRidge(delta=1e-5, accountant=BudgetAccountant(), random_state=0).fit(X, y)
    np.testing.assert_array_equal(a.coef_, b.coef_)
    assert a.privacy_spent_ == b.privacy_spent_


@pytest.mark.parametrize("n", [100, 10_000, 100_000, 10**7])
def test_delta_auto_never_warns_and_an_explicit_delta_not_below_one_over_n_does(n):
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrivacyLeakWarning)
        assert ToyDPRidge(delta="auto")._resolve_delta(n) == default_delta(n)
        if n <= 10_000:
            assert ToyDPRidge(delta=1e-5)._resolve_delta(n) == 1e-5
        else:
            with pytest.raises(PrivacyLeakWarning, match="not below 1 / n_samples"):
                ToyDPRidge(delta=1e-5)._resolve_delta(n)


@pytest.mark.parametrize("delta", ["Auto", "1e-5", None, float("nan"), 1.0, -1e-9, [1e-5]])
def test_nonsense_deltas_are_refused_before_any_spend(delta):
    X, y = _data()
    acc = BudgetAccountant()
    with pytest.raises(InvalidParameterError, match="'delta'"):
        ToyDPRidge(delta=delta, accountant=acc).fit(X, y)
    assert acc.events == ()


def test_infinite_epsilon_warns_and_adds_no_noise():
    X, y = _data()
    with pytest.warns(PrivacyLeakWarning, match="not private"):
        a = ToyDPRidge(epsilon=np.inf, random_state=0).fit(X, y)
    with pytest.warns(PrivacyLeakWarning):
        b = ToyDPRidge(epsilon=np.inf, random_state=1).fit(X, y)
    np.testing.assert_array_equal(a.coef_, b.coef_)
    assert a.privacy_spent_.epsilon == np.inf


def test_random_state_controls_the_noise():
    X, y = _data()
    a = ToyDPRidge(random_state=3).fit(X, y).coef_
    with pytest.warns(PrivacyLeakWarning, match="already used"):  # the same seed on the implicit ledger
        b = ToyDPRidge(random_state=3).fit(X, y).coef_
    c = ToyDPRidge(random_state=None).fit(X, y).coef_
    d = ToyDPRidge(random_state=None).fit(X, y).coef_
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(c, d)


def test_failed_solver_keeps_the_reservation():
    acc = BudgetAccountant()
    est = ToyDPRidge(accountant=acc)
    est.delta = 1e-5

    def boom(rng):
        raise RuntimeError("solver failed")

    with pytest.raises(RuntimeError, match="solver failed"):
        est._run_private(ZCDPRelease(0.1), boom)
    assert acc.events == (ZCDPRelease(0.1),)


def test_overspending_solver_is_refused_and_recorded():
    acc = BudgetAccountant()
    est = ToyDPRidge(accountant=acc)
    with pytest.raises(RuntimeError, match="Internal privacy error"):
        est._run_private(ZCDPRelease(0.1), lambda rng: (ZCDPRelease(0.2), None))
    assert acc.events == (ZCDPRelease(0.2),)
    assert not hasattr(est, "coef_")


def test_verbose_reports_the_spend(capsys):
    X, y = _data()
    ToyDPRidge(verbose=1, random_state=0).fit(X, y)
    assert "spent epsilon=1" in capsys.readouterr().out
