"""Rule 7 of the privacy contract: after the budget is reserved, nothing may raise depending on the data.

* A sweep of tiny fits (2 to 40 rows, 2 or 3 classes, every localization solver,
  both schedules, pure and Gaussian budgets, rows of 1e300, constant columns,
  duplicated rows): every fit either returns a model and charges the ledger
  once, or raises before anything is charged.
* Coupled replays: a solver runs on a dataset, then on a neighbour (one row
  replaced) with every noisy release forced to the value released on the first
  dataset. Everything after a release is post-processing of released values, so
  both runs must end identically (coefficients, public schedule, no exception);
  a branch, fallback or exception that read the rows beyond the releases would
  show as a difference. Row scales down to 3e-17 make the Lipschitz level
  collapse as a starved scaling does.
* Misconfigured solver instances (``algorithm=ClippedGD(n_steps=0)`` and the
  like) are refused before anything is charged.
"""

import dataclasses
import math
import warnings

import numpy as np
import pytest

from skdp import BudgetAccountant, DPHeavyTailRegressor, DPInterpolatingClassifier
from skdp.losses import SquaredHingeLoss
from skdp.solvers import ProblemSpec, SolverBudget, get_solver, solver_names
from skdp.solvers._contract import _REGISTRY
from skdp.solvers.interpolation import ClassificationProblem, JointSquaredOutputs, OneVsRestOutputs, localization

LOCALIZATION = ("epoch_growth", "interpolation", "adaptive", "kappa_growth")
_RELEASE = localization.release_vector


def _tiny_table(rng):
    """A small table with the extremes of the fuzz: huge rows, constant columns, duplicated rows."""
    n, k, d = int(rng.integers(2, 41)), int(rng.integers(2, 4)), int(rng.integers(1, 6))
    X = rng.normal(size=(n, d)) * 10.0 ** rng.integers(-3, 4, size=d)
    kind = int(rng.integers(5))
    if kind == 0:
        X[rng.integers(n)] = 1e300
    elif kind == 1:
        X[:, 0] = 3.0
    elif kind == 2:
        X = np.repeat(X[:1], n, axis=0)
    elif kind == 3:
        X[rng.integers(n)] = -1e300
    return X, rng.integers(0, k, size=n), k


@pytest.mark.parametrize("schedule", ["theory", "practical"])
@pytest.mark.parametrize("delta", [0.0, 1e-5])
def test_tiny_localization_fits_charge_exactly_when_they_return(schedule, delta):
    """Before the fix, 89 of 300 theory fits of 'interpolation' at n = 33 raised after charging."""
    rng = np.random.default_rng(1 + int(delta > 0) + 2 * (schedule == "theory"))
    fitted = 0
    for _ in range(25):
        X, y, k = _tiny_table(rng)
        accountant = BudgetAccountant()
        clf = DPInterpolatingClassifier(epsilon=float(rng.choice([0.1, 1.0, 5.0])), delta=delta,
                                        algorithm=LOCALIZATION[rng.integers(4)], schedule=schedule,
                                        classes=list(range(k)), accountant=accountant,
                                        random_state=int(rng.integers(2**31)))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                clf.fit(X, y)
            except ValueError:
                assert len(accountant.events) == 0, "raised after the budget was charged"
                continue
        assert len(accountant.events) == 1
        assert np.all(np.isfinite(clf.coef_)) and np.all(np.isfinite(clf.intercept_))
        fitted += 1
    assert fitted >= 20  # refusals before spend are rare (tiny n with delta >= 1 / n is only a warning)


def _problem(n, d, k, row_scale, seed, joint, ridge=1e-3):
    rng = np.random.default_rng(seed)
    bound = 3.0 * math.sqrt(d + 1)
    X = np.hstack([rng.normal(size=(n, d)), np.ones((n, 1))])
    X *= np.minimum(1.0, bound / np.linalg.norm(X, axis=1))[:, None]
    labels = rng.integers(0, k, size=n)
    X2, labels2 = X.copy(), labels.copy()
    i = int(rng.integers(n))
    X2[i] = rng.normal(size=d + 1)
    X2[i] *= bound / np.linalg.norm(X2[i])
    labels2[i] = (labels[i] + 1) % k
    outputs = JointSquaredOutputs(k) if joint else OneVsRestOutputs(SquaredHingeLoss(), k)

    def make(X, labels):
        return ClassificationProblem(X, labels, outputs, np.r_[np.full(d, ridge), 0.0], radius=20.0,
                                     row_scale=row_scale, intercept=True, rows_clipped=True, row_bound=bound)

    return make(X, labels), make(X2, labels2)


