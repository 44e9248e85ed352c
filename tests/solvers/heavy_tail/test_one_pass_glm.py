"""'one_pass_glm': phase averages on neighbours move by at most 2 eta_i C_i; refusals come before spending."""

import math

import numpy as np
import pytest

from skdp.accounting import Parallel, Sequential
from skdp.losses import AbsoluteLoss, HuberLoss, SquaredLoss
from skdp.mechanisms import clip_factors, clip_rows
from skdp.solvers import GLMProblem, MomentBounds, OnePassGLM, ProblemSpec, SolverBudget
from skdp.solvers.geometry import project_ball
from skdp.solvers.heavy_tail import one_pass_glm as one_pass_glm_module
from skdp.solvers.heavy_tail.one_pass_glm import clipped_sgd_pass
from skdp.solvers.schedules import halving_phase_sizes
from privacy_harness import assert_event_as_planned, neighbours, record_releases, run_as_planned

SCHEDULES = [
    ("practical", lambda: OnePassGLM(clip=2.0)),
    ("practical-fixed-times", lambda: OnePassGLM(clip=2.0, phase_fractions=(0.2, 0.3, 0.5),
                                                 phase_times=(50.0, 20.0, 5.0))),
    ("theory", lambda: OnePassGLM(schedule="theory", moments=MomentBounds(bound=5.0))),
]


def _problem(X, y, loss):
    return GLMProblem(X, y, loss, np.zeros(X.shape[1]), 5.0, math.hypot(math.sqrt(X.shape[1] - 1) + 3, 1),
                      intercept=True)


def _run(solver, problem, seed, mu=0.7):
    """Every release of a run (one per phase, in phase order), the result and the plan."""
    changes = {}
    if solver.schedule == "theory":
        changes = dict(schedule="theory", public_smoothness=problem.uniform_smoothness())
    with record_releases() as log:
        result, planned = run_as_planned(solver, problem, mu, 0.1, seed, **changes)
    return log, result, planned


@pytest.mark.parametrize("name,make", SCHEDULES, ids=[s[0] for s in SCHEDULES])
@pytest.mark.parametrize("loss", [SquaredLoss(), HuberLoss(0.5)], ids=repr)
@pytest.mark.parametrize("row", [0, 150, 300, 390])
def test_phase_averages_respect_2_eta_C(name, make, loss, row):
    # The differing row is an extreme outlier. Coupled runs (the same noise and the same
    # permutation) release identical averages until the phase holding the row, whose
    # (tail-)average moves by at most its claimed sensitivity 2 eta_i C_i, whatever the
    # phase's step (capped at 2 / beta) and averaging window.
    X, y, X2, y2, _, i = neighbours(seed=3, row=row)
    rec1, res1, planned = _run(make(), _problem(X, y, loss), 5)
    rec2, _, _ = _run(make(), _problem(X2, y2, loss), 5)
    sizes = res1.schedule["phase_sizes"]
    assert len(rec1) == len(rec2) == len(sizes)
    first = next(k for k in range(len(sizes)) if not np.array_equal(rec1[k].value, rec2[k].value))
    if name == "theory":  # consecutive blocks: the first differing phase is the one holding row i
        assert first == int(np.searchsorted(np.cumsum(sizes), i, side="right"))
        eta, C = res1.schedule["step_size"], res1.schedule["clip_threshold"]
        expected = 2.0 * (eta / 16.0 ** (first + 1)) * (C * 2.0 ** (first + 1))
    else:
        expected = 2.0 * res1.schedule["step_sizes"][first] * 2.0
        assert max(res1.schedule["step_sizes"]) <= 2.0 / _problem(X, y, loss).uniform_smoothness()
    sens = rec1[first].sensitivity
    assert sens == rec2[first].sensitivity == pytest.approx(expected, rel=1e-12)  # public: data-independent
    assert 0.0 < np.linalg.norm(rec1[first].value - rec2[first].value) <= sens * (1 + 1e-9)
    assert_event_as_planned(res1.event, planned)


