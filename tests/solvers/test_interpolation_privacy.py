"""Privacy of the classification solvers: coupled runs on neighbouring datasets.

The neighbour replaces one row by an extreme outlier (norm 1e6) with a flipped
label. Every gradient release of "clipped_gd" and every certified ERM of the
localization solvers is recomputed on the neighbour at the same point (same
iterate, or same centre, radius, step and Lipschitz level), and the distance
between the two exact values must be within the sensitivity the release was
calibrated to.
"""

import dataclasses
import math

import numpy as np
import pytest

from skdp.accounting import Sequential
from skdp.losses import ModifiedHuberLoss, SmoothedHingeLoss, SquaredHingeLoss
from skdp.solvers import ProblemSpec, SolverBudget, get_solver
from skdp.solvers.interpolation import (
    ClassificationProblem,
    JointSquaredOutputs,
    OneVsRestOutputs,
    SoftmaxOutputs,
    _centring,
    clipped_gd,
    localization,
)

SOLVERS = ("clipped_gd", "epoch_growth", "interpolation", "adaptive", "kappa_growth")


def neighbouring_problems(outputs, n=300, d=4, seed=0, clip_rows=False, offset=0.0):
    rng = np.random.default_rng(seed)
    X = np.hstack([rng.normal(size=(n, d)) + offset, np.ones((n, 1))])
    k = outputs.n_classes
    labels = rng.integers(0, k, size=n)
    X2, labels2 = X.copy(), labels.copy()
    i = int(rng.integers(n))
    X2[i, :d] = 1e6 * np.sign(rng.normal(size=d))
    labels2[i] = (labels[i] + 1) % k
    penalty = np.r_[np.full(d, 1e-3), 0.0]
    bound = 3.0 * math.sqrt(d + 1)
    if clip_rows:  # as the pipeline does for solvers that take bounded rows
        X2[i] *= min(1.0, bound / np.linalg.norm(X2[i]))

    def make(X, labels):
        return ClassificationProblem(X, labels, outputs, penalty, radius=20.0, row_scale=math.sqrt(d + 1),
                                     intercept=True, rows_clipped=clip_rows, row_bound=bound)

    return make(X, labels), make(X2, labels2), i


class CoupledGradients(ClassificationProblem):
    """Answers every clipped-gradient query on the neighbour too and logs the ratio to ``2 clip``."""

    def __init__(self, problem, neighbour, log):
        super().__init__(**{f.name: getattr(problem, f.name) for f in dataclasses.fields(problem) if f.init})
        self.neighbour = neighbour
        self.log = log

    def clipped_gradient_sum(self, W, clip):
        mine = super().clipped_gradient_sum(W, clip)
        theirs = ClassificationProblem.clipped_gradient_sum(self.neighbour, W, clip)
        self.log.append(float(np.linalg.norm(mine - theirs)) / (2.0 * clip))
        return mine


def outputs_for(kind):
    return {"binary": OneVsRestOutputs(SquaredHingeLoss(), 2),
            "ovr3": OneVsRestOutputs(SquaredHingeLoss(), 3),
            "huber3": OneVsRestOutputs(ModifiedHuberLoss(), 3),
            "smoothed": OneVsRestOutputs(SmoothedHingeLoss(0.5), 2),
            "joint3": JointSquaredOutputs(3),
            "softmax3": SoftmaxOutputs(3)}[kind]


def budget_for(pure):
    return SolverBudget(0.0, math.inf, pure_epsilon=1.0) if pure else SolverBudget(1.0)


def spec(problem):
    return ProblemSpec(n_samples=problem.n_samples, n_coef=problem.n_coef, loss=SquaredHingeLoss(),
                       n_outputs=problem.n_outputs)


def clipped_feature_sum(problem):
    """The exact value the private row mean releases (feature parts clipped to the row bound)."""
    features = problem.X[:, :-1]
    norms = np.linalg.norm(features, axis=1)
    factors = np.minimum(1.0, problem.row_bound / np.maximum(norms, 1e-300))
    return factors @ features


