"""The budget plan of a fit: scaling tiers, starved variants and the calibration, from public inputs only."""

import math
import warnings

import numpy as np
import pytest

from skdp import BudgetAccountant, DPHeavyTailRegressor, DPInterpolatingClassifier, LowBudgetWarning
from skdp.accounting import dp_to_zcdp
from skdp.linear_model import PrivateStandardiser
from skdp.linear_model._standardise import WHITENED_MODES
from skdp.linear_model._budget import (
    MAX_SCALING_SHARE,
    MIN_QUANTILE_EPS_TIMES_N,
    choose_scaling,
    plan_budget,
    quantile_epsilon,
)
from skdp.losses import AbsoluteLoss, SquaredLoss
from skdp.solvers import (
    AveragedSGD,
    ClippedGD,
    KnownLipschitz,
    Localized,
    LocalizedSubgradient,
    MomentBounds,
    OnePassGLM,
    ProblemSpec,
)

D = 4


def _plan(solver, n, epsilon, loss=SquaredLoss(), delta=1e-5, **kwargs):
    def make_spec(mode):
        return ProblemSpec(n_samples=n, n_coef=D + 1, loss=loss, schedule=kwargs.get("schedule", "practical"),
                           public_smoothness=(D + 3.0) ** 2 + 1 if mode in ("robust", "none") else None,
                           radius=5.0 if mode in ("robust", "none") else None)

    return plan_budget(epsilon=epsilon, delta=delta, n_samples=n, n_features=D, fit_intercept=True,
                       solver=solver, make_spec=make_spec, **kwargs)


# -- the per-quantile epsilon and the scaling tiers ---------------------------------------------------
def test_each_quantile_gets_eps_n_80_within_the_cap():
    rho = dp_to_zcdp(1.0, 1e-5)
    for n, k in [(2000, 17), (1000, 8), (20000, 17)]:
        eps_q = quantile_epsilon(n, k, rho)
        share = k * eps_q**2 / 8 / rho  # each exponential-mechanism quantile costs eps^2 / 8 in zCDP
        assert 0.02 - 1e-12 <= share <= MAX_SCALING_SHARE + 1e-12
        if 0.02 < share < MAX_SCALING_SHARE:
            assert eps_q * n == pytest.approx(MIN_QUANTILE_EPS_TIMES_N)  # exactly what they need
    assert quantile_epsilon(2000, 17, rho, scaling_share=0.1) == pytest.approx(math.sqrt(8 * 0.1 * rho / 17))
    assert quantile_epsilon(2000, 0, rho) == math.inf
    assert quantile_epsilon(2000, 5, math.inf) == math.inf


def test_auto_scaling_takes_the_first_tier_that_funds_its_quantiles():
    rho = dp_to_zcdp(1.0, 1e-5)
    tiers = {n: choose_scaling("auto", n, D, True, 2, rho) for n in (300, 1000, 2000, 10000)}
    assert [tiers[n][0] for n in (300, 1000, 2000, 10000)] == ["target", "pooled", "robust", "robust"]
    for n, (mode, eps_q) in tiers.items():
        if mode != "target":  # the last tier is used even when starved
            assert eps_q * n >= MIN_QUANTILE_EPS_TIMES_N * (1 - 1e-12)
        earlier = ("robust", "pooled", "target")[:("robust", "pooled", "target").index(mode)]
        for tier in earlier:  # every tier before it could not fund its quantiles within the share
            k = PrivateStandardiser.n_quantiles(tier, D, True) + 2
            assert k * (MIN_QUANTILE_EPS_TIMES_N / n) ** 2 / 8 > MAX_SCALING_SHARE * rho
    # Without an intercept nothing is centred: fewer quantiles, so robust is funded earlier.
    assert choose_scaling("auto", 1000, D, False, 2, rho)[0] == "robust"
    assert choose_scaling("auto", 1000, D, True, 2, math.inf) == ("robust", math.inf)


