"""method="bilevel": the penalty hypergradient, convergence without noise, sensitivities, ledger, refusals."""

import math
import warnings

import numpy as np
import pytest

from skdp import BudgetAccountant, DPHeavyTailRegressor, DPInterpolatingClassifier
from skdp.accounting import GaussianRelease
from skdp.model_selection import DPRegularizationTuner
from skdp.model_selection._bilevel import InnerProblem, descend, hypergradient
from skdp.solvers import SufficientStatistics
from bilevel_parts import clipped_parts
from privacy_harness import assert_same_mechanisms, record_releases


def _ridge(G, g, omega):
    return np.linalg.solve(G + omega * np.eye(len(g)), g)


def _validation_loss(A, b, stats, omega, n_train):
    theta = _ridge(stats[0], stats[1], omega)
    return 0.5 * np.mean((A[n_train:] @ theta - b[n_train:]) ** 2)


def test_penalty_hypergradient_tends_to_the_closed_form_with_its_sign():
    # Spec 9.8.1: lambda (R(theta^lambda) - R(theta*)) -> dF/domega = -grad f(theta*)' (H + omega I)^-1 theta*
    # with error O(1 / lambda); the sign makes omega -= step * estimate a descent step.
    A, b, stats = clipped_parts()
    G, g, Gv, gv = stats
    for omega in (0.03, 0.3, 3.0):
        theta = _ridge(G, g, omega)
        exact = -(Gv @ theta - gv) @ np.linalg.solve(G + omega * np.eye(5), theta)
        errors = []
        for lam in (10.0, 100.0, 1e3, 1e4):
            problem = InnerProblem(4.0, 3.0, lam, 200, 100)
            t1, _ = problem.release(G, g, omega, 0.0, np.random.default_rng(0))
            t2, _ = problem.release(G + Gv / lam, g + gv / lam, omega, 0.0, np.random.default_rng(0))
            estimate = hypergradient(t1, t2, lam)
            assert np.sign(estimate) == np.sign(exact)
            errors.append(abs(estimate - exact))
        # O(1/lambda): each tenfold lambda cuts the error about tenfold (8x to 12x allowed).
        ratios = np.array(errors[:-1]) / np.array(errors[1:])
        assert np.all((ratios > 8) & (ratios < 12)), (omega, errors)
        # The printed sign of the paper (R(theta) - R(theta^lambda)) would ascend F.
        step = 1e-4
        F = lambda w: _validation_loss(A, b, stats, w, 200)  # noqa: E731
        assert F(omega - step * exact) < F(omega)


@pytest.mark.parametrize("start", ["low", "high"])
def test_without_noise_the_descent_reaches_the_grid_argmin_from_both_ends(start):
    # Weak signal, few training rows: the validation loss has an interior minimum in [1e-3, 10].
    A, b, stats = clipped_parts(seed=0, n_train=40, n_val=60, p=9, coef_scale=0.3, noise=1.0)
    grid = np.logspace(-3, 1, 81)
    losses = [_validation_loss(A, b, stats, w, 40) for w in grid]
    best = grid[int(np.argmin(losses))]
    assert grid[5] < best < grid[-5], best
    problem = InnerProblem(4.0, 3.0, 1e6, 40, 60)
    bounds = (math.log(1e-3), math.log(10.0))
    path, events = descend(problem, stats, bounds, 1e-3 if start == "low" else 10.0, 40, math.inf,
                           np.random.default_rng(0))
    t_out = int(np.argmin(path["step"]))
    assert len(events) == 80 and path["omega"].shape == (41,)
    # Within two grid steps (a factor 10^0.1) of the grid's argmin, and as good as the grid's best.
    assert abs(math.log10(path["omega"][t_out] / best)) < 0.1, (path["omega"], best)
    assert _validation_loss(A, b, stats, path["omega"][t_out], 40) <= min(losses) * (1 + 1e-4)


