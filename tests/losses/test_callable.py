"""CallableLoss: a user's function evaluated one row at a time, failures mapped to a zero derivative."""

import numpy as np
import pytest

from skdp import BudgetAccountant, DPHeavyTailRegressor
from skdp.losses import CallableLoss
from skdp.mechanisms import clip_rows
from skdp.solvers import GLMProblem, Localized
from privacy_harness import CoupledProblem, assert_event_as_planned, neighbours, run_as_planned


def test_the_callable_sees_one_row_at_a_time():
    shapes = []

    def squared(z, y):
        shapes.append((z.shape, y.shape))
        return 0.5 * (z - y) ** 2, z - y

    loss = CallableLoss(squared)
    z, y = np.array([0.0, 1.0, 2.0, 3.0]), np.array([1.0, 1.0, 1.0, -1.0])
    np.testing.assert_array_equal(loss.derivative(z, y), z - y)
    np.testing.assert_array_equal(loss.value(z, y), 0.5 * (z - y) ** 2)
    assert shapes == [((1,), (1,))] * 8  # four rows, twice


def test_labels_broadcast_and_shapes_are_kept():
    loss = CallableLoss(lambda z, y: (np.abs(z - y), np.sign(z - y)))
    z = np.arange(6.0).reshape(2, 3)
    np.testing.assert_array_equal(loss.derivative(z, 2.0), np.sign(z - 2.0))
    assert loss.value(z, 2.0).shape == (2, 3)


def test_a_row_on_which_the_callable_raises_or_misbehaves_gets_derivative_zero():
    def fragile(z, y):
        if y[0] > 100:
            raise OverflowError("label out of range")
        if y[0] < -100:
            return np.array([1.0, 2.0]), np.array([1.0, 2.0])  # two values for one row
        if y[0] == 0:
            return np.array([np.inf]), np.array([np.nan])  # non-finite derivative
        return 0.5 * (z - y) ** 2, z - y

    loss = CallableLoss(fragile)
    z, y = np.zeros(5), np.array([1.0, 1e6, -1e6, 0.0, -2.0])
    np.testing.assert_array_equal(loss.derivative(z, y), [-1.0, 0.0, 0.0, 0.0, 2.0])
    values = loss.value(z, y)
    assert values[0] == 0.5 and values[4] == 2.0
    assert np.isnan(values[1]) and np.isnan(values[2])


def test_a_callable_that_couples_rows_cannot_move_the_clipped_sum_beyond_2C():
    """Each row's value and derivative may depend on that row only: the callable sees one row at a time."""
    rng = np.random.default_rng(0)
    n, d, C = 200, 3, 1.0
    X = clip_rows(rng.normal(size=(n, d)), 2.0)
    y = X @ np.array([1.0, -1.0, 0.5]) + rng.normal(size=n)

    def batch_centred(z, t):
        r = z - t
        r = r - r.mean()  # couples every row of the batch it is given
        return 0.5 * r * r, r

    w = np.array([0.3, 0.1, -0.2])
    y2 = y.copy()
    y2[7] = 1e6  # replace one label
    sums = [GLMProblem(X, labels, CallableLoss(batch_centred), np.zeros(d), 5.0, 2.0)
            .clipped_gradient_sum(w, C) for labels in (y, y2)]
    assert np.linalg.norm(sums[0] - sums[1]) <= 2 * C * (1 + 1e-12)


def test_a_wild_callable_is_clipped_and_sanitised_by_the_solver():
    X, y, X2, y2, row_bound, _ = neighbours(seed=2)

    def wild(z, yy):  # a non-convex, sometimes non-finite user loss
        r = z - yy
        deriv = np.where(np.abs(r) > 50, np.nan, 100 * np.sin(r))
        return np.abs(r), deriv

    problem = CoupledProblem(X, y, X2, y2, CallableLoss(wild), np.zeros(5), 5.0, row_bound)
    result, planned = run_as_planned(Localized(max_steps=10), problem, 0.5, 0.2, 0)
    assert problem.checks and max(problem.checks) <= 1 + 1e-9
    assert max(problem.checks) > 1e-4  # the changed row is seen
    assert np.all(np.isfinite(result.coef))
    assert_event_as_planned(result.event, planned)


def test_a_callable_that_raises_on_a_record_acts_as_a_zero_derivative():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 4)) * np.arange(1, 5)
    y = X @ rng.normal(size=4) + rng.standard_t(2.5, size=400)
    y[:5] = 1e6  # the callable below cannot handle these records

    def fragile(z, t):
        if np.any(np.abs(t) > 1e5):
            raise OverflowError("label out of range")
        return 0.5 * (z - t) ** 2, z - t

    def zero_there(z, t):
        bad = np.abs(t) > 1e5
        return np.where(bad, np.nan, 0.5 * (z - t) ** 2), np.where(bad, 0.0, z - t)

    def fit(loss):  # the same noise for both fits: one seed, each fit the first entry of a fresh ledger
        return DPHeavyTailRegressor(loss=loss, scaling="none", max_iter=20, random_state=3,
                                    accountant=BudgetAccountant()).fit(X, y)

    a, b = fit(fragile), fit(zero_there)
    np.testing.assert_array_equal(a.coef_, b.coef_)
    assert np.all(np.isfinite(a.coef_))


def test_repr_names_the_function():
    def my_loss(z, y):
        return z, z

    assert repr(CallableLoss(my_loss)) == "CallableLoss('my_loss')"
    assert CallableLoss(my_loss).smoothness == np.inf
    with pytest.raises(AttributeError):
        CallableLoss(my_loss).derivative_bound  # no public bound: solvers clip it


def test_any_failure_of_the_callable_on_a_record_maps_to_a_zero_derivative():
    """Even exceptions outside Exception (SystemExit, a test framework's failure) cannot escape."""

    def exits(z, y):
        if np.any(np.abs(y) > 100):
            raise SystemExit("a record the callable cannot handle")
        return 0.5 * (z - y) ** 2, z - y

    loss = CallableLoss(exits)
    d = loss.derivative(np.zeros(3), np.array([1.0, 1e6, -2.0]))
    np.testing.assert_array_equal(d, [-1.0, 0.0, 2.0])


def test_a_keyboard_interrupt_is_the_users_and_passes_through():
    def interrupted(z, y):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        CallableLoss(interrupted).derivative(np.zeros(2), np.zeros(2))