def test_explicit_modes_and_restrictions():
    rho = dp_to_zcdp(1.0, 1e-5)
    assert choose_scaling("pooled", 1000, D, True, 2, rho)[0] == "pooled"
    assert choose_scaling("none", 1000, D, True, 0, rho) == ("none", math.inf)  # nothing to fund
    assert math.isfinite(choose_scaling("none", 1000, D, True, 1, rho)[1])  # the solver's own quantile
    # Theory schedules that need a public smoothness bound restrict the modes to public row bounds.
    assert choose_scaling("auto", 300, D, True, 0, rho, modes=("robust", "none"))[0] == "robust"
    with pytest.raises(ValueError, match="public smoothness bound"):
        choose_scaling("pooled", 1000, D, True, 0, rho, modes=("robust", "none"))


# -- starved budgets degrade in public --------------------------------------------------------------
def test_starved_budgets_release_fewer_quantiles_then_use_a_public_clip():
    # Funded: the whitened modes (here with two statistics per column), whose quantiles get
    # epsilon * n >= 100, and clipped_gd's configuration for whitened rows.
    funded = _plan(ClippedGD(), 3000, 0.5)
    assert funded.standardiser.mode in WHITENED_MODES and funded.solver == ClippedGD().for_whitened_rows()
    assert funded.budget.quantile_epsilon * 3000 >= 100.0
    # The column-wise modes take over below that.
    # Fewer thresholds (one clip quantile instead of two) and a larger share for them.
    fewer = _plan(ClippedGD(), 3000, 0.2)
    assert fewer.standardiser.mode == "pooled"
    assert fewer.solver == ClippedGD(adaptive_clip=False)
    assert fewer.budget.quantile_epsilon * 3000 >= 80.0 * (1 - 1e-12)
    # Still starved: two scaling quantiles and a public clip of 0.5 sqrt(d) in standardised units.
    minimal = _plan(ClippedGD(), 3000, 0.05)
    assert minimal.standardiser.mode == "minimal"
    assert minimal.solver == ClippedGD(adaptive_clip=False, clip=0.5 * math.sqrt(D))
    assert minimal.solver.n_quantiles(ProblemSpec(3000, D + 1, SquaredLoss())) == 0


def test_a_users_solver_instance_is_run_as_given_at_every_budget():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LowBudgetWarning)
        for epsilon in (0.5, 0.2, 0.05):
            plan = _plan(ClippedGD(), 3000, epsilon, adapt_solver=False)
            assert plan.solver == ClippedGD()


def test_a_public_clip_replaces_only_a_quantile_chosen_gradient_clip():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LowBudgetWarning)
        # known_lipschitz's threshold truncates rows: it has no public-clip variant.
        kl = _plan(KnownLipschitz(), 3000, 0.05)
        assert kl.standardiser.mode == "minimal" and kl.solver == KnownLipschitz()
        # A bounded derivative keeps its public bound: no quantile to replace.
        absolute = _plan(ClippedGD(), 3000, 0.05, loss=AbsoluteLoss())
        assert absolute.solver.clip is None
        # A user's clip is kept as given.
        user = _plan(Localized(clip=3.0), 300, 0.05)
        assert user.solver == Localized(clip=3.0)
        # Theory schedules never switch to the minimal mode (their row bound must stay public).
        theory = _plan(OnePassGLM(schedule="theory", moments=MomentBounds(bound=3.0)), 300, 0.05,
                       schedule="theory")
        assert theory.standardiser.mode == "robust"