@pytest.mark.parametrize("name,make", SCHEDULES, ids=[s[0] for s in SCHEDULES])
def test_the_sensitivity_is_attained(name, make):
    # A case where 2 eta_1 C_1 is attained (so an understated sensitivity fails): every
    # gradient is clipped with a residual sign that never changes, so the clipped steps
    # do not depend on the iterate and the coupled runs keep the displacement of the
    # differing step, the first step of phase 1 (the first row of the permutation, which
    # is drawn first; row 0 for the theory schedule's consecutive blocks).
    rng = np.random.default_rng(0)
    n, d = 400, 4
    X = np.hstack([clip_rows(rng.normal(size=(n, d)), math.sqrt(d) + 3), np.ones((n, 1))])
    y = 1e8 * rng.choice([-1.0, 1.0], size=n)  # random signs keep the iterates near 0
    solver = make()
    first_row = 0 if solver.schedule == "theory" else int(np.random.default_rng(5).permutation(n)[0])
    y2 = y.copy()
    y2[first_row] = -y[first_row]
    rec1, _, _ = _run(make(), _problem(X, y, SquaredLoss()), 5)
    rec2, _, _ = _run(make(), _problem(X, y2, SquaredLoss()), 5)
    sens = rec1[0].sensitivity
    gap = np.linalg.norm(rec1[0].value - rec2[0].value)
    assert 0.99 * sens <= gap <= sens * (1 + 1e-9)


def test_phase_quantiles_read_only_their_own_phase(monkeypatch):
    # The practical clip of every phase is a private quantile on that phase's own rows,
    # at the previous phase's released output: the quantiles compose in parallel, which
    # is what the plan (one quantile) claims.
    calls = []
    original = one_pass_glm_module.private_clip

    def recording(problem, level, epsilon, rng, **kwargs):
        calls.append((np.asarray(kwargs["rows"]), kwargs["w"].copy()))
        return original(problem, level, epsilon, rng, **kwargs)

    monkeypatch.setattr(one_pass_glm_module, "private_clip", recording)
    X, y, *_ = neighbours(n=1000, seed=6)
    solver = OnePassGLM(phase_fractions=(0.2, 0.3, 0.5))
    log, result, planned = _run(solver, _problem(X, y, SquaredLoss()), 0)
    sizes = result.schedule["phase_sizes"]
    assert [len(rows) for rows, _ in calls] == sizes == [200, 300, 500]
    assert len(np.unique(np.concatenate([rows for rows, _ in calls]))) == len(y)  # disjoint, every row used
    # Phase 1's clip is taken at 0, the later ones at the previous phase's (noisy) release.
    np.testing.assert_array_equal(calls[0][1], 0.0)
    assert all(np.linalg.norm(w) > 0 for _, w in calls[1:])
    assert_event_as_planned(result.event, planned, deltas=(1e-5, 1e-7))
    # The written event (one quantile, then parallel Gaussians) has the curve of the
    # mechanism (the parallel composition of (quantile, Gaussian) per phase).
    quantile, gaussians = planned.events
    per_phase = Parallel([Sequential([quantile, g]) for g in gaussians.events])
    for delta in (1e-5, 1e-7):
        assert per_phase.epsilon(delta) == pytest.approx(planned.epsilon(delta), rel=1e-9)


def test_practical_times_and_layout_follow_public_inputs():
    solver = OnePassGLM()
    assert solver.layout(1001) == [500, 501]
    # time_1 = clip(2 ln(n mu / p) - 3.5, 2, 16), halved per phase.
    assert solver._times(2000, 21, 1.0, 2) == pytest.approx([2 * math.log(2000 / 21) - 3.5,
                                                            math.log(2000 / 21) - 1.75])
    assert solver._times(100, 21, 0.1, 2) == [2.0, 1.0]
    assert solver._times(10**9, 2, 1.0, 2) == [16.0, 8.0]
    assert solver._times(100, 2, math.inf, 3) == [16.0, 8.0, 4.0]
    assert OnePassGLM(phase_times=(5.0, 3.0))._times(100, 2, 1.0, 3) == [5.0, 3.0, 3.0]
    assert OnePassGLM(schedule="theory").layout(397) == halving_phase_sizes(397)


