"""The private linear-model pipeline with a solver written outside the library.

A :class:`~skdp.solvers.Solver` instance passed as ``algorithm=`` is run as
given: the pipeline checks it against the problem specification, plans and
calibrates the budget on its plan, reserves the planned event, runs it, and
settles the ledger with the event of what it drew. Refusals come before any
spend.
"""

import math
import warnings
from dataclasses import dataclass, field

import numpy as np
import pytest
from sklearn.base import clone

from skdp import BudgetAccountant, DPHeavyTailRegressor, DPInterpolatingClassifier, PrivacyLeakWarning
from skdp.accounting import GaussianRelease, Repeated, default_delta
from skdp.linear_model._budget import plan_budget
from skdp.solvers import Capabilities, Solver, SolverResult
from skdp.solvers.descent import noise_std, noisy_clipped_gradient
from privacy_harness import assert_event_as_planned, record_releases


@dataclass(frozen=True)
class NoisyGD(Solver):
    """Full-batch noisy clipped gradient descent from 0, written against the public contract only.

    ``calls`` logs the contract calls (a test spy); ``spend`` scales the noise
    actually drawn (1: as planned; below 1: less noise than planned, i.e. a
    dearer release; above 1: cheaper).
    """

    clip: float = 1.0
    n_steps: int = 20
    step: float = 0.5
    spend: float = 1.0
    refuse: str = None
    calls: list = field(default_factory=list, compare=False)

    name = "noisy_gd"
    family = "heavy_tail"
    capabilities = Capabilities(public_clip=True)

    def check(self, spec):
        self.calls.append("check")
        super().check(spec)
        if self.refuse:
            raise ValueError(self.refuse)

    def check_budget(self, spec, budget):
        self.calls.append("check_budget")

    def plan(self, spec, budget):
        self.calls.append("plan")
        return Repeated(GaussianRelease(1.0, math.sqrt(self.n_steps) / budget.mu), self.n_steps)

    def run(self, spec, problem, budget, rng):
        self.calls.append("run")
        n = problem.n_samples
        std = noise_std(math.sqrt(self.n_steps) * 2.0 * self.clip / n, budget.mu) * self.spend
        w = np.zeros(problem.n_coef)
        for _ in range(self.n_steps):
            g, _ = noisy_clipped_gradient(problem, w, self.clip, std, rng)
            w = problem.prox(w - self.step * (g + problem.penalty * w), self.step)
        event = Repeated(GaussianRelease(2.0 * self.clip / n, std), self.n_steps)
        return SolverResult(w, event, {"algorithm": self.name, "n_steps": self.n_steps})


