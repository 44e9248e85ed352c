"""'known_lipschitz': per-row truncation then the localized subgradient method, on coupled neighbours."""

import math

import numpy as np
import pytest

from skdp.accounting import Parallel, Sequential
from skdp.losses import HuberLoss, SquaredLoss
from skdp.solvers import GLMProblem, KnownLipschitz, MomentBounds, ProblemSpec
from skdp.solvers.schedules import halving_phase_sizes
from privacy_harness import (
    CoupledProblem,
    assert_event_as_planned,
    neighbours,
    record_releases,
    run_as_planned,
)

CASES = [("huber", HuberLoss(1.0)), ("squared", SquaredLoss())]


@pytest.mark.parametrize("name,loss", CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("seed", [0, 1])
def test_every_release_respects_its_sensitivity(name, loss, seed):
    X, y, X2, y2, row_bound, _ = neighbours(seed=seed)
    p = X.shape[1]
    problem = CoupledProblem(X, y, X2, y2, loss, np.full(p, 0.01), 5.0, row_bound)
    with record_releases() as log:
        result, planned = run_as_planned(KnownLipschitz(max_steps=10), problem, 0.5, 0.2, seed)
    checks = problem.checks
    assert checks, "the solver made no data query"
    assert max(checks) <= 1.0 + 1e-9
    assert max(checks) > 1e-4  # the neighbour really differs on some release
    assert np.all(np.isfinite(result.coef))
    assert_event_as_planned(result.event, planned)
    # Phase i: T_i steps on its own n_i rows, sensitivity 2 C / n_i.
    C = result.schedule["clip_threshold"]
    sizes = halving_phase_sizes(len(y))
    steps = [min(10, math.ceil(n_i * math.log(len(y)))) for n_i in sizes]
    expected = [2.0 * C / n_i for n_i, T in zip(sizes, steps) for _ in range(T)]
    np.testing.assert_allclose([r.sensitivity for r in log], expected, rtol=1e-12)


def test_parallel_events_of_disjoint_phases():
    X, y, *_ = neighbours()
    problem = GLMProblem(X, y, HuberLoss(1.0), np.zeros(5), 5.0, 10.0)
    result, _ = run_as_planned(KnownLipschitz(max_steps=5), problem, 0.4, 0.1, 0)
    phases = [e for e in result.event.events if isinstance(e, Parallel)]
    assert len(phases) == 1 and len(phases[0].events) == int(math.log2(len(y)))
    assert isinstance(result.event, Sequential)


def test_rows_above_the_threshold_become_dummies():
    X, y, *_ = neighbours(seed=5)
    problem = GLMProblem(X, y, HuberLoss(1.0), np.zeros(5), 5.0, 10.0, intercept=True)
    bounds = problem.lipschitz_bounds()
    C = float(np.quantile(bounds, 0.5))
    result, _ = run_as_planned(KnownLipschitz(max_steps=5, clip=C), problem, 1.0, 0.1, 0)
    assert result.schedule["dummies_threshold"] == C
    truncated = problem.truncated(C)
    assert truncated.n_samples == len(y) and 0 < truncated.active.sum() < len(y)


def test_theory_needs_moment_bounds_and_a_built_in_loss():
    spec = ProblemSpec(n_samples=400, n_coef=5, loss=HuberLoss(1.0), schedule="theory")
    with pytest.raises(ValueError, match="moment bounds"):
        KnownLipschitz(schedule="theory").check(spec)
    KnownLipschitz(schedule="theory", moments=MomentBounds(bound=1.0)).check(spec)
    assert KnownLipschitz(schedule="theory").n_quantiles(spec) == 0


def test_theory_schedule_releases_as_planned_on_coupled_neighbours():
    X, y, X2, y2, row_bound, _ = neighbours(seed=1)
    problem = CoupledProblem(X, y, X2, y2, HuberLoss(1.0), np.full(5, 0.01), 5.0, row_bound)
    solver = KnownLipschitz(schedule="theory", max_steps=10, moments=MomentBounds(bound=3.0))
    result, planned = run_as_planned(solver, problem, 0.5, 0.2, 0, schedule="theory")
    assert max(problem.checks) <= 1.0 + 1e-9 and max(problem.checks) > 1e-4
    # C = G_k (n sqrt(rho) / sqrt(d))^(1/k) from the public moment bounds: no quantile.
    rho = 0.5**2 / 2
    expected = 3.0 * (400 * math.sqrt(rho) / math.sqrt(5)) ** 0.25
    assert result.schedule["clip_threshold"] == pytest.approx(expected)
    assert_event_as_planned(result.event, planned)
