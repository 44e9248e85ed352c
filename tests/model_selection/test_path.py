"""DPRegularizationTuner(method="path"): proximal candidates of one fit, chosen by one draw."""

import math

import numpy as np
import pytest

from skdp import BudgetAccountant, DPHeavyTailRegressor, DPInterpolatingClassifier, InvalidParameterError
from skdp.accounting import ExponentialMechanismRelease
from skdp.model_selection import DPRegularizationTuner
from skdp.model_selection._path import SCORE_CLIP, ProximalPath, choose, score_changes, score_sensitivity
from privacy_harness import assert_same_mechanisms, record_releases


def _sparse_regression(n=4000, d=40, k=4, seed=0, n_test=4000):
    rng = np.random.default_rng(seed)
    beta = np.zeros(d)
    beta[:min(k, d)] = rng.choice([-1.0, 1.0], size=min(k, d))
    X = rng.normal(size=(n + n_test, d))
    y = X @ beta + rng.normal(size=n + n_test)
    return X[:n], y[:n], X[n:], y[n:]


def test_candidates_are_the_proximal_maps_of_the_penalty_in_standardised_units():
    coef = np.array([2.0, -0.5, 0.1])
    scaling = {"feature_center": np.array([1.0, 2.0, 3.0]), "feature_scale": np.array([2.0, 1.0, 0.5])}
    standardised = coef * scaling["feature_scale"]  # [4, -0.5, 0.05]
    lasso = ProximalPath(coef, 0.3, scaling, l1_ratio=1.0, strengths=[0.1, 1.0])
    np.testing.assert_allclose(lasso.coefs() * scaling["feature_scale"], [[3.9, -0.4, 0.0], [3.0, 0.0, 0.0]])
    ridge = ProximalPath(coef, 0.3, scaling, l1_ratio=0.0, strengths=[1.0])
    np.testing.assert_allclose(ridge.coefs()[0], coef / 2.0)
    net = ProximalPath(coef, 0.3, scaling, l1_ratio=0.5, strengths=[0.2])
    np.testing.assert_allclose(net.coefs()[0] * scaling["feature_scale"], [3.9 / 1.1, -0.4 / 1.1, 0.0])
    # Only the slopes move: every candidate predicts the same at the feature centres.
    coefs = lasso.coefs()
    at_centre = scaling["feature_center"] @ coefs.T + lasso.intercepts(coefs)
    np.testing.assert_allclose(at_centre, scaling["feature_center"] @ coef + 0.3)
    # The default path ends at the strength that zeroes every coefficient.
    default = ProximalPath(coef, 0.3, scaling, l1_ratio=1.0)
    assert default.strengths[-1] == pytest.approx(np.max(np.abs(standardised)))
    assert np.all(default.coefs()[-1] == 0.0) and np.any(default.coefs()[0] != 0.0)


def test_utility_moves_by_at_most_its_sensitivity_on_neighbours():
    X, y, _, _ = _sparse_regression(n=300, d=5)
    coef = np.array([1.0, -1.0, 0.5, 0.0, 0.2])
    path = ProximalPath(coef, 0.1, {"feature_center": None, "feature_scale": None}, l1_ratio=1.0)
    coefs = path.coefs()
    intercepts = path.intercepts(coefs)
    sums = []
    for value, label in ((None, None), (1e6, -1e6), (np.inf, 0.0), (np.nan, np.nan)):
        A, b = X.copy(), y.copy()
        if value is not None:
            A[7], b[7] = value, label
        changes = score_changes(A, b, path.coef, path.intercept, coefs, intercepts, 1.5)
        assert np.all(np.abs(changes) <= SCORE_CLIP)
        sums.append(changes.sum(axis=0))
    for other in sums[1:]:
        assert np.max(np.abs(other - sums[0])) <= score_sensitivity() * (1 + 1e-12)


def test_the_draw_is_the_exponential_mechanism_and_exact_without_noise():
    changes = np.array([[-0.2, 0.5], [-0.2, 0.5], [0.1, 0.5]])  # sums: -0.3, 1.5
    assert choose(changes, math.inf, np.random.default_rng(0)) == (0, ExponentialMechanismRelease(math.inf))
    eps = 2.0
    for margin in (0.0, 1.0):
        draws = [choose(changes, eps, np.random.default_rng(s), margin=margin)[0] for s in range(20000)]
        # The fitted model's utility is its public head start: margin Gumbel scales.
        utility = np.array([margin * 2 * score_sensitivity() / eps, 0.3, -1.5])
        expected = np.exp(eps * utility / (2 * score_sensitivity()))
        expected /= expected.sum()
        observed = np.bincount(np.asarray(draws) + 1, minlength=3) / len(draws)
        np.testing.assert_allclose(observed, expected, atol=0.015)
    assert choose(changes, eps, np.random.default_rng(0))[1] == ExponentialMechanismRelease(eps)


