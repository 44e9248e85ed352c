"""BudgetAccountant: ledger, budget checks, default accountant and identity under copies."""

import copy
import math
import multiprocessing
import os
import pickle
import subprocess
import sys
import threading

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sklearn.base import clone

from skdp import BudgetAccountant, BudgetExceededError
from skdp.accounting import (
    ApproxDPRelease,
    DetachedAccountantError,
    ExponentialMechanismRelease,
    GaussianRelease,
    LaplaceRelease,
    PrivacySpent,
    ZCDPRelease,
    calibrate_gaussian,
    zcdp_to_dp,
)
from process_workers import spend_in_child, spend_or_explain, unpickle_and_spend


def test_fits_compose_as_events_not_summed_epsilons():
    acc = BudgetAccountant(delta=1e-6)
    for _ in range(10):
        acc.spend(ZCDPRelease(0.05))
    assert acc.spent == PrivacySpent(pytest.approx(zcdp_to_dp(0.5, 1e-6)), 1e-6)
    assert acc.spent.epsilon < 10 * zcdp_to_dp(0.05, 1e-6)


def test_budget_is_enforced_before_recording():
    acc = BudgetAccountant(epsilon=1.0, delta=1e-5)
    std = calibrate_gaussian(1.0, 1.0, 1e-5)
    acc.spend(GaussianRelease(1.0, std))  # exactly the budget
    assert acc.spent.epsilon == pytest.approx(1.0)
    with pytest.raises(BudgetExceededError, match="Nothing was read from the data"):
        acc.spend(GaussianRelease(1.0, 100.0))
    assert len(acc.events) == 1
    with pytest.raises(BudgetExceededError):
        acc.check(LaplaceRelease(1.0, 10.0))


def test_remaining_is_a_pure_epsilon_headroom():
    acc = BudgetAccountant(epsilon=2.0, delta=1e-6)
    acc.spend(LaplaceRelease(1.0, 2.0))
    assert acc.remaining == PrivacySpent(pytest.approx(2.0 - acc.spent.epsilon), 1e-6)
    acc.check(LaplaceRelease(acc.remaining.epsilon * 0.999, 1.0))


def test_reporting_delta_without_a_delta_ceiling():
    acc = BudgetAccountant()  # no ceiling at all
    acc.spend(GaussianRelease(1.0, 4.0), delta=1e-6)
    acc.spend(GaussianRelease(1.0, 4.0), delta=1e-6)
    spent = acc.spent
    assert spent.delta == pytest.approx(2e-6)
    assert spent.epsilon == pytest.approx(GaussianRelease(1.0, 4.0 / math.sqrt(2)).epsilon(2e-6))
    pure = BudgetAccountant(epsilon=1.0)
    pure.spend(LaplaceRelease(1.0, 2.0))
    assert pure.spent == PrivacySpent(0.5, 0.0)
    with pytest.raises(BudgetExceededError):
        pure.spend(LaplaceRelease(1.0, 1.0))


def test_spent_at_any_delta():
    acc = BudgetAccountant()
    acc.spend(ZCDPRelease(0.5))
    assert acc.spent_at(1e-6) == pytest.approx(zcdp_to_dp(0.5, 1e-6))


@pytest.mark.parametrize("bad", [dict(epsilon=0.0), dict(epsilon=-1.0), dict(delta=1.5),
                                 dict(delta=-0.1)])
def test_invalid_budgets(bad):
    with pytest.raises(ValueError):
        BudgetAccountant(**bad)


def test_spend_rejects_non_events():
    with pytest.raises(TypeError):
        BudgetAccountant().spend((1.0, 1e-5))


def test_context_manager_sets_the_default():
    outer = BudgetAccountant.default()
    with BudgetAccountant(epsilon=3.0) as acc:
        assert BudgetAccountant.default() is acc
        with BudgetAccountant() as inner:
            assert BudgetAccountant.default() is inner
        assert BudgetAccountant.default() is acc
    assert BudgetAccountant.default() is outer


def test_copies_clones_and_pickles_share_the_ledger():
    acc = BudgetAccountant(epsilon=5.0, delta=1e-6)
    assert copy.copy(acc) is acc
    assert copy.deepcopy(acc) is acc
    assert clone(acc, safe=False) is acc
    assert pickle.loads(pickle.dumps(acc)) is acc
    holder = {"acc": acc}
    assert copy.deepcopy(holder)["acc"] is acc


