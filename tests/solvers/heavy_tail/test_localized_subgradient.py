"""'localized_subgradient': the localized noisy clipped subgradient method and its strongly convex wrapper.

Privacy: the solver runs on a problem that answers every clipped-gradient query
for the dataset and for a neighbour whose differing row is an extreme outlier,
at the same iterate, and logs every batch it takes; every Gaussian release is
recorded with the sensitivity it was charged. Accounting: the planned event
equals the released one, and is exactly mu-GDP after the quantile. Utility: the
noise-free run approaches the non-private optimum, and the error falls with n
and with mu on heavy-tailed data.
"""

import math

import numpy as np
import pytest
from sklearn.linear_model import QuantileRegressor

from skdp.accounting import ExponentialMechanismRelease, GaussianRelease, Sequential
from skdp.losses import AbsoluteLoss, CallableLoss, HuberLoss, QuantileLoss, SquaredLoss
from skdp.mechanisms import clip_rows
from skdp.solvers import GLMProblem, LocalizedSubgradient, MomentBounds, ProblemSpec
from privacy_harness import (
    CoupledProblem,
    assert_event_as_planned,
    neighbours,
    record_releases,
    run_as_planned,
)


def _wild(z, y):
    """A user loss (absolute residual) through the callable adapter."""
    r = z - y
    return np.abs(r), np.sign(r)


LOSSES = [SquaredLoss(), HuberLoss(1.0), AbsoluteLoss(), QuantileLoss(0.8), CallableLoss(_wild)]
# (name, solver, mu, ridge weight). mu = 50 keeps several chunks in the practical wrapper (at small
# budgets its public rule merges them into one).
CONFIGS = [
    ("plain", LocalizedSubgradient(), 0.5, 0.0),
    ("ridge-wrapper", LocalizedSubgradient(), 50.0, 0.05),
    ("theory-ridge-wrapper", LocalizedSubgradient(schedule="theory", moments=MomentBounds(bound=20.0)), 0.5,
     0.05),
]


def _blocks(event):
    """The per-batch events of a released event: Sequential([quantile?, Parallel(blocks)])."""
    return list(event.events[-1].events)


@pytest.mark.parametrize("loss", LOSSES, ids=repr)
@pytest.mark.parametrize("name,solver,mu,ridge", CONFIGS, ids=[c[0] for c in CONFIGS])
def test_every_release_respects_the_sensitivity_it_claims(loss, name, solver, mu, ridge):
    seed = len(name) + len(repr(loss))
    X, y, X2, y2, row_bound, i = neighbours(seed=seed)
    penalty = np.r_[np.full(4, ridge), 0.0]
    problem = CoupledProblem(X, y, X2, y2, loss, penalty, 5.0, row_bound)
    schedule = "theory" if name.startswith("theory") else "practical"
    with record_releases() as log:
        result, planned = run_as_planned(solver, problem, mu, 0.2, seed, schedule=schedule)
    assert np.all(np.isfinite(result.coef))
    assert result.schedule["strongly_convex"] == (ridge > 0)
    if name == "ridge-wrapper":
        assert len(result.schedule["chunk_sizes"]) > 1
    # Every clipped-gradient query moves by at most 2 clip between the neighbours.
    checks, batches = problem.checks, problem.batches
    assert checks and max(checks) <= 1.0 + 1e-9
    if any(i in b for b in batches):
        assert max(checks) > 1e-4  # the differing row is really seen by some release
    # Batches are disjoint, one per released block.
    rows = np.concatenate(batches)
    assert len(np.unique(rows)) == len(rows) == result.schedule["rows_used"]
    blocks = _blocks(result.event)
    assert len(blocks) == len(batches)
    # The releases come block after block, T per block, with the sensitivity the block's event
    # claims, and every block is exactly mu-GDP (noise calibrated to the steps it ran).
    assert len(log) == sum(block.count for block in blocks)
    start = 0
    for block, batch in zip(blocks, batches):
        released = log[start:start + block.count]
        start += block.count
        np.testing.assert_allclose([r.sensitivity for r in released], block.event.sensitivity, rtol=1e-12)
        assert all(r.event == block.event for r in released)
        assert block.event.sensitivity / block.event.noise_std == pytest.approx(mu / math.sqrt(block.count),
                                                                               rel=1e-12)
    # The queries of a block read exactly its batch.
    queries = iter(problem.queries)
    for block, batch in zip(blocks, batches):
        for _ in range(block.count):
            np.testing.assert_array_equal(next(queries), batch)
    assert_event_as_planned(result.event, planned, deltas=(1e-6,))


