"""Privacy tests of the heavy-tail solvers: coupled runs on neighbouring datasets.

Full-batch solvers are run on a problem double that answers every data query
(the clipped gradient sum at an iterate, on a block of rows) for the dataset
and for a neighbour whose differing row is an extreme outlier, at the *same*
iterate, and checks the difference against the sensitivity the solver's event
claims. One-pass solvers are run twice with shared randomness; the phase that
holds the differing row must release averages within the claimed sensitivity.
"""

import math

import numpy as np
import pytest

from skdp.accounting import Parallel, Sequential
from skdp.losses import AbsoluteLoss, HuberLoss, QuantileLoss, SquaredLoss
from skdp.mechanisms import clip_rows
from skdp.solvers import (
    make_solver,
    CallableLoss,
    ClippedGD,
    GLMProblem,
    KnownLipschitz,
    Localized,
    OnePassGLM,
    aggregate_points,
    project_two_balls,
)


class CoupledProblem(GLMProblem):
    """A GLMProblem that also evaluates every query on a neighbouring dataset."""

    def __init__(self, X, y, X2, y2, loss, penalty, radius, row_bound, checks, intercept=False,
                 active=None, active2=None):
        super().__init__(X, y, loss, penalty, radius, row_bound, intercept=intercept, active=active)
        self.other = GLMProblem(X2, y2, loss, penalty, radius, row_bound, intercept=intercept, active=active2)
        self.checks = checks

    def clipped_gradient_sum(self, w, clip, rows=None):
        a = super().clipped_gradient_sum(w, clip, rows)
        b = self.other.clipped_gradient_sum(w, clip, rows)
        self.checks.append(float(np.linalg.norm(a - b)) / (2.0 * clip))
        return a

    def _copy(self, loss=None, active=None, active2=None):
        return CoupledProblem(self.X, self.y, self.other.X, self.other.y, loss or self.loss, self.penalty,
                              self.radius, self.row_bound, self.checks, intercept=self.intercept,
                              active=self.active if active is None else active,
                              active2=self.other.active if active2 is None else active2)

    def with_loss(self, loss):
        return self._copy(loss=loss)

    def truncated(self, threshold):
        return self._copy(active=self.lipschitz_bounds() <= threshold,
                          active2=self.other.lipschitz_bounds() <= threshold)


def _neighbours(n=400, d=4, seed=0, row=None):
    rng = np.random.default_rng(seed)
    A = math.sqrt(d) + 3
    X = clip_rows(rng.standard_t(3, size=(n, d)), A)
    X = np.hstack([X, np.ones((n, 1))])
    y = X[:, :d] @ rng.normal(size=d) + rng.standard_t(2.5, size=n)
    X2, y2 = X.copy(), y.copy()
    i = rng.integers(n) if row is None else row
    X2[i, :d] = clip_rows(np.full((1, d), 1e6 * (-1) ** seed), A)[0]
    y2[i] = -1e6 * (-1) ** seed
    return X, y, X2, y2, math.hypot(A, 1.0), i


GD_SOLVERS = [
    ("clipped_gd", lambda p: ClippedGD(n_steps=40), SquaredLoss()),
    ("clipped_gd-huber-auto", lambda p: ClippedGD(n_steps=40, huber_auto=True), HuberLoss(1.0)),
    ("clipped_gd-quantile", lambda p: ClippedGD(n_steps=40), QuantileLoss(0.8)),
    ("localized", lambda p: Localized(max_steps=15, n_coef=p), SquaredLoss()),
    ("localized-absolute", lambda p: Localized(max_steps=15, n_coef=p), AbsoluteLoss()),
    ("known_lipschitz", lambda p: KnownLipschitz(max_steps=10), HuberLoss(1.0)),
    ("known_lipschitz-squared", lambda p: KnownLipschitz(max_steps=10), SquaredLoss()),
]


@pytest.mark.parametrize("name,make,loss", GD_SOLVERS, ids=[g[0] for g in GD_SOLVERS])
@pytest.mark.parametrize("seed", [0, 1])
def test_every_full_batch_release_respects_its_sensitivity(name, make, loss, seed):
    X, y, X2, y2, row_bound, _ = _neighbours(seed=seed)
    checks = []
    p = X.shape[1]
    problem = CoupledProblem(X, y, X2, y2, loss, np.full(p, 0.01), 5.0, row_bound, checks, intercept=True)
    solver = make(p)
    result = solver.solve(problem, 0.5, 0.2, np.random.default_rng(seed))
    assert checks, "the solver made no data query"
    assert max(checks) <= 1.0 + 1e-9
    assert max(checks) > 1e-4  # the neighbour really differs on some release
    assert np.all(np.isfinite(result.coef))
    # The reported event is the planned one: same epsilon at every delta.
    planned = solver.event(loss, 0.5, 0.2, len(y))
    for delta in (1e-4, 1e-6):
        assert result.event.epsilon(delta) == pytest.approx(planned.epsilon(delta), rel=1e-9)


def _recorded_phases(solver_factory, loss, X, y, budget, seed):
    records = {}
    solver = solver_factory()
    solver.recorder = lambda name, value, sens: records.setdefault(name, (value.copy(), sens))
    problem = GLMProblem(X, y, loss, np.zeros(X.shape[1]), 5.0, math.hypot(math.sqrt(X.shape[1] - 1) + 3, 1),
                         intercept=True)
    result = solver.solve(problem, *budget, np.random.default_rng(seed))
    return records, result, solver


