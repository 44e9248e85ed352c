"""'one_pass_glm': phase averages on neighbours move by at most 2 eta_i C_i; refusals come before spending."""

import math

import numpy as np
import pytest

from skdp.losses import AbsoluteLoss, HuberLoss, SquaredLoss
from skdp.solvers import GLMProblem, MomentBounds, OnePassGLM, ProblemSpec, SolverBudget
from privacy_harness import assert_event_as_planned, neighbours, record_releases, run_as_planned


def _recorded_phases(X, y, loss, seed):
    """Every release of a run with a public clip (no quantile): one per phase, in phase order."""
    problem = GLMProblem(X, y, loss, np.zeros(X.shape[1]), 5.0, math.hypot(math.sqrt(X.shape[1] - 1) + 3, 1),
                         intercept=True)
    with record_releases() as log:
        result, planned = run_as_planned(OnePassGLM(clip=2.0), problem, 0.7, 0.1, seed)
    return log, result, planned


@pytest.mark.parametrize("loss", [SquaredLoss(), HuberLoss(0.5)], ids=repr)
@pytest.mark.parametrize("row", [0, 150, 300, 390])
def test_phase_averages_respect_2_eta_C(loss, row):
    X, y, X2, y2, _, i = neighbours(seed=3, row=row)
    rec1, res1, planned = _recorded_phases(X, y, loss, 5)
    rec2, _, _ = _recorded_phases(X2, y2, loss, 5)  # the same noise draws
    sizes = res1.schedule["phase_sizes"]
    assert len(rec1) == len(rec2) == len(sizes)
    phase = int(np.searchsorted(np.cumsum(sizes), i, side="right"))  # 0-based phase holding row i
    for k in range(phase):  # earlier phases never saw the row
        np.testing.assert_array_equal(rec1[k].value, rec2[k].value)
    eta = res1.schedule["step_size"]
    sens = rec1[phase].sensitivity
    assert sens == pytest.approx(2.0 * (eta / 16.0 ** (phase + 1)) * (2.0 * 2.0 ** (phase + 1)), rel=1e-12)
    assert np.linalg.norm(rec1[phase].value - rec2[phase].value) <= sens * (1 + 1e-9)
    assert_event_as_planned(res1.event, planned)


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
    assert len(log) == len(result.schedule["phase_sizes"]) == int(math.log2(397))
    assert all(r.sensitivity / r.event.noise_std == pytest.approx(0.6) for r in log)  # each phase mu-GDP
    assert_event_as_planned(result.event, planned)
    assert np.linalg.norm(result.coef) <= 5.0 * (1 + 1e-12)