@pytest.mark.parametrize("pure", [False, True])
@pytest.mark.parametrize("kind", ["binary", "ovr3", "joint3", "softmax3"])
def test_clipped_gd_gradient_releases_are_within_their_sensitivity(kind, pure, monkeypatch):
    # Columns far from 0, so the private centring really centres; the neighbour is centred
    # with the same released mean (post-processing of one release).
    problem, neighbour, _ = neighbouring_problems(outputs_for(kind), offset=5.0)
    log, centre_log = [], []
    release_mean = clipped_gd.release_row_mean

    def coupled_release(prob, budget, rng):
        exact, exact2 = clipped_feature_sum(problem), clipped_feature_sum(neighbour)
        centre_log.append(float(np.linalg.norm(exact - exact2)) / (2.0 * problem.row_bound))
        return release_mean(prob, budget, rng)

    def coupled_centring(prob, mean):
        return CoupledGradients(_centring.centred_problem(problem, mean),
                                _centring.centred_problem(neighbour, mean), log)

    monkeypatch.setattr(clipped_gd, "release_row_mean", coupled_release)
    monkeypatch.setattr(clipped_gd, "centred_problem", coupled_centring)
    solver = get_solver("clipped_gd", "interpolation")()
    budget = budget_for(pure)
    result = solver.run(spec(problem), problem, budget, np.random.default_rng(0))
    assert len(centre_log) == 1 and 0.3 < centre_log[0] <= 1.0 + 1e-12
    assert result.schedule["centred_columns"] == 4
    assert len(log) == solver.n_steps
    assert max(log) <= 1.0 + 1e-12
    assert max(log) > 0.3  # the outlier row is really clipped to the bound, not ignored
    planned = solver.plan(spec(problem), budget)
    for delta in (0.0, 1e-6) if pure else (1e-6,):
        assert result.event.epsilon(delta) <= planned.epsilon(delta) * (1 + 1e-9)
    # Exactly the plan (pure: at delta = 0; the Laplace curvature release composes a little
    # more tightly than the plan's generic pure event at delta > 0).
    delta = 0.0 if pure else 1e-6
    assert result.event.epsilon(delta) == pytest.approx(planned.epsilon(delta), rel=1e-9)


@pytest.mark.parametrize("pure", [False, True])
def test_clipped_gd_without_centring_on_centred_rows(pure):
    """Rows the standardisation already centred (public) get no centring release: the budget goes to the steps."""
    problem, neighbour, _ = neighbouring_problems(outputs_for("binary"))
    log = []
    coupled = CoupledGradients(problem, neighbour, log)
    solver = get_solver("clipped_gd", "interpolation")()
    centred_spec = ProblemSpec(n_samples=problem.n_samples, n_coef=problem.n_coef, loss=SquaredHingeLoss(),
                               centred_rows=True)
    budget = budget_for(pure)
    result = solver.run(centred_spec, coupled, budget, np.random.default_rng(0))
    assert "centred_columns" in result.schedule and result.schedule["centred_columns"] == 0
    assert len(log) == solver.n_steps and max(log) <= 1.0 + 1e-12
    assert len(solver.plan(centred_spec, budget).events) == 2
    assert len(solver.plan(spec(problem), budget).events) == 3
    delta = 0.0 if pure else 1e-6
    assert result.event.epsilon(delta) == pytest.approx(solver.plan(centred_spec, budget).epsilon(delta), rel=1e-9)


def test_centring_is_undone_exactly_in_the_intercept():
    """Scores of the centred fit on centred rows equal the mapped-back coefficients' on the original rows."""
    problem, _, _ = neighbouring_problems(outputs_for("ovr3"), offset=3.0)
    mean = np.array([3.0, 0.0, 2.5, -1.0])
    centred = _centring.centred_problem(problem, mean)
    W = np.random.default_rng(1).normal(size=(3, 5))
    back = _centring.uncentred_coef(W, mean, centred)
    np.testing.assert_allclose(centred.X @ W.T, problem.X @ back.T, atol=1e-10)
    assert centred.row_scale < problem.row_scale


