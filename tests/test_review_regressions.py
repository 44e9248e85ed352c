"""Regression tests for privacy bugs found in review of the foundation."""

import math
import multiprocessing
import pickle

import numpy as np
import pytest

from skdp import BudgetAccountant, BudgetExceededError
from skdp.accounting import (
    ApproxDPRelease,
    DetachedAccountantError,
    GaussianRelease,
    Sequential,
    ZCDPRelease,
    calibrate_gaussian,
    dp_to_gdp,
    gdp_to_dp,
)
from skdp.mechanisms import (
    bounded_laplace_event,
    certified_minimize,
    clip_rows,
    clipped_sum,
    private_quantile,
    sparse_vector_event,
)


def _spend_in_child(acc):
    try:
        acc.spend(ZCDPRelease(0.01))
        return "charged a copy"
    except DetachedAccountantError:
        return "refused"


def test_forked_children_refuse_to_charge_a_copy():
    acc = BudgetAccountant()
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(2) as pool:
        results = pool.map(_spend_in_child, [acc] * 4)
    assert results == ["refused"] * 4
    assert acc.events == ()


def test_settling_rechecks_the_budget_at_the_accountants_delta():
    acc = BudgetAccountant(epsilon=2.0, delta=1e-7)
    entry = acc._reserve(GaussianRelease(1.0, 3.0), delta=1e-5)  # 1.6 at delta = 1e-7
    with pytest.raises(BudgetExceededError):
        acc._settle(entry, ApproxDPRelease(1.0, 1e-5))  # infinite epsilon at delta = 1e-7
    assert acc.events == (ApproxDPRelease(1.0, 1e-5),)  # the ledger keeps what was released


def test_certificate_is_honest_near_the_floating_point_floor():
    mu, H = 1e-4, 100.0
    a = np.array([1000.123456789, 0.5])

    def f(x):
        r = x - a
        return 0.5 * mu * r[0] ** 2 + 0.5 * H * r[1] ** 2, np.array([mu * r[0], H * r[1]])

    for tol in [1e-3, 1e-4, 5e-5]:
        sol = certified_minimize(f, np.zeros(2), strong_convexity=mu, smoothness=H, tol=tol, radius=1e4)
        assert np.linalg.norm(sol.x - a) <= tol
    with pytest.raises(ValueError, match="floating point"):
        certified_minimize(f, np.zeros(2), strong_convexity=mu, smoothness=H, tol=1e-8, radius=1e4)


def test_bounded_laplace_delta_with_extreme_parameters():
    event = bounded_laplace_event(710.0, 1.0, 720.0)
    # Outside the other distribution's support the privacy loss is infinite; the
    # mass there alone is at least about 2.3e-5.
    assert event.delta0 >= 2.3e-5
    assert bounded_laplace_event(1.0, 1.0, 800.0).delta0 > 0.0  # never a pure-DP claim
    assert sparse_vector_event(1.0, 0.001, 1.0, 1, 10, delta=1e-6).delta0 > 0.0


def test_many_distinct_approximate_releases_compose():
    ev = Sequential([ApproxDPRelease(0.1 * (i + 1), 1e-7) for i in range(7)])
    assert ev.epsilon(1e-5) == pytest.approx(2.8)
    assert ev.delta(3.0) <= 1e-6


def test_conversions_never_overspend_at_extreme_parameters():
    mu = dp_to_gdp(3e15, 1e-5)
    assert gdp_to_dp(mu, 1e-5) <= 3e15
    assert dp_to_gdp(1.0, 1e-300) == 0.0
    std = calibrate_gaussian(1.0, 1.0, 1e-200)
    assert GaussianRelease(1.0, std).epsilon(1e-200) <= 1.0


def test_no_delta_ceiling_does_not_mean_no_ceiling():
    acc = BudgetAccountant(epsilon=1.0)
    acc.spend(GaussianRelease(1.0, 20.0), delta=0.4)
    with pytest.raises(BudgetExceededError):
        acc.spend(GaussianRelease(1.0, 20.0), delta=0.6)  # declared deltas would reach 1


def test_non_finite_records_do_not_change_the_output_distribution_support():
    rng_values = np.random.default_rng(0).normal(size=200)
    with_nan = rng_values.copy()
    with_nan[3] = np.nan
    for seed in range(20):
        est, _ = private_quantile(with_nan, 0.5, 1.0, (-5, 5), random_state=seed)
        assert np.isfinite(est)
    X = np.random.default_rng(1).normal(size=(5, 2))
    X[2] = [np.inf, 0.0]
    X[4] = [np.nan, 1.0]
    assert np.all(np.isfinite(clip_rows(X, 1.0)))
    assert np.all(np.isfinite(clipped_sum(X, 1.0)))
    assert math.isfinite(float(np.linalg.norm(clipped_sum(X, 1.0))))


def test_pickled_to_a_spawned_process_charges_the_shared_ledger():
    acc = BudgetAccountant()
    data = pickle.dumps(acc)
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(1) as pool:
        assert pool.apply(_unpickle_and_spend, (data,)) == "charged a copy"
    assert acc.events == (ZCDPRelease(0.01),)  # ... which is the ledger itself


def _unpickle_and_spend(data):
    return _spend_in_child(pickle.loads(data))