def _run_recorded(solver, problem, budget, seed, monkeypatch, replay=None):
    """Run ``solver``; record every release, or force each release to the recorded one."""
    original = _RELEASE
    log = []

    def release(value, sensitivity, budget_, rng):
        noisy, event = original(value, sensitivity, budget_, rng)  # the same draws on both runs
        if replay is not None:
            recorded_noisy, recorded_event = replay[len(log)]
            assert event == recorded_event  # sensitivities come from public values and releases only
            noisy = recorded_noisy
        log.append((np.array(noisy, copy=True), event))
        return noisy, event

    monkeypatch.setattr(localization, "release_vector", release)
    spec = ProblemSpec(n_samples=problem.n_samples, n_coef=problem.n_coef, loss=SquaredHingeLoss(),
                       n_outputs=problem.n_outputs, schedule=solver.schedule)
    result = solver.run(spec, problem, budget, np.random.default_rng(seed))
    return result, log


@pytest.mark.parametrize("schedule", ["theory", "practical"])
@pytest.mark.parametrize("name", LOCALIZATION)
def test_coupled_replay_on_neighbours_ends_identically(name, schedule, monkeypatch):
    rng = np.random.default_rng(len(name) + 7 * (schedule == "theory"))
    for trial in range(4):
        n = int(rng.integers(4, 60))
        row_scale = float(rng.choice([3.1e-17, 1e-10, 1e-4, 1.0, 2.2]))
        pure = bool(rng.integers(2))
        budget = SolverBudget(0.0, math.inf, pure_epsilon=2.0) if pure else SolverBudget(float(rng.choice([0.05, 1.0])))
        # Without a ridge the block ERM's smoothness can be within rounding of its strong convexity.
        problem, neighbour = _problem(n, 3, int(rng.integers(2, 4)), row_scale, trial, joint=bool(rng.integers(2)),
                                      ridge=float(rng.choice([0.0, 1e-3])))
        solver = get_solver(name, "interpolation")(schedule=schedule)
        first, log = _run_recorded(solver, problem, budget, trial, monkeypatch)
        second, _ = _run_recorded(solver, neighbour, budget, trial, monkeypatch, replay=log)
        np.testing.assert_array_equal(first.coef, second.coef)
        assert first.schedule == second.schedule
        assert first.event == second.event


def test_the_public_rule_releases_the_centre_when_the_erm_degenerates():
    """erm_constants reads (b, L, eta, centre) and public constants only; None means: release the centre."""
    problem, _ = _problem(40, 3, 2, 1.0, 0, joint=False)
    run = localization._Run(problem, SolverBudget(1.0), np.random.default_rng(0), 0.1, "practical")
    centre = np.zeros(4)
    assert run.erm_constants(20, 1.0, centre, 0.1) is not None
    for b, L, eta in [(0, 1.0, 0.1), (20, 0.0, 0.1), (20, math.nan, 0.1), (20, math.inf, 0.1), (20, 1.0, 0.0),
                      (20, 1.0, math.inf), (20, 1e-300, 1e-300)]:
        assert run.erm_constants(b, L, centre, eta) is None
    # A ball B(c, 2 L eta b) narrower than the rounding floor at |c| = 1e6: the centre is within tol.
    assert run.erm_constants(20, 1e-17, np.full(4, 5e5), 0.1) is None
    released, sensitivity = run.certified_erm(problem, np.arange(20), 0.0, centre + 1.5, 0.1)
    np.testing.assert_array_equal(released, 1.5)
    assert sensitivity == 0.0
    noisy, event = localization.release_vector(released, 0.0, ("pure", 1.0), np.random.default_rng(0))
    np.testing.assert_array_equal(noisy, released)
    assert event.epsilon(0.0) == 0.0  # nothing read, nothing spent