def test_the_low_budget_warning_depends_on_public_inputs_only():
    with pytest.warns(LowBudgetWarning, match="epsilon \\* n_samples = 60\\).* epsilon \\* n = 17 each"):
        starved = _plan(ClippedGD(), 3000, 0.02)
    assert starved.standardiser.mode == "minimal"
    with warnings.catch_warnings():
        warnings.simplefilter("error", LowBudgetWarning)
        _plan(ClippedGD(), 3000, 0.06)  # epsilon * n = 46 for each of its three quantiles: no warning
    # Two datasets of the same shape, nothing alike: the same plan (mode, public clip, budget).
    rng = np.random.default_rng(0)
    X1, y1 = rng.normal(size=(3000, D)), rng.normal(size=3000)
    X2, y2 = 1e6 * rng.standard_t(1, size=(3000, D)), -1e-6 * rng.pareto(1, size=3000)
    fits = []
    for X, y in ((X1, y1), (X2, y2)):
        est = DPHeavyTailRegressor(epsilon=0.05, accountant=BudgetAccountant(), random_state=0)
        fits.append(est.fit(X, y))
    assert [f.scaling_["mode"] for f in fits] == ["minimal", "minimal"]
    assert fits[0].schedule_["clip_thresholds"] == fits[1].schedule_["clip_thresholds"] == [1.0]
    assert fits[0].scaling_["quantile_epsilon"] == fits[1].scaling_["quantile_epsilon"]
    spent = [f.privacy_event_.epsilon(1e-5) for f in fits]
    assert spent[0] == pytest.approx(spent[1], rel=1e-12)


# -- the calibration spends exactly the target -------------------------------------------------
SOLVERS = [ClippedGD(), ClippedGD(huber_auto=True), Localized(), KnownLipschitz(), OnePassGLM(),
           AveragedSGD(), LocalizedSubgradient(), LocalizedSubgradient(max_grad_evals=10**5)]


@pytest.mark.parametrize("solver", SOLVERS, ids=repr)
@pytest.mark.parametrize("n,epsilon,delta", [(3000, 1.0, 1e-5), (3000, 0.05, 1e-6), (300, 3.0, 1e-4)])
def test_calibration_spends_exactly_the_target(solver, n, epsilon, delta):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LowBudgetWarning)
        plan = _plan(solver, n, epsilon, delta=delta)
    spent = plan.event.epsilon(delta)
    assert spent <= epsilon
    assert spent == pytest.approx(epsilon, rel=1e-6)
    assert math.isfinite(plan.budget.mu) and plan.budget.mu > 0
    # The planned event is the standardiser's plan followed by the solver's plan at this budget.
    assert plan.event.events[0] == plan.standardiser.planned_event(D)
    assert plan.event.events[1] == plan.solver.plan(plan.spec, plan.budget)


def test_infinite_epsilon_plans_no_noise():
    plan = _plan(ClippedGD(), 300, math.inf)
    assert plan.budget.mu == math.inf and plan.budget.quantile_epsilon == math.inf
    assert plan.standardiser.mode == "columns" and plan.standardiser.bound_multiplier == math.inf


@pytest.mark.filterwarnings("ignore::skdp.LowBudgetWarning")  # 15 scaling quantiles at n = 500
def test_a_broken_privacy_condition_is_refused_at_planning():
    with pytest.raises(ValueError, match="privacy condition"):
        _plan(OnePassGLM(schedule="theory", moments=MomentBounds(bound=1e-6, second_bound=1e-6)), 500, 1.0,
              schedule="theory")


@pytest.mark.parametrize("make", [
    lambda: DPHeavyTailRegressor(epsilon=1e-4),
    lambda: DPInterpolatingClassifier(epsilon=1e-4, classes=[0, 1]),
])
def test_an_epsilon_with_no_zero_concentrated_budget_is_refused_before_spend(make):
    # epsilon far below log(1/delta) / 4000: the conversion certifies rho = 0 (it divided by zero before).
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 3))
    y = (X[:, 0] > 0).astype(int)
    acc = BudgetAccountant()
    with pytest.raises(ValueError, match="no zero-concentrated budget.*Nothing was spent"):
        make().set_params(accountant=acc).fit(X, y)
    assert len(acc.events) == 0
