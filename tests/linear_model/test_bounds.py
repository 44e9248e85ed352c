"""Declared public bounds (``bounds=``, ``y_bounds=``): validation, clipping, the plan, privacy, exactness."""

import math
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.linear_model import LinearRegression, LogisticRegression, QuantileRegressor

from skdp import (
    BudgetAccountant,
    DPHeavyTailRegressor,
    DPInterpolatingClassifier,
    DPZerothOrderRegressor,
    PrivacyLeakWarning,
)
from skdp.accounting import ExponentialMechanismRelease, GaussianRelease, Repeated, Sequential
from skdp.linear_model._bounds import resolve_bounds
from skdp.linear_model._budget import plan_budget
from skdp.linear_model._standardise import (
    BLOCK_GRAM_SHARE,
    BLOCK_MEAN_SHARE,
    GRAM_SHARE,
    PrivateStandardiser,
    block_means_sensitivity,
)
from skdp.mechanisms import column_statistics_event
from skdp.preprocessing import FeatureBounds

from privacy_harness import assert_same_mechanisms, record_releases


def _mixed(n=3000, seed=0, levels=6):
    """Two numeric columns (some values outside their bounds [-3, 3] and [0, 50]) and a one-hot block."""
    rng = np.random.default_rng(seed)
    x1 = rng.standard_t(3, n)
    x2 = rng.gamma(2.0, 8.0, n)
    codes = rng.choice(levels, n, p=np.arange(levels, 0, -1) / np.arange(levels, 0, -1).sum())
    onehot = np.eye(levels)[codes]
    X = np.column_stack([x1, x2, onehot])
    y = 1.5 * np.clip(x1, -3, 3) - 0.05 * np.clip(x2, 0, 50) + np.linspace(-1, 1, levels)[codes] \
        + rng.normal(size=n)
    bounds = FeatureBounds([-3.0, 0.0] + [0.0] * levels, [3.0, 50.0] + [1.0] * levels,
                           blocks=[list(range(2, 2 + levels))])
    return X, y, bounds


def _count(event, kind):
    """Number of releases of one kind in an event tree."""
    if isinstance(event, kind):
        return 1
    if isinstance(event, Repeated):
        return event.count * _count(event.event, kind)
    if isinstance(event, Sequential):
        return sum(_count(e, kind) for e in event.events)
    return 0


# -- validation before any spend ------------------------------------------------------------------
@pytest.mark.parametrize("bounds, message", [
    (([0, 0, 0], [1, -1, 1]), "lower <= upper"),
    (([0, 0, 0], [1, np.inf, 1]), "finite"),
    (([0, 0], [1, 1]), "n_features = 3"),
    (([0, np.nan, 0], [1, 1, 1]), "nan in only one"),
    ({"a": (0, 1)}, "needs X with feature names"),
    ("wide", "'bounds' parameter"),
    ((0, 1, 2), "a pair"),
    (FeatureBounds([0, 0], [1, 1]), "declares 2 columns"),
])
def test_malformed_bounds_are_refused_before_anything_is_spent(bounds, message):
    X = np.random.default_rng(0).normal(size=(50, 3))
    acc = BudgetAccountant()
    with pytest.raises(ValueError, match=message):
        DPHeavyTailRegressor(bounds=bounds, accountant=acc).fit(X, X[:, 0])
    assert acc.events == ()


def test_names_are_checked_and_unknown_ones_listed():
    pd = pytest.importorskip("pandas")
    X = pd.DataFrame({"age": [20.0, 50.0, 90.0, 40.0], "income": [1.0, 2.0, 3.0, 4.0]})
    acc = BudgetAccountant()
    with pytest.raises(ValueError, match=r"unknown features \['agee'\]; the features are \['age', 'income'\]"):
        DPHeavyTailRegressor(bounds={"agee": (17, 100)}, accountant=acc).fit(X, [1.0, 2.0, 3.0, 4.0])
    other = FeatureBounds([0, 0], [1, 1], feature_names=["income", "age"])
    with pytest.raises(ValueError, match="other features"):
        DPInterpolatingClassifier(bounds=other, classes=[0, 1], accountant=acc).fit(X, [0, 1, 0, 1])
    with pytest.raises(ValueError, match="y_bounds"):
        DPZerothOrderRegressor(y_bounds=(1.0, 0.0), accountant=acc).fit(X, [1.0, 2.0, 3.0, 4.0])
    assert acc.events == ()


