"""Gaussian, Laplace and bounded Laplace mechanisms."""

import math

import numpy as np
import pytest
from scipy import stats

from skdp.accounting import ApproxDPRelease, GaussianRelease, LaplaceRelease
from skdp.mechanisms import (
    bounded_laplace_event,
    bounded_laplace_mechanism,
    bounded_laplace_noise,
    check_generator,
    gaussian_mechanism,
    laplace_mechanism,
)


def test_gaussian_noise_has_the_stated_scale():
    value = np.zeros(200_000)
    noisy, event = gaussian_mechanism(value, sensitivity=0.5, noise_std=2.0, random_state=1)
    assert event == GaussianRelease(0.5, 2.0)
    # Sample std of 2e5 draws: relative standard error ~ 1/sqrt(4e5) = 0.0016.
    assert np.std(noisy) == pytest.approx(2.0, rel=0.01)
    assert abs(np.mean(noisy)) < 0.02


def test_laplace_noise_has_the_stated_scale():
    noisy, event = laplace_mechanism(np.zeros(200_000), sensitivity=1.0, scale=3.0, random_state=2)
    assert event == LaplaceRelease(1.0, 3.0)
    assert np.mean(np.abs(noisy)) == pytest.approx(3.0, rel=0.01)


def test_scalars_stay_scalars_and_inputs_are_not_mutated():
    x = np.array([1.0, 2.0])
    noisy, _ = gaussian_mechanism(x, 1.0, 1.0, random_state=0)
    assert x.tolist() == [1.0, 2.0]
    scalar, _ = laplace_mechanism(5.0, 1.0, 1.0, random_state=0)
    assert isinstance(scalar, float)


def test_seeds_reproduce_and_none_does_not():
    a, _ = gaussian_mechanism(np.zeros(5), 1.0, 1.0, random_state=7)
    b, _ = gaussian_mechanism(np.zeros(5), 1.0, 1.0, random_state=7)
    c, _ = gaussian_mechanism(np.zeros(5), 1.0, 1.0, random_state=None)
    d, _ = gaussian_mechanism(np.zeros(5), 1.0, 1.0, random_state=None)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(c, d)


def test_check_generator_accepts_the_sklearn_forms():
    assert isinstance(check_generator(None), np.random.Generator)
    g = np.random.default_rng(0)
    assert check_generator(g) is g
    assert isinstance(check_generator(np.random.RandomState(0)), np.random.Generator)
    with pytest.raises(ValueError):
        check_generator("seed")


def test_coupled_neighbouring_releases_differ_by_the_value_difference():
    # With shared randomness the noise cancels: the releases differ exactly by the
    # difference of the exact values, which must respect the claimed sensitivity.
    rng = np.random.default_rng(0)
    X = rng.normal(size=(100, 3))
    X_prime = X.copy()
    X_prime[17] = [1e6, -1e6, 1e6]  # an extreme outlier replaces one row

    def clipped_mean(A, C=1.0):
        norms = np.linalg.norm(A, axis=1)
        return (A * np.minimum(1, C / norms)[:, None]).mean(axis=0)

    sens = 2.0 / 100
    a, _ = gaussian_mechanism(clipped_mean(X), sens, 0.1, random_state=3)
    b, _ = gaussian_mechanism(clipped_mean(X_prime), sens, 0.1, random_state=3)
    assert np.linalg.norm(a - b) <= sens + 1e-12


def test_bounded_laplace_is_a_conditioned_laplace():
    scale, bound = 2.0, 3.0
    x = bounded_laplace_noise(scale, bound, size=100_000, random_state=4)
    assert np.abs(x).max() <= bound
    # |x| follows an exponential truncated at the bound.
    truncated = stats.truncexpon(b=bound / scale, scale=scale)
    assert stats.kstest(np.abs(x), truncated.cdf).pvalue > 1e-3
    assert abs(np.mean(x > 0) - 0.5) < 0.01


def test_bounded_laplace_event_recovers_the_published_guarantee():
    # Lemma 9 of Asi, Liu and Tian (2024, arXiv:2406.02789): BLap(Delta/eps, tau) with
    # tau >= (Delta/eps) log(4/delta) is (eps, delta)-DP for eps, delta in (0, 1).
    for eps, delta in [(0.5, 1e-6), (0.9, 1e-3), (0.1, 0.5)]:
        scale = 1.0 / eps
        event = bounded_laplace_event(1.0, scale, scale * math.log(4 / delta))
        assert event.epsilon0 == pytest.approx(eps)
        assert event.delta0 <= delta


def test_bounded_laplace_mechanism_event_counts_coordinates():
    noisy, event = bounded_laplace_mechanism(np.zeros(4), 1.0, scale=1.0, bound=20.0, random_state=0)
    single = bounded_laplace_event(1.0, 1.0, 20.0)
    assert isinstance(event, ApproxDPRelease)
    assert event.delta0 == pytest.approx(4 * single.delta0)
    with pytest.raises(ValueError):
        bounded_laplace_noise(0.0, 1.0)


def test_bounded_laplace_delta_with_extreme_parameters():
    event = bounded_laplace_event(710.0, 1.0, 720.0)
    # Outside the other distribution's support the privacy loss is infinite; the
    # mass there alone is at least about 2.3e-5.
    assert event.delta0 >= 2.3e-5
    assert bounded_laplace_event(1.0, 1.0, 800.0).delta0 > 0.0  # never a pure-DP claim
