"""Per-row losses: derivatives, Lipschitz and smoothness bounds, Lipschitzian extensions."""

import numpy as np
import pytest
from scipy import optimize

from skdp.losses import (
    LOSSES,
    AbsoluteLoss,
    HuberLoss,
    LogisticLoss,
    ModifiedHuberLoss,
    QuantileLoss,
    SmoothedHingeLoss,
    SquaredHingeLoss,
    SquaredLoss,
    get_loss,
)

ALL = [SquaredLoss(), HuberLoss(0.7), AbsoluteLoss(), QuantileLoss(0.8), LogisticLoss(),
       SquaredHingeLoss(), SmoothedHingeLoss(0.5), ModifiedHuberLoss()]
SMOOTH = [loss for loss in ALL if np.isfinite(loss.smoothness)]


def _labels(loss, rng, n):
    if loss.is_classification:
        return rng.choice([-1.0, 1.0], size=n)
    return rng.standard_t(df=2, size=n) * 3


@pytest.mark.parametrize("loss", ALL, ids=repr)
def test_derivative_matches_finite_differences(loss):
    rng = np.random.default_rng(0)
    z = rng.normal(size=400) * 4
    y = _labels(loss, rng, 400)
    h = 1e-6
    numeric = (loss.value(z + h, y) - loss.value(z - h, y)) / (2 * h)
    # Away from kinks the derivative is exact.
    kink = np.zeros_like(z, dtype=bool)
    if isinstance(loss, (AbsoluteLoss, QuantileLoss, HuberLoss)):
        kink = np.abs(np.abs(z - y) - getattr(loss, "delta", 0.0)) < 1e-4
        kink |= np.abs(z - y) < 1e-4
    np.testing.assert_allclose(loss.derivative(z, y)[~kink], numeric[~kink], atol=1e-5)


@pytest.mark.parametrize("loss", SMOOTH, ids=repr)
def test_smoothness_constant_bounds_the_second_derivative(loss):
    rng = np.random.default_rng(1)
    z = rng.normal(size=2000) * 5
    y = _labels(loss, rng, 2000)
    h = 1e-4
    second = np.abs(loss.derivative(z + h, y) - loss.derivative(z - h, y)) / (2 * h)
    assert second.max() <= loss.smoothness * (1 + 1e-6)
    assert second.max() >= 0.5 * loss.smoothness  # the constant is attained (not vacuous)


@pytest.mark.parametrize("loss", ALL, ids=repr)
def test_lipschitz_bound_over_the_coefficient_ball(loss):
    rng = np.random.default_rng(2)
    n, d, R = 200, 3, 2.5
    X = rng.normal(size=(n, d)) * rng.lognormal(size=(n, 1))
    y = _labels(loss, rng, n)
    norms = np.linalg.norm(X, axis=1)
    bound = loss.lipschitz_bound(norms, y, R)
    for _ in range(200):
        w = rng.normal(size=d)
        w *= R * rng.random() ** (1 / d) / np.linalg.norm(w)
        grad_norm = np.abs(loss.derivative(X @ w, y)) * norms
        assert np.all(grad_norm <= bound * (1 + 1e-12) + 1e-12)
    # A point on the boundary of the ball, where the bound is tightest.
    w = X[0] / norms[0] * R
    assert np.abs(loss.derivative(X[0] @ w, y[0])) * norms[0] <= bound[0] * (1 + 1e-12)


def _brute_force_extension(loss, z, y, M):
    # inf_u loss(u) + M |z - u|, over a fine grid plus a local solve.
    grid = z + np.linspace(-60, 60, 200_001)
    vals = loss.value(grid, np.full_like(grid, y)) + M * np.abs(z - grid)
    u0 = grid[np.argmin(vals)]
    res = optimize.minimize_scalar(lambda u: float(loss.value(u, y)) + M * abs(z - u),
                                   bounds=(u0 - 1e-3, u0 + 1e-3), method="bounded",
                                   options={"xatol": 1e-12})
    return min(vals.min(), res.fun)


@pytest.mark.parametrize("loss", ALL, ids=repr)
@pytest.mark.parametrize("M", [0.3, 0.9, 2.5])
def test_extension_is_the_infimal_convolution(loss, M):
    rng = np.random.default_rng(3)
    for z, y in zip(rng.normal(size=8) * 6, _labels(loss, rng, 8)):
        expected = _brute_force_extension(loss, z, y, M)
        assert float(loss.extended_value(z, y, M)) == pytest.approx(expected, abs=1e-6)


@pytest.mark.parametrize("loss", ALL, ids=repr)
def test_extension_derivative_is_the_clipped_derivative(loss):
    rng = np.random.default_rng(4)
    z = rng.normal(size=300) * 6
    y = _labels(loss, rng, 300)
    M = rng.uniform(0.1, 3.0, size=300)
    d = loss.extended_derivative(z, y, M)
    assert np.all(np.abs(d) <= M)
    h = 1e-6
    numeric = (loss.extended_value(z + h, y, M) - loss.extended_value(z - h, y, M)) / (2 * h)
    away = np.abs(numeric - d) < 1e-4
    assert away.mean() > 0.97  # equal except within h of a kink
    # Where the loss is already M-Lipschitz the extension is the loss itself.
    inside = np.abs(loss.derivative(z, y)) < M - 1e-9
    np.testing.assert_allclose(loss.extended_value(z, y, M)[inside], loss.value(z, y)[inside])


def test_known_closed_forms():
    z = np.linspace(-5, 5, 101)
    zero = np.zeros_like(z)
    # The squared loss extended with slope M is the Huber loss with threshold M.
    np.testing.assert_allclose(SquaredLoss().extended_value(z, zero, 1.5), HuberLoss(1.5).value(z, zero))
    # The squared hinge extended with slope 4 is scikit-learn's modified Huber.
    ones = np.ones_like(z)
    np.testing.assert_allclose(SquaredHingeLoss().extended_value(z, ones, 4.0),
                               ModifiedHuberLoss().value(z, ones))
    # An infinite slope bound (a zero feature row) leaves the loss unchanged.
    np.testing.assert_allclose(SquaredLoss().extended_value(z, zero, np.inf), SquaredLoss().value(z, zero))


def test_extension_slope_from_row_norms():
    slope = SquaredLoss.extension_slope(np.array([0.0, 2.0]), lipschitz=3.0)
    assert slope.tolist() == [np.inf, 1.5]


def test_registry_and_parameters():
    assert set(LOSSES) == {"squared", "huber", "absolute", "quantile", "logistic", "squared_hinge",
                           "smoothed_hinge", "modified_huber"}
    assert get_loss("quantile", quantile=0.3) == QuantileLoss(0.3)
    assert get_loss(HuberLoss(2.0)) == HuberLoss(2.0)
    with pytest.raises(ValueError, match="Unknown loss"):
        get_loss("hinge")
    for bad in (lambda: HuberLoss(0.0), lambda: QuantileLoss(1.0), lambda: SmoothedHingeLoss(-1.0)):
        with pytest.raises(ValueError):
            bad()


def test_quantile_loss_minimiser_is_the_quantile():
    y = np.random.default_rng(5).standard_t(df=3, size=4001)
    loss = QuantileLoss(0.9)
    res = optimize.minimize_scalar(lambda c: loss.value(np.full_like(y, c), y).mean(), bounds=(-10, 10),
                                   method="bounded", options={"xatol": 1e-10})
    assert res.x == pytest.approx(np.quantile(y, 0.9), abs=1e-2)
