"""Property tests of the accounting (hypothesis)."""

import math

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from skdp.accounting import (
    ApproxDPRelease,
    ExponentialMechanismRelease,
    GaussianRelease,
    LaplaceRelease,
    Parallel,
    Repeated,
    Sequential,
    ZCDPRelease,
    calibrate_gaussian,
    calibrate_scale,
    dp_to_gdp,
    dp_to_zcdp,
    gdp_to_dp,
    zcdp_to_dp,
)

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
# Fewer examples for the properties whose single example costs ~0.1-0.5 s.
SLOW_SETTINGS = settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])

positive = st.floats(min_value=0.05, max_value=20.0, allow_nan=False)
deltas = st.floats(min_value=1e-10, max_value=0.1).map(float)

gaussians = st.builds(GaussianRelease, st.floats(0.1, 2.0), st.floats(0.5, 20.0))
laplaces = st.builds(LaplaceRelease, st.floats(0.1, 2.0), st.floats(0.5, 20.0))
zcdps = st.builds(ZCDPRelease, st.floats(0.001, 1.0))
exps = st.builds(ExponentialMechanismRelease, st.floats(0.01, 2.0))
approx = st.builds(ApproxDPRelease, st.floats(0.01, 1.0), st.floats(1e-12, 1e-8))
leaves = st.one_of(gaussians, laplaces, zcdps, exps, approx)
events = st.lists(leaves, min_size=1, max_size=4)


@SETTINGS
@given(events, leaves, deltas)
def test_composition_is_monotone(evs, extra, delta):
    before = Sequential(evs).epsilon(delta)
    after = Sequential(evs + [extra]).epsilon(delta)
    assert after >= before * (1 - 1e-7) - 1e-9


@SETTINGS
@given(events, deltas, deltas)
def test_epsilon_does_not_increase_with_delta(evs, d1, d2):
    lo, hi = sorted([d1, d2])
    ev = Sequential(evs)
    assert ev.epsilon(hi) <= ev.epsilon(lo) * (1 + 1e-7) + 1e-9


@SLOW_SETTINGS
@given(events, st.integers(2, 5), deltas)
def test_repeated_equals_sequential_copies(evs, k, delta):
    ev = Sequential(evs)
    assert Repeated(ev, k).epsilon(delta) == pytest.approx(Sequential([ev] * k).epsilon(delta),
                                                           rel=1e-9, abs=1e-12)


@SETTINGS
@given(st.lists(st.one_of(gaussians, laplaces, zcdps, approx), min_size=1, max_size=4), deltas)
def test_parallel_is_max(evs, delta):
    expected = max(e.epsilon(delta) for e in evs)
    assert Parallel(evs).epsilon(delta) == expected


@SETTINGS
@given(st.lists(gaussians, min_size=1, max_size=3), st.lists(gaussians, min_size=1, max_size=3),
       deltas)
def test_parallel_inside_sequential(left, right, delta):
    # A parallel block inside a sequence costs its worst block.
    block = Parallel([Sequential(left), Sequential(right)])
    # For Gaussian compositions mu orders the blocks (epsilon may tie at 0).
    worst = max([Sequential(left), Sequential(right)],
                key=lambda e: sum(g.mu**2 for g in e.events))
    other = GaussianRelease(1.0, 3.0)
    assert Sequential([block, other]).epsilon(delta) == pytest.approx(
        Sequential([worst, other]).epsilon(delta), rel=1e-9)


@SETTINGS
@given(st.floats(0.01, 10.0), deltas)
def test_gdp_round_trip(mu, delta):
    eps = gdp_to_dp(mu, delta)
    assume(eps > 0)  # at eps = 0 every smaller mu also meets delta: no unique inverse
    assert dp_to_gdp(eps, delta) == pytest.approx(mu, rel=1e-6)


@SETTINGS
@given(st.floats(1e-4, 5.0), deltas)
def test_zcdp_round_trip(rho, delta):
    eps = zcdp_to_dp(rho, delta)
    assume(eps > 0)
    assert dp_to_zcdp(eps, delta) == pytest.approx(rho, rel=1e-6)


@SETTINGS
@given(st.one_of(gaussians, laplaces, zcdps, exps), deltas)
def test_epsilon_and_delta_are_consistent(ev, delta):
    eps = ev.epsilon(delta)
    if math.isfinite(eps) and eps > 0:
        assert ev.delta(eps) <= delta * (1 + 1e-4)


@SETTINGS
@given(positive, deltas, st.integers(1, 100), st.floats(0.1, 10.0))
def test_calibrated_gaussian_spends_the_target_and_no_more(epsilon, delta, count, sensitivity):
    std = calibrate_gaussian(sensitivity, epsilon, delta, count=count)
    spent = Repeated(GaussianRelease(sensitivity, std), count).epsilon(delta)
    assert spent <= epsilon
    assert spent >= epsilon * (1 - 1e-6)


@SLOW_SETTINGS
@given(st.floats(0.2, 5.0), st.floats(1e-8, 1e-4), st.floats(0.01, 0.5))
def test_calibrated_mixture_spends_the_target_and_no_more(epsilon, delta, laplace_share):
    def make(scale):
        return Sequential([Repeated(GaussianRelease(1.0, scale), 5),
                           LaplaceRelease(laplace_share, scale)])

    scale = calibrate_scale(make, epsilon, delta, rtol=1e-10)
    spent = make(scale).epsilon(delta)
    assert spent <= epsilon
    assert spent >= epsilon * (1 - 1e-5)


@SLOW_SETTINGS
@given(sigma=positive, eps=positive, count=st.integers(1, 5), delta=st.floats(1e-9, 0.1))
def test_reused_epsilons_are_the_composition_of_equal_events(sigma, eps, count, delta):
    # Certified epsilons are reused for events with equal fields (a cache keyed by the frozen event):
    # the answer must be the composition itself, for a fresh event equal to a queried one too.
    from skdp.accounting._composition import compose_epsilon

    def make():
        return Sequential([Repeated(GaussianRelease(1.0, sigma), count), ExponentialMechanismRelease(eps)])

    first = make().epsilon(delta)
    again = make()
    assert again.epsilon(delta) == first == compose_epsilon(again._items(), delta)
    assert make().epsilon(delta / 2) >= first
