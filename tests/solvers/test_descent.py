"""Noisy clipped gradients and descent: sensitivities, events and the error bounds they are analysed with.

The bounds are those of Lowy and Razaviyayn (2022, arXiv:2209.07403): the bias
and variance of a clipped Gaussian mean (their Lemma 8) and the error of
regularised noisy clipped descent on a strongly convex problem (their
Lemma 12).
"""

import math

import numpy as np
import pytest

from skdp.accounting import GaussianRelease, Repeated
from skdp.losses import SquaredLoss
from skdp.solvers import GLMProblem
from skdp.solvers.descent import (
    clipped_gaussian_mean,
    noise_std,
    noisy_clipped_descent,
    noisy_clipped_gradient,
    step_noise_std,
)
from skdp.solvers.geometry import project_ball
from privacy_harness import record_releases


def _problem(n=60, d=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    X /= np.maximum(1.0, np.linalg.norm(X, axis=1, keepdims=True) / 2.0)  # rows of norm <= 2
    y = X @ np.array([1.0, -0.5, 0.2]) + rng.standard_t(2, size=n)
    return GLMProblem(X, y, SquaredLoss(), np.full(d, 0.1), 5.0, 2.0)


def test_noise_scales():
    assert noise_std(2.0, 0.5) == 4.0
    assert noise_std(2.0, math.inf) == 0.0
    # T releases of a clipped mean of m rows, mu-GDP together: sqrt(T) 2 C / (m mu) each.
    assert step_noise_std(1.5, 30, 4, 0.5) == pytest.approx(2.0 * 2.0 * 1.5 / (30 * 0.5))


def test_noisy_clipped_gradient_releases_the_clipped_mean_of_its_rows():
    problem = _problem()
    w = np.array([0.3, 0.0, -0.2])
    rows = np.arange(10, 30)
    with record_releases() as log:
        noisy, event = noisy_clipped_gradient(problem, w, 0.7, 0.25, np.random.default_rng(0), rows)
    assert event == GaussianRelease(2.0 * 0.7 / 20, 0.25)
    assert len(log) == 1 and log[0].event == event
    np.testing.assert_allclose(log[0].value, problem.clipped_gradient_sum(w, 0.7, rows) / 20)
    assert not np.allclose(noisy, log[0].value)


def test_noisy_clipped_descent_releases_one_clipped_mean_per_step():
    problem = _problem()
    steps = [0.1] * 7
    with record_releases() as log:
        w, event = noisy_clipped_descent(problem, np.zeros(3), clip=0.5, std=0.3, steps=steps,
                                         rng=np.random.default_rng(1), project=lambda v: project_ball(v, 0.8))
    assert event == Repeated(GaussianRelease(2.0 * 0.5 / 60, 0.3), 7)
    assert [r.event for r in log] == [GaussianRelease(2.0 * 0.5 / 60, 0.3)] * 7
    assert np.linalg.norm(w) <= 0.8 * (1 + 1e-12)


def test_noise_free_descent_follows_the_explicit_and_proximal_steps():
    problem = _problem()
    anchor, lam, eta = np.array([0.5, 0.5, 0.5]), 2.0, 0.3
    g0 = problem.clipped_gradient_sum(anchor, 1.0) / problem.n_samples + problem.penalty * anchor
    explicit, _ = noisy_clipped_descent(problem, anchor, clip=1.0, std=0.0, steps=[eta], rng=None,
                                        anchor=anchor, lam=lam)
    np.testing.assert_allclose(explicit, anchor - eta * g0)  # the regulariser's gradient is 0 at the anchor
    start = np.zeros(3)
    g = problem.clipped_gradient_sum(start, 1.0) / problem.n_samples
    prox, _ = noisy_clipped_descent(problem, start, clip=1.0, std=0.0, steps=[eta], rng=None, anchor=anchor,
                                    lam=lam, proximal=True)
    np.testing.assert_allclose(prox, (start - eta * g + eta * lam * anchor) / (1 + eta * lam))


def test_weights_average_the_iterates_from_the_start_point():
    problem = _problem()
    iterates = [np.zeros(3)]
    for _ in range(3):
        w, _ = noisy_clipped_descent(problem, iterates[-1], clip=1.0, std=0.0, steps=[0.2], rng=None)
        iterates.append(w)
    avg, _ = noisy_clipped_descent(problem, np.zeros(3), clip=1.0, std=0.0, steps=[0.2] * 3, rng=None,
                                   weights=[0.0, 1.0, 2.0, 3.0])
    np.testing.assert_allclose(avg, (iterates[1] + 2 * iterates[2] + 3 * iterates[3]) / 6)


def test_clipped_mean_bias_and_variance_bounds_on_pareto_gradients():
    """Lemma 8 through GLMProblem and one noisy step: bias below G_k^k / ((k - 1) C^(k-1)), variance
    below d sigma^2 + r^(2) / s."""
    alpha, C, d = 4.5, 3.0, 3
    moment = lambda k: alpha / (alpha - k)  # E Z^k of a Pareto(alpha) on [1, inf)
    # Bias: the clipped mean of Z e_1 misses E Z = alpha / (alpha - 1) by E (Z - C)_+.
    rng = np.random.default_rng(0)
    N = 200000
    Z = rng.pareto(alpha, N) + 1.0
    X = np.zeros((N, d))
    X[:, 0] = 1.0
    problem = GLMProblem(X, -Z, SquaredLoss(), np.zeros(d), 1.0, 1.0)  # gradient at 0 is Z e_1
    clipped_mean = problem.clipped_gradient_sum(np.zeros(d), C) / N
    bias = abs(clipped_mean[0] - moment(1))
    exact = C ** (1 - alpha) / (alpha - 1)
    tol = 4.0 * C / math.sqrt(N)
    assert abs(bias - exact) <= tol
    for k in (2.0, 3.0, 4.0):
        assert exact <= moment(k) / ((k - 1) * C ** (k - 1))
        assert bias <= moment(k) / ((k - 1) * C ** (k - 1)) + tol
    # Variance of the noisy clipped mean (one step from 0 with step 1 returns it, negated):
    # E ||nu~ - E nu~||^2 <= d sigma^2 + r^(2) / s.
    s, sigma, reps = 50, 0.05, 1500
    draws = []
    Xs = np.zeros((s, d))
    Xs[:, 0] = 1.0
    for _ in range(reps):
        batch = GLMProblem(Xs, -(rng.pareto(alpha, s) + 1.0), SquaredLoss(), np.zeros(d), 1e9, 1.0)
        w, _ = noisy_clipped_descent(batch, np.zeros(d), clip=C, std=sigma, steps=[1.0], rng=rng)
        draws.append(-w)
    draws = np.array(draws)
    variance = float(np.mean(np.sum((draws - draws.mean(axis=0)) ** 2, axis=1)))
    assert variance <= d * sigma**2 + moment(2) / s
    assert variance >= d * sigma**2 * 0.8  # the noise really is there


@pytest.mark.parametrize("k", [2.0, 3.0])
@pytest.mark.parametrize("clip", [2.0, 5.0])
def test_clipped_gaussian_mean_bias_and_variance_bounds(k, clip):
    """Lemma 8 on a stack of independent batches of Pareto-scaled vectors."""
    rng = np.random.default_rng(int(10 * k + clip))
    a, d, s, runs, mu = 4.5, 3, 40, 20000, 2.0
    v = np.array([0.6, 0.0, 0.8])
    Y = rng.pareto(a, size=(runs, s)) + 1.0  # Pareto(a), scale 1
    G = Y[..., None] * v
    noisy, event = clipped_gaussian_mean(G, clip, mu, rng)
    nu = a / (a - 1.0) * v
    r_k = a / (a - k)  # E Y^k
    r_2 = a / (a - 2.0)
    sigma = 2.0 * clip / (s * mu)
    assert event.sensitivity == pytest.approx(2.0 * clip / s) and event.noise_std == pytest.approx(sigma)
    mean = noisy.mean(axis=0)
    bias = np.linalg.norm(mean - nu)
    exact_bias = clip ** (1 - a) / (a - 1.0)  # E (Y - C)_+ for a Pareto(a) with scale 1
    bias_bound = r_k / ((k - 1.0) * clip ** (k - 1.0))
    assert exact_bias <= bias_bound
    se = np.sqrt(noisy.var(axis=0, ddof=1).sum() / runs)
    assert bias <= bias_bound + 4 * se
    assert abs(bias - exact_bias) <= 4 * se + 1e-12
    variance = np.sum(noisy.var(axis=0, ddof=1))
    assert variance <= (d * sigma**2 + r_2 / s) * 1.05


def test_regularised_noisy_descent_meets_its_error_bound():
    """Lemma 12 with explicit steps, eta <= 2 / lam and k = 2:

    E ||w_T - w_hat||^2 <= e^{-lam eta T / 2} ||w_0 - w_hat||^2
                           + (8 eta / lam) (r^2 + lam^2 D^2 + d sigma^2) + (20 / lam^2) (r^(2) / C)^2.
    """
    rng = np.random.default_rng(3)
    n, d, R = 40, 3, 3.0
    X = rng.normal(size=(n, d)) / math.sqrt(d)
    y = X @ np.array([0.8, -0.5, 0.3]) + 0.3 * rng.standard_t(3, size=n)
    lam, eta, T, mu = 1.0, 0.03, 300, 1.5
    w0 = np.array([0.5, 0.5, -0.5])
    row_norms = np.linalg.norm(X, axis=1)
    per_sample = row_norms * (R * row_norms + np.abs(y))  # sup over Ball(0, R) of ||grad f||
    C = float(per_sample.max())  # clipping never binds
    problem = GLMProblem(X, y, SquaredLoss(), np.zeros(d), R, float(row_norms.max()))
    w_hat = np.linalg.solve(X.T @ X / n + lam * np.eye(d), X.T @ y / n + lam * w0)
    assert np.linalg.norm(w_hat) < R  # the constrained minimiser is the unconstrained one
    sigma = math.sqrt(T) * 2.0 * C / (n * mu)
    errors = []
    for _ in range(60):
        w, _ = noisy_clipped_descent(problem, w0, clip=C, std=sigma, steps=[eta] * T, rng=rng, anchor=w0,
                                     lam=lam, project=lambda v: project_ball(v, R))
        errors.append(float(np.sum((w - w_hat) ** 2)))
    r2 = float(np.mean(per_sample**2))
    bound = (math.exp(-lam * eta * T / 2) * float(np.sum((w0 - w_hat) ** 2))
             + 8 * eta / lam * (r2 + lam**2 * (2 * R) ** 2 + d * sigma**2) + 20 / lam**2 * (r2 / C) ** 2)
    assert np.mean(errors) <= bound
    assert np.mean(errors) >= 0.01 * bound  # not vacuous: the noise term dominates both