def test_without_noise_the_tuner_chooses_the_validation_argmin():
    # Through the tuner at epsilon = inf (exact scaling, no noise): alpha_ minimises the validation
    # loss of the tuning problem (its released scaling, its split) within a factor 10^0.1.
    rng = np.random.default_rng(4)
    X = rng.normal(size=(120, 8))
    y = X @ rng.normal(size=8) * 0.3 + rng.normal(size=120)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tuner = DPRegularizationTuner(method="bilevel", epsilon=math.inf, outer_steps=30, random_state=0,
                                      accountant=BudgetAccountant()).fit(X, y)
    path = tuner.bilevel_path_
    assert tuner.method_ == "bilevel" and tuner.validation_scores_ is None
    assert tuner.alpha_ == pytest.approx(path["omega"][path["t_out"]] * path["feature_scale"] ** 2)
    np.testing.assert_allclose(tuner.alphas_, path["omega"] * path["feature_scale"] ** 2)
    assert path["penalty"] == 1e6 and np.all(path["noise_std"] == 0)
    assert tuner.best_estimator_.alpha == tuner.alpha_
    # The gradient in log omega (what the descent drives to 0) is small at the output against the start's.
    log_gradient = np.abs(path["omega"][:-1] * path["hypergradient"])
    assert log_gradient[path["t_out"]] < 0.1 * log_gradient[0]


@pytest.mark.parametrize("method", ["bilevel", "bilevel_sgd"])
@pytest.mark.parametrize("classifier", [False, True])
def test_the_whole_fit_on_coupled_neighbours_releases_the_same_mechanisms_at_public_noise(classifier, method):
    # Through the tuner (clipping, label map, split, intercept, scaling, refit): one row replaced by an
    # extreme one. The released scales differ between the runs, so values are compared in the release-level
    # test; here every release must be the same mechanism with the same noise per unit of sensitivity, and
    # both ledgers must be charged the same target.
    rng = np.random.default_rng(11)
    X = rng.normal(size=(400, 4))
    y = X @ rng.normal(size=4) + rng.normal(size=400)
    X2, y2 = X.copy(), y.copy()
    X2[9], y2[9] = 1e6, -1e6
    if classifier:
        y, y2 = (y > 0).astype(int), (y2 > 0).astype(int)
        y2[9] = 1 - y2[9]
    logs, charged = [], []
    for A, b in ((X, y), (X2, y2)):
        acc = BudgetAccountant()
        estimator = DPInterpolatingClassifier(classes=[0, 1]) if classifier else None
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with record_releases() as log:
                DPRegularizationTuner(estimator, method=method, outer_steps=3 if method == "bilevel" else 2,
                                      epsilon=2.0, accountant=acc, random_state=5).fit(A, b)
        logs.append(log)
        charged.append(acc.spent.epsilon)
    # Two releases per outer step (bilevel), or one per inner step (bilevel_sgd: 100 per outer step).
    assert len(logs[0]) > (6 if method == "bilevel" else 200)
    assert_same_mechanisms(*logs)
    assert charged[0] == charged[1] == pytest.approx(2.0, rel=1e-6)


@pytest.mark.parametrize("loss", ["squared", "logistic"])
@pytest.mark.parametrize("part", ["train", "val"])
def test_both_inner_releases_within_their_sensitivity_on_replace_one_neighbours(part, loss):
    # Brute force: every row of a small table, replaced by extreme rows on the clipping sphere.
    n_train, n_val, p, A_, B_ = 12, 8, 3, 2.0, 1.5
    rng = np.random.default_rng(7)
    A, b, _ = clipped_parts(seed=7, n_train=n_train, n_val=n_val, p=p, row_bound=A_, label_bound=B_)
    if loss == "logistic":
        b, B_ = np.where(b > 0, 1.0, -1.0), 1.0
    replacements = []
    for _ in range(6 if loss == "squared" else 3):  # the logistic solves are iterative: fewer
        u = rng.normal(size=p)
        replacements.append((A_ * u / np.linalg.norm(u), rng.choice([-B_, B_])))
    rows = range(n_train) if part == "train" else range(n_train, n_train + n_val)
    worst = 0.0
    for omega, lam in ((0.05, n_train / n_val), (0.5, 10.0), (5.0, 1e3)):
        problem = InnerProblem(A_, B_, lam, n_train, n_val, loss)

        def releases(A2, b2, problem=problem, omega=omega):
            tr, va = slice(0, n_train), slice(n_train, None)
            if loss == "logistic":
                w_train, w_val = np.zeros(n_train + n_val), np.zeros(n_train + n_val)
                w_train[tr], w_val[va] = 1.0 / n_train, 1.0 / n_val
                stats = (A2, b2, w_train, w_val)
            else:
                stats = (A2[tr].T @ A2[tr] / n_train, A2[tr].T @ b2[tr] / n_train,
                         A2[va].T @ A2[va] / n_val, A2[va].T @ b2[va] / n_val)
            with record_releases() as log:
                problem.release_pair(stats, omega, 1.0, np.random.default_rng(0))
            return log

        base = releases(A, b)
        for j in rows:
            for a_new, b_new in replacements:
                A2, b2 = A.copy(), b.copy()
                A2[j], b2[j] = a_new, b_new
                other = releases(A2, b2)
                for r0, r1 in zip(base, other):
                    assert r0.event == r1.event  # the same public sensitivity and noise for both problems
                    gap = np.linalg.norm(r0.value - r1.value) / r0.sensitivity
                    assert gap <= 1.0 + 1e-9
                    worst = max(worst, gap)
    assert worst > 0.01  # the replacements move the minimisers: the check is not vacuous


