"""Hardening of the shared ledger and of the default accountant (regression tests of a privacy review)."""

import copy
import dataclasses
import multiprocessing
import os
import pickle
import struct
import sys
import threading

import numpy as np
import pytest
from joblib import Parallel, delayed

from skdp import BudgetAccountant, BudgetExceededError, PrivacyLeakWarning
from skdp.accounting import DetachedAccountantError, LaplaceRelease
from skdp.accounting._ledger import Entry
from process_workers import spend_until_refused, train_toy_ridge
from toy_estimator import ToyDPRidge


def _data(n=120, d=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) / np.sqrt(d)
    y = np.clip(X @ np.array([0.5, -0.3, 0.2]) + 0.05 * rng.normal(size=n), -1, 1)
    return X, y


def test_ledger_entries_hold_no_seeds():
    """A pickled model carries its ledger; the ledger must not let anyone rebuild another fit's noise."""
    assert {f.name for f in dataclasses.fields(Entry)} == {"key", "event", "delta"}
    X, y = _data()
    acc = BudgetAccountant()
    ToyDPRidge(random_state=np.random.default_rng(123), accountant=acc).fit(X, y)
    state = acc.__reduce__()[1][1]  # what a pickle of any estimator holding this ledger carries
    assert all(set(vars(entry)) == {"key", "event", "delta"} for entry in state["entries"])


def test_a_copy_made_outside_a_block_does_not_escape_the_block_opened_later():
    X, y = _data()
    copies = [copy.deepcopy(ToyDPRidge(epsilon=1.0, random_state=0)) for _ in range(3)]
    copies += [pickle.loads(pickle.dumps(ToyDPRidge(epsilon=1.0, random_state=0))) for _ in range(3)]
    outcomes = []
    with BudgetAccountant(epsilon=1.0, delta=1e-5) as acc:
        def fit(est):
            try:
                est.fit(X, y)
                outcomes.append("fit")
            except BudgetExceededError:
                outcomes.append("refused")
        threads = [threading.Thread(target=fit, args=(est,)) for est in copies]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert outcomes.count("fit") == 1 and len(acc.events) == 1


def test_a_worker_that_builds_its_own_estimator_refuses():
    with BudgetAccountant(epsilon=1.0, delta=1e-5) as acc:
        with pytest.raises(DetachedAccountantError, match="worker process"):
            Parallel(n_jobs=2)(delayed(train_toy_ridge)(a) for a in (0.5, 1.0))
    assert acc.events == ()


def test_no_charge_is_lost_while_the_ledger_moves_to_a_file():
    for _ in range(5):
        acc = BudgetAccountant()
        stop = threading.Event()
        counted = []

        def spend():
            while not stop.is_set():
                acc.spend(LaplaceRelease(1.0, 1e6))
                counted.append(1)

        worker = threading.Thread(target=spend)
        worker.start()
        pickle.dumps(acc)  # the first pickling moves the ledger to a file
        stop.set()
        worker.join()
        assert len(acc.events) == len(counted)


def test_the_implicit_ledger_warns_when_a_seed_comes_back_and_stops_claiming_a_total():
    X, y = _data()
    implicit = BudgetAccountant.default()
    ToyDPRidge(random_state=98765).fit(X, y)
    with pytest.warns(PrivacyLeakWarning, match="share their noise"):
        ToyDPRidge(random_state=98765).fit(X[::-1], y[::-1])
    assert implicit.shares_noise and implicit.spent.epsilon == np.inf


_FORK_CHILD = """
import os, pickle, sys
sys.path[:0] = {paths!r}
from skdp import BudgetAccountant
from skdp.accounting import LaplaceRelease
acc = BudgetAccountant(epsilon=2.0)
acc.spend(LaplaceRelease(1.0, 1.0))
pickle.dumps(acc)
pid = os.fork()
if pid == 0:
    sys.exit(0)
os.waitpid(pid, 0)
print(os.path.exists(acc._store.path), acc.spent.epsilon)
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_does_not_remove_its_parents_ledger():
    import subprocess

    code = _FORK_CHILD.format(paths=sys.path[:3])
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, check=True, text=True)
    assert out.stdout.split() == ["True", "1.0"]


def test_a_torn_record_is_cut_off_and_later_records_are_seen_by_every_process():
    acc = BudgetAccountant(epsilon=3.0)
    blob = pickle.dumps(acc)
    with open(acc._store.path, "ab") as fh:  # a writer that died in the middle of a record
        fh.write(struct.pack("<Q", 10**6) + b"x" * 20)
    acc.spend(LaplaceRelease(1.0, 1.0))
    acc.spend(LaplaceRelease(1.0, 1.0))
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        more = pool.apply(spend_until_refused, (blob,))
    assert more == 1 and len(acc.events) == 3 and acc.spent.epsilon == pytest.approx(3.0)


@pytest.mark.parametrize("seed", [-1, 2**32, 2**40])
def test_out_of_range_seeds_are_refused_before_any_spend(seed):
    X, y = _data()
    acc = BudgetAccountant()
    with pytest.raises(ValueError, match="random_state"):
        ToyDPRidge(random_state=seed, accountant=acc).fit(X, y)
    assert acc.events == ()


def test_noise_streams_of_one_seed_never_repeat_another_seeds_stream():
    from skdp._base import _noise_generator

    draws = {}
    for seed in (5, 6):
        for stream in range(4):
            draws[(seed, stream)] = tuple(_noise_generator((seed,), stream).standard_normal(3))
    assert len(set(draws.values())) == len(draws)
