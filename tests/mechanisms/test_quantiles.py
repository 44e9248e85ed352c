"""Private quantiles and scales (exponential mechanism)."""

import math

import numpy as np
import pytest

from skdp.accounting import ExponentialMechanismRelease, Repeated
from skdp.mechanisms import private_quantile, private_scale


def test_median_is_accurate():
    x = np.random.default_rng(0).normal(size=20_000)
    estimates = [private_quantile(x, 0.5, 1.0, (-100, 100), random_state=s)[0] for s in range(20)]
    assert np.median(np.abs(estimates)) < 0.02


def test_log_scale_quantile_of_heavy_tailed_values():
    x = np.random.default_rng(1).pareto(1.5, size=5000) + 1e-3
    true = np.quantile(x, 0.9)
    est, event = private_quantile(x, 0.9, 0.5, (1e-8, 1e8), scale="log", random_state=0)
    assert abs(math.log(est / true)) < 0.2
    assert event == Repeated(ExponentialMechanismRelease(0.5), 1)


def test_columns_and_bounds():
    X = np.random.default_rng(2).normal(loc=[0.0, 50.0, -50.0], size=(3000, 3))
    est, event = private_quantile(X, 0.5, 1.0, (-10, 10), random_state=0)
    assert est.shape == (3,)
    assert abs(est[0]) < 0.1
    # Columns outside the public range are clipped to it; with every value on a
    # bound the only interval of positive length is the whole range, so the
    # estimate is uniform on it (choose bounds that contain the data).
    assert -10.0 <= est[1] <= 10.0 and -10.0 <= est[2] <= 10.0
    assert event.epsilon(0.0) == pytest.approx(3.0)


def test_private_scale_is_scale_equivariant():
    X = np.random.default_rng(3).normal(scale=[1e-3, 1.0, 1e3], size=(5000, 3))
    s, _ = private_scale(X, 1.0, quantile=0.5, random_state=0)
    np.testing.assert_allclose(s / [1e-3, 1.0, 1e3], 0.674, rtol=0.05)


def test_output_frequencies_on_neighbouring_datasets():
    """Every output bin has P(bin) <= e^eps P'(bin) (+ sampling error) on neighbours."""
    eps, n_draws = 1.0, 40_000
    x = np.array([0.1, 0.2, 0.25, 0.4, 0.5, 0.6, 0.8])
    x_prime = x.copy()
    x_prime[3] = 1e9  # one value replaced by an extreme one (clipped to the upper bound)
    bins = np.linspace(0.0, 1.0, 11)

    def histogram(values, seed):
        rng = np.random.default_rng(seed)
        draws = np.array([private_quantile(values, 0.5, eps, (0.0, 1.0), random_state=rng)[0]
                          for _ in range(n_draws)])
        return np.histogram(draws, bins=bins)[0] / n_draws

    p, q = histogram(x, 0), histogram(x_prime, 1)
    se = np.sqrt((p + q) / n_draws)
    assert np.all(p <= math.exp(eps) * q + 4 * se * (1 + math.exp(eps)))
    assert np.all(q <= math.exp(eps) * p + 4 * se * (1 + math.exp(eps)))
    assert np.abs(p - q).max() > 0.02  # the test can fail


@pytest.mark.parametrize("kwargs", [dict(quantile=1.5), dict(epsilon=0.0), dict(bounds=(1.0, 0.0)),
                                    dict(bounds=(0.0, 1.0), scale="log"), dict(scale="cubic")])
def test_invalid_arguments(kwargs):
    args = dict(values=np.arange(10.0), quantile=0.5, epsilon=1.0, bounds=(0.0, 10.0))
    args.update(kwargs)
    with pytest.raises(ValueError):
        private_quantile(**args)


def test_a_non_finite_record_never_makes_the_quantile_non_finite():
    rng_values = np.random.default_rng(0).normal(size=200)
    with_nan = rng_values.copy()
    with_nan[3] = np.nan
    for seed in range(20):
        est, _ = private_quantile(with_nan, 0.5, 1.0, (-5, 5), random_state=seed)
        assert np.isfinite(est)


def test_linear_jitter_keeps_zeros_out_of_a_nonzero_quantile():
    x = np.r_[np.zeros(900), np.full(100, 10.0)]
    est, _ = private_quantile(x, 0.5, 5.0, (-20.0, 20.0), nonzero=True, jitter=0.05, random_state=0)
    assert abs(est - 10.0) < 0.1