def test_a_sparse_X_needs_intervals_that_contain_zero():
    X = sp.random(40, 3, density=0.5, format="csr", random_state=0)
    acc = BudgetAccountant()
    with pytest.raises(ValueError, match="contain 0"):
        DPHeavyTailRegressor(bounds=([1, 0, 0], [2, 1, 1]), accountant=acc).fit(X, np.ones(40))
    assert acc.events == ()


def test_blocks_must_be_declared_zero_one_and_disjoint():
    with pytest.raises(ValueError, match=r"declared \(0, 1\)"):
        FeatureBounds([0, 0, 0], [1, 2, 1], blocks=[[0, 1]])
    with pytest.raises(ValueError, match="at most one block"):
        FeatureBounds([0, 0, 0], [1, 1, 1], blocks=[[0, 1], [1, 2]])


# -- the per-record clip -----------------------------------------------------------------------------
def test_the_clip_is_per_value_and_per_block_and_the_same_dense_or_sparse():
    fb = FeatureBounds([-1, 0, 0, 0], [1, 1, 1, 1], blocks=[[1, 2, 3]])
    declared = resolve_bounds(fb, (0.0, 10.0), 4)
    X = np.array([[5.0, 1.0, 0.0, 0.0], [-0.5, 1.0, 1.0, 0.0], [0.2, 0.0, 0.0, 0.0], [0.0, 3.0, 0.0, 0.0]])
    Z = declared.clip(X)
    np.testing.assert_allclose(Z, [[1, 1, 0, 0], [-0.5, 2**-0.5, 2**-0.5, 0], [0.2, 0, 0, 0], [0, 1, 0, 0]])
    np.testing.assert_allclose(declared.clip(sp.csr_matrix(X)).toarray(), Z)
    np.testing.assert_array_equal(declared.clip_target(np.array([-3.0, 4.0, 12.0])), [0.0, 4.0, 10.0])
    # A row's clipped values depend on that row only.
    X2 = X.copy()
    X2[0] = [-1e9, 7.0, 7.0, 7.0]
    changed = np.any(declared.clip(X2) != Z, axis=1)
    assert changed.tolist() == [True, False, False, False]


