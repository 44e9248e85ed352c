"""'clipped_gd': every release on coupled neighbouring datasets, the curvature release, the planned event."""

import math

import numpy as np
import pytest

from skdp.losses import AbsoluteLoss, HuberLoss, QuantileLoss, SquaredLoss
from skdp.accounting import GaussianRelease, Repeated
from skdp.mechanisms import NON_PRIVATE_RELEASE, top_eigenvalue
from skdp.solvers import ClippedGD
from privacy_harness import (
    CoupledProblem,
    assert_event_as_planned,
    neighbours,
    record_releases,
    run_as_planned,
)

CASES = [
    ("squared", ClippedGD(n_steps=40), SquaredLoss(), 0.0),
    ("huber-auto", ClippedGD(n_steps=40, huber_auto=True), HuberLoss(1.0), 0.0),
    ("quantile", ClippedGD(n_steps=40), QuantileLoss(0.8), 0.0),
    ("squared-l1", ClippedGD(n_steps=40), SquaredLoss(), 0.05),
]


@pytest.mark.parametrize("name,solver,loss,l1", CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("seed", [0, 1])
def test_every_release_respects_its_sensitivity(name, solver, loss, l1, seed):
    X, y, X2, y2, row_bound, _ = neighbours(seed=seed)
    n, p = X.shape
    l1w = np.r_[np.full(p - 1, l1), 0.0]
    problem = CoupledProblem(X, y, X2, y2, loss, np.full(p, 0.01), 5.0, row_bound, l1=l1w)
    with record_releases() as log:
        result, planned = run_as_planned(solver, problem, 0.5, 0.2, seed)
    checks = problem.checks
    assert len(checks) == 40, "one full-batch query per step"
    assert max(checks) <= 1.0 + 1e-9
    assert max(checks) > 1e-4  # the neighbour really differs on some release
    assert np.all(np.isfinite(result.coef))
    # The released event is the planned one: same epsilon at every delta.
    assert_event_as_planned(result.event, planned)
    # The releases: the curvature (top eigenvalue of mean x x^T, sensitivity row_bound^2 / n), then
    # one clipped mean gradient per step, with sensitivity 2 C / n for the clip of its stage.
    curvature, steps = log[0], log[1:]
    assert curvature.sensitivity == pytest.approx(row_bound**2 / n, rel=1e-12)
    assert abs(float(curvature.value) - top_eigenvalue(X2)) <= curvature.sensitivity * (1 + 1e-9)
    stages, clips = result.schedule["stages"], result.schedule["clip_thresholds"]
    expected = [2.0 * C / n for C, T in zip(clips, stages) for _ in range(T)]
    np.testing.assert_allclose([r.sensitivity for r in steps], expected, rtol=1e-12)
    if l1:
        assert result.schedule["noise_floor"] > 0


def test_the_budget_split_gives_the_curvature_two_percent_of_mu_squared():
    X, y, *_, row_bound, _ = neighbours(seed=3)
    problem = CoupledProblem(X, y, X, y, SquaredLoss(), np.zeros(5), 5.0, row_bound)
    with record_releases() as log:
        result, planned = run_as_planned(ClippedGD(n_steps=20), problem, 0.8, 0.2, 0)
    curvature, steps = log[0], log[1:]
    mu_curv = curvature.sensitivity / curvature.event.noise_std
    mu_steps = steps[0].sensitivity / steps[0].event.noise_std * math.sqrt(len(steps))
    assert mu_curv == pytest.approx(math.sqrt(0.02) * 0.8, rel=1e-12)
    assert math.hypot(mu_curv, mu_steps) == pytest.approx(0.8, rel=1e-12)
    assert_event_as_planned(result.event, planned)


def test_without_the_curvature_release_every_release_is_a_gradient_step():
    X, y, *_, row_bound, _ = neighbours(seed=4)
    problem = CoupledProblem(X, y, X, y, AbsoluteLoss(), np.zeros(5), 5.0, row_bound)
    with record_releases() as log:
        result, planned = run_as_planned(ClippedGD(n_steps=12, curvature_release=False), problem, 0.8,
                                         0.2, 0)
    assert len(log) == 12
    # A bounded derivative is clipped at its public bound: no quantile, and clipping never binds.
    assert result.schedule["clip_thresholds"] == [row_bound, row_bound]
    assert all(r.sensitivity == pytest.approx(2.0 * row_bound / len(y)) for r in log)
    assert_event_as_planned(result.event, planned)


# -- whitened rows: nothing clipped but the per-sample gradients ----------------------------------------
def _unbounded_neighbours(seed):
    """Rows NOT clipped: the neighbour's changed row is 1e6 long (a leverage outlier kept whole)."""
    rng = np.random.default_rng(seed)
    n, d = 400, 4
    X = np.hstack([rng.standard_t(3, size=(n, d)), np.ones((n, 1))])
    y = X[:, :d] @ rng.normal(size=d) + rng.standard_t(2.5, size=n)
    X2, y2 = X.copy(), y.copy()
    i = int(rng.integers(n))
    X2[i, :d] = 1e6 * (-1) ** seed
    y2[i] = -1e6 * (-1) ** seed
    return X, y, X2, y2, i


@pytest.mark.parametrize("blocks", [False, True], ids=["whitened", "block-rows"])
@pytest.mark.parametrize("loss", [SquaredLoss(), HuberLoss(1.0)], ids=repr)
@pytest.mark.parametrize("seed", [0, 1])
def test_on_unclipped_rows_every_release_respects_its_sensitivity(loss, seed, blocks):
    """for_whitened_rows(): rows are kept whole; the curvature release clips them to the released row
    bound for itself only, and every gradient release clips per-sample gradients. for_block_rows() only
    lowers the public floor of the clip multiplier: the same releases, at the same sensitivities."""
    X, y, X2, y2, i = _unbounded_neighbours(seed)
    n, p = X.shape
    row_bound = 4.0  # a released typical scale of the rows (not a bound on them)
    problem = CoupledProblem(X, y, X2, y2, loss, np.zeros(p), 5.0, row_bound, rows_clipped=False)
    solver = ClippedGD(n_steps=40).for_whitened_rows()
    if blocks:
        solver = solver.for_block_rows()
        assert solver.clip_floor == 0.4 and ClippedGD().for_block_rows() == ClippedGD()  # only the median rule
    with record_releases() as log:
        result, planned = run_as_planned(solver, problem, 0.2, 0.2, seed)
    assert max(problem.checks) <= 1.0 + 1e-9 and max(problem.checks) > 1e-4
    assert_event_as_planned(result.event, planned)
    curvature = log[0]
    assert curvature.sensitivity == pytest.approx(row_bound**2 / n, rel=1e-12)
    # The released value on the neighbour (rows clipped to the bound for this release) moves by at most
    # its sensitivity although the changed row is 1e6 long.
    clipped = [X * np.minimum(1.0, row_bound / np.linalg.norm(X, axis=1))[:, None] for X in (X, X2)]
    gap = abs(top_eigenvalue(clipped[0]) - top_eigenvalue(clipped[1]))
    assert gap <= curvature.sensitivity * (1 + 1e-9)
    # sqrt(n mu_steps / p / 50) is about 0.56 here: below the default floor, above the one of block rows
    if blocks:
        assert 0.4 <= result.schedule["clip_multiplier"] < 0.6
    else:
        assert result.schedule["clip_multiplier"] == pytest.approx(0.6)
    assert np.all(np.isfinite(result.coef))


def test_on_unclipped_rows_without_noise_the_fit_is_exact_least_squares():
    rng = np.random.default_rng(0)
    n = 3000
    X = np.hstack([rng.lognormal(0.0, 1.5, size=(n, 3)), np.ones((n, 1))])  # informative heavy tails
    y = X @ [1.0, -2.0, 0.5, 3.0] + rng.normal(size=n)
    X = (X - np.r_[X[:, :3].mean(axis=0), 0.0]) / np.r_[X[:, :3].std(axis=0), 1.0]  # a whitened-like scale
    problem = CoupledProblem(X, y, X, y, SquaredLoss(), np.zeros(4), 1e6, 1.0, rows_clipped=False)
    result, _ = run_as_planned(ClippedGD().for_whitened_rows(), problem, math.inf, math.inf, 0)
    exact = np.linalg.lstsq(X, y, rcond=None)[0]
    np.testing.assert_allclose(result.coef, exact, rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("settings", [dict(clip=math.inf), dict(clip=math.nan), dict(clip=0.0), dict(clip=1e300),
                                      dict(clip_multiplier=math.inf), dict(clip_multiplier=math.nan),
                                      dict(clip_multiplier=-1.0), dict(curvature_share=0.0),
                                      dict(curvature_share=1.0)])
def test_settings_that_would_release_unclipped_or_unplanned_gradients_are_refused_before_any_spend(settings):
    from skdp import BudgetAccountant, DPHeavyTailRegressor

    X, y, *_ = neighbours(seed=0)
    acc = BudgetAccountant()
    with pytest.raises(ValueError):
        DPHeavyTailRegressor(epsilon=1.0, algorithm=ClippedGD(**settings), accountant=acc).fit(X, y)
    assert acc.spent.epsilon == 0.0 and acc.events == ()


def test_without_noise_the_unclipped_releases_are_accounted_as_not_private():
    X, y, X2, y2, row_bound, _ = neighbours(seed=0)
    p = X.shape[1]
    problem = CoupledProblem(X, y, X2, y2, SquaredLoss(), np.zeros(p), 5.0, row_bound)
    solver = ClippedGD(n_steps=10).for_whitened_rows()
    result, _ = run_as_planned(solver, problem, math.inf, math.inf, 0)
    assert math.isinf(result.schedule["clip_thresholds"][0])
    # The gradient releases themselves (not only the exact quantiles) say mu = inf.
    steps = [e for e in result.event.events if isinstance(e, Repeated) and isinstance(e.event, GaussianRelease)]
    assert steps and all(e.event == NON_PRIVATE_RELEASE and math.isinf(e.event.mu) for e in steps)
