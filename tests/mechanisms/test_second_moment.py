"""The private second-moment matrix: its sensitivity (attained), non-finite rows, unbounded releases."""

import math

import numpy as np
import pytest

from skdp.mechanisms import NON_PRIVATE_RELEASE, private_second_moment, second_moment_sensitivity
from privacy_harness import record_releases


def _released(rows, bound):
    with record_releases() as log:
        private_second_moment(rows, bound, 1.0, random_state=0)
    return log[0].value, log[0].event


def test_the_sensitivity_is_attained_by_orthogonal_rows_at_the_bound():
    rng = np.random.default_rng(0)
    n, B = 50, 3.0
    A = rng.normal(size=(n, 4))
    A2 = A.copy()
    A[0], A2[0] = [B, 0, 0, 0], [0, 100.0, 0, 0]  # the second is clipped to norm B
    a, event = _released(A, B)
    b, _ = _released(A2, B)
    assert event.sensitivity == second_moment_sensitivity(B, n) == pytest.approx(math.sqrt(2) * B**2 / n)
    assert np.linalg.norm(a - b) == pytest.approx(event.sensitivity, rel=1e-12)


@pytest.mark.parametrize("seed", range(4))
def test_random_neighbours_stay_within_the_sensitivity(seed):
    rng = np.random.default_rng(seed)
    A = rng.standard_t(2, size=(200, 5))
    A2 = A.copy()
    A2[rng.integers(200)] = rng.normal(size=5) * 10.0 ** rng.integers(-3, 8)
    a, event = _released(A, 2.5)
    b, _ = _released(A2, 2.5)
    assert np.linalg.norm(a - b) <= event.sensitivity * (1 + 1e-12)


def test_a_non_finite_row_counts_as_zero_and_cannot_spoil_the_release():
    rng = np.random.default_rng(1)
    A = rng.normal(size=(100, 3))
    A[7] = [np.inf, 1.0, np.nan]
    G, _ = private_second_moment(A, 2.0, 0.01, random_state=0)
    assert np.all(np.isfinite(G))
    B = A.copy()
    B[7] = 0.0
    np.testing.assert_allclose(G, private_second_moment(B, 2.0, 0.01, random_state=0)[0])


def test_without_a_bound_only_a_noiseless_release_is_allowed_and_it_is_not_private():
    A = np.random.default_rng(2).normal(size=(100, 3))
    with pytest.raises(ValueError, match="finite bound"):
        private_second_moment(A, math.inf, 0.1)
    G, event = private_second_moment(A, math.inf, 0.0)
    np.testing.assert_allclose(G, A.T @ A / 100)
    assert event == NON_PRIVATE_RELEASE and math.isinf(event.mu)


def test_the_released_matrix_is_symmetric_with_the_stated_noise():
    A = np.zeros((10, 3))
    draws = np.array([private_second_moment(A, 1.0, 0.5, random_state=s)[0] for s in range(2000)])
    assert np.all(draws == np.transpose(draws, (0, 2, 1)))
    assert draws[:, 0, 0].std() == pytest.approx(0.5, rel=0.1)
    assert draws[:, 0, 1].std() == pytest.approx(0.5 / math.sqrt(2), rel=0.1)
