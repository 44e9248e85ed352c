"""The solver contract: registry, declared capabilities, immutable configurations, refusals first."""

import dataclasses
import math

import pytest

from skdp.accounting import ExponentialMechanismRelease
from skdp.losses import AbsoluteLoss, CallableLoss, HuberLoss, QuantileLoss, SquaredLoss
from skdp.solvers import (
    SufficientStatistics,
    SVTSGD,
    Accelerated,
    AveragedSGD,
    Capabilities,
    ClippedGD,
    KnownLipschitz,
    Localized,
    LocalizedSubgradient,
    MomentBounds,
    OnePassGLM,
    ProblemSpec,
    ProximalSGD,
    Solver,
    SolverBudget,
    SolverOptions,
    get_solver,
    register_solver,
    solver_names,
)
from skdp.solvers import _contract

HEAVY_TAIL = {"accelerated": Accelerated, "averaged_sgd": AveragedSGD, "clipped_gd": ClippedGD,
              "known_lipschitz": KnownLipschitz, "localized": Localized,
              "localized_subgradient": LocalizedSubgradient, "one_pass_glm": OnePassGLM,
              "proximal_sgd": ProximalSGD, "svt_sgd": SVTSGD,
              "sufficient_statistics": SufficientStatistics}
# The gradient solvers (the sufficient-statistics solver has no gradient clip; its own tests are in
# tests/solvers/heavy_tail/test_sufficient_statistics.py).
USABLE = sorted(name for name in HEAVY_TAIL if name not in ("svt_sgd", "sufficient_statistics"))


def _spec(**changes):
    fields = dict(n_samples=2000, n_coef=5, loss=SquaredLoss(), ridge=True)
    fields.update(changes)
    return ProblemSpec(**fields)


def _callable(z, y):
    return abs(z - y), (z > y) * 2.0 - 1.0


def _exponential_leaves(event):
    if isinstance(event, ExponentialMechanismRelease):
        return 1
    count = getattr(event, "count", 1)
    inner = getattr(event, "event", None)
    if inner is not None:
        return count * _exponential_leaves(inner)
    return sum(_exponential_leaves(e) for e in getattr(event, "events", ()))


# -- registry ------------------------------------------------------------------------------------
def test_every_heavy_tail_solver_is_registered_under_its_name():
    assert sorted(solver_names("heavy_tail")) == sorted(HEAVY_TAIL)
    assert set(solver_names("heavy_tail")) <= set(solver_names())
    for name, cls in HEAVY_TAIL.items():
        assert get_solver(name) is cls and cls.name == name and cls.family == "heavy_tail"
    assert solver_names("no_such_family") == ()


def test_an_unknown_name_lists_the_choices():
    with pytest.raises(ValueError, match="Unknown algorithm 'newton'.*clipped_gd"):
        get_solver("newton")


def test_register_solver(monkeypatch):
    monkeypatch.setattr(_contract, "_REGISTRY", dict(_contract._REGISTRY))  # leave the real registry alone

    @dataclasses.dataclass(frozen=True)
    class Custom(Solver):
        name = "custom_for_tests"
        family = "tests_only"

    assert register_solver(Custom) is Custom
    assert get_solver("custom_for_tests") is Custom
    assert solver_names("tests_only") == ("custom_for_tests",)

    @dataclasses.dataclass(frozen=True)
    class Replacement(Custom):
        pass

    register_solver(Replacement)  # a later registration replaces the earlier one
    assert get_solver("custom_for_tests") is Replacement
    for bad in (object, Solver, Custom()):
        with pytest.raises(TypeError, match="Solver subclass with a name"):
            register_solver(bad)


# -- declared capabilities, checked before any spend -----------------------------------------------
@pytest.mark.parametrize("name", USABLE)
def test_check_enforces_the_declared_capabilities(name):
    solver = get_solver(name)()
    caps = solver.capabilities
    solver.check(_spec())  # every usable solver takes the squared loss with a ridge
    if caps.l1:
        solver.check(_spec(l1=True))
    else:
        with pytest.raises(ValueError, match="does not support an L1 penalty.*proximal_sgd"):
            solver.check(_spec(l1=True))
    if caps.callable_losses:
        solver.check(_spec(loss=CallableLoss(_callable)))
    else:
        with pytest.raises(ValueError, match="callable loss"):
            solver.check(_spec(loss=CallableLoss(_callable)))
    for loss in (AbsoluteLoss(), QuantileLoss(0.7)):
        if caps.smooth_only:
            with pytest.raises(ValueError, match="smooth loss.*localized_subgradient"):
                solver.check(_spec(loss=loss))
        else:
            solver.check(_spec(loss=loss))


def test_problem_spec_properties():
    assert _spec().smooth and _spec(loss=HuberLoss(1.0)).smooth
    assert not _spec(loss=AbsoluteLoss()).smooth and not _spec(loss=CallableLoss(_callable)).smooth
    assert _spec(loss=CallableLoss(_callable)).callable_loss and not _spec().callable_loss


@pytest.mark.parametrize("spec", [_spec(), _spec(loss=AbsoluteLoss(), ridge=False), _spec(l1=True),
                                  _spec(loss=CallableLoss(_callable)), _spec(schedule="theory")],
                         ids=["squared", "absolute", "l1", "callable", "theory"])