def _data(n=600, d=4, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * 3.0 + 5.0
    return X, X @ rng.normal(size=d) + rng.normal(size=n)


@pytest.mark.parametrize("epsilon", [0.8, 3.0])
def test_ledger_total_is_the_target_and_the_release_is_the_plan(epsilon, monkeypatch):
    X, y = _data()
    acc = BudgetAccountant()
    tuner = DPRegularizationTuner(method="bilevel", epsilon=epsilon, outer_steps=4, accountant=acc,
                                  random_state=1)
    seen = {}
    original = DPRegularizationTuner._run_private

    def spy(self, planned, solve, *, n_samples=None):
        seen["planned"] = planned
        return original(self, planned, solve, n_samples=n_samples)

    monkeypatch.setattr(DPRegularizationTuner, "_run_private", spy)
    tuner.fit(X, y)
    delta = tuner.privacy_spent_.delta
    assert len(acc.events) == 1
    assert acc.spent.epsilon == pytest.approx(epsilon, rel=1e-6) and acc.spent.epsilon <= epsilon
    released, planned = tuner.privacy_event_, seen["planned"]
    for dl in (delta, 1e-7, 1e-3):
        assert released.epsilon(dl) == pytest.approx(planned.epsilon(dl), rel=1e-9)
    _, inner, _ = released.events  # the scaling, the inner releases, the refit
    gaussians = inner.events
    assert len(gaussians) == 8 and all(isinstance(e, GaussianRelease) for e in gaussians)
    mus = [e.sensitivity / e.noise_std for e in gaussians]
    np.testing.assert_allclose(mus, mus[0], rtol=1e-12)  # rho per call fixed whatever omega_t is
    # The two releases of a step share their sensitivity and noise (the norm bias cancels).
    for e1, e2 in zip(gaussians[::2], gaussians[1::2]):
        assert e1 == e2
    np.testing.assert_allclose(tuner.bilevel_path_["noise_std"], [e.noise_std for e in gaussians[::2]])


@pytest.mark.parametrize("params, message", [
    (dict(estimator=DPInterpolatingClassifier(classes=[0, 1], loss="squared_hinge")), "loss='auto' or"),
    (dict(estimator=DPInterpolatingClassifier(classes=[0, 1, 2])), "binary logistic"),
    (dict(estimator=DPHeavyTailRegressor(l1_ratio=1.0)), "l1_ratio=0"),
    (dict(estimator=DPHeavyTailRegressor(loss="huber")), "loss='squared'"),
    (dict(estimator=DPHeavyTailRegressor(algorithm=SufficientStatistics(alphas=(1e-3, 100.0)))),
     "its own grid of alphas"),
    (dict(delta=0.0), "delta > 0"),
    (dict(alphas=[0.0, 0.1]), "two different positive"),
])
def test_refusals_spend_nothing(params, message):
    X, y = _data(n=300)
    if "estimator" in params and isinstance(params["estimator"], DPInterpolatingClassifier):
        y = np.digitize(y, np.quantile(y, [0.4, 0.7])) if "2" in repr(params["estimator"]) \
            else (y > np.median(y)).astype(int)
    acc = BudgetAccountant()
    with pytest.raises((ValueError, TypeError)) as info:
        DPRegularizationTuner(**{"method": "bilevel", **params}, accountant=acc).fit(X, y)
    assert message in str(info.value) and "Nothing was spent" in str(info.value)
    assert len(acc.events) == 0


@pytest.mark.parametrize("method", ["bilevel", "bilevel_sgd"])
@pytest.mark.parametrize("case", ["tiny", "constant_columns", "constant_y", "huge_values"])
def test_nothing_raises_after_the_reservation_on_degenerate_data(case, method):
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(50, 3)), rng.normal(size=50)
    if case == "tiny":
        X, y = X[:4], y[:4]
    elif case == "constant_columns":
        X[:] = 7.0
    elif case == "constant_y":
        y[:] = -2.0
    else:
        X[0], y[0] = 1e300, -1e300
    acc = BudgetAccountant()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tuner = DPRegularizationTuner(method=method, epsilon=1.0, outer_steps=3 if method == "bilevel" else 2,
                                      accountant=acc, random_state=0).fit(X, y)
    assert acc.spent.epsilon == pytest.approx(1.0, rel=1e-6)
    path = tuner.bilevel_path_
    for key in ("omega", "hypergradient", "step", "noise_std"):
        assert np.all(np.isfinite(path[key])), key
    assert math.isfinite(tuner.alpha_) and tuner.alpha_ > 0
    assert np.all(np.isfinite(tuner.predict(X[:3])))