# -- the plan: exactly the releases no longer made -----------------------------------------------
@pytest.mark.parametrize("mode", ["columns", "coarse", "scale"])
def test_the_standardisers_event_loses_exactly_the_releases_not_made(mode):
    d, eps, mu = 8, 0.01, 0.7
    stages = {"columns": 4, "coarse": 2, "scale": 1}[mode]
    base = dict(mu=mu, magnitude_check=True)
    without = PrivateStandardiser(mode, eps, **base).planned_event(d)
    assert [type(e) for e in without.events] == [Repeated, Repeated, GaussianRelease, ExponentialMechanismRelease,
                                                 GaussianRelease, ExponentialMechanismRelease]
    assert without.events[0] == column_statistics_event(d, eps, stages)
    # A one-hot block of three columns: their statistics go, nothing else changes.
    block = resolve_bounds(FeatureBounds([0, 0, 0] + [np.nan] * 5, [1, 1, 1] + [np.nan] * 5, blocks=[[0, 1, 2]]),
                           None, d)
    with_block = PrivateStandardiser(mode, eps, declared=block, **base).planned_event(d)
    assert with_block.events == (column_statistics_event(d - 3, eps, stages),) + without.events[1:]
    # Three standalone declared columns: the coarse statistics (at most two quantiles each) inside the bounds.
    standalone = resolve_bounds(([0, 0, 0] + [np.nan] * 5, [1, 1, 1] + [np.nan] * 5), None, d)
    with_standalone = PrivateStandardiser(mode, eps, declared=standalone, **base).planned_event(d)
    assert with_standalone.events == ((column_statistics_event(d - 3, eps, stages),
                                       column_statistics_event(3, eps, min(stages, 2))) + without.events[1:])
    # Every column in a block (a target bound changes nothing here: y keeps its private statistics): no
    # column statistics, no magnitude check and no private median for the second moments' clip.
    full = resolve_bounds(FeatureBounds([0] * d, [1] * d, blocks=[range(0, 5), range(5, 8)]), (0.0, 1.0), d)
    with_all = PrivateStandardiser(mode, eps, declared=full, **base).planned_event(d)
    # The second moments' release: the same noise per unit of a clip 1.5 times smaller (the public bound of
    # [z, 1] instead of 1.5 times it), at 1 / 1.5^4 of GRAM_SHARE.
    gram = GaussianRelease(1.0, without.events[4].noise_std * math.sqrt(GRAM_SHARE / BLOCK_GRAM_SHARE))
    assert with_all.events[0] == without.events[1] and with_all.events[2] == without.events[5]
    assert with_all.events[1].sensitivity == 1.0
    assert with_all.events[1].noise_std == pytest.approx(gram.noise_std, rel=1e-12)
    for declared, expected in ((full, 4 + 1), (standalone, stages * 5 + min(stages, 2) * 3 + 4 + 2),
                               (block, stages * 5 + 4 + 2)):
        assert PrivateStandardiser.n_quantiles(mode, d, True, True, declared) == expected
        assert PrivateStandardiser.n_quantiles(mode, d, True, True, declared) == _count(
            PrivateStandardiser(mode, eps, declared=declared, **base).planned_event(d), ExponentialMechanismRelease)


def test_the_budget_saved_goes_to_the_solver():
    n, d = 10_000, 200
    est = DPHeavyTailRegressor()
    from skdp.solvers import SolverOptions, get_solver
    solver = get_solver("clipped_gd", "heavy_tail").from_options(SolverOptions())
    common = dict(epsilon=1.0, delta=1e-5, n_samples=n, n_features=d, fit_intercept=True, solver=solver,
                  make_spec=lambda mode: est._problem_spec(solver, n, d, mode))
    plain = plan_budget(**common)
    declared = resolve_bounds(FeatureBounds([0] * d, [1] * d, blocks=[range(0, 10), range(10, 60), range(60, 200)]), None, d)
    bounded = plan_budget(**common, declared=declared)
    for plan in (plain, bounded):  # both spend the whole target
        assert plan.event.epsilon(1e-5) == pytest.approx(1.0, rel=1e-6)
    assert plain.standardiser.mode == bounded.standardiser.mode == "columns"
    removed = _count(plain.event, ExponentialMechanismRelease) - _count(bounded.event, ExponentialMechanismRelease)
    assert removed == 4 * d + 1  # the column statistics and the second-moment clip's median
    assert not bounded.standardiser.magnitude_check  # nothing left to check
    assert (_count(plain.event, GaussianRelease) - _count(bounded.event, GaussianRelease)
            == int(plain.standardiser.magnitude_check))
    # 801 quantiles fewer: the solver's Gaussian budget grows by 31% (its mu^2 by 73%).
    assert bounded.budget.mu > 1.25 * plain.budget.mu


