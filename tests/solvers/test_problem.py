"""GLMProblem: the clipped rows, labels, penalties and ball every solver sees."""

import numpy as np
import pytest

from skdp.losses import AbsoluteLoss, HuberLoss, SquaredLoss
from skdp.solvers import GLMProblem


def _problem(**kwargs):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(30, 3))
    X /= np.maximum(1.0, np.linalg.norm(X, axis=1, keepdims=True) / 2.0)
    X = np.hstack([X, np.ones((30, 1))])
    y = X[:, :3] @ np.array([1.0, -1.0, 0.5]) + rng.normal(size=30)
    args = dict(loss=SquaredLoss(), penalty=np.array([0.1, 0.1, 0.1, 0.0]), radius=5.0,
                row_bound=float(np.hypot(2.0, 1.0)), intercept=True)
    args.update(kwargs)
    return GLMProblem(X, y, **args)


def test_rows_beyond_the_row_bound_are_refused():
    with pytest.raises(ValueError, match="clipped to row_bound"):
        GLMProblem(np.array([[3.0, 4.0]]), np.zeros(1), SquaredLoss(), np.zeros(2), 1.0, 4.9)


def test_huge_labels_are_clipped_to_a_finite_range():
    problem = GLMProblem(np.eye(2), np.array([1e300, -np.inf]), SquaredLoss(), np.zeros(2), 1.0, 1.0)
    assert np.all(np.isfinite(problem.y)) and problem.y[0] == 1e150 and problem.y[1] == -1e150
    assert np.all(np.isfinite(problem.clipped_gradient_sum(np.zeros(2), 1.0)))


def test_clipped_gradient_sum_clips_each_row_and_has_sensitivity_2C():
    problem = _problem()
    w = np.array([0.5, 0.2, -0.3, 0.1])
    r = problem.X @ w - problem.y
    grads = r[:, None] * problem.X
    norms = np.linalg.norm(grads, axis=1)
    C = float(np.median(norms))
    expected = (grads * np.minimum(1.0, C / norms)[:, None]).sum(axis=0)
    np.testing.assert_allclose(problem.clipped_gradient_sum(w, C), expected)
    np.testing.assert_allclose(problem.clipped_gradient_sum(w, C, rows=np.arange(4)),
                               (grads[:4] * np.minimum(1.0, C / norms[:4])[:, None]).sum(axis=0))
    y2 = problem.y.copy()
    y2[3] = -1e9
    other = GLMProblem(problem.X, y2, SquaredLoss(), problem.penalty, 5.0, problem.row_bound)
    assert np.linalg.norm(problem.clipped_gradient_sum(w, C) - other.clipped_gradient_sum(w, C)) <= 2 * C


def test_derived_problems_keep_everything_else():
    problem = _problem(l1=np.array([0.2, 0.2, 0.2, 0.0]))
    sub = problem.subset(np.arange(5, 12))
    assert sub.n_samples == 7 and sub.intercept and np.array_equal(sub.l1, problem.l1)
    np.testing.assert_array_equal(sub.X, problem.X[5:12])
    np.testing.assert_array_equal(sub.norms, problem.norms[5:12])
    huber = problem.with_loss(HuberLoss(0.5))
    assert huber.loss == HuberLoss(0.5) and np.array_equal(huber.y, problem.y) and huber.has_l1
    # Truncation turns the rows whose per-sample Lipschitz bound exceeds the threshold into
    # dummies with zero loss and zero gradient; the problem keeps its size n.
    truncated = problem.with_loss(AbsoluteLoss()).truncated(1.5)
    keep = AbsoluteLoss().lipschitz_bound(problem.norms, problem.y, 5.0) <= 1.5
    assert truncated.n_samples == problem.n_samples and 0 < keep.sum() < problem.n_samples
    np.testing.assert_array_equal(truncated.active, keep)
    w = np.full(4, 0.3)
    assert np.all(truncated.derivatives(w)[~keep] == 0.0)


def test_prox_is_soft_thresholding_then_the_ball():
    problem = _problem(l1=np.array([0.5, 0.5, 0.5, 0.0]), radius=2.0)
    v = np.array([0.3, -1.0, 3.0, -0.2])
    expected = np.array([0.0, -0.5, 2.5, -0.2])
    np.testing.assert_allclose(problem.prox(v, 1.0), expected * min(1.0, 2.0 / np.linalg.norm(expected)))
    plain = _problem()
    np.testing.assert_allclose(plain.prox(v, 1.0), v)  # no L1 and inside the ball


def test_objective_and_public_constants():
    problem = _problem(l1=np.array([0.2, 0.0, 0.0, 0.0]))
    w = np.array([0.5, 0.2, -0.3, 0.1])
    r = problem.X @ w - problem.y
    expected = np.mean(0.5 * r * r) + 0.5 * np.sum(problem.penalty * w * w) + 0.2 * 0.5
    assert problem.objective(w) == pytest.approx(expected)
    np.testing.assert_array_equal(problem.free_coordinates(), [1.0, 1.0, 1.0, 0.0])
    assert problem.uniform_smoothness() == pytest.approx(problem.row_bound**2 + 0.1)
    assert problem.loss_smoothness_or_one() == 1.0
    assert problem.with_loss(AbsoluteLoss()).loss_smoothness_or_one() == 1.0
    assert problem.with_loss(HuberLoss(1.0)).loss_smoothness_or_one() == 1.0
