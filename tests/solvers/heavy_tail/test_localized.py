"""'localized': coupled neighbouring datasets, the block layout and the event as planned."""

import math

import numpy as np
import pytest

from skdp.losses import AbsoluteLoss, HuberLoss, SquaredLoss
from skdp.solvers import GLMProblem, Localized, MomentBounds, ProblemSpec, SolverBudget
from skdp.solvers.heavy_tail import localized as localized_module
from privacy_harness import (
    CoupledProblem,
    assert_event_as_planned,
    neighbours,
    record_releases,
    run_as_planned,
)

# n mu / p = 40 at mu = 0.5: the practical schedule runs one block of all rows unless the
# layout is given.
CASES = [("squared", lambda: Localized(max_steps=15), SquaredLoss()),
         ("absolute", lambda: Localized(max_steps=15), AbsoluteLoss()),
         ("full-pipeline", lambda: Localized(max_steps=15, n_portions=3, n_phases=2), SquaredLoss()),
         ("public-clip", lambda: Localized(max_steps=15, n_portions=3, n_phases=2, clip=2.0), HuberLoss(1.0))]


@pytest.mark.parametrize("name,make,loss", CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("seed", [0, 1])
def test_every_release_respects_its_sensitivity(name, make, loss, seed):
    X, y, X2, y2, row_bound, i = neighbours(seed=seed)
    p = X.shape[1]
    problem = CoupledProblem(X, y, X2, y2, loss, np.full(p, 0.01), 5.0, row_bound)
    solver = make()
    with record_releases() as log:
        result, planned = run_as_planned(solver, problem, 0.5, 0.2, seed)
    checks = problem.checks
    assert checks, "the solver made no data query"
    assert max(checks) <= 1.0 + 1e-9
    assert max(checks) > 1e-4  # the neighbour really differs on some release
    assert np.all(np.isfinite(result.coef))
    assert_event_as_planned(result.event, planned)
    # Blocks: J portions per phase, each T steps on its own disjoint rows with sensitivity 2 C / m_i.
    schedule = result.schedule
    J, sizes, steps = schedule["portions"], schedule["block_sizes"], schedule["steps_per_block"]
    assert (J, len(sizes)) == ((1, 1) if name in ("squared", "absolute") else (3, 2))
    clips = schedule["clip_thresholds"]  # one per phase
    if name == "public-clip":
        assert clips == [2.0, 2.0]
    expected = [2.0 * C / m for m, T, C in zip(sizes, steps, clips) for _ in range(J) for _ in range(T)]
    np.testing.assert_allclose([r.sensitivity for r in log], expected, rtol=1e-12)
    blocks, start = [], 0
    for m, T in zip(sizes, steps):
        for _ in range(J):
            rows = problem.queries[start:start + T]
            assert all(np.array_equal(q, rows[0]) for q in rows) and len(rows[0]) == m
            blocks.append(rows[0])
            start += T
    seen = np.concatenate(blocks)
    assert len(np.unique(seen)) == len(seen)  # disjoint blocks


def test_practical_layout_is_public_and_uses_all_but_n_mod_J_rows():
    for n in (100, 400, 1001):
        J, I, sizes = Localized().layout(n)  # without a budget: the full pipeline
        assert (J, I) == (3, 2) and J * sum(sizes) == n - n % 3
        assert sizes[1] == (n // 3) // 4  # phase 2 gets a quarter of a portion, phase 1 the rest
        assert Localized().layout(n, mu=101.0 / n * 5, n_coef=5) == (J, I, sizes)  # n mu / p >= 100
        assert Localized().layout(n, mu=99.0 / n * 5, n_coef=5) == (1, 1, [n])  # below: one block
        assert Localized(n_portions=3).layout(n, mu=0.1, n_coef=5)[:2] == (3, 1)
    with pytest.raises(ValueError, match="needs more rows"):
        Localized(n_portions=3, n_phases=4).check(ProblemSpec(n_samples=10, n_coef=3, loss=SquaredLoss()))


def test_theory_schedule_needs_moment_bounds_and_follows_its_layout_rule():
    spec = ProblemSpec(n_samples=200_000, n_coef=5, loss=SquaredLoss(), schedule="theory")
    with pytest.raises(ValueError, match="moment bounds"):
        Localized(schedule="theory").check(spec)
    solver = Localized(schedule="theory", moments=MomentBounds(bound=2.0))
    solver.check(spec)
    J, I, sizes = solver.layout(spec.n_samples)
    # J in [400, 500] log(I / failure_prob), blocks of a power of two halving over I phases.
    assert 400 * math.log(I / 0.05) <= J <= 400 * math.log(I / 0.05) + 1
    assert all(a == 2 * b for a, b in zip(sizes, sizes[1:])) and J * sum(sizes) <= spec.n_samples
    assert solver.n_quantiles(spec) == 0


def test_theory_schedule_releases_as_planned_on_coupled_neighbours():
    # n = 8000: about 1500 portions of 2 + 1 rows (the theory schedule needs J >= 400 log(I / 0.05)).
    X, y, X2, y2, row_bound, _ = neighbours(n=8000, seed=0, row=0)  # row 0 lies in the first block
    problem = CoupledProblem(X, y, X2, y2, SquaredLoss(), np.full(5, 0.01), 5.0, row_bound)
    solver = Localized(schedule="theory", moments=MomentBounds(bound=3.0))
    result, planned = run_as_planned(solver, problem, 0.5, 0.2, 0, schedule="theory")
    assert max(problem.checks) <= 1.0 + 1e-9 and max(problem.checks) > 1e-4
    assert result.schedule["portions"] > 1000
    assert_event_as_planned(result.event, planned)


@pytest.mark.parametrize("mu,expected", [(0.3, (1, 1)), (30.0, (3, 2))])
def test_the_layout_follows_n_mu_over_p_and_phase_quantiles_are_disjoint(monkeypatch, mu, expected):
    # The practical layout follows n mu / p (public), and every phase's clip quantile
    # reads only that phase's rows at the phase's centre, so the quantiles compose in
    # parallel (one epsilon), as planned.
    calls = []
    original = localized_module.private_clip

    def recording(problem, level, epsilon, rng, **kwargs):
        calls.append((np.asarray(kwargs["rows"]), kwargs["w"].copy()))
        return original(problem, level, epsilon, rng, **kwargs)

    monkeypatch.setattr(localized_module, "private_clip", recording)
    X, y, *_ = neighbours(n=1000, seed=8)
    row_bound = math.hypot(math.sqrt(4) + 3, 1)
    problem = GLMProblem(X, y, SquaredLoss(), np.zeros(5), 5.0, row_bound, intercept=True)
    result, planned = run_as_planned(Localized(max_steps=10), problem, mu, 0.2, 0)
    assert (result.schedule["portions"], result.schedule["phases"]) == expected
    assert len(calls) == expected[1]
    rows = np.concatenate([r for r, _ in calls])
    assert len(np.unique(rows)) == len(rows)  # disjoint phases
    assert [len(r) for r, _ in calls] == [expected[0] * m for m in result.schedule["block_sizes"]]
    np.testing.assert_array_equal(calls[0][1], 0.0)  # phase 1 starts (unregularised) at 0
    assert result.schedule["regularization"][0] == 0.0
    if expected[1] == 2:
        assert result.schedule["regularization"][1] == pytest.approx(0.03 * 32.0)
    assert_event_as_planned(result.event, planned, deltas=(1e-5, 1e-8))
    quantile, blocks = planned.events
    assert len(blocks.events) == expected[0] * expected[1]


def test_localized_never_predicts_a_poor_fit():
    spec = ProblemSpec(n_samples=2000, n_coef=21, loss=SquaredLoss())
    assert Localized().poor_fit_reason(spec, SolverBudget(0.1, 0.1)) is None