def test_with_every_column_in_a_block_the_second_moments_cost_less_and_the_solver_gets_the_rest(monkeypatch):
    n, d = 10_000, 200
    est = DPHeavyTailRegressor()
    from skdp.solvers import SolverOptions, get_solver
    solver = get_solver("clipped_gd", "heavy_tail").from_options(SolverOptions())
    common = dict(epsilon=1.0, delta=1e-5, n_samples=n, n_features=d, fit_intercept=True, solver=solver,
                  make_spec=lambda mode: est._problem_spec(solver, n, d, mode))
    blocks = [range(0, 10), range(10, 60), range(60, 200)]
    every = plan_budget(**common, declared=resolve_bounds(FeatureBounds([0] * d, [1] * d, blocks=blocks), None, d))
    # One column left out of the blocks (declared, standalone): the clip is a private median, the share as before.
    lower, upper = [0.0] * d, [1.0] * d
    partial = plan_budget(**common, declared=resolve_bounds(
        FeatureBounds(lower, upper, blocks=[range(0, 10), range(10, 60), range(60, 199)]), None, d))
    assert every.standardiser.gaussian_share() == pytest.approx(GRAM_SHARE / 1.5**4) == BLOCK_GRAM_SHARE
    assert partial.standardiser._gram_share() == GRAM_SHARE
    for plan in (every, partial):
        assert plan.event.epsilon(1e-5) == pytest.approx(1.0, rel=1e-6)
    # The planned Gram release is the one at BLOCK_GRAM_SHARE of the fit's mu^2 (noise per unit sensitivity).
    mu = every.standardiser.mu
    grams = [e for e in every.standardiser.planned_event(d).events if isinstance(e, GaussianRelease)]
    assert len(grams) == 1 and grams[0].noise_std == pytest.approx(1.0 / (math.sqrt(BLOCK_GRAM_SHARE) * mu))
    # The budget the Gram no longer takes goes to the solver (mu^2 shares: 0.15 -> 0.03 of the total).
    import skdp.linear_model._standardise as standardise
    monkeypatch.setattr(standardise, "BLOCK_GRAM_SHARE", GRAM_SHARE)
    before = plan_budget(**common, declared=resolve_bounds(FeatureBounds([0] * d, [1] * d, blocks=blocks), None, d))
    assert before.event.epsilon(1e-5) == pytest.approx(1.0, rel=1e-6)
    assert every.budget.mu > 1.05 * before.budget.mu

    # The solver's clip multiplier gets its floor for block rows (public rule); not without every column in a block.
    assert every.solver.clip_floor == 0.4 and partial.solver.clip_floor == 0.6
    assert plan_budget(**common).solver.clip_floor == 0.6


# -- privacy: coupled neighbours with rows outside the bounds -------------------------------------
@pytest.mark.parametrize("sparse", [False, True])
def test_neighbours_with_a_row_far_outside_the_bounds_stay_within_the_sensitivity(sparse):
    rng = np.random.default_rng(1)
    n = 1500
    X = np.hstack([np.eye(6)[rng.integers(0, 6, n)], np.eye(3)[rng.integers(0, 3, n)]])
    y = X @ rng.normal(size=9) + rng.normal(size=n)
    X2, y2 = X.copy(), y.copy()
    X2[7] = [9.0, 9.0, 9.0, 0.0, 0.0, 0.0, 5.0, 5.0, 5.0]  # outside every bound, block norms far above 1
    y2[7] = 1e9
    bounds = FeatureBounds(np.zeros(9), np.ones(9), blocks=[range(0, 6), range(6, 9)])
    logs = []
    for data, target in ((X, y), (X2, y2)):
        with record_releases() as log:
            DPHeavyTailRegressor(epsilon=1.0, bounds=bounds, y_bounds=(-10.0, 10.0), random_state=5,
                                 accountant=BudgetAccountant()).fit(sp.csr_matrix(data) if sparse else data, target)
        logs.append(log)
    # Every column is in a block: the first Gaussian release is the second-moment matrix of the rows [z, 1]
    # with public centres, scales and clip, the same function of each dataset; one row differs.
    first, second = logs[0][0], logs[1][0]
    assert first.event == second.event and first.value.size == 10 * 11 // 2  # the upper triangle of [z, 1]
    moved = np.linalg.norm(first.value - second.value)
    assert 0.0 < moved <= first.sensitivity * (1.0 + 1e-9)
    # The public clip: the bound of [z, 1] (1 for the intercept and 1 for each block), which no clipped row
    # exceeds; the noise is that of GRAM_SHARE at 1.5 times the bound, at BLOCK_GRAM_SHARE of the budget.
    assert first.sensitivity == pytest.approx(math.sqrt(2.0) * 3.0 / n)
    mu = DPHeavyTailRegressor(epsilon=1.0, bounds=bounds, y_bounds=(-10.0, 10.0))._prepare_fit(X, y)[4].standardiser.mu
    assert first.event.noise_std == pytest.approx(math.sqrt(2.0) * 1.5**2 * 3.0 / n / (math.sqrt(GRAM_SHARE) * mu))


