"""Tests of 'localized_subgradient' (paper 001, Algorithms 2 and 3 and the strongly convex wrapper).

Privacy: the solver runs on a problem double that answers every clipped-gradient
query for the dataset and for a neighbour whose differing row is an extreme
outlier, at the same iterate, and logs every batch it takes; the recorder sees
every Gaussian release with the sensitivity the solver claims. Accounting: the
planned event equals the released one, and is exactly mu-GDP after the
quantile. Utility: the noise-free run approaches the non-private optimum,
Lemma 8 (clipped mean) and Lemma 12 (Algorithm 2) hold with their explicit
constants, and the error falls with n and with mu on heavy-tailed data.
"""

import math
from collections import OrderedDict

import numpy as np
import pytest
from sklearn.linear_model import QuantileRegressor

from skdp.accounting import ExponentialMechanismRelease, GaussianRelease, Sequential
from skdp.losses import AbsoluteLoss, HuberLoss, QuantileLoss, SquaredLoss
from skdp.mechanisms import clip_rows
from skdp.solvers import CallableLoss, GLMProblem
from skdp.solvers.localized_subgradient import LocalizedSubgradient, noisy_clipped_subgradient, project_balls


class CoupledProblem(GLMProblem):
    """A GLMProblem that evaluates every query on a neighbour too and logs its batches."""

    def __init__(self, X, y, X2, y2, loss, penalty, radius, row_bound, checks, batches, index=None,
                 intercept=True):
        super().__init__(X, y, loss, penalty, radius, row_bound, intercept=intercept)
        self.other = GLMProblem(X2, y2, loss, penalty, radius, row_bound, intercept=intercept)
        self.checks = checks
        self.batches = batches
        self.index = np.arange(len(y)) if index is None else index

    def clipped_gradient_sum(self, w, clip, rows=None):
        a = super().clipped_gradient_sum(w, clip, rows)
        b = self.other.clipped_gradient_sum(w, clip, rows)
        self.checks.append(float(np.linalg.norm(a - b)) / (2.0 * clip))
        return a

    def subset(self, index):
        self.batches.append(self.index[index])
        return CoupledProblem(self.X[index], self.y[index], self.other.X[index], self.other.y[index],
                              self.loss, self.penalty, self.radius, self.row_bound, self.checks, self.batches,
                              index=self.index[index], intercept=self.intercept)


def _neighbours(n=400, d=4, seed=0):
    rng = np.random.default_rng(seed)
    A = math.sqrt(d) + 3
    X = np.hstack([clip_rows(rng.standard_t(3, size=(n, d)), A), np.ones((n, 1))])
    y = X[:, :d] @ rng.normal(size=d) + rng.standard_t(2.5, size=n)
    X2, y2 = X.copy(), y.copy()
    i = int(rng.integers(n))
    X2[i, :d] = clip_rows(np.full((1, d), 1e6 * (-1) ** seed), A)[0]
    y2[i] = -1e6 * (-1) ** seed
    return X, y, X2, y2, math.hypot(A, 1.0), i


def _wild(z, y):
    """A user loss (absolute residual) through the callable adapter."""
    r = z - y
    return np.abs(r), np.sign(r)


LOSSES = [SquaredLoss(), HuberLoss(1.0), AbsoluteLoss(), QuantileLoss(0.8), CallableLoss(_wild)]
# (name, solver arguments, mu, ridge weight). mu = 50 keeps several chunks in the practical
# wrapper (at small budgets its public rule merges them into one).
CONFIGS = [
    ("plain", {}, 0.5, 0.0),
    ("ridge-wrapper", {"ridge": True, "n_coef": 5}, 50.0, 0.05),
    ("theory-ridge-wrapper", {"schedule": "theory", "moment_bound": 20.0, "ridge": True}, 0.5, 0.05),
]


def _blocks(event):
    """The per-batch events of a released event: Sequential([quantile?, Parallel(blocks)])."""
    return list(event.events[-1].events)