def _interval_probabilities(x, quantile, eps, bounds, density=None):
    """The exponential mechanism's probability of every interval between the sorted values."""
    edges = np.concatenate([[bounds[0]], np.sort(x), [bounds[1]]])
    width = np.diff(edges) if density is None else np.array([density(a, b) for a, b in zip(edges, edges[1:])])
    ranks = np.arange(len(x) + 1)
    weight = width * np.exp(-0.5 * eps * np.abs(ranks - quantile * len(x)))
    return edges, weight / weight.sum()


@pytest.mark.parametrize("quantile", [0.5, 0.8])
def test_draws_follow_the_exponential_mechanism(quantile):
    """Columns are independent draws: 20000 identical columns give the interval frequencies."""
    x = np.array([0.1, 0.2, 0.25, 0.4, 0.5, 0.6, 0.8])
    eps, draws = 2.0, 20_000
    est, _ = private_quantile(np.repeat(x[:, None], draws, axis=1), quantile, eps, (0.0, 1.0), random_state=0)
    edges, expected = _interval_probabilities(x, quantile, eps, (0.0, 1.0))
    observed = np.histogram(est, bins=edges)[0] / draws
    assert np.all(np.abs(observed - expected) <= 4 * np.sqrt(expected / draws) + 1e-3)


def test_draws_with_a_prior_follow_the_exponential_mechanism():
    x = np.array([0.3, 0.9, 1.2, 1.5, 3.0])
    prior = [(0.01, 0.5, 0.1), (0.5, 2.0, 0.8), (2.0, 100.0, 0.1)]
    logs = [(math.log(a), math.log(b), w) for a, b, w in prior]

    def density(a, b):  # base mass of [a, b] in log units
        return sum(w * max(0.0, min(b, hi) - max(a, lo)) / (hi - lo) for lo, hi, w in logs)

    eps, draws = 1.0, 20_000
    est, _ = private_quantile(np.repeat(x[:, None], draws, axis=1), 0.5, eps, (0.01, 100.0), scale="log",
                              prior=prior, random_state=1)
    edges, expected = _interval_probabilities(np.log(x), 0.5, eps, (math.log(0.01), math.log(100.0)), density)
    observed = np.histogram(np.log(est), bins=edges)[0] / draws
    assert np.all(np.abs(observed - expected) <= 4 * np.sqrt(expected / draws) + 1e-3)


def test_ties_far_from_every_interval_of_positive_length_at_a_large_epsilon():
    """Every factor exp(epsilon * utility / 2) with positive length underflows; the draw
    must still pick among those intervals by their weights, not fall on the first one."""
    x = np.concatenate([np.zeros(1000), [1.0]])
    est, _ = private_quantile(np.repeat(x[:, None], 400, axis=1), 500 / 1001, 10.0, (-1.0, 2.0),
                              random_state=0)
    below, middle = np.mean(est < 0), np.mean((est > 0) & (est < 1))
    # [-1, 0] (rank 0) and [0, 1] (rank 1000) are both 500 ranks from the target, [1, 2] is 501.
    assert 0.4 < below < 0.6 and 0.4 < middle < 0.6
    assert np.all((est >= -1.0) & (est <= 2.0))


def test_results_do_not_depend_on_the_worker_threads():
    from skdp.mechanisms.quantiles import quantile_columns

    X = np.random.default_rng(4).lognormal(size=(40_000, 12))
    one = quantile_columns(X, 0.5, 0.01, (1e-6, 1e6), scale="log", random_state=3, threads=1)[0]
    two = quantile_columns(X, 0.5, 0.01, (1e-6, 1e6), scale="log", random_state=3, threads=2)[0]
    np.testing.assert_array_equal(one, two)
    assert np.all(np.abs(np.log(one)) < 0.05)  # the median of a standard log-normal is 1


def test_bounds_whose_width_overflows_are_refused():
    """(-1e308, 1e308) has an infinite width: every interval's share would be 0 and the draw
    would fall on the interval below the data minimum, releasing it."""
    with pytest.raises(ValueError, match="finite width"):
        private_quantile(np.linspace(-1, 1, 101), 0.5, 1.0, (-1e308, 1e308))
    est, _ = private_quantile(np.linspace(-1, 1, 101), 0.5, 1.0, (-1e300, 1e300), random_state=0)
    assert np.isfinite(est)


def test_no_columns_give_an_empty_estimate_with_or_without_a_prior():
    from skdp.mechanisms import SCALE_PRIOR

    for kwargs in ({}, {"scale": "log", "nonzero": True, "prior": SCALE_PRIOR}):
        est, event = private_quantile(np.zeros((5, 0)), 0.5, 1.0, (1e-15, 1e15), random_state=0, **kwargs)
        assert est.shape == (0,) and event.epsilon(0.0) == 0.0
