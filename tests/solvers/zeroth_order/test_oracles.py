"""The zeroth-order oracles: directions, clipping, sensitivity on adversarial neighbours, unbiasedness."""

import math

import numpy as np
import pytest

from skdp.losses import AbsoluteLoss, ValueLoss
from skdp.solvers.zeroth_order import DirectionDraw, ZOProblem, draw_directions
from skdp.solvers.zeroth_order.directions import orthonormal_frame, sphere_directions
from skdp.zeroth_order._models import CallableModel, LinearModel, MLPModel
from privacy_harness import CoupledZOProblem

# (mode, directions) with d = 6: full and partial frames.
MODES = [("iid", 4), ("orth", 6), ("orth", 3), ("coordinates", 6), ("coordinates", 2)]


def test_frames_are_orthonormal_and_uniform():
    rng = np.random.default_rng(0)
    U = orthonormal_frame(rng, 4, 6)
    np.testing.assert_allclose(U @ U.T, np.eye(4), atol=1e-12)
    # Haar frames: each direction is uniform on the sphere, so E[u u^T] = I / d (sign correction
    # matters: without it the first coordinate's sign is biased). 4000 frames, tolerance ~5 sd.
    first = np.array([orthonormal_frame(rng, 1, 3)[0] for _ in range(4000)])
    np.testing.assert_allclose(first.T @ first / 4000, np.eye(3) / 3, atol=0.03)
    assert abs(first[:, 0].mean()) < 0.03
    V = sphere_directions(rng, (1000, 2), 5)
    np.testing.assert_allclose(np.linalg.norm(V, axis=-1), 1.0)


def _adversarial(d, n=30, seed=0, kind="huge", power=1):
    """Rows and a neighbour whose row 0 makes every difference saturate the clip, with opposite signs.

    The loss ``1e6 * y * prediction^power`` (slope far beyond the bound) has, for label +1 and -1, finite
    differences of opposite signs along every direction (``power=2`` for the symmetric difference, which
    vanishes on a linear loss); "nan" and "raise" neighbours make the callable misbehave on that row instead.
    """
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = rng.choice([-1.0, 1.0], size=n)
    y2 = y.copy()
    y2[0] = -y[0] if kind == "huge" else (np.nan if kind == "nan" else 7.0)

    def loss(prediction, t):
        if kind == "raise" and np.any(t == 7.0):
            raise RuntimeError("bad row")
        return 1e6 * t * prediction**power

    def make(labels):
        return ZOProblem(X, labels, LinearModel(d), ValueLoss(loss), lipschitz=2.0, init=np.zeros(d))

    return make(y), make(y2)


@pytest.mark.parametrize("kind", ["huge", "nan", "raise"])
@pytest.mark.parametrize("mode,m", MODES)
def test_gradient_oracle_sensitivity_on_adversarial_neighbours(mode, m, kind):
    d = 6
    a, b = _adversarial(d, kind=kind)
    coupled = CoupledZOProblem(a, b)
    rng = np.random.default_rng(1)
    for _ in range(20):
        theta = rng.normal(size=d)
        draw = draw_directions(mode, rng, a.n_samples, m, d)
        total, sensitivity = coupled.grad_sum(theta, draw, 0.01)
        assert np.all(np.isfinite(total))
    assert max(coupled.checks) <= 1.0 + 1e-9
    if mode != "iid" and kind == "huge":
        # The joint clip is attained: both rows saturate with opposite signs.
        np.testing.assert_allclose(coupled.checks, 1.0, rtol=1e-9)
    # The claimed bound is the mode's: 2 d L / m (orth: joint clip 2 delta L sqrt(m/d), scale d/(2 delta m)
    # gives 2 L sqrt(d/m)) or 2 d L (iid).
    expected = 2 * 2.0 * math.sqrt(d / m) if mode != "iid" else 2 * d * 2.0
    np.testing.assert_allclose(coupled.sensitivities, expected, rtol=1e-12)


