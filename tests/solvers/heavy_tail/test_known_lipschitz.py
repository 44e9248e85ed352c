"""'known_lipschitz': truncation by (local) per-row Lipschitz bounds, then a clipped solver, on neighbours."""

import math

import numpy as np
import pytest

from skdp.accounting import Parallel, Sequential
from skdp.losses import AbsoluteLoss, HuberLoss, QuantileLoss, SquaredLoss
from skdp.solvers import GLMProblem, KnownLipschitz, MomentBounds, ProblemSpec, SolverBudget
from skdp.solvers.heavy_tail import known_lipschitz as known_lipschitz_module
from skdp.solvers.schedules import halving_phase_sizes
from privacy_harness import (
    CoupledProblem,
    assert_event_as_planned,
    neighbours,
    record_releases,
    run_as_planned,
)

CASES = [
    ("huber", lambda: KnownLipschitz(max_steps=10), HuberLoss(1.0)),
    ("squared", lambda: KnownLipschitz(max_steps=10), SquaredLoss()),
    ("public-threshold", lambda: KnownLipschitz(max_steps=10, clip=30.0), SquaredLoss()),
    ("three-phases", lambda: KnownLipschitz(max_steps=10, phase_fractions=(1, 1, 1)), QuantileLoss(0.3)),
]


