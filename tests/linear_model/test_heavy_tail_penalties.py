"""DPHeavyTailRegressor with the one-pass and subgradient solvers and L1 / elastic-net penalties.

Estimator-level contract: every fit spends exactly its target, refusals come
before any budget is spent, ``alpha`` and ``l1_ratio`` follow ElasticNet's
objective (the non-private limit matches scikit-learn's Lasso), and the private
Lasso recovers a sparse support.
"""

import warnings

import numpy as np
import pytest
from sklearn.linear_model import Lasso, Ridge

from skdp import BudgetAccountant, DPHeavyTailRegressor, LowBudgetWarning, PrivacyLeakWarning

SUBGRADIENT_AND_ONE_PASS = ["localized_subgradient", "accelerated", "averaged_sgd", "proximal_sgd"]


def _data(n, seed=0, d=4):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * np.arange(1, d + 1)
    y = X @ rng.normal(size=d) + rng.standard_t(2.5, size=n)
    return X, y


def _sparse(n, d=50, k=5, seed=0):
    rng = np.random.default_rng(seed)
    w = np.zeros(d)
    w[:k] = rng.choice([-1.0, 1.0], k) * rng.uniform(0.5, 2.0, k)
    X = rng.normal(size=(n, d))
    return X, X @ w + rng.standard_t(2.5, size=n), w


@pytest.mark.parametrize("params", [
    *[dict(algorithm=a) for a in SUBGRADIENT_AND_ONE_PASS],
    dict(algorithm="localized_subgradient", loss="quantile", alpha=0.1),
    dict(algorithm="proximal_sgd", alpha=0.05, l1_ratio=1.0),
    dict(algorithm="clipped_gd", alpha=0.05, l1_ratio=0.5),
])
@pytest.mark.parametrize("n,epsilon", [(2000, 1.0), (300, 0.3)], ids=["funded", "starved"])
def test_every_fit_spends_exactly_its_target(params, n, epsilon):
    X, y = _data(n)
    acc = BudgetAccountant()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LowBudgetWarning)
        model = DPHeavyTailRegressor(epsilon=epsilon, accountant=acc, random_state=1, **params).fit(X, y)
    spent = model.privacy_spent_.epsilon
    assert spent <= epsilon
    assert spent == pytest.approx(epsilon, rel=1e-6)
    assert acc.spent.epsilon == pytest.approx(spent, rel=1e-9)
    assert np.all(np.isfinite(model.coef_))


@pytest.mark.parametrize("params", [
    dict(algorithm="accelerated", alpha=0.1, l1_ratio=1.0),
    dict(algorithm="localized_subgradient", alpha=0.1, l1_ratio=0.5),
    dict(algorithm="svt_sgd", alpha=0.1, l1_ratio=1.0),
    dict(algorithm="averaged_sgd", loss="absolute"),
    dict(algorithm="proximal_sgd", schedule="theory", moment_bound=1.0),
    dict(algorithm="averaged_sgd", schedule="theory", moment_bound=1.0, alpha=0.1, l1_ratio=1.0),
    dict(algorithm="accelerated", loss=lambda z, y: (z - y, np.sign(z - y))),
])
def test_refusals_come_before_any_budget_is_spent(params):
    X, y = _data(500)
    acc = BudgetAccountant()
    with pytest.raises(ValueError):
        DPHeavyTailRegressor(accountant=acc, random_state=0, **params).fit(X, y)
    assert acc.events == ()


def test_callable_loss_runs_with_localized_subgradient():
    X, y = _data(2000)
    model = DPHeavyTailRegressor(loss=lambda z, t: (np.abs(z - t), np.sign(z - t)),
                                 algorithm="localized_subgradient", random_state=0).fit(X, y)
    reference = DPHeavyTailRegressor(loss="absolute", epsilon=np.inf)
    with pytest.warns(PrivacyLeakWarning):
        reference.fit(X, y)
    assert np.linalg.norm(model.coef_ - reference.coef_) < 0.3 * np.linalg.norm(reference.coef_)