@pytest.mark.parametrize("symmetric", [False, True])
@pytest.mark.parametrize("kind", ["huge", "nan", "raise"])
@pytest.mark.parametrize("mode,m", MODES)
def test_difference_oracle_sensitivity_on_adversarial_neighbours(mode, m, kind, symmetric):
    d, delta = 6, 0.05
    a, b = _adversarial(d, kind=kind, power=2 if symmetric else 1)
    coupled = CoupledZOProblem(a, b)
    rng = np.random.default_rng(2)
    for _ in range(20):
        w = rng.normal(size=d)
        w_prev = w + rng.normal(size=d) * 1e-3
        draw = draw_directions(mode, rng, a.n_samples, m, d)
        total, sensitivity = coupled.diff_sum(w, w_prev, draw, delta, symmetric=symmetric)
        r = np.linalg.norm(w - w_prev)
        # The bound shrinks with the distance between the points: 2 d L r / (delta sqrt(m)) (orth) or
        # 2 d L r / delta (iid), whichever form of the difference.
        bound = 2 * d * 2.0 * r / delta / (math.sqrt(m) if mode != "iid" else 1.0)
        assert sensitivity == pytest.approx(bound, rel=1e-9)
    assert max(coupled.checks) <= 1.0 + 1e-9
    if mode != "iid" and kind == "huge":
        np.testing.assert_allclose(coupled.checks, 1.0, rtol=1e-9)


def test_difference_distance_is_capped_by_the_public_bound():
    a, _ = _adversarial(4)
    draw = draw_directions("orth", np.random.default_rng(0), a.n_samples, 4, 4)
    w = np.ones(4)
    far = a.diff_sum(w, w + 1.0, draw, 0.1, max_distance=0.01)[1]
    near = a.diff_sum(w, w + 0.0025, draw, 0.1, max_distance=0.01)[1]  # distance 0.005
    assert far == pytest.approx(2 * 4 * 2.0 * 0.01 / 0.1 / 2.0)
    assert near == pytest.approx(far / 2)
    # Iterates that overflowed: the public cap, never an unbounded or NaN clip.
    assert a.diff_sum(w, np.full(4, np.nan), draw, 0.1, max_distance=0.01)[1] == far


def _ball_gradient(a, theta, delta, n_samples, rng):
    """Monte Carlo gradient of the ball smoothing of |<a, theta> - 1| (subgradients averaged over the ball)."""
    d = a.shape[0]
    g = rng.normal(size=(n_samples, d))
    v = g / np.linalg.norm(g, axis=1, keepdims=True) * rng.random((n_samples, 1)) ** (1.0 / d)
    return np.mean(np.sign((theta + delta * v) @ a - 1.0)) * a


def _row_frames(rng, n, m, d):
    """Independent Haar frames, one per row (sign-corrected batched QR): the "orth" rule with per-row frames."""
    Q, R = np.linalg.qr(rng.normal(size=(n, d, m)))
    signs = np.sign(np.diagonal(R, axis1=1, axis2=2))
    return np.swapaxes(Q * signs[:, None, :], 1, 2)


@pytest.mark.parametrize("mode,m", [("iid", 4), ("orth", 4), ("orth", 2)])
def test_oracles_are_unbiased_on_a_kinked_function(mode, m):
    """GRAD's mean is the gradient of the delta-ball smoothing; DIFF's the difference of two such gradients."""
    d, delta, draws = 4, 0.5, 40_000
    rng = np.random.default_rng(3)
    a = np.array([1.0, -0.5, 0.25, 0.8])
    # The kink <a, theta> = 1 lies inside the ball: <a, theta> - 1 = 0.3 delta ||a||.
    theta = a * (1.0 + 0.3 * delta * np.linalg.norm(a)) / (a @ a)
    other = theta - 0.6 * delta * a / np.linalg.norm(a)
    # One row x = a, y = 1, repeated: the mean over rows is a mean over independent direction draws
    # (for "orth", one Haar frame per row: the same clip rule and bound as a shared frame).
    problem = ZOProblem(np.tile(a, (draws, 1)), np.ones(draws), LinearModel(d), AbsoluteLoss(),
                        lipschitz=float(np.linalg.norm(a)), init=np.zeros(d))

    def draw():
        if mode == "iid":
            return draw_directions(mode, rng, draws, m, d)
        return DirectionDraw("orth", _row_frames(rng, draws, m, d))

    mean_grad = problem.grad_sum(theta, draw(), delta)[0] / draws
    mean_diff = problem.diff_sum(theta, other, draw(), delta)[0] / draws
    target = _ball_gradient(a, theta, delta, 400_000, rng)
    target_other = _ball_gradient(a, other, delta, 400_000, rng)
    # Tolerance: each per-row estimate is bounded by d L (iid) or L sqrt(d/m) (orth), L = ||a|| = 1.4, so the
    # mean of 4e4 has a standard error below d L / 200 = 0.03 per coordinate (and much less where the row is
    # far from the kink); the Monte Carlo target's is 0.002. 0.06 is two worst-case standard errors.
    np.testing.assert_allclose(mean_grad, target, atol=0.06)
    np.testing.assert_allclose(mean_diff, target - target_other, atol=0.06)
    # The kink matters: the smoothed gradient is not the gradient at theta (which is +a).
    assert np.linalg.norm(target - a) > 0.3


