"""Which ledger a fit charges: per-context defaults, worker threads and processes, and noise streams.

Every scenario here lost spend or let a budget through before the default
accountant became per context and ledgers became shared across processes.
"""

import pickle
import threading

import joblib
import numpy as np
import pytest
from sklearn.base import clone
from sklearn.model_selection import GridSearchCV, RandomizedSearchCV, cross_val_score, cross_validate

from skdp import BudgetAccountant, BudgetExceededError, PrivacyLeakWarning
from skdp.accounting import AmbiguousAccountantError
from toy_estimator import ToyDPRidge


def _data(n=120, d=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) / np.sqrt(d)
    y = np.clip(X @ np.array([0.5, -0.3, 0.2]) + 0.05 * rng.normal(size=n), -1, 1)
    return X, y


GRID = {"alpha": [0.5, 1.0, 2.0]}


@pytest.mark.parametrize("n_jobs", [1, 2])
def test_grid_search_in_a_block_charges_every_fit(n_jobs):
    X, y = _data()
    with BudgetAccountant() as acc:
        GridSearchCV(ToyDPRidge(random_state=0), GRID, cv=2, n_jobs=n_jobs).fit(X, y)
    assert len(acc.events) == 3 * 2 + 1  # six fold fits and the refit, whatever n_jobs


@pytest.mark.parametrize("search", ["grid", "randomized", "cross_val_score"])
def test_process_workers_charge_exactly_what_one_process_charges(search):
    X, y = _data()
    spent = {}
    for n_jobs in (1, 2):
        acc = BudgetAccountant(delta=1e-5)
        est = ToyDPRidge(epsilon=0.4, accountant=acc)
        if search == "grid":
            GridSearchCV(est, GRID, cv=3, n_jobs=n_jobs).fit(X, y)
        elif search == "randomized":
            RandomizedSearchCV(est, GRID, n_iter=2, cv=3, n_jobs=n_jobs, random_state=0).fit(X, y)
        else:
            cross_val_score(est, X, y, cv=3, n_jobs=n_jobs)
        spent[n_jobs] = (len(acc.events), acc.spent.epsilon)
    assert spent[1][0] == spent[2][0]
    assert spent[1][1] == pytest.approx(spent[2][1], rel=1e-9)


def test_the_budget_refuses_across_processes():
    X, y = _data()
    # Gaussian fits at epsilon 0.6 compose to ~0.88 for two and ~1.09 for three:
    # of four folds in two worker processes exactly two may run.
    with BudgetAccountant(epsilon=1.0, delta=1e-5) as acc:
        scores = cross_val_score(ToyDPRidge(epsilon=0.6), X, y, cv=4, n_jobs=2, error_score=np.nan)
    assert np.isnan(scores).sum() == 2
    assert len(acc.events) == 2
    assert acc.spent.epsilon <= 1.0 * (1 + 1e-9)


def test_worker_processes_record_in_the_implicit_ledger_of_their_parent():
    X, y = _data()
    before = len(BudgetAccountant.default().events)
    cross_val_score(ToyDPRidge(), X, y, cv=3, n_jobs=2)
    assert len(BudgetAccountant.default().events) == before + 3