def _all_block_neighbours():
    """A table whose every column is in one of two blocks, and its neighbour with a row far outside them."""
    rng = np.random.default_rng(3)
    n = 1500
    codes = rng.integers(0, 6, n), rng.integers(0, 3, n)
    X = np.hstack([np.eye(6)[codes[0]], np.eye(3)[codes[1]]])
    labels = (X @ rng.normal(size=9) + rng.normal(size=n) > 0.5).astype(int)
    X2, labels2 = X.copy(), labels.copy()
    X2[7] = [9.0, 9.0, 9.0, 0.0, 0.0, 0.0, 5.0, 5.0, 5.0]  # outside every bound, block norms far above 1
    labels2[7] = 1 - labels[7]
    return (X, labels), (X2, labels2), FeatureBounds(np.zeros(9), np.ones(9), blocks=[range(0, 6), range(6, 9)])


@pytest.mark.parametrize("sparse", [False, True])
def test_the_classifiers_block_means_stay_within_their_sensitivity_on_neighbours(sparse):
    first_data, second_data, bounds = _all_block_neighbours()
    n = first_data[0].shape[0]
    logs, models = [], []
    for X, labels in (first_data, second_data):
        acc = BudgetAccountant()
        with record_releases() as log:
            models.append(DPInterpolatingClassifier(epsilon=1.0, classes=[0, 1], bounds=bounds, max_iter=5,
                                                    random_state=5, accountant=acc)
                          .fit(sp.csr_matrix(X) if sparse else X, labels))
        logs.append(log)
        # The ledger holds exactly what was planned, and the fit spends the target.
        assert acc.events == (models[-1].privacy_event_,)
        assert models[-1].privacy_spent_.epsilon == pytest.approx(1.0, rel=1e-6)
    assert_same_mechanisms(logs[0], logs[1])
    # The block means: the column means of the clipped rows (the block columns' z is x), one Gaussian
    # release of sensitivity sqrt(2 B) / n, B = 2, at BLOCK_MEAN_SHARE of the budget.
    sensitivity = block_means_sensitivity(2, n)
    assert sensitivity == pytest.approx(2.0 / n)
    first, second = ([r for r in log if r.mechanism == "gaussian" and r.value.size == 9
                      and r.sensitivity == pytest.approx(sensitivity)] for log in logs)
    assert len(first) == len(second) == 1
    first, second = first[0], second[0]
    assert first.event == second.event
    np.testing.assert_allclose(first.value, first_data[0].mean(axis=0), rtol=1e-12)
    moved = np.linalg.norm(first.value - second.value)
    assert 0.0 < moved <= first.sensitivity * (1.0 + 1e-9)
    plan = DPInterpolatingClassifier(epsilon=1.0, classes=[0, 1], bounds=bounds, max_iter=5)._prepare_fit(
        *first_data)[4]
    assert first.event.noise_std == pytest.approx(sensitivity / (math.sqrt(BLOCK_MEAN_SHARE) * plan.standardiser.mu))


def _float32_block_neighbours(sparse):
    """One block of 1000 levels in float32, and neighbouring rows whose block norms float32 rounds to 1.

    Each row has four entries 1 / 2 and 496 tiny entries 1.2e-4, on disjoint halves of the block: the
    norm is 1 + 3.6e-6, but the float32 sum of the squares loses the tiny ones, so the dense clip (in
    the input's dtype) leaves the row as it is. The sparse clip sums the squares in float64 and keeps
    the bound; the sparse case checks the release's own sparse clip.
    """
    k, half = 1000, 500
    rng = np.random.default_rng(0)
    X = np.eye(k, dtype=np.float32)[rng.integers(0, k, 400)]
    labels = rng.integers(0, 2, 400)
    first, second = X.copy(), X.copy()
    for data, offset in ((first, 0), (second, half)):
        data[0] = 0.0
        data[0, offset:offset + half] = np.float32(1.2e-4)
        data[0, offset:offset + 4] = np.float32(0.5)
    if sparse:
        first, second = sp.csr_matrix(first), sp.csr_matrix(second)
    return first, second, labels, FeatureBounds(np.zeros(k), np.ones(k), blocks=[range(k)])