_CHILD = """
import pickle, sys
from skdp.accounting import GaussianRelease, DetachedAccountantError
acc = pickle.loads(sys.stdin.buffer.read())
print(len(acc.events), acc.epsilon, acc.detached)
try:
    acc.spend(GaussianRelease(1.0, 10.0))
    print("charged")
except DetachedAccountantError:
    print("refused")
acc.reattach()
acc.spend(GaussianRelease(1.0, 10.0))
print(len(acc.events))
"""


def test_unpickled_in_another_process_charges_the_shared_ledger():
    acc = BudgetAccountant(epsilon=5.0, delta=1e-6)
    acc.spend(GaussianRelease(1.0, 10.0))
    out = subprocess.run([sys.executable, "-c", _CHILD], input=pickle.dumps(acc),
                         capture_output=True, check=True)
    lines = out.stdout.decode().split()
    # The child reaches the ledger: it sees the parent's entry and its own charges land there.
    assert lines == ["1", "5.0", "False", "charged", "3"]  # reattach() of an attached copy changes nothing
    assert len(acc.events) == 3 and acc.shared


def test_a_copy_whose_ledger_is_gone_is_detached():
    acc = BudgetAccountant(epsilon=5.0, delta=1e-6)
    acc.spend(GaussianRelease(1.0, 10.0))
    data = pickle.dumps(acc)
    del acc  # the owner is collected: its ledger file is removed
    import gc

    gc.collect()
    out = subprocess.run([sys.executable, "-c", _CHILD], input=data, capture_output=True, check=True)
    assert out.stdout.decode().split() == ["1", "5.0", "True", "refused", "2"]


def test_concurrent_spends_never_exceed_the_budget():
    acc = BudgetAccountant(epsilon=1.0, delta=0.0)
    errors = []

    def worker():
        for _ in range(20):
            try:
                acc.spend(LaplaceRelease(1.0, 10.0))
            except BudgetExceededError:
                errors.append(1)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(acc.events) == 10
    assert len(errors) == 70
    assert acc.spent.epsilon == pytest.approx(1.0)


def test_detached_error_message_says_what_to_do():
    live = BudgetAccountant()
    assert not pickle.loads(pickle.dumps(live)).detached  # same process: the live ledger
    from skdp.accounting.budget import _restore_accountant

    detached = _restore_accountant("not-a-live-id", {"epsilon": 1.0, "delta": 1e-5, "entries": []})
    with pytest.raises(DetachedAccountantError, match="n_jobs=1"):
        detached.spend(LaplaceRelease(1.0, 10.0))


def test_forked_children_refuse_to_charge_a_copy():
    acc = BudgetAccountant()
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(2) as pool:
        results = pool.map(spend_in_child, [acc] * 4)
    assert results == ["refused"] * 4
    assert acc.events == ()


def test_pickled_to_a_spawned_process_charges_the_shared_ledger():
    acc = BudgetAccountant()
    data = pickle.dumps(acc)
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(1) as pool:
        assert pool.apply(unpickle_and_spend, (data,)) == "charged a copy"
    assert acc.events == (ZCDPRelease(0.01),)  # ... which is the ledger itself


def test_settling_rechecks_the_budget_at_the_accountants_delta():
    acc = BudgetAccountant(epsilon=2.0, delta=1e-7)
    entry = acc._reserve(GaussianRelease(1.0, 3.0), delta=1e-5)  # 1.6 at delta = 1e-7
    with pytest.raises(BudgetExceededError):
        acc._settle(entry, ApproxDPRelease(1.0, 1e-5))  # infinite epsilon at delta = 1e-7
    assert acc.events == (ApproxDPRelease(1.0, 1e-5),)  # the ledger keeps what was released


def test_no_delta_ceiling_does_not_mean_no_ceiling():
    acc = BudgetAccountant(epsilon=1.0)
    acc.spend(GaussianRelease(1.0, 20.0), delta=0.4)
    with pytest.raises(BudgetExceededError):
        acc.spend(GaussianRelease(1.0, 20.0), delta=0.6)  # declared deltas would reach 1


