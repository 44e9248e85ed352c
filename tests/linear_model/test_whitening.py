"""The whitening's post-processing of the released second moments (and of released column means)."""

import numpy as np
import pytest

from skdp.linear_model._whitening import whitening_from_second_moment


def _gram(Z):
    A = np.hstack([Z, np.ones((Z.shape[0], 1))])
    return A.T @ A / Z.shape[0]


def test_released_means_are_combined_with_the_grams_by_inverse_variance():
    rng = np.random.default_rng(0)
    Z = np.eye(4)[rng.integers(0, 4, 5000)]
    gram = _gram(Z)
    truth = Z.mean(axis=0)
    sigma = 0.02
    noisy = gram.copy()
    noisy[:4, 4] = noisy[4, :4] = truth + 0.01  # the Gram's means, off by 0.01 (noise sd sigma / sqrt(2))
    alone = whitening_from_second_moment(noisy, sigma, 4)
    # Released means with the same noise variance as the Gram's get weight 1/2; exact ones weight 1.
    other = truth - 0.01
    half = whitening_from_second_moment(noisy, sigma, 4, mean=other, mean_std=sigma / np.sqrt(2.0))
    exact = whitening_from_second_moment(noisy, sigma, 4, mean=truth, mean_std=0.0)
    np.testing.assert_allclose(exact.mean, truth, rtol=1e-12)
    # With noise, positive-part James-Stein shrinks by 1 - (d - 2) s2 / |m|^2, s2 the combined variance.
    combined = 0.5 * (truth + 0.01) + 0.5 * other
    s2 = 0.5 * sigma**2 / 2.0
    np.testing.assert_allclose(half.mean, combined * (1.0 - 2.0 * s2 / float(combined @ combined)), rtol=1e-12)
    m = truth + 0.01
    np.testing.assert_allclose(alone.mean, m * (1.0 - 2.0 * 0.5 * sigma**2 / float(m @ m)), rtol=1e-12)


@pytest.mark.parametrize("sigma", [0.0, 0.05])
def test_without_released_means_nothing_changes(sigma):
    rng = np.random.default_rng(1)
    gram = _gram(rng.normal(size=(2000, 3)) + [1.0, 0.0, -2.0])
    a = whitening_from_second_moment(gram, sigma, 3)
    b = whitening_from_second_moment(gram, sigma, 3, mean=None, mean_std=0.3)
    np.testing.assert_array_equal(a.mean, b.mean)
    np.testing.assert_array_equal(a.matrix, b.matrix)
