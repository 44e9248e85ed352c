"""DPRegularizationTuner(method="noise_floor"): one fit, its hard threshold at the noise floor, one draw."""

import math

import numpy as np
import pytest

from skdp import BudgetAccountant, DPHeavyTailRegressor, DPInterpolatingClassifier, InvalidParameterError
from skdp.model_selection import DPRegularizationTuner
from skdp.model_selection._noise_floor import threshold_at_noise_floor
from skdp.model_selection._path import score_sensitivity
from skdp.solvers.heavy_tail.clipped_gd import NOISE_FLOOR_Z
from privacy_harness import assert_same_mechanisms, record_releases


def _scaling(d, center=0.0):
    return {"feature_scale": np.ones(d), "target_scale": 1.0, "feature_center": np.full(d, center)}


def _regression(n, d, k, seed, n_test=4000, rho=0.0):
    """k non-zero coefficients of size 1 among d (k = d: dense), columns with correlation rho."""
    rng = np.random.default_rng(seed)
    beta = np.zeros(d)
    beta[:k] = rng.choice([-1.0, 1.0], size=k) * (1.0 if k < d else 0.3)
    Z = rng.normal(size=(n + n_test, d))
    X = math.sqrt(1 - rho) * Z + math.sqrt(rho) * rng.normal(size=(n + n_test, 1))
    y = X @ beta + rng.normal(size=n + n_test)
    return X[:n], y[:n], X[n:], y[n:]


def test_pure_noise_looks_like_noise_and_the_test_rarely_says_otherwise():
    rng = np.random.default_rng(0)
    refused = 0
    for _ in range(400):
        coef = rng.normal(scale=0.05, size=200)
        refused += not threshold_at_noise_floor(coef, 0.0, _scaling(200), 0.05).looks_like_noise
    # One-sided test at TEST_Z = 3 standard deviations: about 0.1-0.3% of pure-noise models fail it.
    assert refused <= 4


def test_dense_signal_below_the_floor_does_not_look_like_noise():
    rng = np.random.default_rng(1)
    coef = rng.normal(scale=0.05, size=200) + rng.choice([-1.0, 1.0], size=200) * 0.08  # each under 3 sds
    out = threshold_at_noise_floor(coef, 0.3, _scaling(200), 0.05)
    assert not out.looks_like_noise and out.energy_ratio > 1.5
    assert out.n_zeroed > 150  # the candidate is still offered; the draw decides


def test_the_threshold_is_in_standardised_units_and_the_intercept_keeps_the_centre_prediction():
    rng = np.random.default_rng(2)
    d = 100
    standardised = np.r_[np.full(3, 2.0), rng.normal(scale=0.1, size=d - 3)]
    scale, target = rng.uniform(0.5, 4.0, size=d), 7.0
    coef = standardised * target / scale  # coef_j = w_j * target_scale / feature_scale_j
    scaling = {"feature_scale": scale, "target_scale": target, "feature_center": rng.normal(size=d)}
    out = threshold_at_noise_floor(coef, 1.5, scaling, 0.1)
    assert out.threshold == pytest.approx(NOISE_FLOOR_Z * 0.1)
    assert np.array_equal(out.coef != 0, np.abs(standardised) > out.threshold)
    center = scaling["feature_center"]
    assert out.intercept + out.coef @ center == pytest.approx(1.5 + coef @ center)


@pytest.mark.parametrize("noise_sd", [None, 0.0, math.nan, math.inf])
def test_no_noise_estimate_offers_the_fitted_model_itself(noise_sd):
    coef = np.full(10, 0.01)
    out = threshold_at_noise_floor(coef, 0.0, _scaling(10), noise_sd)
    assert out.threshold is None and np.array_equal(out.coef, coef) and not out.looks_like_noise


def test_whitened_or_degenerate_models_are_kept_without_raising():
    coef = np.full(10, 0.01)
    whitened = dict(_scaling(10), whitening_matrix=np.eye(10))
    assert threshold_at_noise_floor(coef, 0.0, whitened, 0.1).threshold is None
    bad = np.r_[np.nan, np.inf, np.zeros(8)]
    out = threshold_at_noise_floor(bad, 0.0, _scaling(10), 0.1)
    assert np.isnan(out.coef[0]) and np.isinf(out.coef[1])  # non-finite coordinates are left alone
    zero_target = dict(_scaling(10), target_scale=0.0)
    assert threshold_at_noise_floor(coef, 0.0, zero_target, 0.1).threshold is None


@pytest.mark.filterwarnings("ignore::skdp.PrivacyLeakWarning")
def test_clipped_gd_reports_the_noise_of_its_averaged_iterate():
    X, y, _, _ = _regression(3000, 5, 5, seed=0)
    fit = DPHeavyTailRegressor(epsilon=1.0, random_state=0, accountant=BudgetAccountant()).fit(X, y)
    assert fit.schedule_["algorithm"] == "clipped_gd" and fit.schedule_["averaged_noise_sd"] > 0
    exact = DPHeavyTailRegressor(epsilon=math.inf, random_state=0, accountant=BudgetAccountant()).fit(X, y)
    assert exact.schedule_["averaged_noise_sd"] == 0.0