@pytest.mark.parametrize("name,make,loss", CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("seed", [0, 1])
def test_every_release_respects_its_sensitivity(name, make, loss, seed):
    X, y, X2, y2, row_bound, _ = neighbours(seed=seed)
    p = X.shape[1]
    problem = CoupledProblem(X, y, X2, y2, loss, np.full(p, 0.01), 5.0, row_bound)
    with record_releases() as log:
        result, planned = run_as_planned(make(), problem, 0.5, 0.2, seed)
    checks = problem.checks
    assert checks, "the solver made no data query"
    assert max(checks) <= 1.0 + 1e-9
    assert max(checks) > 1e-4  # the neighbour really differs on some release
    assert np.all(np.isfinite(result.coef))
    assert_event_as_planned(result.event, planned)
    # Phase i: T steps on its own n_i rows (disjoint blocks), sensitivity 2 C_i / n_i.
    sizes, clips = result.schedule["phase_sizes"], result.schedule["clip_thresholds"]
    assert sum(sizes) == len(y) and len(clips) == len(sizes)
    expected = [2.0 * C / n_i for n_i, C in zip(sizes, clips) for _ in range(10)]
    np.testing.assert_allclose([r.sensitivity for r in log], expected, rtol=1e-12)
    blocks = problem.batches
    assert [len(b) for b in blocks] == sizes
    assert len(np.unique(np.concatenate(blocks))) == len(y)
    if name == "public-threshold":
        assert clips == [30.0] * len(sizes)


@pytest.mark.parametrize("schedule", ["practical", "theory"])
def test_parallel_events_of_disjoint_phases(schedule):
    X, y, *_ = neighbours()
    problem = GLMProblem(X, y, HuberLoss(1.0), np.zeros(5), 5.0, 10.0)
    solver = KnownLipschitz(max_steps=5, schedule=schedule, moments=MomentBounds(bound=2.0))
    result, planned = run_as_planned(solver, problem, 0.4, 0.1, 0, schedule=schedule)
    phases = [e for e in result.event.events if isinstance(e, Parallel)]
    expected = int(math.log2(len(y))) if schedule == "theory" else len(solver.phase_fractions)
    assert len(phases) == 1 and len(phases[0].events) == expected
    assert isinstance(result.event, Sequential)
    assert_event_as_planned(result.event, planned)


def test_phase_thresholds_are_quantiles_of_their_own_rows(monkeypatch):
    # Every phase's threshold is a private quantile of the local bounds of that phase's
    # own rows: the quantiles compose in parallel (one epsilon), as planned.
    calls = []
    original = known_lipschitz_module.private_clip

    def recording(problem, level, epsilon, rng, **kwargs):
        calls.append((problem.index.copy(), kwargs["upper"]))
        return original(problem, level, epsilon, rng, **kwargs)

    monkeypatch.setattr(known_lipschitz_module, "private_clip", recording)
    X, y, X2, y2, row_bound, _ = neighbours(n=900, seed=2)
    problem = CoupledProblem(X, y, X2, y2, SquaredLoss(), np.zeros(5), 5.0, row_bound)
    solver = KnownLipschitz(max_steps=5, phase_fractions=(1, 1, 1))
    result, planned = run_as_planned(solver, problem, 0.5, 0.2, 0)
    assert [len(rows) for rows, _ in calls] == result.schedule["phase_sizes"] == [300, 300, 300]
    assert len(np.unique(np.concatenate([rows for rows, _ in calls]))) == 900
    # The search range stops at the bound of a row of norm row_bound with a 3-unit residual.
    radii = result.schedule["radii"]
    for (_, upper), r in zip(calls, radii):
        assert upper == pytest.approx(row_bound * (r * row_bound + 3.0))
    assert radii[0] == 1.5 and all(r < 5.0 for r in radii)
    quantile, phases = planned.events
    per_phase = Parallel([Sequential([quantile, e]) for e in phases.events])
    for delta in (1e-5, 1e-8):
        assert result.event.epsilon(delta) == pytest.approx(planned.epsilon(delta), rel=1e-9)
        assert per_phase.epsilon(delta) == pytest.approx(planned.epsilon(delta), rel=1e-9)


@pytest.mark.parametrize("loss", [SquaredLoss(), HuberLoss(0.7), AbsoluteLoss()], ids=repr)
@pytest.mark.parametrize("mu", [0.3, 3.0])
def test_local_bounds_hold_on_the_set_the_solver_works_on(monkeypatch, loss, mu):
    # Algorithm 4's premise in the practical schedule: every row kept in phase i has a
    # gradient of norm <= C_i at every iterate of phase i (the bound over
    # Ball(0, R) ∩ Ball(w_{i-1}, r_i) is a true bound, and the iterates are projected onto
    # that set), so the per-sample clip never binds. (A bound over half the radius fails.)
    excess = []
    original = GLMProblem.clipped_gradient_sum

    def checking(self, w, clip, rows=None):
        norms = self.norms if rows is None else self.norms[rows]
        excess.append(float(np.max(np.abs(self.derivatives(w, rows)) * norms, initial=0.0)) / clip)
        return original(self, w, clip, rows)

    monkeypatch.setattr(GLMProblem, "clipped_gradient_sum", checking)
    X, y, *_ = neighbours(n=2000, seed=7)
    y[:20] *= 100.0  # gross outliers, truncated
    row_bound = math.hypot(math.sqrt(4) + 3, 1)
    problem = GLMProblem(X, y, loss, np.full(5, 0.01), 5.0, row_bound, intercept=True)
    result, planned = run_as_planned(KnownLipschitz(max_steps=30), problem, mu, 0.5, 1)
    assert len(excess) == 60
    assert max(excess) <= 1.0 + 1e-9
    assert len(result.schedule["radii"]) == 2 and result.schedule["radii"][1] < 5.0
    assert_event_as_planned(result.event, planned)


@pytest.mark.parametrize("loss", [SquaredLoss(), HuberLoss(0.7), AbsoluteLoss(), QuantileLoss(0.2)], ids=repr)
def test_lipschitz_bounds_over_a_localised_ball(loss):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 4))
    y = 3.0 * rng.standard_t(2, size=300)
    problem = GLMProblem(X, y, loss, np.zeros(4), 5.0, 100.0)
    np.testing.assert_array_equal(problem.lipschitz_bounds(), loss.lipschitz_bound(problem.norms, y, 5.0))
    center, radius = rng.normal(size=4) * 0.5, 0.3
    local = problem.lipschitz_bounds(center, radius)
    assert np.all(local <= problem.lipschitz_bounds())
    # Every point of Ball(center, radius) ∩ Ball(0, R) has per-sample gradients within the bound.
    for _ in range(200):
        u = rng.normal(size=4)
        w = center + radius * rng.uniform() ** 0.25 * u / np.linalg.norm(u)
        assert np.all(np.abs(loss.derivative(X @ w, y)) * problem.norms <= local * (1 + 1e-12))
    # Truncation keeps the size; with the default arguments it is today's map.
    kept = problem.truncated(np.median(local), center, radius)
    assert kept.n_samples == 300 and kept.active.sum() == np.sum(local <= np.median(local))
    np.testing.assert_array_equal(problem.truncated(10.0).active, problem.lipschitz_bounds() <= 10.0)


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
    with record_releases() as log:
        result, planned = run_as_planned(solver, problem, 0.5, 0.2, 0, schedule="theory")
    assert max(problem.checks) <= 1.0 + 1e-9 and max(problem.checks) > 1e-4
    # C = G_k (n sqrt(rho) / sqrt(d))^(1/k) from the public moment bounds: no quantile.
    rho = 0.5**2 / 2
    expected = 3.0 * (400 * math.sqrt(rho) / math.sqrt(5)) ** 0.25
    C = result.schedule["clip_threshold"]
    assert C == pytest.approx(expected)
    assert_event_as_planned(result.event, planned)
    # Phase i: T_i steps on its own n_i rows (halving phases), sensitivity 2 C / n_i.
    sizes = halving_phase_sizes(len(y))
    steps = [min(10, math.ceil(n_i * math.log(len(y)))) for n_i in sizes]
    expected = [2.0 * C / n_i for n_i, T in zip(sizes, steps) for _ in range(T)]
    np.testing.assert_allclose([r.sensitivity for r in log], expected, rtol=1e-12)


def test_poor_fit_rule_is_public_arithmetic():
    # Poor below n mu = 35 p^1.5 (3368 at p = 21); theory never warns.
    spec = ProblemSpec(n_samples=20000, n_coef=21, loss=SquaredLoss())
    assert KnownLipschitz().poor_fit_reason(spec, SolverBudget(0.245)) is None
    reason = KnownLipschitz().poor_fit_reason(spec, SolverBudget(0.129))
    assert reason is not None and "35 * p^1.5 = 3368" in reason
    assert KnownLipschitz().poor_fit_reason(spec, SolverBudget(math.inf)) is None
    assert KnownLipschitz(schedule="theory").poor_fit_reason(spec, SolverBudget(0.01)) is None
