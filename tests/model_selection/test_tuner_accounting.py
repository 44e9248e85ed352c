"""The tuner's whole privacy event against Google's dp-accounting (a test-only dependency).

For every method the tuner's released event (tuning and refit together) is
re-accounted with dp-accounting, branch by branch: a :class:`~skdp.accounting.Parallel`
event (releases on disjoint rows) splits the composition into branches, one per
block a changed row can lie in.

* Lower bound: the PLD accountant on the Gaussian and Laplace releases of each
  branch alone. Dropping releases can only lower a valid epsilon, so an epsilon
  below it would be an accounting error in skdp's favour: a privacy bug.
* The oracle: the RDP accountant on every release of each branch (an
  exponential-mechanism draw as the ``epsilon^2 / 8``-zCDP event its bounded range
  gives; a Poisson-sampled Gaussian step as dp-accounting's sampled Gaussian with
  the same noise multiplier, the add-or-remove curve skdp applies with the
  replace-one sensitivity), the branches' curves combined by their maximum at
  every order, as skdp combines them. Every tuner event holds exponential-mechanism quantiles,
  for which skdp converts through the same RDP curves, so the two agree (to the
  orders' grid); skdp above it would waste budget, below it would need a
  tighter analysis than RDP and a test of its own.
"""

import dp_accounting
import numpy as np
import pytest
from dp_accounting import pld, rdp
from dp_accounting.rdp.rdp_privacy_accountant import compute_epsilon

from skdp import BudgetAccountant, DPHeavyTailRegressor, DPInterpolatingClassifier
from skdp.accounting import (
    ExponentialMechanismRelease,
    GaussianRelease,
    LaplaceRelease,
    Parallel,
    PoissonSampled,
    Repeated,
    Sequential,
    ZCDPRelease,
)
from skdp.model_selection import DPRegularizationTuner

DELTA = 1e-5


def branches(event):
    """The event's compositions, one per block of rows a changed row can lie in: lists of (release, count)."""
    if isinstance(event, Sequential):
        out = [[]]
        for child in event.events:
            out = [head + tail for head in out for tail in branches(child)]
        return out
    if isinstance(event, Repeated):
        return [[(leaf, count * event.count) for leaf, count in branch] for branch in branches(event.event)]
    if isinstance(event, Parallel):
        return [branch for child in event.events for branch in branches(child)]
    return [[(event, 1)]]


def dp_accounting_event(leaf):
    """The same release for dp-accounting; a release kind it cannot take fails the test (no silent skip)."""
    if isinstance(leaf, GaussianRelease):
        return dp_accounting.GaussianDpEvent(leaf.noise_std / leaf.sensitivity)
    if isinstance(leaf, LaplaceRelease):
        return dp_accounting.LaplaceDpEvent(leaf.scale / leaf.sensitivity)
    if isinstance(leaf, ExponentialMechanismRelease):
        return dp_accounting.ZCDpEvent(leaf.epsilon0**2 / 8.0)
    if isinstance(leaf, ZCDPRelease):
        return dp_accounting.ZCDpEvent(leaf.rho)
    if isinstance(leaf, PoissonSampled):
        inner = leaf.event
        return dp_accounting.PoissonSampledDpEvent(
            leaf.rate, dp_accounting.GaussianDpEvent(inner.noise_std / inner.sensitivity))
    raise AssertionError(f"no dp-accounting counterpart for {leaf!r}")


def pld_lower_bound(branch):
    accountant = pld.PLDAccountant(value_discretization_interval=1e-3)
    for leaf, count in branch:
        if isinstance(leaf, (GaussianRelease, LaplaceRelease)):
            accountant.compose(dp_accounting_event(leaf), count)
    return accountant.get_epsilon(DELTA)


def rdp_curve(branch, orders):
    accountant = rdp.RdpAccountant(orders)
    counts = {}
    for leaf, count in branch:  # equal releases composed at once (thousands of identical SGD steps)
        counts[leaf] = counts.get(leaf, 0) + count
    for leaf, count in counts.items():
        accountant.compose(dp_accounting_event(leaf), count)
    return np.asarray(accountant._rdp)


def bounds_from_dp_accounting(event):
    parts = branches(event)
    lower = max(pld_lower_bound(branch) for branch in parts)
    orders = np.concatenate([np.linspace(1.01, 8.0, 200), np.arange(9, 257, dtype=float)])
    curve = np.max([rdp_curve(branch, orders) for branch in parts], axis=0)
    upper, _ = compute_epsilon(orders, curve, DELTA)
    return lower, upper


def _regression(n=1200, d=6, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * np.linspace(0.5, 3.0, d)
    return X, X @ rng.normal(size=d) + rng.standard_t(4, size=n)


def _classification(n=1200, d=6, seed=1):
    X, y = _regression(n, d, seed)
    return X, (y > np.median(y)).astype(int)


CASES = {
    "default": (lambda: DPRegularizationTuner(method="default"), _regression),
    "select": (lambda: DPRegularizationTuner(alphas=[0.0, 0.01, 0.1], method="select"), _regression),
    "select-classifier": (lambda: DPRegularizationTuner(DPInterpolatingClassifier(classes=[0, 1]),
                                                        alphas=[1e-3, 1e-2], method="select"),
                          _classification),
    "path": (lambda: DPRegularizationTuner(DPHeavyTailRegressor(l1_ratio=1.0), method="path"),
             _regression),
    "bilevel": (lambda: DPRegularizationTuner(alphas=[1e-3, 1.0], method="bilevel", outer_steps=3),
                _regression),
    "bilevel_sgd": (lambda: DPRegularizationTuner(alphas=[1e-3, 1.0], method="bilevel_sgd", outer_steps=3),
                    _regression),
}


@pytest.mark.filterwarnings("ignore::skdp.LowBudgetWarning")  # small tables: the accounting is the point
@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("epsilon", [0.5, 2.0])
def test_tuner_event_agrees_with_dp_accounting(case, epsilon):
    make, data = CASES[case]
    X, y = data()
    accountant = BudgetAccountant()
    tuner = make().set_params(epsilon=epsilon, delta=DELTA, accountant=accountant, random_state=0).fit(X, y)
    ours = tuner.privacy_event_.epsilon(DELTA)
    lower, oracle = bounds_from_dp_accounting(tuner.privacy_event_)
    assert ours == pytest.approx(epsilon, rel=1e-6)  # the whole budget, charged once
    assert accountant.spent.epsilon == pytest.approx(ours, rel=1e-9)
    assert ours >= lower * (1 - 2e-3) - 1e-4, (ours, lower)
    assert ours == pytest.approx(oracle, rel=1e-3), (ours, oracle)


def test_branches_split_disjoint_blocks_and_repeat_counts():
    a, b, c = GaussianRelease(1.0, 2.0), GaussianRelease(1.0, 3.0), LaplaceRelease(1.0, 4.0)
    event = Sequential([Parallel([Repeated(a, 3), b]), c])
    assert branches(event) == [[(a, 3), (c, 1)], [(b, 1), (c, 1)]]
    lower, oracle = bounds_from_dp_accounting(event)
    assert lower <= event.epsilon(DELTA) * (1 + 2e-3) <= oracle * (1 + 4e-3)