@pytest.mark.parametrize("loss", [SquaredLoss(), HuberLoss(0.5)], ids=repr)
@pytest.mark.parametrize("row", [0, 150, 300, 390])
def test_one_pass_glm_phase_averages_respect_2_eta_C(loss, row):
    X, y, X2, y2, _, i = _neighbours(seed=3, row=row)
    rec1, res1, solver = _recorded_phases(lambda: OnePassGLM(clip=2.0), loss, X, y, (0.7, 0.1), 5)
    rec2, _, _ = _recorded_phases(lambda: OnePassGLM(clip=2.0), loss, X2, y2, (0.7, 0.1), 5)
    sizes = res1.schedule["phase_sizes"]
    phase = int(np.searchsorted(np.cumsum(sizes), i, side="right")) + 1
    for k in range(1, phase):  # earlier phases never saw the row
        np.testing.assert_array_equal(rec1[f"phase{k}"][0], rec2[f"phase{k}"][0])
    a, sens = rec1[f"phase{phase}"]
    b, _ = rec2[f"phase{phase}"]
    assert np.linalg.norm(a - b) <= sens * (1 + 1e-9)
    planned = solver.event(loss, 0.7, 0.1, len(y))
    assert res1.event.epsilon(1e-6) == pytest.approx(planned.epsilon(1e-6), rel=1e-9)


def test_svt_sgd_cannot_be_built():
    with pytest.raises(ValueError, match="privacy proof does not hold"):
        make_solver("svt_sgd", loss=HuberLoss(1.0), n_samples=400, n_coef=5)


def test_one_pass_glm_refuses_non_smooth_losses_and_unsafe_theory_steps():
    with pytest.raises(ValueError, match="smooth loss"):
        OnePassGLM().event(AbsoluteLoss(), 1.0, 0.1, 100)
    X, y, *_ = _neighbours()
    problem = GLMProblem(X, y, SquaredLoss(), np.zeros(5), 5.0, 10.0)
    solver = OnePassGLM(schedule="theory", moment_bound=1e-6, second_moment_bound=1e-6)
    with pytest.raises(ValueError, match="privacy condition"):
        solver.solve(problem, 1.0, 0.1, np.random.default_rng(0))


def test_callable_loss_is_clipped_and_sanitised():
    X, y, X2, y2, row_bound, _ = _neighbours(seed=2)

    def wild(z, yy):  # a non-convex, sometimes non-finite user loss
        r = z - yy
        deriv = np.where(np.abs(r) > 50, np.nan, 100 * np.sin(r))
        return np.abs(r), deriv

    checks = []
    loss = CallableLoss(wild)
    problem = CoupledProblem(X, y, X2, y2, loss, np.zeros(5), 5.0, row_bound, checks, intercept=True)
    result = Localized(max_steps=10, n_coef=5).solve(problem, 0.5, 0.2, np.random.default_rng(0))
    assert max(checks) <= 1 + 1e-9
    assert np.all(np.isfinite(result.coef))


def test_aggregation_returns_the_dense_cluster():
    pts = np.array([[0.0, 0.0], [0.1, 0.0], [0.0, 0.1], [50.0, 50.0], [-40.0, 3.0]])
    np.testing.assert_array_equal(aggregate_points(pts)[None], pts[[0]])


def test_projection_onto_two_balls_is_exact():
    rng = np.random.default_rng(0)
    from scipy.optimize import minimize

    for _ in range(20):
        v = rng.normal(size=3) * 4
        c2 = rng.normal(size=3)
        r1, r2 = 1.5, 1.2
        got = project_two_balls(v, r1, c2, r2)
        cons = [{"type": "ineq", "fun": lambda x: r1**2 - x @ x},
                {"type": "ineq", "fun": lambda x: r2**2 - (x - c2) @ (x - c2)}]
        ref = minimize(lambda x: (x - v) @ (x - v), np.zeros(3), constraints=cons, method="SLSQP",
                       options={"ftol": 1e-14}).x
        assert np.linalg.norm(got) <= r1 * (1 + 1e-9) and np.linalg.norm(got - c2) <= r2 * (1 + 1e-9)
        assert np.linalg.norm(got - v) <= np.linalg.norm(ref - v) + 1e-6


def test_parallel_events_of_disjoint_phases():
    X, y, *_ = _neighbours()
    problem = GLMProblem(X, y, HuberLoss(1.0), np.zeros(5), 5.0, 10.0)
    result = KnownLipschitz(max_steps=5).solve(problem, 0.4, 0.1, np.random.default_rng(0))
    phases = [e for e in result.event.events if isinstance(e, Parallel)]
    assert len(phases) == 1 and len(phases[0].events) == int(math.log2(len(y)))
    assert isinstance(result.event, Sequential)


def test_a_callable_that_couples_rows_cannot_move_the_clipped_sum_beyond_2C():
    """Each row's value and derivative may depend on that row only: the callable sees one row at a time."""
    rng = np.random.default_rng(0)
    n, d, C = 200, 3, 1.0
    X = clip_rows(rng.normal(size=(n, d)), 2.0)
    y = X @ np.array([1.0, -1.0, 0.5]) + rng.normal(size=n)

    def batch_centred(z, t):
        r = z - t
        r = r - r.mean()  # couples every row of the batch it is given
        return 0.5 * r * r, r

    w = np.array([0.3, 0.1, -0.2])
    y2 = y.copy()
    y2[7] = 1e6  # replace one label
    sums = [GLMProblem(X, labels, CallableLoss(batch_centred), np.zeros(d), 5.0, 2.0)
            .clipped_gradient_sum(w, C) for labels in (y, y2)]
    assert np.linalg.norm(sums[0] - sums[1]) <= 2 * C * (1 + 1e-12)