def _data(n=2000, d=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * [1.0, 10.0, 0.1]
    y = X @ np.array([1.0, 0.1, 10.0]) + rng.normal(size=n) + 5.0
    return X, y


def test_a_custom_solver_runs_through_the_pipeline_and_its_event_is_settled():
    X, y = _data()
    solver = NoisyGD()
    acc = BudgetAccountant()
    with record_releases() as log:
        model = DPHeavyTailRegressor(epsilon=1.0, algorithm=solver, accountant=acc, random_state=0).fit(X, y)
    # check first, run last and once; in between the calibration evaluates the plan at several budgets,
    # and the calibrated budget is checked once before anything is spent.
    calls = solver.calls
    assert calls[0] == "check" and calls[-1] == "run" and calls.count("run") == 1
    assert calls.count("check_budget") == 1 and set(calls[1:-1]) == {"plan", "check_budget"}
    assert model.algorithm_ == "noisy_gd" and model.n_iter_ == 20
    # Settled with what was drawn: the ledger holds the fit's event, which costs the target exactly.
    assert acc.events == (model.privacy_event_,)
    assert model.privacy_spent_.epsilon == pytest.approx(1.0, rel=1e-6)
    released_by_solver = model.privacy_event_.events[1]
    assert released_by_solver.event.sensitivity == pytest.approx(2.0 / len(y))
    # The 20 Gaussian releases before the last are the solver's steps; before them come the standardiser's
    # (its second-moment matrix and magnitude check; its other releases are quantiles); the last is the
    # fit check, one number.
    assert len(log) > 21 and all(r.event == released_by_solver.event for r in log[-21:-1])
    assert np.ndim(log[-1].value) == 0 and model.privacy_event_.events[2] == log[-1].event
    # The model is useful: the noisy descent moves towards the least-squares fit.
    assert np.corrcoef(model.predict(X), y)[0, 1] > 0.8


def test_the_solver_runs_at_the_budget_planned_from_public_inputs():
    X, y = _data()
    n, d = X.shape
    est = DPHeavyTailRegressor(epsilon=0.5, algorithm=NoisyGD(), accountant=BudgetAccountant(),
                               random_state=1)
    plan = plan_budget(epsilon=0.5, delta=1e-5, n_samples=n, n_features=d, fit_intercept=True,
                       solver=NoisyGD(), make_spec=lambda mode: est._problem_spec(NoisyGD(), n, d, mode))
    model = est.fit(X, y)
    scaling_event, solver_event, check_event = model.privacy_event_.events
    # The noise of every step is the one the calibrated Gaussian budget mu gives 20 steps together.
    assert solver_event.event.noise_std == pytest.approx(math.sqrt(20) * 2.0 / n / plan.budget.mu, rel=1e-12)
    # The fit check: one number of sensitivity 8 / n at its own planned budget.
    assert check_event.sensitivity == pytest.approx(8.0 / n, rel=1e-12)
    assert check_event.noise_std == pytest.approx(8.0 / n / plan.check_mu, rel=1e-12)
    assert model.scaling_["mode"] == plan.standardiser.mode
    assert model.scaling_["quantile_epsilon"] == plan.budget.quantile_epsilon
    assert_event_as_planned(model.privacy_event_, plan.event, rel=1e-9)


def test_a_check_refusal_comes_before_any_spend():
    X, y = _data()
    solver = NoisyGD(refuse="this problem is not for me")
    acc = BudgetAccountant()
    with pytest.raises(ValueError, match="not for me"):
        DPHeavyTailRegressor(algorithm=solver, accountant=acc).fit(X, y)
    assert solver.calls == ["check"]
    assert acc.events == ()


def test_declared_capabilities_are_checked_for_custom_solvers_too():
    X, y = _data()
    acc = BudgetAccountant()
    for params, match in [(dict(alpha=0.1, l1_ratio=1.0), "L1 penalty"),
                          (dict(loss=lambda z, t: (abs(z - t), np.sign(z - t))), "callable loss")]:
        solver = NoisyGD()
        with pytest.raises(ValueError, match=match):
            DPHeavyTailRegressor(algorithm=solver, accountant=acc, **params).fit(X, y)
        assert "run" not in solver.calls
    assert acc.events == ()


def test_an_unavailable_custom_solver_is_refused_before_any_spend():
    @dataclass(frozen=True)
    class Withdrawn(NoisyGD):
        unavailable = "noisy_gd is withdrawn until its proof is reviewed."

    X, y = _data()
    acc = BudgetAccountant()
    with pytest.raises(ValueError, match="withdrawn"):
        DPHeavyTailRegressor(algorithm=Withdrawn(), accountant=acc).fit(X, y)
    assert acc.events == ()


def test_a_solver_that_draws_less_noise_than_planned_is_recorded_and_its_model_withheld():
    X, y = _data()
    acc = BudgetAccountant()
    est = DPHeavyTailRegressor(epsilon=1.0, algorithm=NoisyGD(spend=0.5), accountant=acc, random_state=0)
    with pytest.raises(RuntimeError, match="Internal privacy error"):
        est.fit(X, y)
    assert not hasattr(est, "coef_")
    assert len(acc.events) == 1 and acc.spent.epsilon > 1.0  # the ledger keeps what was released


def test_a_solver_that_draws_more_noise_than_planned_is_charged_what_it_drew():
    X, y = _data()
    acc = BudgetAccountant()
    model = DPHeavyTailRegressor(epsilon=1.0, algorithm=NoisyGD(spend=2.0), accountant=acc,
                                 random_state=0).fit(X, y)
    # Twice the noise on the solver's share (80% of mu^2, the rest is the standardiser's): well below 1.
    assert model.privacy_spent_.epsilon < 0.75
    assert acc.events == (model.privacy_event_,)


def test_a_solver_instance_survives_clone():
    est = DPHeavyTailRegressor(algorithm=NoisyGD(n_steps=7))
    copy = clone(est)
    assert copy.algorithm == NoisyGD(n_steps=7)
    X, y = _data(n=500)
    assert copy.set_params(accountant=BudgetAccountant()).fit(X, y).n_iter_ == 7


# -- input checks: every refusal comes before anything is spent ---------------------------------
def _regression_data(n=500, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3)) * [1.0, 10.0, 0.1]
    return X, X @ [1.0, 0.1, 10.0] + rng.normal(size=n)


@pytest.mark.parametrize("bad_input", ["string target", "sample_weight", "delta=0", "nan", "object X",
                                       "unknown fit parameter"])