def test_a_degenerate_row_scale_gives_the_start_at_no_cost():
    problem, _ = _problem(40, 3, 2, 0.0, 0, joint=False)
    solver = get_solver("interpolation", "interpolation")(schedule="theory")
    spec = ProblemSpec(n_samples=40, n_coef=4, loss=SquaredHingeLoss(), schedule="theory")
    result = solver.run(spec, problem, SolverBudget(0.0, math.inf, pure_epsilon=1.0), np.random.default_rng(0))
    assert result.schedule["centre_releases"] == result.schedule["releases"] >= 1
    np.testing.assert_array_equal(result.coef, 0.0)
    assert result.event.epsilon(0.0) == 0.0


# -- misconfigured solver instances --------------------------------------------------------------
_BAD_VALUES = (0, -1, math.inf, math.nan, -math.inf, 1e308, 1e200, 1e-163, 1e-320, "x", None, (), (0.0, 1.0))


def test_every_solver_declares_a_constraint_for_every_parameter():
    for (family, name), cls in _REGISTRY.items():
        fields = {f.name for f in dataclasses.fields(cls)}
        assert fields == set(cls._parameter_constraints), (family, name)


# One case per solver (not per family), so that the two test workers share the ~90 fits each
# family runs with accepted extreme values.
@pytest.mark.parametrize("family, name", [(family, name) for family in ("interpolation", "heavy_tail")
                                          for name in solver_names(family)])
def test_misconfigured_solver_instances_are_refused_before_spend(family, name):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 3))
    y = (X[:, 0] > 0).astype(int) if family == "interpolation" else X @ [1.0, 2.0, 0.0] + rng.normal(size=200)
    charged_then_raised = []
    cls = get_solver(name, family)
    for field in dataclasses.fields(cls):
        for bad in _BAD_VALUES:
            try:
                solver = cls(**{field.name: bad})
            except (TypeError, ValueError):
                continue  # refused at construction
            accountant = BudgetAccountant()
            if family == "interpolation":
                estimator = DPInterpolatingClassifier(epsilon=1.0, delta=0.0, algorithm=solver, classes=[0, 1],
                                                      accountant=accountant, random_state=0)
            else:
                estimator = DPHeavyTailRegressor(epsilon=1.0, algorithm=solver, accountant=accountant,
                                                 random_state=0)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                try:
                    estimator.fit(X, y)
                except (TypeError, ValueError):
                    if accountant.events:
                        charged_then_raised.append((name, field.name, bad))
    assert charged_then_raised == []


@pytest.mark.parametrize("solver", [
    get_solver("clipped_gd", "interpolation")(n_steps=0),
    get_solver("clipped_gd", "interpolation")(clip_multiplier=-1.0),
    get_solver("clipped_gd", "interpolation")(clip_multiplier=math.inf),
    get_solver("clipped_gd", "interpolation")(curvature_share=0.0),
    get_solver("clipped_gd", "interpolation")(curvature_share=0.5, centre_share=0.5),
    get_solver("epoch_growth", "interpolation")(lipschitz=0.0),
    get_solver("epoch_growth", "interpolation")(lipschitz=-1.0),
    get_solver("epoch_growth", "interpolation")(c_eta=0.0),
    get_solver("clipped_gd", "heavy_tail")(),
    get_solver("localized", "heavy_tail")(),
])
@pytest.mark.parametrize("delta", [0.0, 1e-5])
def test_the_reported_misconfigurations_say_what_to_change(solver, delta):
    X = np.random.default_rng(1).normal(size=(100, 2))
    accountant = BudgetAccountant()
    clf = DPInterpolatingClassifier(delta=delta, algorithm=solver, classes=[0, 1], accountant=accountant)
    with pytest.raises(ValueError, match="parameter of|family|must be below 1"):
        clf.fit(X, (X[:, 0] > 0).astype(int))
    assert len(accountant.events) == 0