def test_path_spends_the_target_as_one_entry_and_keeps_a_candidate_of_the_fit():
    X, y, _, _ = _sparse_regression(n=1500, d=10)
    acc = BudgetAccountant()
    tuner = DPRegularizationTuner(DPHeavyTailRegressor(l1_ratio=1.0, epsilon=30.0), method="path", epsilon=0.8,
                                  accountant=acc, random_state=0).fit(X, y)
    assert len(acc.events) == 1
    assert acc.spent.epsilon == pytest.approx(0.8, rel=1e-6) and acc.spent.epsilon <= 0.8 * (1 + 1e-9)
    assert tuner.method_ == "path" and tuner.alpha_ == 0.0 and list(tuner.alphas_) == [0.0]
    assert tuner.path_strengths_[0] == 0.0 and tuner.path_strengths_.size == 13
    assert tuner.path_strength_ == tuner.path_strengths_[tuner.best_index_]
    # The released model is the chosen proximal candidate of the fit (or the fit itself).
    assert tuner.coef_.shape == (10,) and np.isfinite(tuner.intercept_)
    assert tuner.predict(X[:3]).shape == (3,)


@pytest.mark.filterwarnings("ignore::skdp.PrivacyLeakWarning")
def test_without_noise_the_path_picks_the_best_training_change():
    # Without noise the fit is the rows' least-squares model, which no proximal step improves on the same
    # rows: the path keeps it (the rule errs towards the fitted model).
    X, y, X_test, y_test = _sparse_regression(n=600, d=40, k=3, seed=2)
    tuner = DPRegularizationTuner(DPHeavyTailRegressor(l1_ratio=1.0), method="path", epsilon=math.inf,
                                  random_state=0).fit(X, y)
    fitted = DPHeavyTailRegressor(l1_ratio=1.0, epsilon=math.inf).fit(X, y)
    path = ProximalPath(fitted.coef_, fitted.intercept_, fitted.scaling_, l1_ratio=1.0)
    coefs = path.coefs()
    sums = score_changes(X, y, path.coef, path.intercept, coefs, path.intercepts(coefs),
                         fitted.scaling_["target_scale"]).sum(axis=0)
    assert tuner.best_index_ == (int(np.argmin(sums)) + 1 if sums.min() < 0 else 0)
    assert tuner.best_index_ == 0 and tuner.path_strength_ == 0.0
    np.testing.assert_allclose(tuner.coef_, fitted.coef_)
    # Shrunk candidates of a noisy model do improve on the same rows: there the choice moves.
    noisy = fitted.coef_ + np.random.default_rng(0).normal(scale=0.3, size=40)
    path = ProximalPath(noisy, fitted.intercept_, fitted.scaling_, l1_ratio=1.0)
    coefs = path.coefs()
    changes = score_changes(X, y, path.coef, path.intercept, coefs, path.intercepts(coefs),
                            fitted.scaling_["target_scale"])
    best, _ = choose(changes, math.inf, np.random.default_rng(0))
    assert best >= 0 and np.sum(coefs[best] != 0) < 40
    assert np.mean((y_test - X_test @ coefs[best] - path.intercepts(coefs)[best]) ** 2) < \
        np.mean((y_test - X_test @ noisy - fitted.intercept_) ** 2)


def test_at_finite_epsilon_the_path_beats_the_untuned_lasso_form_on_a_sparse_task():
    # 4 of 60 coefficients non-zero: the private fit spreads its noise over all 60, the path removes most.
    X, y, X_test, y_test = _sparse_regression(n=6000, d=60, k=4, seed=1)
    mse = {}
    for seed in range(3):
        default = DPHeavyTailRegressor(l1_ratio=1.0, epsilon=1.0, random_state=seed,
                                       accountant=BudgetAccountant()).fit(X, y)
        tuned = DPRegularizationTuner(DPHeavyTailRegressor(l1_ratio=1.0), method="path", epsilon=1.0,
                                      random_state=seed, accountant=BudgetAccountant()).fit(X, y)
        for name, model in (("default", default), ("path", tuned)):
            mse.setdefault(name, []).append(np.mean((y_test - model.predict(X_test)) ** 2))
    assert np.median(mse["path"]) < np.median(mse["default"])