@pytest.mark.parametrize("sparse", [False, True])
def test_the_block_means_stay_within_their_sensitivity_on_float32_rows(sparse):
    first, second, labels, bounds = _float32_block_neighbours(sparse)
    released = []
    for X in (first, second):
        with record_releases() as log, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            DPInterpolatingClassifier(epsilon=50.0, classes=[0, 1], bounds=bounds, max_iter=2, random_state=0,
                                      accountant=BudgetAccountant()).fit(X, labels)
        released.append([r for r in log if r.mechanism == "gaussian" and r.value.size == X.shape[1]])
    assert len(released[0]) == len(released[1]) == 1
    a, b = released[0][0], released[1][0]
    assert a.event == b.event and a.sensitivity == pytest.approx(block_means_sensitivity(1, 400))
    # Disjoint supports: the means move by (almost) the whole sensitivity, and never by more.
    ratio = np.linalg.norm(a.value - b.value) / a.sensitivity
    assert 0.99 < ratio <= 1.0 + 1e-12


def test_a_feature_bounds_changed_after_it_was_built_is_validated_again_before_anything_is_spent():
    (X, labels), _, bounds = _all_block_neighbours()
    bounds.lower[:] = -1.0  # every block column now declared (-1, 1), which a block may not be
    acc = BudgetAccountant()
    message = "no longer valid.*one-hot block must be declared.*Nothing was spent"
    with pytest.raises(ValueError, match=message):
        DPInterpolatingClassifier(epsilon=1.0, classes=[0, 1], bounds=bounds, max_iter=5, random_state=0,
                                  accountant=acc).fit(X, labels)
    assert acc.events == ()
    # A change made after the bounds were resolved does not reach the fit: it holds copies.
    _, _, valid = _all_block_neighbours()
    declared = resolve_bounds(valid, None, 9)
    valid.lower[:] = -1.0
    np.testing.assert_array_equal(declared.features.lower, 0.0)
    assert declared.features.blocks == valid.blocks


def test_with_block_means_the_solver_makes_no_centring_release_and_otherwise_one(monkeypatch):
    from skdp.solvers.interpolation import clipped_gd

    calls = []
    release = clipped_gd.release_row_mean

    def counted(*args, **kwargs):
        calls.append(1)
        return release(*args, **kwargs)

    monkeypatch.setattr(clipped_gd, "release_row_mean", counted)
    (X, labels), _, bounds = _all_block_neighbours()
    with record_releases() as log:
        DPInterpolatingClassifier(epsilon=1.0, classes=[0, 1], bounds=bounds, max_iter=5, random_state=0,
                                  accountant=BudgetAccountant()).fit(X, labels)
    sensitivity = block_means_sensitivity(2, X.shape[0])
    assert sum(r.mechanism == "gaussian" and r.value.size == 9 and r.sensitivity == pytest.approx(sensitivity)
               for r in log) == 1
    assert calls == []
    mixed, y, mixed_bounds = _mixed(n=1500, seed=4)
    DPInterpolatingClassifier(epsilon=1.0, classes=[0, 1], bounds=mixed_bounds, max_iter=5, random_state=0,
                              accountant=BudgetAccountant()).fit(mixed, (y > 0).astype(int))
    assert calls == [1]