@pytest.mark.parametrize("pure", [False, True])
@pytest.mark.parametrize("kind", ["binary", "ovr3", "huber3", "smoothed", "joint3"])
@pytest.mark.parametrize("name", SOLVERS[1:])
def test_every_certified_erm_is_within_its_sensitivity(name, kind, pure, monkeypatch):
    problem, neighbour, changed = neighbouring_problems(outputs_for(kind), n=240, clip_rows=True)
    ratios = []
    original = localization._Run.certified_erm

    def coupled(self, prob, rows, L, center, eta):
        x, sensitivity = original(self, prob, rows, L, center, eta)
        x2, sensitivity2 = original(self, neighbour, rows, L, center, eta)
        assert sensitivity2 == sensitivity
        if changed in rows:
            ratios.append(float(np.linalg.norm(x - x2)) / sensitivity)
        else:  # a release that does not read the changed row is identical on both
            assert np.array_equal(x, x2)
        return x, sensitivity

    monkeypatch.setattr(localization._Run, "certified_erm", coupled)
    solver = get_solver(name, "interpolation")()
    budget = budget_for(pure)
    result = solver.run(spec(problem), problem, budget, np.random.default_rng(1))
    # Disjoint blocks covering all 240 rows: the changed row is read by exactly one release.
    assert len(ratios) == 1
    assert all(r <= 1.0 for r in ratios)
    assert result.schedule["releases"] >= 1
    # The reported event is computed from the noise drawn and costs exactly what was planned.
    planned = solver.plan(spec(problem), budget)
    for delta in (0.0, 1e-6) if pure else (1e-6, 1e-4):
        assert result.event.epsilon(delta) == pytest.approx(planned.epsilon(delta), rel=1e-9)


@pytest.mark.parametrize("pure", [False, True])
def test_the_solver_event_is_one_release_at_the_full_budget(pure):
    solver = get_solver("adaptive", "interpolation")()
    problem, _, _ = neighbouring_problems(outputs_for("binary"))
    event = solver.plan(spec(problem), budget_for(pure))
    if pure:
        assert event.epsilon(0.0) == pytest.approx(1.0)
    else:
        from skdp.accounting import GaussianRelease
        assert event.epsilon(1e-5) == pytest.approx(GaussianRelease(1.0, 1.0).epsilon(1e-5))


def test_extension_gradient_is_clipped_gradient_and_lipschitz():
    """The extension of a margin loss per class (slope M / sqrt(k)) bounds each row's gradient by L."""
    rng = np.random.default_rng(3)
    outputs = OneVsRestOutputs(SquaredHingeLoss(), 4)
    X = rng.normal(size=(50, 6)) * 10
    labels = rng.integers(0, 4, size=50)
    W = rng.normal(size=(4, 6))
    L = 2.5
    norms = np.linalg.norm(X, axis=1)
    _, G = outputs.value_and_gradient(X @ W.T, labels, L / norms)
    assert np.all(np.linalg.norm(G, axis=1) * norms <= L * (1 + 1e-12))
    # Where the gradient is already small the extension agrees with the loss.
    v0, G0 = outputs.value_and_gradient(X @ W.T, labels)
    v1, G1 = outputs.value_and_gradient(X @ W.T, labels, np.full(50, np.inf))
    assert np.allclose(v0, v1) and np.allclose(G0, G1)
    # Convexity along a line: the extended mean loss lies below its chords.
    problem = ClassificationProblem(X, labels, outputs, np.zeros(6), 20.0, 1.0)
    W2 = rng.normal(size=(4, 6))
    f = lambda t: problem.mean_loss_and_gradient((1 - t) * W + t * W2, L / norms)[0]  # noqa: E731
    for t in np.linspace(0.1, 0.9, 5):
        assert f(t) <= (1 - t) * f(0) + t * f(1) + 1e-9


