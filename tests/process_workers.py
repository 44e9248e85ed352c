"""Functions that tests hand to worker processes.

A spawned process finds a function by importing its module by name; test
modules are imported with ``--import-mode=importlib`` under names such as
``tests.accounting.test_budget`` that a worker cannot import, so the functions
live here, in the tests folder that ``conftest.py`` puts on ``sys.path`` (which
workers inherit).
"""

import pickle

import numpy as np

from skdp.accounting import BudgetExceededError, DetachedAccountantError, LaplaceRelease, ZCDPRelease

__all__ = ["spend_in_child", "unpickle_and_spend", "train_toy_ridge", "spend_until_refused",
           "spend_or_explain"]


def spend_in_child(acc):
    """Try to charge ``ZCDPRelease(0.01)`` to ``acc``; say whether it was charged or refused."""
    try:
        acc.spend(ZCDPRelease(0.01))
        return "charged a copy"
    except DetachedAccountantError:
        return "refused"


def spend_or_explain(acc):
    """Charge ``ZCDPRelease(0.01)`` to ``acc``: "charged", or why it refused to charge and to give a total."""
    try:
        acc.spend(ZCDPRelease(0.01))
        return "charged"
    except DetachedAccountantError as refusal:
        try:
            acc.spent
        except DetachedAccountantError as reading:
            return f"{refusal}\n{reading}"
        return f"{refusal}\nthe total was given"


def unpickle_and_spend(data):
    """:func:`spend_in_child` on an accountant pickled by the parent."""
    return spend_in_child(pickle.loads(data))


def train_toy_ridge(alpha):
    """Build and fit a ToyDPRidge inside the worker (no accountant): the fit must refuse."""
    from toy_estimator import ToyDPRidge

    rng = np.random.default_rng(0)
    X = rng.normal(size=(120, 3)) / np.sqrt(3)
    y = np.clip(X @ np.array([0.5, -0.3, 0.2]) + 0.05 * rng.normal(size=120), -1, 1)
    return ToyDPRidge(epsilon=1.0, alpha=alpha).fit(X, y).privacy_spent_.epsilon


def spend_until_refused(data, n_max=10):
    """Charge epsilon-1 Laplace releases to a pickled accountant until it refuses; how many were charged."""
    acc = pickle.loads(data)
    charged = 0
    try:
        for _ in range(n_max):
            acc.spend(LaplaceRelease(1.0, 1.0))
            charged += 1
    except BudgetExceededError:
        pass
    return charged