def test_the_block_means_replace_the_classifiers_centring_release_and_only_there():
    (X, labels), _, bounds = _all_block_neighbours()

    def plan(estimator, X, target, bounds):
        return estimator(epsilon=1.0, bounds=bounds, **({"classes": [0, 1], "max_iter": 5}
                                                        if estimator is DPInterpolatingClassifier else {})
                         )._prepare_fit(X, target)[4]

    every = plan(DPInterpolatingClassifier, X, labels, bounds)
    assert every.standardiser.block_means and every.spec.centred_rows
    steps = [name for name, _ in every.standardiser._steps(9)]
    assert steps.index("block_means") == steps.index("second_moment") - 1
    # One more Gaussian release in the standardiser, one fewer in the solver (no centring release).
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(DPInterpolatingClassifier, "_block_means", False)
        without = plan(DPInterpolatingClassifier, X, labels, bounds)
    assert not without.standardiser.block_means and not without.spec.centred_rows
    assert _count(every.standardiser.planned_event(9), GaussianRelease) == \
        _count(without.standardiser.planned_event(9), GaussianRelease) + 1
    assert _count(every.solver.plan(every.spec, every.budget), GaussianRelease) == \
        _count(without.solver.plan(without.spec, without.budget), GaussianRelease) - 1
    # Not with a column outside the blocks, and never for the regressor.
    mixed, y, mixed_bounds = _mixed(n=1500, seed=4)
    assert not plan(DPInterpolatingClassifier, mixed, (y > 0).astype(int), mixed_bounds).standardiser.block_means
    assert not plan(DPHeavyTailRegressor, X, labels + 0.5, bounds).standardiser.block_means


def test_the_ledger_holds_what_was_planned_and_spends_the_target():
    X, y, bounds = _mixed(n=2000, seed=2)
    acc = BudgetAccountant()
    model = DPHeavyTailRegressor(epsilon=1.0, bounds=bounds, random_state=0, accountant=acc).fit(X, y)
    assert acc.events == (model.privacy_event_,)
    assert model.privacy_spent_.epsilon == pytest.approx(1.0, rel=1e-6)
    # Declared columns carry their public centre and scale.
    # The block's columns carry their public centre and scale.
    np.testing.assert_array_equal(model.scaling_["feature_center"][2:], 0.0)
    np.testing.assert_array_equal(model.scaling_["feature_scale"][2:], 1.0)


# -- without noise: the non-private estimator on the clipped data ---------------------------------
def _clipped(X, bounds):
    return resolve_bounds(bounds, None, X.shape[1]).clip(X)


def test_without_noise_the_regressor_is_least_squares_on_the_clipped_data():
    X, y, bounds = _mixed(n=3000, seed=3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)
        dp = DPHeavyTailRegressor(epsilon=math.inf, bounds=bounds, accountant=BudgetAccountant()).fit(X, y)
    Xc = _clipped(X, bounds)
    ls = LinearRegression().fit(Xc, y)
    # Exact collinearity (full dummy coding and an intercept): compare predictions, not coefficients.
    pred, ref = Xc @ dp.coef_ + dp.intercept_, ls.predict(Xc)
    assert np.sqrt(np.mean((pred - ref) ** 2)) < 0.02 * np.std(ref)


def test_without_noise_the_quantile_loss_is_quantile_regression_on_the_clipped_data():
    X, y, bounds = _mixed(n=1000, seed=4, levels=3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)
        dp = DPHeavyTailRegressor(epsilon=math.inf, loss="quantile", quantile=0.5, bounds=bounds,
                                  accountant=BudgetAccountant()).fit(X, y)
    Xc = _clipped(X, bounds)
    qr = QuantileRegressor(quantile=0.5, alpha=0.0).fit(Xc, y)
    loss = lambda pred: np.mean(np.abs(y - pred))  # noqa: E731 - the objective both minimise
    assert loss(Xc @ dp.coef_ + dp.intercept_) <= loss(qr.predict(Xc)) * 1.01


def test_without_noise_the_classifier_is_logistic_regression_on_the_clipped_data():
    X, y, bounds = _mixed(n=3000, seed=5, levels=3)
    labels = (y > np.median(y)).astype(int)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)
        dp = DPInterpolatingClassifier(epsilon=math.inf, C=1.0, bounds=bounds, classes=[0, 1],
                                       accountant=BudgetAccountant()).fit(X, labels)
    Xc = _clipped(X, bounds)
    lr = LogisticRegression(C=1.0, max_iter=10_000, tol=1e-10).fit(Xc, labels)
    np.testing.assert_allclose(dp.predict_proba(Xc), lr.predict_proba(Xc), atol=5e-3)