def test_joint_squared_extension_is_frobenius_clipping():
    outputs = JointSquaredOutputs(3)
    Z = np.array([[5.0, 0.0, 0.0], [0.1, 0.9, 0.0]])
    labels = np.array([1, 1])
    value, G = outputs.value_and_gradient(Z, labels, np.array([1.0, 1.0]))
    assert np.linalg.norm(G[0]) == pytest.approx(1.0)
    assert np.allclose(G[1], Z[1] - [0, 1, 0])
    r = np.linalg.norm(Z[0] - [0, 1, 0])
    assert value[0] == pytest.approx(r - 0.5)


def test_composed_event_of_a_pure_fit_is_pure():
    solver = get_solver("clipped_gd", "interpolation")()
    problem, _, _ = neighbouring_problems(outputs_for("binary"))
    event = Sequential([solver.plan(spec(problem), budget_for(True))])
    assert event.epsilon(0.0) == pytest.approx(1.0)


@pytest.mark.parametrize("name", SOLVERS[1:])
def test_localization_solvers_scale_unclipped_rows_to_the_public_bound(name):
    """Direct use with an unclipped outlier row (norm 1e200): the rows are scaled to the public
    row_bound first, so the certified ERM's work cannot depend on that row; no bound, no run."""
    problem, _, changed = neighbouring_problems(outputs_for("binary"), n=240)
    X = problem.X.copy()
    X[changed, :-1] = 1e200
    X[(changed + 1) % len(X), 0] = np.inf  # a non-finite entry: the row becomes 0
    unclipped = dataclasses.replace(problem, X=X)
    clipped = localization._rows_clipped_to_bound(unclipped)
    norms = np.linalg.norm(clipped.X, axis=1)
    assert norms[changed] == pytest.approx(problem.row_bound)  # scaled to the bound, not to 0
    assert norms[(changed + 1) % len(X)] == 0.0
    assert np.all(norms <= problem.row_bound * (1 + 1e-12))
    solver = get_solver(name, "interpolation")()
    result = solver.run(spec(unclipped), unclipped, budget_for(False), np.random.default_rng(2))
    assert np.all(np.isfinite(result.coef))
    unbounded = dataclasses.replace(problem, X=X, row_bound=math.inf)
    with pytest.raises(ValueError, match="public row_bound"):
        solver.run(spec(unbounded), unbounded, budget_for(False), np.random.default_rng(2))


@pytest.mark.parametrize(("name", "pure"), [("epoch_growth", False), ("kappa_growth", True)])
def test_eta_cap_bounds_the_erm_condition_and_keeps_every_release_within_its_sensitivity(name, pure, monkeypatch):
    """A public row bound of 1e4 makes every block ERM's condition number far above the cap (raw breast
    cancer at epsilon = 0.1 reached 3.5e9, a 100 s fit); eta is lowered to keep it at most the cap, and
    the sensitivity uses the lowered eta."""
    problem, neighbour, changed = neighbouring_problems(outputs_for("binary"), n=240, clip_rows=True)
    problem = dataclasses.replace(problem, row_bound=1e4)
    neighbour = dataclasses.replace(neighbour, row_bound=1e4)
    conditions, ratios = [], []
    original = localization._Run.certified_erm

    def coupled(self, prob, rows, L, center, eta):
        sub = prob.subset(rows)
        strong = 2.0 / (eta * len(rows))
        conditions.append((self.smooth_row + strong + sub.max_penalty) / strong)
        x, sensitivity = original(self, prob, rows, L, center, eta)
        x2, _ = original(self, neighbour, rows, L, center, eta)
        assert sensitivity >= L * eta  # computed from the eta actually used (the capped one)
        if changed in rows:
            ratios.append(float(np.linalg.norm(x - x2)) / sensitivity)
        return x, sensitivity

    monkeypatch.setattr(localization._Run, "certified_erm", coupled)
    solver = get_solver(name, "interpolation")()
    result = solver.run(spec(problem), problem, budget_for(pure), np.random.default_rng(3))
    assert result.schedule["capped_steps"] == result.schedule["releases"] >= 1
    assert max(conditions) <= localization.MAX_ERM_CONDITION * (1 + 1e-9)
    assert len(ratios) == 1 and ratios[0] <= 1.0