# -- totals never go down ------------------------------------------------------------------
_LEAVES = st.one_of(
    st.builds(GaussianRelease, st.floats(0.1, 2.0), st.floats(0.5, 20.0)),
    st.builds(LaplaceRelease, st.floats(0.1, 2.0), st.floats(0.5, 20.0)),
    st.builds(ZCDPRelease, st.floats(0.001, 1.0)),
    st.builds(ExponentialMechanismRelease, st.floats(0.01, 2.0)),
    st.builds(ApproxDPRelease, st.floats(0.01, 1.0), st.floats(1e-12, 1e-8)),
)
_DECLARED = st.sampled_from([0.0, 1e-8, 1e-5, 1e-3, 0.05, 0.3])
# An operation: ("spend", event, delta), or ("fit", event, delta, shrink): a reservation settled by
# the same event with its noise scaled up by ``shrink`` >= 1 (a release no dearer than planned).
_OPERATIONS = st.lists(st.one_of(
    st.tuples(st.just("spend"), _LEAVES, _DECLARED),
    st.tuples(st.just("fit"), st.builds(GaussianRelease, st.floats(0.1, 2.0), st.floats(0.5, 20.0)),
              _DECLARED, st.floats(1.0, 1.5)),
), min_size=1, max_size=5)


def _apply(acc, op):
    try:
        if op[0] == "spend":
            acc.spend(op[1], delta=op[2])
        else:
            entry = acc._reserve(op[1], delta=op[2])
            acc._settle(entry, GaussianRelease(op[1].sensitivity, op[1].noise_std * op[3]))
    except BudgetExceededError:
        pass  # refused before anything was recorded


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_OPERATIONS, st.sampled_from([(math.inf, 1.0), (8.0, 1.0), (math.inf, 1e-5), (6.0, 1e-6)]))
def test_reported_totals_never_go_down_and_stay_valid(operations, budget):
    watched, unwatched = BudgetAccountant(*budget), BudgetAccountant(*budget)
    last = PrivacySpent(0.0, 0.0)
    for op in operations:
        _apply(watched, op)
        _apply(unwatched, op)
        spent = watched.spent
        assert spent.epsilon >= last.epsilon and spent.delta >= last.delta  # monotone in both
        # Valid: at least the composition of everything charged, at the reported delta.
        assert spent.epsilon >= watched.total_event().epsilon(spent.delta) or spent.delta >= 1.0
        assert spent.epsilon <= watched.epsilon * (1 + 1e-9) + 1e-12  # and within the budget
        last = spent
    # A function of what was charged, not of who looked: a ledger read only at the end agrees.
    assert unwatched.events == watched.events
    assert unwatched.spent == watched.spent


def test_three_fits_at_delta_1e_5_1e_5_and_0_3_never_lower_the_total():
    from skdp import DPHeavyTailRegressor, PrivacyLeakWarning

    rng = np.random.default_rng(0)
    X = rng.normal(size=(2000, 5))
    y = X @ np.ones(5) + rng.normal(size=2000)
    acc = BudgetAccountant()  # no delta ceiling: reported at the sum of the declared deltas
    totals = []
    for seed, delta in enumerate([1e-5, 1e-5, 0.3]):
        est = DPHeavyTailRegressor(delta=delta, accountant=acc, random_state=seed)
        if delta * len(y) >= 1:
            with pytest.warns(PrivacyLeakWarning, match="not below 1 / n_samples"):
                est.fit(X, y)
        else:
            est.fit(X, y)
        totals.append(acc.spent)
    assert [round(t.epsilon, 3) for t in totals] == [1.0, 1.402, 1.402]
    assert [t.delta for t in totals] == [1e-5, 2e-5, pytest.approx(0.30002)]
    # The composition alone at 0.30002 is smaller (that was the total reported before): the
    # reported total keeps the larger, earlier one, which is still a valid bound.
    assert acc.spent_at(0.30002) < totals[1].epsilon == totals[2].epsilon


def test_the_peak_lives_with_the_shared_ledger():
    from skdp.accounting._ledger import FileStore

    acc = BudgetAccountant()
    acc.spend(GaussianRelease(1.0, 4.0), delta=1e-5)
    acc.spend(GaussianRelease(1.0, 4.0), delta=1e-5)
    before = acc.spent
    pickle.dumps(acc)  # the ledger moves to a file, peak included
    acc.spend(GaussianRelease(1.0, 4.0), delta=0.3)  # alone, the composition at 0.30002 is far lower
    assert acc.spent_at(0.30002) < 0.5 * before.epsilon
    other = FileStore(acc._store.path)  # what another process opening the file reads
    entries, peak = other.read()
    assert len(entries) == 3 and peak == before.epsilon
    assert acc.spent == PrivacySpent(before.epsilon, pytest.approx(0.30002))