@pytest.mark.parametrize("loss", LOSSES, ids=repr)
@pytest.mark.parametrize("name,kwargs,mu,ridge", CONFIGS, ids=[c[0] for c in CONFIGS])
def test_every_release_respects_the_sensitivity_it_claims(loss, name, kwargs, mu, ridge):
    seed = len(name) + len(repr(loss))
    X, y, X2, y2, row_bound, i = _neighbours(seed=seed)
    checks, batches, records = [], [], []
    penalty = np.r_[np.full(4, ridge), 0.0]
    problem = CoupledProblem(X, y, X2, y2, loss, penalty, 5.0, row_bound, checks, batches)
    solver = LocalizedSubgradient(**kwargs)
    solver.recorder = lambda key, value, sens: records.append((key.rsplit("/", 1)[0], sens))
    result = solver.solve(problem, mu, 0.2, np.random.default_rng(seed))
    assert np.all(np.isfinite(result.coef))
    assert result.schedule["strongly_convex"] == (ridge > 0)
    if name == "ridge-wrapper":
        assert len(result.schedule["chunk_sizes"]) > 1
    # Every clipped-gradient query moves by at most 2 clip between the neighbours.
    assert checks and max(checks) <= 1.0 + 1e-9
    if any(i in b for b in batches):
        assert max(checks) > 1e-4  # the differing row is really seen by some release
    # Batches are disjoint, one per released block.
    rows = np.concatenate(batches)
    assert len(np.unique(rows)) == len(rows) == result.schedule["rows_used"]
    blocks = _blocks(result.event)
    assert len(blocks) == len(batches)
    # The recorder's sensitivities are the ones the event claims, T releases per block,
    # and every block is exactly mu-GDP (noise calibrated to the steps it ran).
    groups = OrderedDict()
    for key, sens in records:
        groups.setdefault(key, []).append(sens)
    assert len(groups) == len(blocks)
    for sens_list, block in zip(groups.values(), blocks):
        assert len(sens_list) == block.count
        np.testing.assert_allclose(sens_list, block.event.sensitivity, rtol=1e-12)
        assert block.event.sensitivity / block.event.noise_std == pytest.approx(mu / math.sqrt(block.count),
                                                                               rel=1e-12)
    planned = solver.event(loss, mu, 0.2, len(y))
    assert result.event.epsilon(1e-6) == pytest.approx(planned.epsilon(1e-6), rel=1e-9)


LEDGER = [
    ("squared", SquaredLoss(), {}, 0.7),
    ("absolute", AbsoluteLoss(), {}, 0.7),
    ("absolute-capped", AbsoluteLoss(), {"max_grad_evals": 3000}, 0.7),
    ("huber-wrapper", HuberLoss(1.0), {"ridge": True, "n_coef": 5}, 40.0),
    ("quantile-theory", QuantileLoss(0.8), {"schedule": "theory", "moment_bound": 10.0}, 0.7),
]


@pytest.mark.parametrize("name,loss,kwargs,mu", LEDGER, ids=[c[0] for c in LEDGER])
def test_ledger_is_exactly_mu_gdp_plus_the_quantile(name, loss, kwargs, mu):
    X, y, *_ = _neighbours(n=600, seed=5)
    eps_q = 0.1
    checks, batches = [], []
    penalty = np.r_[np.full(4, 0.1 if kwargs.get("ridge") else 0.0), 0.0]
    problem = CoupledProblem(X, y, X, y, loss, penalty, 5.0, math.hypot(5.0, 1.0), checks, batches)
    solver = LocalizedSubgradient(**kwargs)
    planned = solver.event(loss, mu, eps_q, len(y))  # from public inputs, before any data
    result = solver.solve(problem, mu, eps_q, np.random.default_rng(1))
    n_q = solver.n_quantiles(loss)
    assert n_q == (1 if name.startswith("squared") or name.startswith("huber") else 0)
    target = Sequential([ExponentialMechanismRelease(eps_q)] * n_q + [GaussianRelease(1.0, 1.0 / mu)])
    gaussian = GaussianRelease(1.0, 1.0 / mu)
    for delta in (1e-5, 1e-8):
        released = result.event.epsilon(delta)
        assert released == pytest.approx(planned.epsilon(delta), rel=1e-9)
        assert released == pytest.approx(target.epsilon(delta), rel=1e-9)
        # The batches compose in parallel: the Gaussian part is exactly mu-GDP.
        assert result.event.events[-1].epsilon(delta) == pytest.approx(gaussian.epsilon(delta), rel=1e-9)
    rows = np.concatenate(batches)
    assert len(np.unique(rows)) == len(rows)  # disjoint batches
    if "max_grad_evals" in kwargs:
        assert result.schedule["grad_evals"] <= kwargs["max_grad_evals"]
        uncapped = LocalizedSubgradient().plan(len(y), mu)
        assert sum(t for _, t in uncapped[0]) > result.schedule["n_steps"]


