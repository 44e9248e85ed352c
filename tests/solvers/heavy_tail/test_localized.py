"""'localized': coupled neighbouring datasets, the block layout and the event as planned."""

import math

import numpy as np
import pytest

from skdp.losses import AbsoluteLoss, SquaredLoss
from skdp.solvers import Localized, MomentBounds, ProblemSpec
from privacy_harness import (
    CoupledProblem,
    assert_event_as_planned,
    neighbours,
    record_releases,
    run_as_planned,
)

CASES = [("squared", SquaredLoss()), ("absolute", AbsoluteLoss())]


@pytest.mark.parametrize("name,loss", CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("seed", [0, 1])
def test_every_release_respects_its_sensitivity(name, loss, seed):
    X, y, X2, y2, row_bound, i = neighbours(seed=seed)
    p = X.shape[1]
    problem = CoupledProblem(X, y, X2, y2, loss, np.full(p, 0.01), 5.0, row_bound)
    solver = Localized(max_steps=15)
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
    C = result.schedule["clip_threshold"]
    expected = [2.0 * C / m for m, T in zip(sizes, steps) for _ in range(J) for _ in range(T)]
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
        J, I, sizes = Localized().layout(n)
        assert (J, I) == (3, 2) and J * sum(sizes) == n - n % 3
        assert sizes[1] == (n // 3) // 4  # phase 2 gets a quarter of a portion, phase 1 the rest
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
