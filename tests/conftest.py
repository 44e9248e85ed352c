"""Shared test configuration.

* Test modules are imported with ``--import-mode=importlib`` (no folder is added
  to ``sys.path`` for them), so the tests folder itself is put on ``sys.path``
  here: ``privacy_harness``, ``toy_estimator`` and ``process_workers`` then
  import the same way from ``tests/`` and from any subfolder, and from worker
  processes, which inherit the path.
* Every test starts with a fresh implicit ledger (the one fits charge outside
  every ``with BudgetAccountant()`` block). That ledger warns when it sees a
  seed again, since two fits with one seed share their noise; tests are
  independent scenarios, so a seed used by one test must not count as reused
  by the next. Within a test, reuse still warns (and fails the test, see
  ``filterwarnings`` in pyproject.toml) unless the test expects it.
"""

import os
import sys

import pytest

_HERE = os.path.dirname(os.path.abspath(__file__))
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)


@pytest.fixture(autouse=True)
def fresh_implicit_ledger(monkeypatch):
    """Give the test its own implicit ledger (created on first use); the previous one is restored after."""
    from skdp.accounting import budget

    monkeypatch.setitem(budget._IMPLICIT, "default", None)
    yield