def _gaussian_regression(n, seed, d=5):
    rng = np.random.default_rng(seed)
    X = np.hstack([rng.normal(size=(n, d)), np.ones((n, 1))])
    w = np.r_[rng.normal(size=d) / math.sqrt(d), 0.3]
    return X, X @ w + rng.normal(size=n)


@pytest.mark.parametrize("loss", [AbsoluteLoss(), SquaredLoss()], ids=repr)
def test_noise_free_run_approaches_the_non_private_optimum(loss):
    """mu = inf, eps_q = inf and a clip that never binds.

    Algorithm 3 does not minimise the full empirical objective: its output is
    built from disjoint batches, the largest holding about n/2 rows, so its error
    covariance is a small multiple k of the full-data minimiser's. For a
    regression with unit noise the excess empirical objective is then about
    ``k (d+1) / (2 n)`` (squared) or ``k (d+1) / (4 f(0) n)`` with ``f(0) = 0.4``
    (absolute); with k about 2 both are about (d+1)/n. The tolerance is 4 (d+1)/n.
    """
    n, p = 3000, 6
    for seed in range(2):
        X, y = _gaussian_regression(n, seed)
        problem = GLMProblem(X, y, loss, np.zeros(p), 50.0, float(np.linalg.norm(X, axis=1).max()),
                             intercept=True)
        result = LocalizedSubgradient(clip=1e6).solve(problem, math.inf, math.inf,
                                                      np.random.default_rng(seed))
        if isinstance(loss, AbsoluteLoss):
            lad = QuantileRegressor(quantile=0.5, alpha=0.0, solver="highs", fit_intercept=False)
            best = lad.fit(X, y).coef_
        else:
            best = np.linalg.lstsq(X, y, rcond=None)[0]
        excess = problem.objective(result.coef) - problem.objective(best)
        assert -1e-9 <= excess <= 4.0 * p / n


def test_lemma_8_clipped_mean_bias_and_variance_on_pareto_samples():
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
    # Variance of the noisy clipped mean (one step of Algorithm 2 from 0 with step 1 returns it,
    # negated): E ||nu~ - E nu~||^2 <= d sigma^2 + r^(2) / s.
    s, sigma, reps = 50, 0.05, 1500
    draws = []
    Xs = np.zeros((s, d))
    Xs[:, 0] = 1.0
    for _ in range(reps):
        batch = GLMProblem(Xs, -(rng.pareto(alpha, s) + 1.0), SquaredLoss(), np.zeros(d), 1e9, 1.0)
        w, _ = noisy_clipped_subgradient(batch, np.zeros(d), 0.0, 1.0, C, 1, sigma, rng)
        draws.append(-w)
    draws = np.array(draws)
    variance = float(np.mean(np.sum((draws - draws.mean(axis=0)) ** 2, axis=1)))
    assert variance <= d * sigma**2 + moment(2) / s
    assert variance >= d * sigma**2 * 0.8  # the noise really is there


def test_lemma_12_for_algorithm_2_on_a_strongly_convex_problem():
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
        w, _ = noisy_clipped_subgradient(problem, w0, lam, eta, C, T, sigma, rng, balls=[(None, R)])
        errors.append(float(np.sum((w - w_hat) ** 2)))
    r2 = float(np.mean(per_sample**2))
    bound = (math.exp(-lam * eta * T / 2) * float(np.sum((w0 - w_hat) ** 2))
             + 8 * eta / lam * (r2 + lam**2 * (2 * R) ** 2 + d * sigma**2) + 20 / lam**2 * (r2 / C) ** 2)
    assert np.mean(errors) <= bound
    assert np.mean(errors) >= 0.01 * bound  # not vacuous: the noise term dominates both


def _heavy(n, seed, d=5):
    rng = np.random.default_rng(seed)
    w = rng.normal(size=d) / math.sqrt(d)
    X = rng.standard_t(3, size=(n, d))
    y = X @ w + rng.standard_t(2.5, size=n)
    A = math.sqrt(d) + 3
    return np.hstack([clip_rows(X, A), np.ones((n, 1))]), y, np.r_[w, 0.0], math.hypot(A, 1.0)


def _mean_error(n, mu, seeds=4):
    errors = []
    for s in range(seeds):
        X, y, w, rb = _heavy(n, s)
        problem = GLMProblem(X, y, AbsoluteLoss(), np.zeros(6), 5.0, rb, intercept=True)
        coef = LocalizedSubgradient(n_coef=6).solve(problem, mu, 0.1, np.random.default_rng(100 + s)).coef
        errors.append(np.linalg.norm(coef - w))
    return float(np.mean(errors))


