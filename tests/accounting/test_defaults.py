"""Which ledger a fit charges: per-context defaults, worker threads and processes, and noise streams.

Every scenario here lost spend or let a budget through before the default
accountant became per context and ledgers became shared across processes.
"""

import threading

import numpy as np
import pytest
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


def test_several_open_blocks_make_the_default_ambiguous_and_nothing_is_spent():
    X, y = _data()
    opened, release = threading.Barrier(3), threading.Event()
    ledgers = []

    def hold_block():
        with BudgetAccountant() as acc:
            ledgers.append(acc)
            opened.wait()
            release.wait()

    threads = [threading.Thread(target=hold_block) for _ in range(2)]
    for t in threads:
        t.start()
    opened.wait()
    try:
        with pytest.raises(AmbiguousAccountantError, match="accountant="):
            ToyDPRidge().fit(X, y)
        acc = BudgetAccountant()
        ToyDPRidge(accountant=acc).fit(X, y)  # an explicit accountant is never ambiguous
        assert len(acc.events) == 1
    finally:
        release.set()
        for t in threads:
            t.join()
    assert [len(acc.events) for acc in ledgers] == [0, 0]


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
