"""The clip-threshold rule: public derivative bounds, and a private quantile of the gradient norms."""

import math

import numpy as np
import pytest

from skdp.accounting import ExponentialMechanismRelease
from skdp.losses import AbsoluteLoss, CallableLoss, HuberLoss, QuantileLoss, SquaredLoss
from skdp.solvers import GLMProblem
from skdp.solvers.clip_threshold import (
    CLIP_RANGE,
    derivative_cap,
    gradient_norms,
    private_clip,
    public_derivative_bound,
)


def _problem(n=2000, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    X /= np.maximum(1.0, np.linalg.norm(X, axis=1, keepdims=True) / 4.0)
    y = X @ np.array([1.0, 0.0, -1.0]) + rng.standard_t(2, size=n)
    return GLMProblem(X, y, SquaredLoss(), np.zeros(3), 5.0, 4.0)


def test_public_derivative_bounds():
    assert public_derivative_bound(AbsoluteLoss()) == 1.0
    assert public_derivative_bound(QuantileLoss(0.8)) == pytest.approx(0.8)
    assert public_derivative_bound(QuantileLoss(0.3)) == pytest.approx(0.7)
    # Squared: no bound; Huber: a private low quantile beats delta * row_bound; callables: unknown.
    assert public_derivative_bound(SquaredLoss()) is None
    assert public_derivative_bound(HuberLoss(0.5)) is None
    assert public_derivative_bound(CallableLoss(lambda z, y: (z, z))) is None


def test_derivative_cap_is_the_huber_threshold():
    assert derivative_cap(HuberLoss(0.5)) == 0.5
    assert derivative_cap(SquaredLoss()) is None
    assert derivative_cap(CallableLoss(lambda z, y: (z, z))) is None


def test_gradient_norms_are_per_row():
    problem = _problem(n=50)
    w = np.array([0.2, -0.1, 0.4])
    expected = np.abs(problem.X @ w - problem.y) * np.linalg.norm(problem.X, axis=1)
    np.testing.assert_allclose(gradient_norms(problem, w), expected)
    np.testing.assert_allclose(gradient_norms(problem, w, rows=np.arange(5)), expected[:5])


def test_private_clip_is_the_quantile_of_the_gradient_norms_at_zero():
    problem = _problem()
    exact = float(np.quantile(gradient_norms(problem, np.zeros(3)), 0.5))
    # epsilon = inf: the exact empirical quantile, and the event says so.
    threshold, event = private_clip(problem, 0.5, math.inf, np.random.default_rng(0))
    assert threshold == pytest.approx(exact, rel=1e-9)
    estimates = []
    for seed in range(5):
        threshold, event = private_clip(problem, 0.5, 1.0, np.random.default_rng(seed))
        assert event.epsilon(0.0) == ExponentialMechanismRelease(1.0).epsilon(0.0) == 1.0
        estimates.append(threshold)
    # epsilon * n = 2000: the private median lies within a few percent of the exact one.
    assert np.median(estimates) == pytest.approx(exact, rel=0.1)


def test_private_clip_stays_in_its_public_range():
    problem = _problem(n=200)
    lower, upper = CLIP_RANGE[0] * problem.row_bound, CLIP_RANGE[1] * problem.row_bound
    huge = np.full(problem.n_samples, 1e12)
    for seed in range(5):
        t, _ = private_clip(problem, 0.5, 0.01, np.random.default_rng(seed))
        assert lower <= t <= upper
        t, _ = private_clip(problem, 0.9, 1.0, np.random.default_rng(seed), values=huge, upper=7.0)
        assert lower <= t <= 7.0


def test_private_clip_of_a_block_reads_only_its_rows():
    # A solver's disjoint blocks get quantiles of their own rows (parallel composition):
    # changing rows outside the block changes nothing, with the same randomness.
    problem = _problem(n=300)
    rows = np.arange(100, 200)
    w = np.array([0.3, 0.0, -0.2])
    t1, _ = private_clip(problem, 0.5, 1.0, np.random.default_rng(3), w=w, rows=rows)
    X, y = problem.X.copy(), problem.y.copy()
    y[:100] *= 1e3
    y[200:] = 0.0
    other = GLMProblem(X, y, SquaredLoss(), np.zeros(3), 5.0, 4.0)
    t2, _ = private_clip(other, 0.5, 1.0, np.random.default_rng(3), w=w, rows=rows)
    assert t1 == t2
    exact, _ = private_clip(problem, 0.5, math.inf, np.random.default_rng(0), w=w, rows=rows)
    assert exact == pytest.approx(float(np.quantile(gradient_norms(problem, w)[rows], 0.5)), rel=1e-9)