def test_bad_inputs_are_refused_before_anything_is_spent(bad_input):
    X, y = _regression_data()
    acc = BudgetAccountant()
    params, fit_kwargs = {}, {}
    if bad_input == "string target":
        y = np.array(["a", "b"] * 250)
    elif bad_input == "sample_weight":
        fit_kwargs["sample_weight"] = np.ones(len(y))
    elif bad_input == "delta=0":
        params["delta"] = 0.0
    elif bad_input == "nan":
        X = X.copy()
        X[3, 1] = np.nan
    elif bad_input == "object X":
        X = np.array([["1.0", "x", "2"]] * len(y), dtype=object)
    else:
        fit_kwargs["sample_wieght"] = None
    with pytest.raises((ValueError, TypeError)):
        DPHeavyTailRegressor(accountant=acc, **params).fit(X, y, **fit_kwargs)
    assert acc.events == ()


def test_a_numeric_string_target_is_a_number():
    X, y = _regression_data()
    a = DPHeavyTailRegressor(random_state=0, accountant=BudgetAccountant()).fit(X, y)
    b = DPHeavyTailRegressor(random_state=0, accountant=BudgetAccountant()).fit(X, y.astype(str))
    np.testing.assert_allclose(a.coef_, b.coef_, rtol=1e-12)


def test_sample_weight_none_is_accepted_and_weights_are_refused_with_the_reason():
    X, y = _regression_data()
    DPHeavyTailRegressor(random_state=0).fit(X, y, sample_weight=None)
    with pytest.raises(TypeError, match="influence of one row"):
        DPHeavyTailRegressor(random_state=0).fit(X, y, sample_weight=np.ones(len(y)))


def test_a_delta_not_below_one_over_n_warns():
    X, y = _regression_data(n=200)
    with pytest.warns(PrivacyLeakWarning, match="not below 1 / n_samples"):
        DPHeavyTailRegressor(delta=0.01, random_state=0).fit(X, y)


def _both_estimators(**params):
    """Both estimators, each with a ledger of its own."""
    return [DPHeavyTailRegressor(accountant=BudgetAccountant(), **params),
            DPInterpolatingClassifier(classes=[0, 1], accountant=BudgetAccountant(), **params)]


def _target_for(est, y):
    return (y > np.median(y)).astype(int) if isinstance(est, DPInterpolatingClassifier) else y


def test_default_fits_on_100000_rows_do_not_warn_and_report_the_resolved_delta():
    X, y = _regression_data(n=100_000)
    for est in _both_estimators(random_state=0):
        with warnings.catch_warnings():
            warnings.simplefilter("error", PrivacyLeakWarning)
            est.fit(X, _target_for(est, y))
        assert est.privacy_spent_.delta == default_delta(100_000) == 1e-6
        assert est.privacy_spent_.epsilon == pytest.approx(1.0, rel=1e-6)
        assert est.accountant.spent.delta == 1e-6  # charged at the resolved delta


def test_an_explicit_delta_of_1e_5_still_warns_at_200000_rows_before_anything_is_spent():
    X, y = _regression_data(n=200_000)
    for est in _both_estimators(delta=1e-5):
        with warnings.catch_warnings():
            warnings.simplefilter("error", PrivacyLeakWarning)  # stop the fit at the warning
            with pytest.raises(PrivacyLeakWarning, match="not below 1 / n_samples"):
                est.fit(X, _target_for(est, y))
        assert est.accountant.events == ()


def test_default_fits_up_to_10000_rows_are_the_fits_of_delta_1e_5():
    X, y = _regression_data(n=2000)
    for auto, explicit in zip(_both_estimators(random_state=3),
                              _both_estimators(delta=1e-5, random_state=3)):
        auto.fit(X, _target_for(auto, y))
        explicit.fit(X, _target_for(explicit, y))
        np.testing.assert_array_equal(auto.coef_, explicit.coef_)
        assert auto.privacy_spent_ == explicit.privacy_spent_ and auto.privacy_spent_.delta == 1e-5
        assert auto.algorithm_ == explicit.algorithm_


def test_float32_input_gives_float32_coefficients_and_predictions():
    X, y = _regression_data()
    model = DPHeavyTailRegressor(random_state=0).fit(X.astype(np.float32), y.astype(np.float32))
    assert model.coef_.dtype == np.float32 and np.asarray(model.intercept_).dtype == np.float32
    assert model.predict(X.astype(np.float32)).dtype == np.float32
    assert model.predict(X).dtype == np.float64
