"""The zeroth-order solvers: the paper's schedule with its errata, exact spending, coupled neighbour runs."""

import math

import numpy as np
import pytest

from skdp.accounting import GaussianRelease
from skdp.losses import AbsoluteLoss, TukeyLoss, ValueLoss
from skdp.mechanisms import tree_depth
from skdp.mechanisms._audit import record_releases
from skdp.solvers import ProblemSpec, SolverBudget, get_solver, solver_names
from skdp.solvers.zeroth_order import Naive, VarianceReduced, ZOProblem
from skdp.solvers.zeroth_order.schedule import naive_theory_inner, variance_reduced_theory
from skdp.zeroth_order._models import LinearModel, MLPModel
from privacy_harness import CoupledZOProblem, assert_event_as_planned

SOLVERS = [
    Naive(n_steps=15),
    Naive(n_steps=15, directions="coordinates"),
    Naive(n_steps=15, optimizer="adam", directions="orth", n_directions=2),
    Naive(n_steps=12, warm_loss=AbsoluteLoss(), rescale_loss=True),
    Naive(schedule="theory"),
    VarianceReduced(),
    VarianceReduced(directions="coordinates", n_inner=8, diff_batch=3),
    VarianceReduced(schedule="theory"),
    VarianceReduced(schedule="theory", directions="orth", n_directions=2),
]


def _rows(n=300, d=3, seed=0):
    rng = np.random.default_rng(seed)
    X = np.hstack([rng.normal(size=(n, d)), np.ones((n, 1))])
    y = X[:, :d] @ rng.normal(size=d) + rng.standard_cauchy(n)
    return X, y


def _problem(X, y, loss=None):
    return ZOProblem(X, y, LinearModel(X.shape[1]), loss or AbsoluteLoss(), lipschitz=4.0, init=None,
                     row_bound=4.0)


def _spec(problem, loss=None):
    return ProblemSpec(n_samples=problem.n_samples, n_coef=problem.n_params, loss=loss or problem.loss,
                       radius=20.0)


def test_registry_family():
    assert set(solver_names("zeroth_order")) == {"naive", "variance_reduced"}
    assert get_solver("naive", "zeroth_order") is Naive


def test_theory_schedule_matches_the_corrected_rule():
    """T = max(T1, T2) (the paper's min gives T = 2 without noise), B1 = T + 1, B2 = 1, D = delta / T."""
    s = variance_reduced_theory(n=100_000, d=11, lipschitz=math.sqrt(2), smoothing=0.05, loss_gap=1.0, mu=0.268)
    assert (s.n_inner, s.n_epochs, s.checkpoint_batch, s.diff_batch) == (948, 52, 949, 1)
    assert s.step_radius == pytest.approx(0.05 / 948)
    assert s.n_rows_used == 52 * 2 * 948 <= 100_000
    # No noise: T is the non-private balance T1, not 2.
    T1 = (math.sqrt(11) * math.sqrt(2) * 0.05 * 1e5 / (1 + math.sqrt(2) * 0.05)) ** (2 / 3)
    assert variance_reduced_theory(100_000, 11, math.sqrt(2), 0.05, 1.0, math.inf).n_inner == int(T1)
    # More noise (smaller mu) lengthens the epochs (T2 grows as 1 / sqrt(mu)).
    assert variance_reduced_theory(100_000, 11, math.sqrt(2), 0.05, 1.0, 0.01).n_inner > s.n_inner
    assert naive_theory_inner(100_000, 11, 1.0, 0.05, 1.0, 0.5) > naive_theory_inner(100_000, 11, 1.0, 0.05, 1.0,
                                                                                       math.inf)
    with pytest.raises(ValueError, match="at least 4 rows"):
        variance_reduced_theory(3, 2, 1.0, 0.05, 1.0, 1.0)