def test_each_thread_charges_its_own_block():
    """Thread A opens its block after thread B's; B's fits still go to B's ledger and budget."""
    X, y = _data()
    b_open, a_open, b_done = threading.Event(), threading.Event(), threading.Event()
    outcome = {}

    def thread_b():
        with BudgetAccountant(epsilon=1.0, delta=1e-5) as acc_b:
            b_open.set()
            a_open.wait()
            results = []
            for _ in range(3):
                try:
                    ToyDPRidge(epsilon=1.0, random_state=0).fit(X, y)
                    results.append("fit")
                except BudgetExceededError:
                    results.append("refused")
            outcome["b"] = (results, len(acc_b.events))
        b_done.set()

    def thread_a():
        b_open.wait()
        with BudgetAccountant(epsilon=10.0, delta=1e-5) as acc_a:
            a_open.set()
            b_done.wait()
            outcome["a"] = len(acc_a.events)

    threads = [threading.Thread(target=thread_b), threading.Thread(target=thread_a)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert outcome["b"] == (["fit", "refused", "refused"], 1)
    assert outcome["a"] == 0


def test_a_thread_without_a_block_uses_the_one_open_block():
    X, y = _data()
    result = {}
    with BudgetAccountant() as acc:
        worker = threading.Thread(target=lambda: result.setdefault("est", ToyDPRidge().fit(X, y)))
        worker.start()
        worker.join()
    assert len(acc.events) == 1


def _hold_blocks(count):
    """Open ``count`` blocks, each in a thread of its own; return (ledgers, release)."""
    opened, release = threading.Barrier(count + 1), threading.Event()
    ledgers, threads = [], []

    def hold_block():
        with BudgetAccountant() as acc:
            ledgers.append(acc)
            opened.wait()
            release.wait()

    for _ in range(count):
        threads.append(threading.Thread(target=hold_block))
        threads[-1].start()
    opened.wait()

    def close():
        release.set()
        for t in threads:
            t.join()

    return ledgers, close


def _in_thread(fn):
    """Run ``fn`` in a new thread; return its result, or raise what it raised."""
    outcome = {}

    def run():
        try:
            outcome["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - handed back to the caller
            outcome["error"] = exc

    worker = threading.Thread(target=run)
    worker.start()
    worker.join()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def test_blocks_of_other_threads_are_never_the_default_of_this_one():
    """The default is per thread: neither the main thread nor a third one borrows another thread's block."""
    X, y = _data()
    implicit = BudgetAccountant.default()
    ledgers, close = _hold_blocks(1)
    try:
        assert BudgetAccountant.default() is implicit  # the main thread, one block open elsewhere
    finally:
        close()
    ledgers, close = _hold_blocks(2)
    try:
        assert BudgetAccountant.default() is implicit
        ToyDPRidge().fit(X, y)  # two blocks open elsewhere: no AmbiguousAccountantError ...
        assert len(implicit.events) == 1  # ... the fit charges this thread's default
        _in_thread(lambda: ToyDPRidge().fit(X, y))  # nor in a third thread
        assert _in_thread(BudgetAccountant.default) is implicit
        assert len(implicit.events) == 2
        acc = BudgetAccountant()
        ToyDPRidge(accountant=acc).fit(X, y)  # an explicit accountant is never ambiguous
        assert len(acc.events) == 1
    finally:
        close()
    assert [len(acc.events) for acc in ledgers] == [0, 0]


def test_a_copy_handed_to_another_thread_while_several_blocks_are_open_refuses_and_nothing_is_spent():
    """joblib's helper threads clone the copies they hand to workers; with two blocks open elsewhere the
    block a copy works for cannot be told, so it refuses (in the thread that made it, it is its own)."""
    X, y = _data()
    ledgers, close = _hold_blocks(2)
    try:
        copy_ = _in_thread(lambda: clone(ToyDPRidge()))  # copied by a thread without a block
        with pytest.raises(AmbiguousAccountantError, match="accountant="):
            copy_.fit(X, y)  # fitted in another thread
        assert _in_thread(lambda: clone(ToyDPRidge()).fit(X, y)).privacy_spent_.epsilon > 0  # same thread
    finally:
        close()
    assert [len(acc.events) for acc in ledgers] == [0, 0]
    assert len(BudgetAccountant.default().events) == 1


def test_model_selection_inside_a_block_of_another_thread_charges_that_block():
    """The helper threads that dispatch the later folds have no block; their copies take the one open."""
    X, y = _data()

    def search():
        with BudgetAccountant() as acc:
            with joblib.parallel_backend("threading"):
                cross_val_score(ToyDPRidge(), X, y, cv=6, n_jobs=2)  # more folds than joblib pre-dispatches
        return acc

    acc = _in_thread(search)
    assert len(acc.events) == 6 and BudgetAccountant.default().events == ()


def test_a_block_stops_applying_when_it_closes_for_originals_and_copies_alike():
    """Scope rule: fit time decides, and a copy made in a block counts as inside it only while it is open."""
    X, y = _data()
    with BudgetAccountant() as block:
        original = ToyDPRidge()
        cloned = clone(ToyDPRidge())
        pickled = pickle.loads(pickle.dumps(ToyDPRidge()))
        handed = clone(ToyDPRidge())
        _in_thread(lambda: handed.fit(X, y))  # while open, a copy charges its block from any thread
    assert len(block.events) == 1
    implicit = BudgetAccountant.default()
    for est in (original, cloned, pickled):
        est.fit(X, y)  # after the block closed: the default in force at fit time, for all three
    assert len(block.events) == 1 and len(implicit.events) == 3
    with BudgetAccountant() as later:
        for est in (original, cloned, pickled):
            est.fit(X, y)
    assert len(later.events) == 3


def test_fits_on_a_user_ledger_never_share_noise_and_reruns_reproduce():
    X, y = _data()
    folds = [(np.arange(len(y)), np.arange(len(y)))] * 3  # three identical training sets

    def fold_models(accountant):
        out = cross_validate(ToyDPRidge(random_state=0, accountant=accountant), X, y, cv=folds,
                             return_estimator=True)
        return [est.coef_ for est in out["estimator"]]

    first, rerun = fold_models(BudgetAccountant()), fold_models(BudgetAccountant())
    # Same seed, same data, one ledger: three different noise draws (fresh streams) ...
    assert not np.allclose(first[0], first[1]) and not np.allclose(first[1], first[2])
    # ... and a rerun on a fresh ledger reproduces every model.
    for a, b in zip(first, rerun):
        np.testing.assert_array_equal(a, b)
    # The first fit of a seed on a user ledger is the fit scikit-learn's rule gives.
    np.testing.assert_array_equal(first[0], ToyDPRidge(random_state=0).fit(X, y).coef_)


def test_the_implicit_ledger_keeps_scikit_learns_seed_rule_and_warns_on_a_reused_seed():
    X, y = _data()
    a = ToyDPRidge(random_state=5).fit(X, y).coef_
    implicit = BudgetAccountant.default()
    assert not implicit.shares_noise and implicit.spent.epsilon < np.inf
    with pytest.warns(PrivacyLeakWarning, match="already used"):
        b = ToyDPRidge(random_state=5).fit(X, y).coef_
    np.testing.assert_array_equal(a, b)  # same seed, same noise ...
    assert implicit.shares_noise  # ... so the two fits compose to no guarantee at all
    assert implicit.spent.epsilon == np.inf
    ToyDPRidge(random_state=6).fit(X, y)  # another seed: no warning


def test_a_generator_random_state_is_copied_by_clone_but_streams_still_differ():
    X, y = _data()
    acc = BudgetAccountant()
    est = ToyDPRidge(random_state=np.random.default_rng(1), accountant=acc)
    out = cross_validate(est, X, y, cv=[(np.arange(len(y)), np.arange(len(y)))] * 2, return_estimator=True)
    a, b = (m.coef_ for m in out["estimator"])
    assert not np.allclose(a, b)
