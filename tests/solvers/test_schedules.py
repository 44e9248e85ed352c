"""Public schedules: phase layouts, disjoint batches, step counts, step sizes and averaging weights."""

import math

import numpy as np
import pytest

from skdp.solvers.schedules import (
    clamp_steps,
    decaying_steps,
    fractional_phase_sizes,
    halving_phase_sizes,
    permuted_blocks,
    sgd_practical_steps,
    split_batches,
    stich_schedule,
    tail_average_weights,
)


@pytest.mark.parametrize("n", [2, 3, 20, 400, 1023, 1024, 100_001])
def test_halving_phase_sizes_use_every_row_once(n):
    sizes = halving_phase_sizes(n)
    I = int(math.floor(math.log2(n)))
    assert len(sizes) == I and sum(sizes) == n
    assert sizes[1:] == [2 ** (I - i) for i in range(2, I + 1)]  # phases after the first halve
    assert sizes[0] >= 2 ** (I - 1)  # the leftover rows go to phase 1


def test_batches_are_disjoint_data_independent_blocks():
    parts = split_batches(103, 10, np.random.default_rng(0))
    assert sorted(len(b) for b in parts) == [10] * 7 + [11] * 3
    assert sorted(np.concatenate(parts).tolist()) == list(range(103))
    again = split_batches(103, 10, np.random.default_rng(0))
    assert all(np.array_equal(a, b) for a, b in zip(parts, again))
    with pytest.raises(ValueError):
        split_batches(5, 6, np.random.default_rng(0))
    with pytest.raises(ValueError):
        split_batches(5, 0, np.random.default_rng(0))


def test_clamp_steps():
    assert clamp_steps(3.2, 100) == 4
    assert clamp_steps(0.0, 100) == 1
    assert clamp_steps(1e9, 100) == 100
    assert clamp_steps(math.inf, 100) == 100 and clamp_steps(math.nan, 100) == 100


def test_practical_sgd_steps_grow_with_the_budget_and_are_capped():
    n, p = 5000, 6
    small, large = sgd_practical_steps(n, p, 0.1), sgd_practical_steps(n, p, 1.0)
    assert small < large
    m = n * 1.0 / p
    assert large == pytest.approx(min(2 * math.log2(m) - 1.5, 4 * math.sqrt(n / p)))
    assert sgd_practical_steps(n, p, math.inf) == pytest.approx(4 * math.sqrt(n / p))  # the noise-free cap
    assert sgd_practical_steps(10, 6, 0.1) == 1.0  # fewer private rows than coefficients


@pytest.mark.parametrize("T", [1, 4, 16, 17, 200])
def test_stich_schedule(T):
    beta, mu = 4.0, 0.5  # kappa = 8: T <= 16 is the constant-step regime
    steps, weights = stich_schedule(T, beta, mu)
    assert steps.shape == weights.shape == (T,)
    assert np.all(steps <= 1.0 / beta + 1e-15) and np.all(steps > 0)
    assert np.all(weights >= 0) and weights.sum() > 0
    if T <= 2 * beta / mu:
        np.testing.assert_allclose(steps, 1.0 / beta)
        np.testing.assert_allclose(weights, (1 - mu / (2 * beta)) ** -(np.arange(T) + 1.0))
    else:
        t0 = math.ceil(T / 2)
        assert np.all(weights[:t0] == 0) and np.all(np.diff(steps[t0:]) < 0)


def test_stich_schedule_needs_0_lt_mu_le_beta():
    for beta, mu in [(1.0, 0.0), (1.0, 2.0), (1.0, -1.0)]:
        with pytest.raises(ValueError, match="0 < mu <= beta"):
            stich_schedule(10, beta, mu)


def test_decaying_steps():
    assert decaying_steps(1.0, 8) == [1.0, 1.0, 2 / 3, 0.5, 0.4, 1 / 3, 2 / 7, 0.25]  # tau = 2
    assert decaying_steps(0.5, 3, tau=10) == [0.5, 0.5, 0.5]
    assert decaying_steps(1.0, 0) == []


@pytest.mark.parametrize("n", [2, 3, 401, 1000, 100_001])
def test_fractional_phase_sizes_use_every_row_once(n):
    halves = fractional_phase_sizes(n, (0.5, 0.5))
    assert sum(halves) == n and abs(halves[0] - halves[1]) <= 1
    thirds = fractional_phase_sizes(n, (1, 1, 1))
    assert sum(thirds) == n and max(thirds) - min(thirds) <= 1
    assert fractional_phase_sizes(n, (0.2, 0.0, 0.8)) == [s for s in fractional_phase_sizes(n, (0.2, 0.8))]
    with pytest.raises(ValueError):
        fractional_phase_sizes(n, (0.0, 0.0))


def test_permuted_blocks_are_disjoint_data_independent_blocks():
    blocks = permuted_blocks(103, [40, 30, 20], np.random.default_rng(0))
    assert [len(b) for b in blocks] == [40, 30, 20]
    order = np.random.default_rng(0).permutation(103)  # the permutation is the generator's first draw
    np.testing.assert_array_equal(np.concatenate(blocks), order[:90])
    with pytest.raises(ValueError):
        permuted_blocks(10, [6, 5], np.random.default_rng(0))


def test_tail_average_weights_are_the_last_half_of_the_iterates():
    assert tail_average_weights(4) == [0.0, 0.0, 0.0, 1.0, 1.0]  # w_3, w_4
    assert tail_average_weights(1) == [0.0, 1.0]
    for T in (2, 7, 100):
        weights = tail_average_weights(T)
        assert len(weights) == T + 1 and sum(weights) == T - T // 2 and weights[-1] == 1.0