def test_binary_logistic_without_noise_descends_and_charges_the_target():
    # DPInterpolatingClassifier (binary logistic): at epsilon = inf the hypergradient at the output is
    # small against the start's; at epsilon 2 the ledger holds the target.
    rng = np.random.default_rng(5)
    X = rng.normal(size=(300, 6))
    y = (X @ rng.normal(size=6) * 0.4 + rng.logistic(size=300) > 0).astype(int)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tuner = DPRegularizationTuner(DPInterpolatingClassifier(classes=[0, 1]), method="bilevel",
                                      epsilon=math.inf, outer_steps=15, random_state=0,
                                      accountant=BudgetAccountant()).fit(X, y)
    path = tuner.bilevel_path_
    log_gradient = np.abs(path["omega"][:-1] * path["hypergradient"])
    assert log_gradient[path["t_out"]] < 0.2 * log_gradient[0]
    assert tuner.best_estimator_.alpha == tuner.alpha_ and tuner.predict_proba(X[:2]).shape == (2, 2)
    acc = BudgetAccountant()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        DPRegularizationTuner(DPInterpolatingClassifier(classes=[0, 1]), method="bilevel", epsilon=2.0,
                              outer_steps=3, random_state=0, accountant=acc).fit(X, y)
    assert acc.spent.epsilon == pytest.approx(2.0, rel=1e-6) and acc.spent.epsilon <= 2.0


def test_sparse_input_too_large_to_densify_is_refused_before_spending(monkeypatch):
    import scipy.sparse as sp

    from skdp.model_selection import _bilevel

    monkeypatch.setattr(_bilevel, "MAX_DENSE_VALUES", 100)
    X = sp.random(200, 5, density=0.3, format="csr", random_state=0)
    acc = BudgetAccountant()
    with pytest.raises(ValueError, match="dense rows"):
        DPRegularizationTuner(method="bilevel", accountant=acc).fit(X, np.arange(200.0))
    assert len(acc.events) == 0


def test_a_refit_plan_above_the_charged_one_falls_back_to_the_charged_strength(monkeypatch):
    # Post-processing of the released alpha: a refit whose plan would cost more than the one charged is
    # made at the charged strength (alpha = 1), and the ledger stays at the target.
    from skdp.model_selection import _bilevel

    monkeypatch.setattr(_bilevel, "_plan_within", lambda *args: False)
    rng = np.random.default_rng(2)
    X = rng.normal(size=(300, 3))
    y = X @ np.ones(3) + rng.normal(size=300)
    acc = BudgetAccountant()
    tuner = DPRegularizationTuner(method="bilevel", outer_steps=2, accountant=acc, random_state=0).fit(X, y)
    assert tuner.alpha_ == 1.0 and tuner.best_estimator_.alpha == 1.0
    assert acc.spent.epsilon == pytest.approx(1.0, rel=1e-6) and len(acc.events) == 1
