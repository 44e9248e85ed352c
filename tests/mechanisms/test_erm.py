"""Certified strongly convex ERM and output perturbation."""

import numpy as np
import pytest
from scipy import optimize

from skdp.accounting import GaussianRelease
from skdp.mechanisms import certified_minimize, clip_rows, erm_sensitivity, guaranteed_steps, output_perturbation


def _logistic_ridge(X, y, mu):
    def f(w):
        z = y * (X @ w)
        value = np.logaddexp(0, -z).mean() + 0.5 * mu * w @ w
        grad = X.T @ (-y / (1 + np.exp(z))) / len(y) + mu * w
        return value, grad

    return f


def _exact_minimiser(f, d):
    res = optimize.minimize(lambda w: f(w)[0], np.zeros(d), jac=lambda w: f(w)[1], method="L-BFGS-B",
                            options={"gtol": 1e-14, "ftol": 1e-16, "maxiter": 10_000})
    return res.x


def _data(seed, n=300, d=4):
    rng = np.random.default_rng(seed)
    X = clip_rows(rng.normal(size=(n, d)) * 2, 1.0)
    y = np.where(X @ rng.normal(size=d) + 0.3 * rng.normal(size=n) > 0, 1.0, -1.0)
    return X, y


@pytest.mark.parametrize("tol", [1e-3, 1e-6])
def test_certificate_holds(tol):
    X, y = _data(0)
    mu = 0.05
    f = _logistic_ridge(X, y, mu)
    sol = certified_minimize(f, np.zeros(4), strong_convexity=mu, smoothness=0.25 + mu, tol=tol,
                             radius=1.0 / mu)
    assert np.linalg.norm(sol.x - _exact_minimiser(f, 4)) <= tol


def test_wrong_smoothness_is_handled_by_backtracking():
    A = np.diag([1.0, 400.0])
    b = np.array([1.0, 1.0])
    f = lambda x: (0.5 * x @ A @ x - b @ x, A @ x - b)  # noqa: E731
    sol = certified_minimize(f, np.zeros(2), strong_convexity=1.0, smoothness=1.0, tol=1e-9,
                             radius=10.0)
    np.testing.assert_allclose(sol.x, np.linalg.solve(A, b), atol=1e-9)


def test_constrained_minimiser_on_the_ball():
    b = np.array([3.0, 4.0])  # unconstrained minimiser of |x - b|^2/2 lies outside the unit ball
    f = lambda x: (0.5 * (x - b) @ (x - b), x - b)  # noqa: E731
    sol = certified_minimize(f, np.zeros(2), strong_convexity=1.0, smoothness=1.0, tol=1e-8, radius=1.0)
    np.testing.assert_allclose(sol.x, b / 5.0, atol=1e-8)


def test_coupled_neighbours_respect_the_sensitivity():
    """Exact-data neighbours (one row replaced by an extreme one) stay within 2L/(mu n) + 2 tol."""
    mu, tol, n, d = 0.1, 1e-5, 300, 4
    worst = 0.0
    for seed in range(8):
        X, y = _data(seed, n, d)
        X2, y2 = X.copy(), y.copy()
        X2[seed] = clip_rows(np.full((1, d), 1e6), 1.0)[0]
        y2[seed] = -y[seed]
        sols = [certified_minimize(_logistic_ridge(A, b, mu), np.zeros(d), strong_convexity=mu,
                                   smoothness=0.25 + mu, tol=tol, radius=1.0 / mu).x
                for A, b in ((X, y), (X2, y2))]
        gap = np.linalg.norm(sols[0] - sols[1])
        bound = erm_sensitivity(1.0, mu, n, tol)
        assert gap <= bound
        worst = max(worst, gap / bound)
    assert worst > 0.2  # the bound is not vacuous on these neighbours


def test_output_perturbation_reports_its_noise():
    X, y = _data(1)
    mu = 0.1
    w, event = output_perturbation(_logistic_ridge(X, y, mu), np.zeros(4), n_samples=300, lipschitz=1.0,
                                   strong_convexity=mu, smoothness=0.35, noise_std=0.2, tol=1e-4,
                                   radius=10.0, random_state=0)
    assert event == GaussianRelease(erm_sensitivity(1.0, mu, 300, 1e-4), 0.2)
    w2, _ = output_perturbation(_logistic_ridge(X, y, mu), np.zeros(4), n_samples=300, lipschitz=1.0,
                                strong_convexity=mu, smoothness=0.35, noise_std=0.2, tol=1e-4,
                                radius=10.0, random_state=0)
    np.testing.assert_array_equal(w, w2)