def test_error_falls_with_n_and_with_mu_on_heavy_tailed_data():
    assert _mean_error(8000, 0.5) < 0.6 * _mean_error(500, 0.5)
    assert _mean_error(1000, 2.0) < 0.6 * _mean_error(1000, 0.2)


def test_practical_schedule_layout_is_public_and_capped():
    solver = LocalizedSubgradient()
    plan = solver.plan(100000, 0.3)
    sizes = [n_i for n_i, _ in plan[0]]
    assert len(plan) == 1 and sum(sizes) == 100000 and len(sizes) == 6
    assert all(a >= 2 * b for a, b in zip(sizes, sizes[1:]))  # batches (at least) halve
    # A cap on gradient evaluations cuts the steps, keeps the batches.
    capped = LocalizedSubgradient(max_grad_evals=10**6).plan(100000, 0.3)
    assert [n for n, _ in capped[0]] == sizes
    assert sum(n * t for n, t in capped[0]) <= 10**6
    # Tiny data: a single phase with every row.
    assert LocalizedSubgradient().plan(10, 0.3) == [[(10, 200)]]
    # The wrapper doubles its chunks, and merges the noisy first ones at small budgets.
    wrapped = LocalizedSubgradient(ridge=True, n_coef=21)
    many = [sum(n for n, _ in c) for c in wrapped.plan(100000, 100.0)]
    assert len(many) == 5 and sum(many) == 100000 and all(b >= 2 * a - 1 for a, b in zip(many, many[1:]))
    assert len(wrapped.plan(2000, 0.3)) == 1
    # The theory schedule follows the paper: batches 2^(l-1), ..., 1 and T_i = ceil(n_i ln n).
    theory = LocalizedSubgradient(schedule="theory", moment_bound=1.0).plan(70, 1.0)[0]
    assert theory == [(n_i, math.ceil(n_i * math.log(70))) for n_i in (32, 16, 8, 4, 2, 1)]


def test_refusals():
    X, y, *_ = _neighbours()
    problem = GLMProblem(X, y, AbsoluteLoss(), np.zeros(5), 5.0, 10.0, l1=np.full(5, 0.1))
    assert LocalizedSubgradient.supports_l1 is False
    with pytest.raises(ValueError, match="L1"):
        LocalizedSubgradient().solve(problem, 0.5, 0.1, np.random.default_rng(0))
    with pytest.raises(ValueError, match="moment"):
        LocalizedSubgradient(schedule="theory")
    with pytest.raises(ValueError, match="moment_order"):
        LocalizedSubgradient(schedule="theory", moment_bound=1.0, moment_order=2)
    with pytest.raises(ValueError, match="schedule"):
        LocalizedSubgradient(schedule="fast")
    with pytest.raises(ValueError, match="coefficients"):
        plain = GLMProblem(X, y, SquaredLoss(), np.zeros(5), 5.0, 10.0)
        LocalizedSubgradient(n_coef=3).solve(plain, 0.5, 0.1, np.random.default_rng(0))
    # Every convex loss is accepted, callables included.
    for loss in LOSSES:
        LocalizedSubgradient().check_loss(loss)


def test_projection_onto_three_balls_is_exact():
    from scipy.optimize import minimize

    rng = np.random.default_rng(0)
    for _ in range(15):
        v = rng.normal(size=3) * 4
        balls = [(None, 1.5), (rng.normal(size=3) * 0.6, 1.2), (rng.normal(size=3) * 0.6, 1.3)]
        centers = [np.zeros(3) if c is None else c for c, _ in balls]
        cons = [{"type": "ineq", "fun": lambda x, c=c, r=r: r * r - (x - c) @ (x - c)}
                for c, (_, r) in zip(centers, balls)]
        ref = minimize(lambda x: (x - v) @ (x - v), np.zeros(3), constraints=cons, method="SLSQP",
                       options={"ftol": 1e-14, "maxiter": 500})
        if not ref.success:
            continue
        got = project_balls(v, balls)
        for c, (_, r) in zip(centers, balls):
            assert np.linalg.norm(got - c) <= r * (1 + 1e-6)
        assert np.linalg.norm(got - v) <= np.linalg.norm(ref.x - v) + 1e-6