def test_the_implicit_ledger_raises_its_peak_when_read_and_user_ledgers_at_every_charge(monkeypatch):
    measured = []
    original = BudgetAccountant._total_epsilon

    def spy(self, entries, delta):
        measured.append(self._implicit)
        return original(self, entries, delta)

    monkeypatch.setattr(BudgetAccountant, "_total_epsilon", spy)
    implicit = BudgetAccountant.default()
    for delta in (1e-5, 1e-5):
        implicit._settle(implicit._reserve(GaussianRelease(1.0, 4.0), delta=delta), GaussianRelease(1.0, 4.0))
    assert measured == []  # fits outside every user ledger pay nothing for the total ...
    first = implicit.spent
    implicit._settle(implicit._reserve(GaussianRelease(1.0, 4.0), delta=0.3), GaussianRelease(1.0, 4.0))
    assert implicit.spent == PrivacySpent(first.epsilon, pytest.approx(0.30002))  # ... and it never goes down
    user = BudgetAccountant()
    user._settle(user._reserve(GaussianRelease(1.0, 4.0), delta=1e-5), GaussianRelease(1.0, 4.0))
    user.spend(GaussianRelease(1.0, 4.0), delta=1e-5)
    assert measured.count(False) == 2  # a user's ledger measures once per charge


# -- detached copies: no stale totals, messages that say what happened and what to do ---------
def test_a_pickled_copy_of_a_collected_ledger_gives_no_stale_total_and_says_why():
    import gc

    acc = BudgetAccountant()
    acc.spend(GaussianRelease(1.0, 10.0))
    blob = pickle.dumps({"accountant": acc})  # e.g. an estimator saved with its ledger
    acc.spend(GaussianRelease(1.0, 10.0))  # charged after the pickle (by this or a worker process)
    del acc
    gc.collect()  # the ledger's object is gone, and its file with it; this process is still running
    copy_ = pickle.loads(blob)["accountant"]
    assert copy_.detached and len(copy_.events) == 1  # what it last saw, listed as such ...
    for read in (lambda: copy_.spent, lambda: copy_.remaining, lambda: copy_.spent_at(1e-5)):
        with pytest.raises(DetachedAccountantError, match="may have been charged since") as info:
            read()  # ... but no total, which would be stale (the second charge is missing)
        message = str(info.value)
        assert "has ended" not in message and "garbage-collected" in message and "reattach()" in message
    copy_.reattach()  # what the message offers: continue from the entries it holds
    assert copy_.spent == PrivacySpent(copy_.total_event().epsilon(0.0), 0.0)


_EXPLAIN = """
import os, pickle, sys
sys.path[:0] = {paths!r}
from process_workers import spend_or_explain
print(spend_or_explain(pickle.loads(sys.stdin.buffer.read())))
"""


def test_a_child_is_told_that_the_keeper_of_a_removed_ledger_is_still_running():
    import gc

    acc = BudgetAccountant()
    blob = pickle.dumps(acc)
    del acc
    gc.collect()  # the file is removed; this (the keeping) process keeps running
    out = subprocess.run([sys.executable, "-c", _EXPLAIN.format(paths=sys.path[:3])], input=blob,
                         capture_output=True, check=True)
    message = out.stdout.decode()
    assert f"process {os.getpid()}, which keeps this ledger, is still running" in message
    assert "has ended" not in message and "may have been charged since" in message


def test_forked_children_are_told_why_and_sharing_before_the_fork_lets_them_charge():
    ctx = multiprocessing.get_context("fork")
    acc = BudgetAccountant()
    with ctx.Pool(1) as pool:  # forked while the ledger is in this process's memory
        message = pool.apply(spend_or_explain, (acc,))
    assert f"was forked from process {os.getpid()}" in message and "pickle.dumps(accountant)" in message
    assert "has ended" not in message and acc.events == ()
    pickle.dumps(acc)  # what the message advises: the ledger moves to a file ...
    with ctx.Pool(1) as pool:  # ... and children forked now charge it
        assert pool.apply(spend_or_explain, (acc,)) == "charged"
    assert acc.events == (ZCDPRelease(0.01),)
