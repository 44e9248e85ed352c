"""Sparse vector technique with bounded Laplace noise."""

import math

import numpy as np
import pytest

from skdp.mechanisms import SparseVector, sparse_vector_event


def test_calibrated_run_meets_its_budget():
    for eps, delta, c, T in [(1.0, 1e-6, 1, 10), (0.5, 1e-5, 5, 1000), (2.0, 1e-8, 20, 10_000)]:
        svt = SparseVector.calibrated(0.0, sensitivity=0.3, epsilon=eps, delta=delta,
                                      max_above=c, max_queries=T, random_state=0)
        event = svt.privacy_event(delta=delta)
        assert event.epsilon0 <= eps
        assert event.delta0 <= delta
        assert event.epsilon(delta) <= eps


def test_published_parameters_are_certified():
    # Lemma 10 of Asi, Liu and Tian (2024, arXiv:2406.02789): R >= (6 Delta / eps) sqrt(c log(5/delta)) and
    # tau >= R log(10 T / delta) make the run (eps, delta)-DP.
    for eps, delta, c, T in [(0.5, 1e-6, 4, 1000), (0.9, 1e-3, 30, 500), (0.2, 1e-8, 1, 50)]:
        R = 6.0 / eps * math.sqrt(c * math.log(5 / delta))
        tau = R * math.log(10 * T / delta)
        event = sparse_vector_event(1.0, R, tau, c, T, delta=delta)
        assert event.epsilon(delta) <= eps


def test_halts_after_max_above_and_refuses_more_queries():
    svt = SparseVector.calibrated(100.0, sensitivity=1.0, epsilon=1.0, delta=1e-6, max_above=2,
                                  max_queries=5, random_state=0)
    answers = [svt.test(q) for q in [0.0, 1e6, 0.0, 1e6]]
    assert answers == [False, True, False, True]
    assert svt.halted
    with pytest.raises(RuntimeError, match="halted"):
        svt.test(0.0)
    svt2 = SparseVector.calibrated(100.0, sensitivity=1.0, epsilon=1.0, delta=1e-6, max_above=2,
                                   max_queries=1, random_state=0)
    svt2.test(0.0)
    with pytest.raises(RuntimeError, match="sized"):
        svt2.test(0.0)


def test_noise_is_bounded():
    svt = SparseVector(0.0, scale=1.0, bound=0.5, sensitivity=1.0, max_above=10_000,
                       max_queries=10_000, random_state=1)
    # Threshold noise <= 0.5 and query noise <= 1.0: a query of 1.6 is always above,
    # one of -1.6 never.
    assert all(svt.test(1.6) for _ in range(2000))
    assert not any(svt.test(-1.6) for _ in range(2000))


def test_empirical_privacy_on_neighbouring_streams():
    """Distribution of the first 'above' index on two neighbouring query streams.

    Each query differs by the sensitivity between the two streams. The
    frequencies of every outcome must satisfy P(S) <= e^eps P'(S) + delta, up
    to sampling error (3 standard errors).
    """
    eps, delta, n_runs = 1.0, 1e-6, 6000
    q = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 2.5])
    q_prime = q + 1.0  # every query moves by the sensitivity

    template = SparseVector.calibrated(2.0, sensitivity=1.0, epsilon=eps, delta=delta, max_above=1,
                                       max_queries=len(q))

    def first_above(stream, seed):
        svt = SparseVector(2.0, scale=template.scale, bound=template.bound, sensitivity=1.0,
                           max_above=1, max_queries=len(stream), random_state=seed)
        for i, value in enumerate(stream):
            if svt.test(value):
                return i
        return len(stream)

    a = np.bincount([first_above(q, s) for s in range(n_runs)], minlength=len(q) + 1) / n_runs
    b = np.bincount([first_above(q_prime, s + n_runs) for s in range(n_runs)], minlength=len(q) + 1) / n_runs
    se = np.sqrt((a + b) / n_runs)
    assert np.all(a <= math.exp(eps) * b + delta + 3 * se * (1 + math.exp(eps)))
    assert np.all(b <= math.exp(eps) * a + delta + 3 * se * (1 + math.exp(eps)))
    # The streams are genuinely different (the test can fail).
    assert np.abs(a - b).max() > 0.05


def test_a_tiny_noise_bound_is_never_a_pure_dp_claim():
    # The bounded Laplace noise inside the sparse vector has a delta at extreme parameters too.
    assert sparse_vector_event(1.0, 0.001, 1.0, 1, 10, delta=1e-6).delta0 > 0.0