def test_path_on_coupled_neighbours_releases_the_same_mechanisms_at_public_scales():
    X, y, _, _ = _sparse_regression(n=800, d=3)
    X2, y2 = X.copy(), y.copy()
    X2[11], y2[11] = -1e6, 1e6
    logs, charged = [], []
    for A, b in ((X, y), (X2, y2)):
        acc = BudgetAccountant()
        with record_releases() as log:
            DPRegularizationTuner(method="path", epsilon=1.0, accountant=acc, random_state=4).fit(A, b)
        logs.append(log)
        charged.append(acc.spent.epsilon)
    assert len(logs[0]) > 0
    assert_same_mechanisms(*logs)
    assert logs[0][-1].mechanism == "exponential"  # the draw comes last, after the fit's releases
    assert logs[0][-1].sensitivity == score_sensitivity()
    assert charged[0] == charged[1] == pytest.approx(1.0, rel=1e-6)


def test_the_draw_is_audited_at_the_planned_epsilon_on_candidates_of_the_released_fit(monkeypatch):
    # The candidates must come from the coefficients the fit stored (released), and the draw must run at
    # the epsilon the event reports: spy on both.
    from skdp.model_selection import _path, _tuner

    X, y, _, _ = _sparse_regression(n=3000, d=12)
    stored, inputs = [], []
    original_store = DPHeavyTailRegressor._store_model
    original_path = _path.ProximalPath

    def spy_store(self, coef, intercept, dtype):
        stored.append(np.array(coef, copy=True))
        return original_store(self, coef, intercept, dtype)

    class SpyPath(original_path):
        def __init__(self, coef, intercept, scaling, **kwargs):
            inputs.append((np.array(coef, copy=True), scaling))
            super().__init__(coef, intercept, scaling, **kwargs)

    monkeypatch.setattr(DPHeavyTailRegressor, "_store_model", spy_store)
    monkeypatch.setattr(_tuner, "ProximalPath", SpyPath)
    with record_releases() as log:
        tuner = DPRegularizationTuner(DPHeavyTailRegressor(l1_ratio=1.0), method="path", epsilon=1.0,
                                      accountant=BudgetAccountant(), random_state=1).fit(X, y)
    np.testing.assert_array_equal(inputs[0][0], stored[0])  # the fit's released coefficients
    assert inputs[0][1] is tuner.best_estimator_.scaling_
    draws = [r for r in log if r.mechanism == "exponential"]
    assert len(draws) == 1 and draws[0].sensitivity == score_sensitivity()
    planned_draw = tuner.privacy_event_.events[-1]
    assert planned_draw == ExponentialMechanismRelease(draws[0].event.epsilon0)


def test_auto_runs_the_path_for_the_lasso_form_from_epsilon_times_rows():
    lasso = DPRegularizationTuner(DPHeavyTailRegressor(l1_ratio=1.0), epsilon=1.0)
    assert lasso._sparse_path(1e-5, 10_000) and not lasso._sparse_path(1e-5, 9_999)
    assert DPRegularizationTuner(DPHeavyTailRegressor(l1_ratio=0.5), epsilon=2.0)._sparse_path(1e-5, 5_000)
    assert not DPRegularizationTuner(DPHeavyTailRegressor(), epsilon=1.0)._sparse_path(1e-5, 10**6)
    assert not DPRegularizationTuner(epsilon=1.0)._sparse_path(1e-5, 10**6)  # estimator=None: the ridge form
    assert not lasso._sparse_path(0.0, 10**6)


@pytest.mark.parametrize("params", [
    dict(estimator=DPInterpolatingClassifier(classes=[0, 1])),
    dict(estimator=DPHeavyTailRegressor(loss="huber")),
    dict(delta=0.0),
    dict(alphas=[0.0, 0.1]),
    dict(epsilon=1e-4, delta=1e-5),
])
def test_path_refusals_spend_nothing(params):
    X, y, _, _ = _sparse_regression(n=300, d=3)
    if "estimator" in params and isinstance(params["estimator"], DPInterpolatingClassifier):
        y = (y > 0).astype(int)
    acc = BudgetAccountant()
    with pytest.raises(InvalidParameterError, match="Nothing was spent"):
        DPRegularizationTuner(method="path", accountant=acc, **params).fit(X, y)
    assert len(acc.events) == 0