LEDGER = [
    ("squared", SquaredLoss(), LocalizedSubgradient(), 0.7, False),
    ("absolute", AbsoluteLoss(), LocalizedSubgradient(), 0.7, False),
    ("absolute-capped", AbsoluteLoss(), LocalizedSubgradient(max_grad_evals=3000), 0.7, False),
    ("huber-wrapper", HuberLoss(1.0), LocalizedSubgradient(), 40.0, True),
    ("quantile-theory", QuantileLoss(0.8),
     LocalizedSubgradient(schedule="theory", moments=MomentBounds(bound=10.0)), 0.7, False),
]


@pytest.mark.parametrize("name,loss,solver,mu,ridge", LEDGER, ids=[c[0] for c in LEDGER])
def test_ledger_is_exactly_mu_gdp_plus_the_quantile(name, loss, solver, mu, ridge):
    X, y, *_ = neighbours(n=600, seed=5)
    eps_q = 0.1
    penalty = np.r_[np.full(4, 0.1 if ridge else 0.0), 0.0]
    problem = CoupledProblem(X, y, X, y, loss, penalty, 5.0, math.hypot(5.0, 1.0))
    schedule = "theory" if name.endswith("theory") else "practical"
    spec = ProblemSpec(n_samples=len(y), n_coef=5, loss=loss, ridge=ridge, schedule=schedule)
    result, planned = run_as_planned(solver, problem, mu, eps_q, 1, schedule=schedule)
    n_q = solver.n_quantiles(spec)
    assert n_q == (1 if name.startswith("squared") or name.startswith("huber") else 0)
    target = Sequential([ExponentialMechanismRelease(eps_q)] * n_q + [GaussianRelease(1.0, 1.0 / mu)])
    gaussian = GaussianRelease(1.0, 1.0 / mu)
    for delta in (1e-5, 1e-8):
        released = result.event.epsilon(delta)
        assert released == pytest.approx(planned.epsilon(delta), rel=1e-9)
        assert released == pytest.approx(target.epsilon(delta), rel=1e-9)
        # The batches compose in parallel: the Gaussian part is exactly mu-GDP.
        assert result.event.events[-1].epsilon(delta) == pytest.approx(gaussian.epsilon(delta), rel=1e-9)
    rows = np.concatenate(problem.batches)
    assert len(np.unique(rows)) == len(rows)  # disjoint batches
    if solver.max_grad_evals is not None:
        assert result.schedule["grad_evals"] <= solver.max_grad_evals
        uncapped = LocalizedSubgradient().layout(spec, mu)
        assert sum(t for _, t in uncapped[0]) > result.schedule["n_steps"]


def _gaussian_regression(n, seed, d=5):
    rng = np.random.default_rng(seed)
    X = np.hstack([rng.normal(size=(n, d)), np.ones((n, 1))])
    w = np.r_[rng.normal(size=d) / math.sqrt(d), 0.3]
    return X, X @ w + rng.normal(size=n)