def test_svt_sgd_refuses_every_problem(spec):
    assert SVTSGD.unavailable and "privacy proof does not hold" in SVTSGD.unavailable
    with pytest.raises(ValueError, match="svt_sgd' is disabled: its privacy proof does not hold"):
        SVTSGD().check(spec)


def test_the_base_class_plans_and_runs_nothing():
    solver = Solver()
    assert solver.n_quantiles(_spec()) == 0 and not solver.needs_public_smoothness()
    assert solver.with_fewer_quantiles() is solver
    solver.check_budget(_spec(), SolverBudget(1.0))  # no condition by default
    assert solver.poor_fit_reason(_spec(), SolverBudget(1e-6)) is None  # and no prediction
    with pytest.raises(NotImplementedError):
        solver.plan(_spec(), SolverBudget(1.0))
    with pytest.raises(NotImplementedError):
        solver.run(_spec(), None, SolverBudget(1.0), None)
    assert SolverBudget(1.0).quantile_epsilon == math.inf


# -- configurations are immutable; variants are new objects -----------------------------------------
@pytest.mark.parametrize("name", USABLE)
def test_configurations_are_frozen_and_replace_returns_a_copy(name):
    solver = get_solver(name)()
    field = dataclasses.fields(solver)[0].name
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(solver, field, None)
    changed = solver.replace(clip=1.5)
    assert changed is not solver and changed.clip == 1.5 and solver.clip is None
    assert type(changed) is type(solver)


@pytest.mark.parametrize("name", USABLE)
def test_a_public_clip_removes_the_clip_quantile(name):
    solver = get_solver(name)()
    spec = _spec()
    if not solver.capabilities.public_clip:
        with pytest.raises(ValueError, match="does not take a public clip"):
            solver.with_public_clip(1.0)
        return
    public = solver.with_public_clip(0.8)
    assert public.clip == 0.8 and solver.clip is None
    assert solver.n_quantiles(spec) > 0 and public.n_quantiles(spec) == 0
    if name == "clipped_gd":
        assert public.adaptive_clip is False  # one public threshold for both stages


@pytest.mark.parametrize("name", USABLE)
@pytest.mark.parametrize("loss", [SquaredLoss(), HuberLoss(1.0), AbsoluteLoss()], ids=repr)
def test_n_quantiles_counts_the_quantiles_of_the_plan(name, loss):
    solver = get_solver(name)()
    spec = _spec(loss=loss)
    if solver.capabilities.smooth_only and not spec.smooth:
        return
    planned = solver.plan(spec, SolverBudget(0.7, 0.1))
    assert _exponential_leaves(planned) == solver.n_quantiles(spec)
    fewer = solver.with_fewer_quantiles()
    assert fewer.n_quantiles(spec) <= solver.n_quantiles(spec)


def test_clipped_gd_starved_variant_releases_one_clip_threshold():
    solver = ClippedGD()
    fewer = solver.with_fewer_quantiles()
    assert solver.n_quantiles(_spec()) == 2 and fewer.n_quantiles(_spec()) == 1
    assert fewer.with_fewer_quantiles() is fewer
    # With huber_auto the Huber threshold is re-estimated after the warm-up: one stage has none.
    huber = ClippedGD(huber_auto=True)
    assert huber.n_quantiles(_spec(loss=HuberLoss(1.345))) == 3
    assert huber.with_fewer_quantiles().n_quantiles(_spec(loss=HuberLoss(1.345))) == 1
    # A bounded derivative is clipped at its public bound: no clip quantile.
    assert solver.n_quantiles(_spec(loss=AbsoluteLoss())) == 0


def test_from_options_maps_the_estimator_options():
    options = SolverOptions(schedule="theory", max_iter=7, moment_order=6.0, moment_bound=2.0,
                            second_moment_bound=1.5, huber_auto=True)
    moments = MomentBounds(6.0, 2.0, 1.5)
    assert ClippedGD.from_options(options) == ClippedGD(n_steps=7, huber_auto=True)
    assert ClippedGD.from_options(SolverOptions()).n_steps is None  # the schedule's default: 100 steps
    assert ClippedGD.from_options(SolverOptions())._total_steps(21) == 100
    assert Localized.from_options(options) == Localized(schedule="theory", max_steps=7, moments=moments)
    assert KnownLipschitz.from_options(options) == KnownLipschitz(schedule="theory", max_steps=7,
                                                                  moments=moments)
    assert OnePassGLM.from_options(options) == OnePassGLM(schedule="theory", moments=moments)
    assert LocalizedSubgradient.from_options(options) == LocalizedSubgradient(schedule="theory", max_steps=7,
                                                                              moments=moments)
    for cls in (Accelerated, AveragedSGD, ProximalSGD):
        assert cls.from_options(options) == cls(schedule="theory", n_steps=7, moments=moments)
    assert SVTSGD.from_options(options) == SVTSGD()


def test_only_one_pass_glm_theory_needs_a_public_smoothness_bound():
    assert OnePassGLM(schedule="theory").needs_public_smoothness()
    assert not OnePassGLM().needs_public_smoothness()
    for name in USABLE:
        if name != "one_pass_glm":
            assert not get_solver(name)().needs_public_smoothness()


def test_capabilities_default_to_nothing():
    assert Capabilities() == Capabilities(l1=False, callable_losses=False, smooth_only=False,
                                          approximate_dp=False, public_clip=False)