@pytest.mark.parametrize("solver", SOLVERS, ids=repr)
@pytest.mark.parametrize("mu", [0.3, 2.0])
def test_spends_exactly_the_budget(solver, mu):
    """The run's event is mu-GDP (exactly what the plan charged) whatever the layout and the data."""
    X, y = _rows()
    problem = _problem(X, y)
    spec = _spec(problem)
    budget = SolverBudget(mu, quantile_epsilon=0.05)
    solver.check(spec)
    planned = solver.plan(spec, budget)
    result = solver.run(spec, problem, budget, np.random.default_rng(0))
    assert_event_as_planned(result.event, planned)
    expected = GaussianRelease(1.0, 1.0 / mu)
    if solver.n_quantiles(spec) == 0:
        for delta in (1e-5, 1e-7):
            assert result.event.epsilon(delta) == pytest.approx(expected.epsilon(delta), rel=1e-9)
    assert np.all(np.isfinite(result.coef))
    assert result.schedule["n_function_evals"] > 0


def _adversarial_pair(n=240, d=3, seed=1):
    """A dataset and a neighbour whose row 7 is built to saturate every clip (and NaN at some points)."""
    X, y = _rows(n, d, seed)
    X2, y2 = X.copy(), y.copy()
    X2[7, :d] = [3.0, -3.0, 3.0][:d]
    y2[7] = 1e9

    def wild(prediction, t):
        # Huge and discontinuous for the outlying label, NaN on part of the parameter space.
        out = np.abs(prediction - t)
        big = np.abs(t) > 1e8
        out = np.where(big, 1e12 * np.sign(np.sin(50 * prediction)) * prediction, out)
        return np.where(big & (prediction > 1.0), np.nan, out)

    loss = ValueLoss(wild)
    return _problem(X, y, loss), _problem(X2, y2, loss)


@pytest.mark.parametrize("solver", SOLVERS, ids=repr)
def test_coupled_runs_respect_every_claimed_sensitivity(solver):
    """Every oracle query, answered on both neighbours at the same point and directions, moves by at most
    its claimed sensitivity, and the noise of every release is calibrated to at least that bound."""
    a, b = _adversarial_pair()
    coupled = CoupledZOProblem(a, b)
    spec = _spec(a)
    budget = SolverBudget(0.5, quantile_epsilon=0.1)
    with record_releases() as log:
        result = solver.run(spec, coupled, budget, np.random.default_rng(3))
    assert coupled.checks and max(coupled.checks) <= 1.0 + 1e-9
    gaussian = [r for r in log if r.mechanism == "gaussian"]
    assert gaussian
    if isinstance(solver, VarianceReduced):
        # Tree nodes are calibrated to the largest leaf cap: every leaf's claimed bound / batch is below it.
        cap = gaussian[0].sensitivity
        batches = np.array([len(q) for q in coupled.queries], dtype=float)
        assert np.all(np.array(coupled.sensitivities) / batches <= cap * (1 + 1e-9))
        assert all(r.sensitivity == cap for r in gaussian)
        assert len(gaussian) == result.schedule["n_steps"]
    else:
        batches = np.array([len(q) for q in coupled.queries], dtype=float)
        released = np.array([r.sensitivity for r in gaussian])
        np.testing.assert_allclose(released, np.array(coupled.sensitivities) / batches, rtol=1e-12)
    assert np.all(np.isfinite(result.coef))


@pytest.mark.parametrize("solver", [Naive(schedule="theory"), VarianceReduced(), VarianceReduced(schedule="theory")],
                         ids=repr)
def test_one_pass_reads_every_used_row_once_and_no_other(solver):
    X, y = _rows(n=500)
    a = _problem(X, y)
    coupled = CoupledZOProblem(a, _problem(X, y))
    result = solver.run(_spec(a), coupled, SolverBudget(1.0), np.random.default_rng(0))
    read = np.concatenate(coupled.queries)
    assert len(read) == len(set(read.tolist())) == result.schedule["n_rows_used"] <= 500


