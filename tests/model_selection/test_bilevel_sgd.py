"""method="bilevel_sgd": per-step sensitivity on neighbours, ledger = recorded releases, descent, refusals."""

import math
import warnings

import numpy as np
import pytest

from skdp import BudgetAccountant, DPHeavyTailRegressor, DPInterpolatingClassifier
from skdp.accounting import GaussianRelease, PoissonSampled, Repeated
from skdp.model_selection import DPRegularizationTuner
from skdp.model_selection._bilevel import InnerProblem, descend
from skdp.model_selection._bilevel_sgd import (
    INNER_STEPS,
    PAIR_SENSITIVITY,
    MinibatchPair,
    sampling_rate,
    step_event,
)
from skdp.solvers import SufficientStatistics
from bilevel_parts import clipped_parts
from privacy_harness import record_releases


def _validation_loss(A, b, stats, omega, n_train):
    theta = np.linalg.solve(stats[0] + omega * np.eye(len(stats[1])), stats[1])
    return 0.5 * np.mean((A[n_train:] @ theta - b[n_train:]) ** 2)


class CoupledPair(MinibatchPair):
    """Answers every step's query on a neighbouring dataset too, at the same iterates and batch."""

    def __init__(self, other, row, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.other, self.row, self.gaps = other, row, []

    def _unit_sums(self, thetas, rows, lipschitz):
        a = super()._unit_sums(thetas, rows, lipschitz)
        b = self.other._unit_sums(thetas, rows, lipschitz)
        self.gaps.append((np.linalg.norm(a - b) / PAIR_SENSITIVITY, np.linalg.norm(a[0] - b[0]) / 2.0,
                          np.linalg.norm(a[1] - b[1]) / 2.0, self.row in rows, len(rows)))
        return a


def _sphere_rows(rng, k, p, A, B, logistic):
    rows = []
    for _ in range(k):
        u = rng.normal(size=p) * 10.0 ** rng.uniform(-3, 3, size=p)  # extreme, NaN-free directions
        rows.append((A * u / np.linalg.norm(u), rng.choice([-1.0, 1.0]) * (1.0 if logistic else B)))
    return rows


@pytest.mark.parametrize("loss", ["squared", "logistic"])
def test_each_step_moves_by_at_most_its_sensitivity_for_any_replaced_row(loss):
    # Coupled runs: every step's pair of clipped sums is computed on both datasets at the same iterates and
    # the same Poisson batch; one row (train or validation) replaced by extreme rows on the clipping sphere.
    n_train, n_val, p, A_, B_ = 14, 10, 3, 2.0, 1.5
    rng = np.random.default_rng(3)
    A, b, _ = clipped_parts(seed=3, n_train=n_train, n_val=n_val, p=p, row_bound=A_, label_bound=B_)
    logistic = loss == "logistic"
    if logistic:
        b, B_ = np.where(b > 0, 1.0, -1.0), 1.0
    train = np.arange(n_train + n_val) < n_train
    worst = np.zeros(3)
    for j in (0, 5, n_train, n_train + 7):  # two training rows, two validation rows
        for a_new, b_new in _sphere_rows(rng, 3, p, A_, B_, logistic):
            A2, b2 = A.copy(), b.copy()
            A2[j], b2[j] = a_new, b_new
            for omega, lam in ((0.02, n_train / n_val), (1.0, 50.0)):
                problem = InnerProblem(A_, B_, lam, n_train, n_val, loss)
                other = MinibatchPair(problem, A2, b2, train, 0.5, 1.0, steps=8)
                pair = CoupledPair(other, j, problem, A, b, train, 0.5, 1.0, steps=8)
                pair.start = rng.normal(size=(2, p)) * 1e3  # iterates far outside the ball: the clip holds
                pair.release_pair(omega, np.random.default_rng(j))
                gaps = np.array(pair.gaps, dtype=float)
                assert np.all(gaps[:, :3] <= 1.0 + 1e-12), gaps
                if j >= n_train:  # a validation row never enters the theta* sum
                    assert np.all(gaps[:, 1] == 0.0)
                assert np.all(gaps[gaps[:, 3] == 0, :3] == 0.0)  # not in the batch: nothing moves
                worst = np.maximum(worst, gaps[:, :3].max(axis=0))
    assert np.all(worst > 0.3), worst  # the replacements move the sums: the check is not vacuous


def test_empty_poisson_batches_are_steps_of_noise_alone():
    A, b, _ = clipped_parts(seed=2, n_train=30, n_val=20, p=4)
    problem = InnerProblem(4.0, 3.0, 10.0, 30, 20)
    pair = MinibatchPair(problem, A, b, np.arange(50) < 30, rate=0.01, noise_multiplier=2.0, steps=40)
    with record_releases() as log:
        theta, theta_lambda, event, std = pair.release_pair(0.1, np.random.default_rng(0))
    assert len(log) == 40 and sum(np.all(r.value == 0.0) for r in log) > 20  # most batches are empty
    assert all(r.event == GaussianRelease(PAIR_SENSITIVITY, 2.0 * PAIR_SENSITIVITY) for r in log)
    assert len(event.events) == 40 and set(event.events) == {step_event(2.0, 0.01)}
    assert np.all(np.isfinite(theta)) and np.all(np.isfinite(theta_lambda))
    assert np.linalg.norm(theta) <= problem.radius(0.1) * (1 + 1e-12)
    # The noise of the gradient estimate: z * sensitivity * L / (rate * n_train), public.
    assert std == pytest.approx(2.0 * PAIR_SENSITIVITY * problem.lipschitz(0.1) / (0.01 * 30))


@pytest.mark.parametrize("start", ["low", "high"])
def test_without_noise_the_descent_moves_to_the_grid_argmin_from_both_ends(start):
    # The problem of the "bilevel" test: an interior minimum of the validation loss in [1e-3, 10].
    A, b, stats = clipped_parts(seed=0, n_train=40, n_val=60, p=9, coef_scale=0.3, noise=1.0)
    grid = np.logspace(-3, 1, 81)
    losses = [_validation_loss(A, b, stats, w, 40) for w in grid]
    best = grid[int(np.argmin(losses))]
    bounds = (math.log(1e-3), math.log(10.0))
    omega0 = 1e-3 if start == "low" else 10.0
    for rate, tolerance in ((1.0, 0.1), (0.5, 0.35)):
        problem = InnerProblem(4.0, 3.0, 1e6, 40, 60)
        pair = MinibatchPair(problem, A, b, np.arange(100) < 40, rate, 0.0)
        path, events = descend(problem, None, bounds, omega0, 20, math.inf, np.random.default_rng(0),
                               releaser=pair.release_pair)
        assert len(events) == 20 and np.all(path["noise_std"] == 0.0)
        # The last 9 iterates of the path (the noise-free iterates settle; mini-batches make them wander) lies
        # within `tolerance` decades of the grid's argmin (full batch: two grid steps), from either end.
        late = np.median(np.log10(path["omega"][12:]))
        assert abs(late - math.log10(best)) < tolerance, (rate, path["omega"], best)
        assert _validation_loss(A, b, stats, 10**late, 40) <= min(losses) * 1.01
    if start == "high":  # the smallest move is taken near the argmin (from below: see the report)
        t_out = int(np.argmin(path["step"]))
        assert abs(math.log10(path["omega"][t_out] / best)) < 0.35


def _data(n=600, d=4, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * 3.0 + 5.0
    return X, X @ rng.normal(size=d) + rng.normal(size=n)


def test_the_ledger_is_the_recorded_releases_and_spends_the_target(monkeypatch):
    X, y = _data()
    acc = BudgetAccountant()
    seen = {}
    original = DPRegularizationTuner._run_private

    def spy(self, planned, solve, *, n_samples=None):
        seen["planned"] = planned
        return original(self, planned, solve, n_samples=n_samples)

    monkeypatch.setattr(DPRegularizationTuner, "_run_private", spy)
    with record_releases() as log:
        tuner = DPRegularizationTuner(method="bilevel_sgd", epsilon=1.5, outer_steps=3, accountant=acc,
                                      random_state=1).fit(X, y)
    info = tuner.bilevel_path_
    rate, z = info["batch_rate"], info["noise_multiplier"]
    assert tuner.method_ == "bilevel_sgd" and rate == sampling_rate(600)
    assert info["inner_steps"] == INNER_STEPS
    # Every SGD step is one recorded Gaussian release of the pair of clipped sums at the planned noise.
    steps = [r for r in log if r.mechanism == "gaussian" and r.sensitivity == PAIR_SENSITIVITY]
    assert len(steps) == 3 * INNER_STEPS
    assert {r.event for r in steps} == {GaussianRelease(PAIR_SENSITIVITY, z * PAIR_SENSITIVITY)}
    # The ledger holds the scaling, the steps (Poisson-sampled at the public rate) and the refit.
    released, planned = tuner.privacy_event_, seen["planned"]
    _, inner, _ = released.events
    sampled = [leaf for outer in inner.events for leaf in outer.events]
    assert sampled == [PoissonSampled(r.event, rate) for r in steps]
    assert planned.events[1] == Repeated(step_event(z, rate), 3 * INNER_STEPS)
    delta = tuner.privacy_spent_.delta
    for dl in (delta, 1e-7, 1e-3):
        assert released.epsilon(dl) == pytest.approx(planned.epsilon(dl), rel=1e-9)
    assert len(acc.events) == 1
    assert acc.spent.epsilon == pytest.approx(1.5, rel=1e-6) and acc.spent.epsilon <= 1.5
    # The hypergradient noise the path reports is that of the steps (std z * 2 sqrt 2 * L / (q n_tr)).
    assert np.all(info["noise_std"] > 0) and np.all(np.isfinite(info["hypergradient"]))


def test_without_noise_the_tuner_runs_noise_free_steps():
    rng = np.random.default_rng(4)
    X = rng.normal(size=(120, 8))
    y = X @ rng.normal(size=8) * 0.3 + rng.normal(size=120)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tuner = DPRegularizationTuner(method="bilevel_sgd", epsilon=math.inf, outer_steps=3, random_state=0,
                                      accountant=BudgetAccountant()).fit(X, y)
    path = tuner.bilevel_path_
    assert path["noise_multiplier"] == 0.0 and np.all(path["noise_std"] == 0.0)
    assert tuner.alpha_ == pytest.approx(path["omega"][path["t_out"]] * path["feature_scale"] ** 2)
    assert tuner.best_estimator_.alpha == tuner.alpha_


@pytest.mark.parametrize("params, message", [
    (dict(estimator=DPInterpolatingClassifier(classes=[0, 1], loss="squared_hinge")), "loss='auto' or"),
    (dict(estimator=DPInterpolatingClassifier(classes=[0, 1, 2])), "binary logistic"),
    (dict(estimator=DPHeavyTailRegressor(l1_ratio=1.0)), "l1_ratio=0"),
    (dict(estimator=DPHeavyTailRegressor(loss="huber")), "loss='squared'"),
    (dict(estimator=DPHeavyTailRegressor(algorithm=SufficientStatistics(alphas=(1e-3, 100.0)))),
     "its own grid of alphas"),
    (dict(delta=0.0), "delta > 0"),
    (dict(alphas=[0.0, 0.1]), "two different positive"),
    (dict(epsilon=1e-4), "no zero-concentrated budget"),
])
def test_refusals_spend_nothing(params, message):
    X, y = _data(n=300)
    if "estimator" in params and isinstance(params["estimator"], DPInterpolatingClassifier):
        y = np.digitize(y, np.quantile(y, [0.4, 0.7])) if "2" in repr(params["estimator"]) \
            else (y > np.median(y)).astype(int)
    acc = BudgetAccountant()
    with pytest.raises((ValueError, TypeError)) as info:
        DPRegularizationTuner(**{"method": "bilevel_sgd", **params}, accountant=acc).fit(X, y)
    assert message in str(info.value) and "Nothing was spent" in str(info.value)
    assert "method='bilevel_sgd'" in str(info.value)
    assert len(acc.events) == 0