def test_invalid_arguments():
    f = lambda x: (0.5 * x @ x, x)  # noqa: E731
    with pytest.raises(ValueError, match="radius"):
        certified_minimize(f, np.zeros(2), strong_convexity=1.0, smoothness=1.0, tol=1e-6)
    with pytest.raises(ValueError):
        certified_minimize(f, np.zeros(2), strong_convexity=0.0, smoothness=1.0, tol=1e-6, radius=1.0)


def test_certificate_is_honest_near_the_floating_point_floor():
    mu, H = 1e-4, 100.0
    a = np.array([1000.123456789, 0.5])

    def f(x):
        r = x - a
        return 0.5 * mu * r[0] ** 2 + 0.5 * H * r[1] ** 2, np.array([mu * r[0], H * r[1]])

    for tol in [1e-3, 1e-4, 5e-5]:
        sol = certified_minimize(f, np.zeros(2), strong_convexity=mu, smoothness=H, tol=tol, radius=1e4)
        assert np.linalg.norm(sol.x - a) <= tol
    with pytest.raises(ValueError, match="floating point"):
        certified_minimize(f, np.zeros(2), strong_convexity=mu, smoothness=H, tol=1e-8, radius=1e4)


def test_a_declared_smoothness_bound_replaces_an_impossible_certificate_by_the_public_step_count():
    """At the floating-point floor with the minimiser on the boundary, no certificate can pass: the
    gradient there is not 0 and the mapping bound's rounding margin is twice the floor. Without a
    gradient bound that raises (in a private fit: after the budget is charged); with one, the
    V-FISTA step count fixed by public constants guarantees the tolerance."""
    b = np.array([3.0, 4.0])
    f = lambda x: (0.5 * (x - b) @ (x - b), x - b)  # noqa: E731
    tol = 16 * np.finfo(float).eps  # exactly the floor at radius 1, centre 0, condition 1
    with pytest.raises(RuntimeError, match="could not be certified"):
        certified_minimize(f, np.zeros(2), strong_convexity=1.0, smoothness=1.0, tol=tol, radius=1.0)
    sol = certified_minimize(f, np.zeros(2), strong_convexity=1.0, smoothness=1.0, tol=tol, radius=1.0,
                             gradient_bound=5.0)
    assert np.linalg.norm(sol.x - b / 5.0) <= tol


@pytest.mark.parametrize("seed", range(3))
def test_guaranteed_steps_bound_the_work_and_reach_the_tolerance(seed):
    rng = np.random.default_rng(seed)
    Q, _ = np.linalg.qr(rng.normal(size=(5, 5)))
    eigen = np.geomspace(1.0, 400.0, 5)
    A = Q @ np.diag(eigen) @ Q.T
    target = rng.normal(size=5)
    target *= 0.5 / np.linalg.norm(target)
    calls = []

    def f(x):
        calls.append(1)
        r = x - target
        return 0.5 * r @ A @ r, A @ r

    radius, tol = 1.0, 1e-9
    bound = float(np.linalg.norm(A @ target))  # the gradient norm at the start x0 = 0
    sol = certified_minimize(f, np.zeros(5), strong_convexity=1.0, smoothness=400.0, tol=tol, radius=radius,
                             gradient_bound=bound)
    assert np.linalg.norm(sol.x - target) <= tol
    steps = guaranteed_steps(1.0, 400.0, radius, bound, tol)
    assert len(calls) <= steps + 2 * (steps // 5 + 1)  # one gradient per step, two per certificate check


def test_guaranteed_steps_survive_a_smoothness_one_ulp_above_the_strong_convexity():
    """sqrt(H / mu) rounded to 1 made the contraction log1p(-1): a 'math domain error' after the charge."""
    assert guaranteed_steps(1.0, 1.0 + 2.0**-52, 1.0, 1.0, 1e-3) == 1
    assert guaranteed_steps(0.6169941109169519, 0.616994110916952, 1.9e-8, 1.0, 9.6e-10) >= 1
    # Products of the constants that underflow or overflow are taken in logarithms.
    assert 0 < guaranteed_steps(1.0, 1e4, 40.0, 10.0, 1e-300) < 10**6
    assert guaranteed_steps(1.0, float("inf"), 1.0, 1.0, 1e-3) == float("inf")


def test_guaranteed_steps_refuse_a_bound_that_is_not_a_number():
    f = lambda x: (0.5 * x @ x, x)  # noqa: E731
    with pytest.raises(ValueError, match="gradient_bound"):
        certified_minimize(f, np.zeros(2), strong_convexity=1.0, smoothness=1.0, tol=1e-6, radius=1.0,
                           gradient_bound=float("inf"))