def test_the_non_private_limit_targets_lasso_and_ridge():
    # Gaussian noise, where the clipped (robust) problem and the least-squares one
    # share their population solution; features on different scales.
    rng = np.random.default_rng(0)
    n, d = 20000, 50
    w = np.zeros(d)
    w[:5] = rng.choice([-1.0, 1.0], 5) * rng.uniform(0.5, 2.0, 5)
    X = rng.normal(size=(n, d))
    y = X @ w + rng.normal(size=n)
    X = X * np.linspace(0.5, 3.0, d)
    with pytest.warns(PrivacyLeakWarning):
        lasso_like = DPHeavyTailRegressor(epsilon=np.inf, alpha=0.05, l1_ratio=1.0).fit(X, y)
    lasso = Lasso(alpha=0.05).fit(X, y)
    assert np.array_equal(lasso_like.coef_ != 0, lasso.coef_ != 0)
    assert np.linalg.norm(lasso_like.coef_ - lasso.coef_) < 0.02 * np.linalg.norm(lasso.coef_)
    # The penalty is rescaled by the nominal unclipped fraction of the rows, an
    # approximation of the clipped loss's curvature: close to Ridge, not equal.
    with pytest.warns(PrivacyLeakWarning):
        ridge_like = DPHeavyTailRegressor(epsilon=np.inf, alpha=5.0).fit(X, y)
    ridge = Ridge(alpha=5.0 * n).fit(X, y)  # Ridge's objective is not averaged over rows
    assert np.linalg.norm(ridge_like.coef_ - ridge.coef_) < 0.1 * np.linalg.norm(ridge.coef_)


def test_private_lasso_recovers_the_support():
    X, y, w = _sparse(10000)
    model = DPHeavyTailRegressor(epsilon=1.0, alpha=0.05, l1_ratio=1.0, random_state=0).fit(X, y)
    found, real = model.coef_ != 0, w != 0
    tp = np.sum(found & real)
    f1 = 2 * tp / (found.sum() + real.sum())
    assert f1 >= 0.8
    assert model.schedule_["noise_floor"] > 0


def test_l1_penalty_of_proximal_sgd_gives_exact_zeros():
    X, y, w = _sparse(20000, d=20, k=3)
    model = DPHeavyTailRegressor(epsilon=5.0, alpha=0.2, l1_ratio=1.0, algorithm="proximal_sgd",
                                 random_state=0).fit(X, y)
    assert np.sum(model.coef_ == 0) >= 5
    assert np.all(model.coef_[w != 0] != 0)


def test_the_starved_public_clip_replaces_only_a_quantile_chosen_gradient_clip():
    X, y = _data(3000)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LowBudgetWarning)
        gd = DPHeavyTailRegressor(epsilon=0.05, random_state=0, accountant=BudgetAccountant()).fit(X, y)
        kl = DPHeavyTailRegressor(epsilon=0.05, algorithm="known_lipschitz", random_state=0,
                                  accountant=BudgetAccountant()).fit(X, y)
        absolute = DPHeavyTailRegressor(epsilon=0.05, loss="absolute", random_state=0,
                                        accountant=BudgetAccountant()).fit(X, y)
    assert gd.scaling_["mode"] == "minimal"
    assert gd.schedule_["clip_thresholds"] == [pytest.approx(0.5 * 2.0)]  # 0.5 sqrt(d), public
    # known_lipschitz's threshold truncates rows; it stays a private quantile.
    assert kl.schedule_["dummies_threshold"] != pytest.approx(1.0)
    # A bounded derivative keeps its (non-binding) public bound.
    assert absolute.schedule_["clip_thresholds"][0] > 1.0


def test_an_underflowing_ridge_runs_instead_of_refusing_after_spending():
    X, y = _data(500)
    acc = BudgetAccountant()
    model = DPHeavyTailRegressor(algorithm="proximal_sgd", schedule="theory", moment_bound=5.0, alpha=1e-307,
                                 scaling="none", accountant=acc, random_state=0).fit(X, y)
    assert np.all(np.isfinite(model.coef_))
    assert acc.spent.epsilon == pytest.approx(1.0, rel=1e-6)