def test_coordinate_frames_are_unbiased_for_a_smooth_loss():
    """Random coordinate subsets: (d / m) sum_S <g, e_j> e_j averages to g (here on a smooth row loss)."""
    d, m = 5, 2
    rng = np.random.default_rng(6)
    x = rng.normal(size=d)
    problem = ZOProblem(x[None], np.zeros(1), LinearModel(d), ValueLoss(lambda p, t: 0.5 * (p - t) ** 2),
                        lipschitz=100.0, init=None)
    theta = rng.normal(size=d)
    grads = np.array([problem.grad_sum(theta, draw_directions("coordinates", rng, 1, m, d), 1e-4)[0]
                      for _ in range(4000)])
    # Exact: every subset has probability m / d per axis; the mean of 4000 is within 5% (each axis is
    # (d/m) g_j with probability m/d, else 0: relative sd sqrt((d/m - 1) / 4000) = 0.02).
    np.testing.assert_allclose(grads.mean(axis=0), (x @ theta) * x, rtol=0.08, atol=1e-3)


def test_misbehaving_rows_are_contained():
    """A row on which the callable raises, or returns NaN or inf, contributes 0; the others are exact."""
    rng = np.random.default_rng(4)
    X = rng.normal(size=(10, 3))
    y = np.arange(10.0)

    def loss(prediction, t):
        out = np.abs(prediction - t)
        if np.any(t == 3.0):
            raise ValueError("row 3")
        return np.where(t == 5.0, np.nan, np.where(t == 6.0, np.inf, out))

    problem = ZOProblem(X, y, LinearModel(3), ValueLoss(loss), lipschitz=10.0, init=np.zeros(3))
    clean = ZOProblem(X, y, LinearModel(3), AbsoluteLoss(), lipschitz=10.0, init=np.zeros(3))
    draw = draw_directions("orth", rng, 10, 3, 3)
    theta = rng.normal(size=3)
    values = problem.two_point(theta, 0.01 * draw.directions)
    assert np.all(np.isnan(values[[3, 5]]))
    good = [i for i in range(10) if i not in (3, 5, 6)]
    np.testing.assert_allclose(values[good], clean.two_point(theta, 0.01 * draw.directions)[good])
    total = problem.grad_sum(theta, draw, 0.01)[0]
    expected = clean.grad_sum(theta, draw, 0.01, rows=np.array(good))[0]
    np.testing.assert_allclose(total, expected, atol=1e-9)


def test_models_evaluate_offsets_consistently():
    rng = np.random.default_rng(5)
    X = rng.normal(size=(7, 3))
    for model in (LinearModel(3), MLPModel(3, 4), MLPModel(3, 2, activation="tanh"),
                  CallableModel(lambda P, Z: Z @ P[:, :3].T + P[:, 3], 4)):
        theta = rng.normal(size=model.n_params)
        V = rng.normal(size=(5, model.n_params))
        direct = np.column_stack([model.predict(theta + v, X) for v in V])
        np.testing.assert_allclose(model.predict_offsets(theta, V, X), direct, atol=1e-12)
        W = rng.normal(size=(7, 5, model.n_params))
        rowwise = np.array([[model.predict(theta + W[i, j], X[i:i + 1])[0] for j in range(5)] for i in range(7)])
        np.testing.assert_allclose(model.predict_rowwise(theta, W, X), rowwise, atol=1e-12)


def test_a_callable_cannot_rewrite_the_rows():
    """The rows a callable sees are read-only views: a write fails, and that row's values count as missing."""
    X = np.arange(12.0).reshape(4, 3)

    def vandal(P, Z):
        Z[:] = 0.0  # would zero every row of the chunk for all later calls
        return Z @ P.T

    problem = ZOProblem(X, np.zeros(4), CallableModel(vandal, 3), AbsoluteLoss(), lipschitz=1.0, init=None)
    values = problem.losses(np.zeros(3), np.eye(3))
    assert np.all(np.isnan(values))
    np.testing.assert_array_equal(problem.X, X)