@pytest.mark.parametrize("loss", [AbsoluteLoss(), SquaredLoss()], ids=repr)
def test_noise_free_run_approaches_the_non_private_optimum(loss):
    """mu = inf, eps_q = inf and a clip that never binds.

    The method does not minimise the full empirical objective: its output is
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
        result, _ = run_as_planned(LocalizedSubgradient(clip=1e6), problem, math.inf, math.inf, seed)
        if isinstance(loss, AbsoluteLoss):
            lad = QuantileRegressor(quantile=0.5, alpha=0.0, solver="highs", fit_intercept=False)
            best = lad.fit(X, y).coef_
        else:
            best = np.linalg.lstsq(X, y, rcond=None)[0]
        excess = problem.objective(result.coef) - problem.objective(best)
        assert -1e-9 <= excess <= 4.0 * p / n


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
        result, _ = run_as_planned(LocalizedSubgradient(), problem, mu, 0.1, 100 + s)
        errors.append(np.linalg.norm(result.coef - w))
    return float(np.mean(errors))


def test_error_falls_with_n_and_with_mu_on_heavy_tailed_data():
    assert _mean_error(8000, 0.5) < 0.6 * _mean_error(500, 0.5)
    assert _mean_error(1000, 2.0) < 0.6 * _mean_error(1000, 0.2)


def _spec(n, **changes):
    fields = dict(n_samples=n, n_coef=5, loss=SquaredLoss())
    fields.update(changes)
    return ProblemSpec(**fields)


def test_practical_schedule_layout_is_public_and_capped():
    layout = LocalizedSubgradient().layout(_spec(100000), 0.3)
    sizes = [n_i for n_i, _ in layout[0]]
    assert len(layout) == 1 and sum(sizes) == 100000 and len(sizes) == 6
    assert all(a >= 2 * b for a, b in zip(sizes, sizes[1:]))  # batches (at least) halve
    # A cap on gradient evaluations cuts the steps, keeps the batches.
    capped = LocalizedSubgradient(max_grad_evals=10**6).layout(_spec(100000), 0.3)
    assert [n for n, _ in capped[0]] == sizes
    assert sum(n * t for n, t in capped[0]) <= 10**6
    # Tiny data: a single phase with every row.
    assert LocalizedSubgradient().layout(_spec(10), 0.3) == [[(10, 200)]]
    # The wrapper doubles its chunks, and merges the noisy first ones at small budgets.
    wrapped = LocalizedSubgradient()
    many = [sum(n for n, _ in c) for c in wrapped.layout(_spec(100000, n_coef=21, ridge=True), 100.0)]
    assert len(many) == 5 and sum(many) == 100000 and all(b >= 2 * a - 1 for a, b in zip(many, many[1:]))
    assert len(wrapped.layout(_spec(2000, n_coef=21, ridge=True), 0.3)) == 1
    # strongly_convex=False never wraps; True wraps without a ridge.
    assert len(LocalizedSubgradient(strongly_convex=False).layout(_spec(100000, ridge=True), 100.0)) == 1
    assert len(LocalizedSubgradient(strongly_convex=True).layout(_spec(100000), 100.0)) > 1
    # The theory schedule follows the paper: batches 2^(l-1), ..., 1 and T_i = ceil(n_i ln n).
    theory = LocalizedSubgradient(schedule="theory", moments=MomentBounds(bound=1.0))
    assert theory.layout(_spec(70, schedule="theory"), 1.0)[0] == [
        (n_i, math.ceil(n_i * math.log(70))) for n_i in (32, 16, 8, 4, 2, 1)]


def test_refusals():
    assert LocalizedSubgradient.capabilities.l1 is False
    with pytest.raises(ValueError, match="L1"):
        LocalizedSubgradient().check(_spec(400, l1=True))
    theory = _spec(400, schedule="theory")
    with pytest.raises(ValueError, match="moment"):
        LocalizedSubgradient(schedule="theory").check(theory)
    with pytest.raises(ValueError, match="moment_order"):
        LocalizedSubgradient(schedule="theory", moments=MomentBounds(order=2, bound=1.0)).check(theory)
    with pytest.raises(ValueError, match="schedule"):
        LocalizedSubgradient(schedule="fast")
    with pytest.raises(ValueError, match="strongly_convex"):
        LocalizedSubgradient(strongly_convex="yes")
    # Every convex loss is accepted, callables included.
    for loss in LOSSES:
        LocalizedSubgradient().check(_spec(400, loss=loss))


def test_theory_schedule_warns_before_an_expensive_run(monkeypatch):
    from skdp.solvers.heavy_tail import localized_subgradient

    X, y, *_ = neighbours(n=300, seed=0)
    problem = GLMProblem(X, y, AbsoluteLoss(), np.zeros(5), 5.0, 10.0, intercept=True)
    solver = LocalizedSubgradient(schedule="theory", moments=MomentBounds(bound=5.0))
    evals = sum(n * t for c in solver.layout(_spec(300, loss=AbsoluteLoss(), schedule="theory"), 1.0)
                for n, t in c)
    monkeypatch.setattr(localized_subgradient, "_EXPENSIVE", evals - 1)  # the threshold is 1e8 evaluations
    with pytest.warns(RuntimeWarning, match="max_grad_evals"):
        run_as_planned(solver, problem, 1.0, 0.1, 0, schedule="theory")
    capped = solver.replace(max_grad_evals=evals - 1)
    result, planned = run_as_planned(capped, problem, 1.0, 0.1, 0, schedule="theory")  # no warning
    assert result.schedule["grad_evals"] <= evals - 1
    assert_event_as_planned(result.event, planned)
