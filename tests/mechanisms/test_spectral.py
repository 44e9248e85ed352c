"""The largest eigenvalue of X^T X / n: exact, never failing, and its private release."""

import math
import warnings

import numpy as np
import pytest
import scipy.sparse as sp

from skdp import BudgetAccountant, DPHeavyTailRegressor, LowBudgetWarning
from skdp.accounting import GaussianRelease
from skdp.mechanisms import MAX_GRAM_SIZE, NON_PRIVATE_RELEASE, clip_rows, private_top_eigenvalue, top_eigenvalue
from skdp.mechanisms import spectral


def test_top_eigenvalue_is_exact_for_dense_and_sparse_input():
    rng = np.random.default_rng(0)
    X = rng.standard_t(3, size=(200, 7)) * np.arange(1, 8)
    expected = float(np.linalg.eigvalsh(X.T @ X / 200)[-1])
    assert top_eigenvalue(X) == pytest.approx(expected, rel=1e-12)
    assert top_eigenvalue(sp.csr_matrix(X)) == pytest.approx(expected, rel=1e-12)


def test_a_lapack_failure_falls_back_to_bisection(monkeypatch):
    rng = np.random.default_rng(1)
    X = rng.normal(size=(50, 6))
    expected = top_eigenvalue(X)

    def fail(*args, **kwargs):
        raise np.linalg.LinAlgError("no convergence")

    monkeypatch.setattr(spectral.np.linalg, "eigvalsh", fail)
    # Bisection on the positive definiteness of t I - G halves [0, trace] 200 times.
    assert top_eigenvalue(X) == pytest.approx(expected, rel=1e-12)


def test_too_many_columns_are_refused_before_forming_the_gram_matrix():
    X = sp.csr_matrix((3, MAX_GRAM_SIZE + 1))
    with pytest.raises(ValueError, match="at most"):
        top_eigenvalue(X)


def test_private_top_eigenvalue_releases_with_sensitivity_row_bound_squared_over_n():
    rng = np.random.default_rng(2)
    X = clip_rows(rng.normal(size=(100, 4)), 2.0)
    value, event = private_top_eigenvalue(X, 2.0, 0.0, random_state=0)
    assert event == GaussianRelease(4.0 / 100, 0.0)
    assert value == top_eigenvalue(X)
    draws = [private_top_eigenvalue(X, 2.0, 0.5, random_state=s)[0] for s in range(2000)]
    # 2000 draws of N(lambda, 0.25): the mean is within 4 standard errors (4 x 0.5 / sqrt(2000)).
    assert abs(np.mean(draws) - value) <= 4 * 0.5 / math.sqrt(2000)


@pytest.mark.parametrize("seed", range(5))
def test_curvature_release_respects_its_sensitivity(seed):
    # ClippedGD releases the top eigenvalue of mean(x x^T) with sensitivity row_bound^2 / n.
    rng = np.random.default_rng(seed)
    n, d = 300, 6
    A = math.sqrt(d) + 3
    X = clip_rows(rng.standard_t(2, size=(n, d)), A)
    for _ in range(3):
        X2 = X.copy()
        i = rng.integers(n)
        X2[i] = clip_rows(rng.normal(size=(1, d)) * 10 ** rng.uniform(-3, 6), A)[0]
        gap = abs(top_eigenvalue(X) - top_eigenvalue(X2))
        assert gap <= A**2 / n * (1 + 1e-9)
    # The bound is attained in order: a tiny dataset dominated by one row.
    Z = np.zeros((10, d))
    Z2 = Z.copy()
    Z2[0, 0] = A
    assert abs(top_eigenvalue(Z) - top_eigenvalue(Z2)) == pytest.approx(A**2 / 10)


def test_the_curvature_release_never_uses_an_eigensolver_that_can_fail(monkeypatch):
    """ARPACK's eigsh raises ArpackNoConvergence depending on the data; it must not be called."""
    import scipy.sparse.linalg

    def no_convergence(*args, **kwargs):
        raise scipy.sparse.linalg.ArpackNoConvergence("no convergence", np.array([]), np.array([]))

    monkeypatch.setattr(scipy.sparse.linalg, "eigsh", no_convergence)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 300))  # more than 256 coefficients: the former Lanczos path
    y = X[:, :5].sum(axis=1) + rng.normal(size=400)
    acc = BudgetAccountant()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LowBudgetWarning)
        model = DPHeavyTailRegressor(algorithm="clipped_gd", accountant=acc, random_state=0).fit(X, y)
    assert np.all(np.isfinite(model.coef_)) and len(acc.events) == 1


def test_without_a_row_bound_only_a_noiseless_release_is_allowed_and_it_is_not_private():
    X = np.random.default_rng(0).normal(size=(50, 3))
    with pytest.raises(ValueError, match="finite row bound"):
        private_top_eigenvalue(X, math.inf, 0.1)
    value, event = private_top_eigenvalue(X, math.inf, 0.0)
    assert value == pytest.approx(top_eigenvalue(X)) and event == NON_PRIVATE_RELEASE
    assert math.isinf(event.mu)