def test_tree_layers_and_noise_follow_bit_length():
    X, y = _rows(n=400)
    problem = _problem(X, y)
    solver = VarianceReduced(schedule="theory")
    result = solver.run(_spec(problem), problem, SolverBudget(0.7), np.random.default_rng(0))
    s = result.schedule
    assert s["tree_layers"] == tree_depth(s["n_inner"])
    assert s["noise_std"] == pytest.approx(math.sqrt(s["tree_layers"]) * s["sensitivity_max"] / 0.7)
    # The paper's iid directions: the checkpoint leaf's cap is 2 d L / B1 and a difference leaf's
    # 2 d L (2 D) / (B2 delta) = 4 d L / T.
    d, L, T = problem.n_params, problem.lipschitz, s["n_inner"]
    assert s["sensitivity_max"] == pytest.approx(max(2 * d * L / (T + 1), 4 * d * L / T))


def test_no_noise_recovers_the_least_absolute_deviation_fit():
    from sklearn.linear_model import QuantileRegressor

    X, y = _rows(n=2000, seed=4)
    problem = _problem(X, y)
    reference = QuantileRegressor(alpha=0.0, solver="highs", fit_intercept=False).fit(X, y).coef_
    theta = Naive(n_steps=200).run(_spec(problem), problem, SolverBudget(math.inf), np.random.default_rng(0)).coef
    # Objective gap: LAD's objective is flat near its minimiser, so compare objectives (1e-3 relative).
    gap = np.mean(np.abs(X @ theta - y)) / np.mean(np.abs(X @ reference - y)) - 1
    assert gap < 1e-3


def test_warm_start_and_residual_scale_for_a_redescending_loss():
    rng = np.random.default_rng(5)
    X = np.hstack([rng.normal(size=(3000, 2)), np.ones((3000, 1))])
    y = X[:, :2] @ [1.0, -1.0] + 0.1 * rng.normal(size=3000)
    y[:600] += 5.0  # one row in five shifted far up
    problem = _problem(X, y, TukeyLoss(4.685))
    solver = Naive(n_steps=60, warm_loss=AbsoluteLoss(), rescale_loss=True)
    with record_releases():
        result = solver.run(_spec(problem), problem, SolverBudget(math.inf, quantile_epsilon=math.inf),
                            np.random.default_rng(0))
    # The residual scale of the warm (absolute-loss) fit is about 0.1 x 1.33 here (the contamination inflates
    # the median absolute residual); Tukey's constant becomes 4.685 times it, and the intercept loses the bias.
    assert 0.05 < result.schedule["residual_scale"] < 0.5
    assert abs(result.coef[2]) < 0.05
    np.testing.assert_allclose(result.coef[:2], [1.0, -1.0], atol=0.05)


def test_network_problem_runs_with_coordinate_frames():
    rng = np.random.default_rng(6)
    X = rng.normal(size=(500, 2))
    y = np.sin(2 * X[:, 0]) + 0.1 * rng.normal(size=500)
    model = MLPModel(2, 8)
    problem = ZOProblem(X, y, model, AbsoluteLoss(), lipschitz=5.0, init=None)
    spec = ProblemSpec(n_samples=500, n_coef=model.n_params, loss=AbsoluteLoss())
    solver = Naive(n_steps=200, optimizer="adam", directions="coordinates", n_directions=model.n_params)
    theta = solver.run(spec, problem, SolverBudget(math.inf), np.random.default_rng(0)).coef
    fitted = model.predict(theta, X)
    # A non-linear fit: better than the best constant by far (R^2 well above a linear model's ~0.6).
    assert 1 - np.mean((fitted - y) ** 2) / np.var(y) > 0.8


def test_bad_configurations_refuse_before_any_spend():
    X, y = _rows(n=50)
    spec = _spec(_problem(X, y))
    for bad in (Naive(optimizer="sgd"), Naive(output="best"), Naive(n_steps=0), Naive(warm_fraction=1.0),
                Naive(directions="random"), VarianceReduced(n_inner=1), VarianceReduced(diff_batch=0),
                VarianceReduced(smoothing=0.0)):
        with pytest.raises(ValueError):
            bad.check(spec)
    with pytest.raises(ValueError, match="at least 4 rows"):
        VarianceReduced().check(ProblemSpec(n_samples=3, n_coef=2, loss=AbsoluteLoss()))