def test_noise_floor_spends_the_target_as_one_entry_ending_with_its_draw():
    X, y, _, _ = _regression(2000, 40, 4, seed=3)
    acc = BudgetAccountant()
    with record_releases() as log:
        tuner = DPRegularizationTuner(DPHeavyTailRegressor(l1_ratio=1.0), method="noise_floor", epsilon=0.7,
                                      accountant=acc, random_state=5).fit(X, y)
    assert len(acc.events) == 1 and tuner.method_ == "noise_floor"
    assert acc.spent.epsilon == pytest.approx(0.7, rel=1e-6) and acc.spent.epsilon <= 0.7 * (1 + 1e-9)
    assert log[-1].mechanism == "exponential" and log[-1].sensitivity == score_sensitivity()
    assert tuner.best_index_ in (0, 1) and tuner.alpha_ == 0.0
    assert (tuner.noise_floor_ is None) == (tuner.best_index_ == 0)


def test_noise_floor_on_coupled_neighbours_releases_the_same_mechanisms():
    X, y, _, _ = _regression(800, 6, 2, seed=4)
    X2, y2 = X.copy(), y.copy()
    X2[7], y2[7] = 1e6, -1e6
    logs = []
    for A, b in ((X, y), (X2, y2)):
        with record_releases() as log:
            DPRegularizationTuner(DPHeavyTailRegressor(l1_ratio=1.0), method="noise_floor", epsilon=1.0,
                                  accountant=BudgetAccountant(), random_state=2).fit(A, b)
        logs.append(log)
    assert len(logs[0]) > 0
    assert_same_mechanisms(*logs)


def test_auto_runs_the_noise_floor_for_the_lasso_form_below_the_path():
    X, y, X_test, y_test = _regression(2000, 60, 4, seed=6)
    mse = {"default": [], "auto": []}
    for seed in range(3):
        for name in ("default", "auto"):
            tuner = DPRegularizationTuner(DPHeavyTailRegressor(l1_ratio=1.0), method=name, epsilon=1.0,
                                          accountant=BudgetAccountant(), random_state=seed).fit(X, y)
            mse[name].append(np.mean((y_test - tuner.predict(X_test)) ** 2))
        assert tuner.method_ == "noise_floor"
    assert np.median(mse["auto"]) < np.median(mse["default"])
    # The public rule: the Lasso and elastic-net forms at alpha = 0 with the squared loss, delta > 0, no grid.
    assert DPRegularizationTuner(DPHeavyTailRegressor(l1_ratio=0.5))._sparse_floor(1e-5)
    assert not DPRegularizationTuner(DPHeavyTailRegressor(l1_ratio=1.0))._sparse_floor(0.0)
    assert not DPRegularizationTuner(DPHeavyTailRegressor(l1_ratio=1.0, alpha=0.1))._sparse_floor(1e-5)
    assert not DPRegularizationTuner(DPHeavyTailRegressor())._sparse_floor(1e-5)
    assert not DPRegularizationTuner()._sparse_floor(1e-5)
    assert not DPRegularizationTuner(DPHeavyTailRegressor(l1_ratio=1.0, loss="huber"))._sparse_floor(1e-5)


def test_a_dense_task_keeps_the_fitted_model():
    # Every coefficient 0.3 on correlated columns: most sit below the floor and together carry the signal.
    X, y, _, _ = _regression(2000, 60, 60, seed=7, rho=0.5)
    kept = 0
    for seed in range(3):
        tuner = DPRegularizationTuner(DPHeavyTailRegressor(l1_ratio=1.0), method="noise_floor", epsilon=1.0,
                                      accountant=BudgetAccountant(), random_state=seed).fit(X, y)
        kept += tuner.noise_floor_ is None
    assert kept >= 2


@pytest.mark.parametrize("params", [
    dict(estimator=DPInterpolatingClassifier(classes=[0, 1])),
    dict(estimator=DPHeavyTailRegressor(l1_ratio=1.0), alphas=[0.0, 0.1]),
    dict(estimator=DPHeavyTailRegressor(l1_ratio=1.0, loss="huber")),
    dict(estimator=DPHeavyTailRegressor(l1_ratio=1.0), delta=0.0),
])
def test_noise_floor_refusals_spend_nothing(params):
    X, y, _, _ = _regression(300, 3, 1, seed=8)
    if isinstance(params["estimator"], DPInterpolatingClassifier):
        y = (y > 0).astype(int)
    acc = BudgetAccountant()
    with pytest.raises(InvalidParameterError, match="Nothing was spent"):
        DPRegularizationTuner(method="noise_floor", accountant=acc, **params).fit(X, y)
    assert len(acc.events) == 0