def test_smoke_without_noise_the_all_block_classifier_is_logistic_regression():
    # A smoke test: the all-block path (block means, exact at epsilon = inf) runs and reaches the optimum.
    # It does not show the block means matter: without noise the centring leaves the optimum where it is,
    # so it passes with them turned off too, and the Gaussian count below is never 0. What the block means
    # replace is checked in test_with_block_means_the_solver_makes_no_centring_release_and_otherwise_one.
    (X, labels), _, bounds = _all_block_neighbours()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)
        dp = DPInterpolatingClassifier(epsilon=math.inf, C=1.0, bounds=bounds, classes=[0, 1],
                                       accountant=BudgetAccountant()).fit(X, labels)
        assert dp._prepare_fit(X, labels)[4].standardiser.block_means
    assert dp.privacy_event_.releases(GaussianRelease) > 0 and dp.scaling_["mode"] in ("columns", "coarse", "scale")
    lr = LogisticRegression(C=1.0, max_iter=10_000, tol=1e-10).fit(X, labels)
    np.testing.assert_allclose(dp.predict_proba(X), lr.predict_proba(X), atol=5e-3)


# -- nothing declared: nothing changes ---------------------------------------------------------------
@pytest.mark.parametrize("estimator", [DPHeavyTailRegressor, DPZerothOrderRegressor])
def test_bounds_that_declare_nothing_change_nothing(estimator):
    X, y, _ = _mixed(n=1500, seed=6)
    params = dict(epsilon=1.0, random_state=11)
    if estimator is DPZerothOrderRegressor:
        params["max_iter"] = 5
    plain = estimator(**params, accountant=BudgetAccountant()).fit(X, y)
    nothing = FeatureBounds(np.full(X.shape[1], np.nan), np.full(X.shape[1], np.nan))
    same = estimator(**params, bounds=nothing, accountant=BudgetAccountant()).fit(X, y)
    np.testing.assert_array_equal(same.coef_, plain.coef_)
    assert same.intercept_ == plain.intercept_
    assert same.privacy_event_ == plain.privacy_event_


def test_the_zeroth_order_regressor_and_pure_dp_classifier_take_bounds():
    X, y, bounds = _mixed(n=2000, seed=7)
    zo = DPZerothOrderRegressor(epsilon=1.0, bounds=bounds, y_bounds=(-8.0, 8.0), max_iter=5, random_state=0,
                                accountant=BudgetAccountant()).fit(X, y)
    assert zo.privacy_spent_.epsilon == pytest.approx(1.0, rel=1e-6)
    labels = (y > np.median(y)).astype(int)
    clf = DPInterpolatingClassifier(epsilon=1.0, delta=0.0, bounds=bounds, classes=[0, 1], random_state=0,
                                    accountant=BudgetAccountant()).fit(X, labels)
    assert clf.privacy_spent_.epsilon <= 1.0 + 1e-9 and clf.privacy_spent_.delta == 0.0


def test_the_block_means_map_bounds_every_rows_block_part_even_with_duplicate_sparse_entries():
    # The release's sensitivity sqrt(2 B) / n rests on each row's block part having entries in [0, 1] and norm
    # at most 1 after its own map: a non-canonical CSR row with the same column twice (1 + 1) must count once.
    from skdp.linear_model._standardise import _standardised_column_sums

    blocks = [(0, 1, 2), (3, 4)]
    data = np.array([1.0, 1.0, 5.0, -3.0, 0.7, 0.7])
    indices = np.array([0, 0, 1, 3, 4, 4])
    X = sp.csr_matrix((data, indices, np.array([0, 3, 6])), shape=(2, 5))
    assert not X.has_canonical_format
    for row in range(2):
        sums = _standardised_column_sums(X[row:row + 1], None, np.zeros(5), np.ones(5), blocks)
        for block in blocks:
            part = sums[list(block)]
            assert np.all(part >= 0.0) and np.linalg.norm(part) <= 1.0 + 1e-12
    dense = _standardised_column_sums(X.toarray(), None, np.zeros(5), np.ones(5), blocks)
    np.testing.assert_allclose(_standardised_column_sums(X, None, np.zeros(5), np.ones(5), blocks), dense)