def test_the_pass_is_the_reference_per_row_loop():
    # The lean loop computes exactly (bit for bit) what the straightforward per-row
    # implementation does when it reads the rows in place, dummies and ridge included.
    X, y, *_ = neighbours(n=300, seed=2)
    for loss in (SquaredLoss(), HuberLoss(0.7)):
        problem = GLMProblem(X, y, loss, np.full(5, 0.05), 0.8, 10.0, intercept=True,
                             active=np.arange(300) % 7 != 0)
        start = np.full(5, 0.1)
        eta, C = 0.03, 1.5
        x, total = start, np.zeros(5)
        for j in range(20, 220):
            total += x
            xj = problem.X[j]
            d = float(loss.derivative(np.array([xj @ x]), problem.y[j:j + 1])[0])
            d = d if problem.active[j] else 0.0
            grad = d * xj * clip_factors(np.array([abs(d) * problem.norms[j]]), C)[0]
            x = project_ball(x - eta * (grad + problem.penalty * x), problem.radius)
        last, average = clipped_sgd_pass(problem, slice(20, 220), start, eta, C)
        np.testing.assert_array_equal(last, x)
        np.testing.assert_array_equal(average, total / 200)
        # From an index array (a contiguous copy) the rounding may differ, not the result.
        last2, average2 = clipped_sgd_pass(problem, np.arange(20, 220), start, eta, C, average_from=100)
        np.testing.assert_allclose(last2, x, rtol=1e-9, atol=1e-12)


def test_refuses_non_smooth_losses_and_unsafe_theory_steps():
    with pytest.raises(ValueError, match="smooth loss"):
        OnePassGLM().check(ProblemSpec(n_samples=100, n_coef=5, loss=AbsoluteLoss()))
    X, y, *_ = neighbours()
    problem = GLMProblem(X, y, SquaredLoss(), np.zeros(5), 5.0, 10.0)
    solver = OnePassGLM(schedule="theory", moments=MomentBounds(bound=1e-6, second_bound=1e-6))
    spec = ProblemSpec(n_samples=len(y), n_coef=5, loss=SquaredLoss(), schedule="theory",
                       public_smoothness=problem.uniform_smoothness(), radius=5.0)
    solver.check(spec)  # the configuration itself is fine ...
    with pytest.raises(ValueError, match="privacy condition"):
        solver.check_budget(spec, SolverBudget(1.0, 0.1))  # ... its step at this budget is not
    # Tight enough moment bounds keep the paper's step inside the condition.
    OnePassGLM(schedule="theory", moments=MomentBounds(bound=5.0)).check_budget(spec, SolverBudget(1.0, 0.1))
    with pytest.raises(ValueError, match="clip_quantile"):
        OnePassGLM(clip_quantile=1.0).check(ProblemSpec(n_samples=100, n_coef=5, loss=SquaredLoss()))


def test_theory_needs_moment_bounds_and_a_public_smoothness_bound():
    spec = ProblemSpec(n_samples=400, n_coef=5, loss=SquaredLoss(), schedule="theory", radius=5.0)
    with pytest.raises(ValueError, match="moment bounds"):
        OnePassGLM(schedule="theory").check(spec)
    with pytest.raises(ValueError, match="public smoothness bound"):
        OnePassGLM(schedule="theory", moments=MomentBounds(bound=1.0)).check(spec)


@pytest.mark.parametrize("clip", [None, 2.0])
def test_the_event_is_one_release_per_phase_plus_the_quantile(clip):
    X, y, *_ = neighbours(n=397, seed=1)
    problem = GLMProblem(X, y, HuberLoss(1.0), np.zeros(5), 5.0, 10.0, intercept=True)
    with record_releases() as log:
        result, planned = run_as_planned(OnePassGLM(clip=clip), problem, 0.6, 0.1, 0)
    assert len(log) == len(result.schedule["phase_sizes"]) == 2 and sum(result.schedule["phase_sizes"]) == 397
    assert all(r.sensitivity / r.event.noise_std == pytest.approx(0.6) for r in log)  # each phase mu-GDP
    assert len(result.schedule["clip_thresholds"]) == 2
    if clip is not None:
        assert result.schedule["clip_thresholds"] == [2.0, 2.0]
    assert_event_as_planned(result.event, planned)
    assert np.linalg.norm(result.coef) <= 5.0 * (1 + 1e-12)


def test_poor_fit_rule_is_public_arithmetic():
    # Poor below n mu / p = 20 (the rule shared by the one-pass solvers); theory never warns.
    spec = ProblemSpec(n_samples=2000, n_coef=21, loss=SquaredLoss())
    assert OnePassGLM().poor_fit_reason(spec, SolverBudget(0.24)) is None
    reason = OnePassGLM().poor_fit_reason(spec, SolverBudget(0.12))
    assert reason is not None and "n * mu / p = 11.4" in reason
    assert OnePassGLM().poor_fit_reason(ProblemSpec(n_samples=10, n_coef=21, loss=SquaredLoss()),
                                        SolverBudget(math.inf)) is None
    assert OnePassGLM(schedule="theory").poor_fit_reason(spec, SolverBudget(0.01)) is None
