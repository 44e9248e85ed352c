"""The user's shared privacy budget: a ledger of events with a ceiling.

Design notes
------------
* An estimator stores its ``accountant`` parameter unchanged and resolves it at
  fit time, so a model built before a ``with BudgetAccountant(...)`` block and
  fitted inside it charges the block's accountant.
* An accountant is a handle on one ledger. ``sklearn.base.clone``, ``copy``,
  ``deepcopy`` and pickling inside the same process all return the same object,
  so ``GridSearchCV``, ``cross_val_score`` and ``Pipeline`` charge the user's
  ledger for every fit. (Copying it silently is exactly how other libraries lose
  the cost of a grid search.)
* An accountant unpickled in a *different* process (a joblib worker, or a model
  loaded from disk tomorrow), or inherited by a forked child process, cannot
  reach the original ledger. It is *detached*: reading it works, charging it
  raises :class:`DetachedAccountantError`. Use ``n_jobs=1`` or the threading backend for
  parallel model selection, or call :meth:`BudgetAccountant.reattach` to use the
  restored copy as an independent ledger.
* Fits compose as events: ten rho-zCDP fits cost ``10 rho``, converted once.
"""

import math
import os
import threading
import uuid
import weakref
from collections import namedtuple

from ._conversions import _check_delta
from .events import PrivacyEvent, Sequential

__all__ = [
    "BudgetAccountant",
    "BudgetExceededError",
    "DetachedAccountantError",
    "LowBudgetWarning",
    "PrivacyLeakWarning",
    "PrivacySpent",
]

PrivacySpent = namedtuple("PrivacySpent", ["epsilon", "delta"])
PrivacySpent.__doc__ = "An (epsilon, delta) pair of privacy spent or remaining."

_TOLERANCE = 1e-9


class BudgetExceededError(RuntimeError):
    """Raised, before any data is read, when a fit would exceed the accountant's budget."""


class DetachedAccountantError(RuntimeError):
    """Raised when charging an accountant restored from a pickle made in another process."""


class PrivacyLeakWarning(RuntimeWarning):
    """Warns that an explicitly requested shortcut releases something without privacy."""


class LowBudgetWarning(UserWarning):
    """Warns, from public inputs only, that a budget is too small for a reliable private fit."""


_REGISTRY = weakref.WeakValueDictionary()
_DEFAULT_STACK = []
_GLOBAL = {"default": None}
_MODULE_LOCK = threading.RLock()


def _restore_accountant(uid, state):
    """Unpickling hook: the live ledger when it exists in this process, else a detached copy."""
    with _MODULE_LOCK:
        live = _REGISTRY.get(uid)
        if live is not None:
            return live
        acc = BudgetAccountant.__new__(BudgetAccountant)
        acc._init_state(state["epsilon"], state["delta"], uid=uid)
        acc._entries = [list(entry) for entry in state["entries"]]
        acc._detached = True
        return acc


class _Entry(list):
    """A ledger entry ``[event, reported_delta]`` (a list so a reservation can be settled)."""


class BudgetAccountant:
    """A shared privacy budget that estimators charge when they fit.

    Parameters
    ----------
    epsilon : float > 0, default=inf
        Ceiling on the total epsilon.
    delta : float in [0, 1], default=1.0
        The delta at which the total epsilon is measured and capped. ``1.0``
        means no delta ceiling; the spend is then reported at the sum of the
        deltas that the fits targeted, and is infinite once that sum reaches 1.

    Attributes
    ----------
    events : tuple of PrivacyEvent
        Everything charged so far, in order.
    spent : PrivacySpent
        Total (epsilon, delta) of the composition of all charged events.
    remaining : PrivacySpent
        Epsilon headroom at the accountant's delta: the budget minus the epsilon
        spent. A pure epsilon-DP release of that size fits by basic composition;
        the engine may certify a tighter total, so this is conservative.
        :meth:`check` is the exact test.

    Notes
    -----
    Every bound the accountant reports is a valid upper bound up to the
    numerical tolerances of root finding (relative 1e-9); budgets are compared
    with the same relative tolerance.

    Examples
    --------
    >>> from skdp.accounting import BudgetAccountant, ZCDPRelease
    >>> acc = BudgetAccountant(epsilon=6.0, delta=1e-6)
    >>> for _ in range(10):
    ...     acc.spend(ZCDPRelease(0.05))
    >>> round(acc.spent.epsilon, 3)  # ten fits of 0.05-zCDP cost 0.5-zCDP
    5.222
    >>> acc.spend(ZCDPRelease(0.5))
    Traceback (most recent call last):
    ...
    skdp.accounting.budget.BudgetExceededError: Charging ZCDPRelease(rho=0.5) would ...

    Used as a context manager it becomes the default accountant of every
    estimator whose ``accountant`` is None:

    >>> with BudgetAccountant(epsilon=2.0, delta=1e-5) as acc:
    ...     BudgetAccountant.default() is acc
    True
    """

    def __init__(self, epsilon=math.inf, delta=1.0):
        epsilon = float(epsilon)
        if not epsilon > 0:
            raise ValueError(f"The budget epsilon must be positive; got {epsilon!r}.")
        self._init_state(epsilon, _check_delta(delta), uid=uuid.uuid4().hex)
        self._entries = []
        self._detached = False

    def _init_state(self, epsilon, delta, uid):
        self._epsilon = epsilon
        self._delta = delta
        self._uid = uid
        self._pid = os.getpid()  # a forked child inherits the object, not the ledger
        self._lock = threading.RLock()
        with _MODULE_LOCK:
            _REGISTRY[uid] = self

    # -- read-only views ---------------------------------------------------------------
    @property
    def epsilon(self):
        """Ceiling on the total epsilon."""
        return self._epsilon

    @property
    def delta(self):
        """The delta at which the budget is measured (1.0: no delta ceiling)."""
        return self._delta

    @property
    def events(self):
        with self._lock:
            return tuple(entry[0] for entry in self._entries)

    @property
    def detached(self):
        """True when this object lives in a process that does not hold the live ledger."""
        return self._detached or self._pid != os.getpid()

    def total_event(self):
        """The sequential composition of everything charged so far."""
        return Sequential(self.events)

    def _reporting_delta(self, entries):
        if self._delta < 1.0:
            return self._delta
        return min(1.0, sum(entry[1] for entry in entries))

    def _total_epsilon(self, entries, delta):
        if self._delta >= 1.0 and delta >= 1.0 and any(entry[1] > 0 for entry in entries):
            # Without a delta ceiling the spend is measured at the sum of the deltas
            # the fits declared; once that reaches 1 the guarantee is vacuous.
            return math.inf
        return Sequential([entry[0] for entry in entries]).epsilon(delta)

    @property
    def spent(self):
        with self._lock:
            entries = list(self._entries)
        delta = self._reporting_delta(entries)
        return PrivacySpent(self._total_epsilon(entries, delta), delta)

    def spent_at(self, delta):
        """Total epsilon of everything charged so far, measured at ``delta``."""
        return self.total_event().epsilon(_check_delta(delta))

    @property
    def remaining(self):
        spent = self.spent
        return PrivacySpent(max(0.0, self._epsilon - spent.epsilon), self._delta)

    # -- charging ----------------------------------------------------------------------
    def _check_attached(self):
        if self.detached:
            raise DetachedAccountantError(
                "This BudgetAccountant was restored from a pickle made in another process, so "
                "it cannot charge the original ledger. Run model selection with n_jobs=1 or the "
                "threading backend (joblib.parallel_backend('threading')), or call "
                "accountant.reattach() to use this copy as an independent ledger."
            )

    def _exceeds(self, entries):
        if math.isinf(self._epsilon):
            return False, None
        delta = self._reporting_delta(entries)
        total = self._total_epsilon(entries, delta)
        return total > self._epsilon * (1.0 + _TOLERANCE) + 1e-12, (total, delta)

    def _validate_event(self, event, delta):
        if not isinstance(event, PrivacyEvent):
            raise TypeError(f"Expected a PrivacyEvent; got {type(event).__name__}.")
        return _check_delta(delta)

    def check(self, event, delta=0.0):
        """Raise :class:`BudgetExceededError` if charging ``event`` would exceed the budget.

        Parameters
        ----------
        event : PrivacyEvent
        delta : float, default=0.0
            The delta at which the caller states the event's guarantee; used only
            to choose the reporting delta when the accountant has no delta ceiling.
        """
        delta = self._validate_event(event, delta)
        self._check_attached()
        with self._lock:
            entries = list(self._entries) + [_Entry([event, delta])]
        exceeded, detail = self._exceeds(entries)
        if exceeded:
            raise BudgetExceededError(self._exceeded_message(event, detail))

    def spend(self, event, delta=0.0):
        """Check ``event`` against the budget and record it (atomically).

        Parameters
        ----------
        event : PrivacyEvent
        delta : float, default=0.0
            See :meth:`check`.
        """
        self._reserve(event, delta)

    def _reserve(self, event, delta=0.0):
        """Atomically check and record ``event``; return a handle to settle it later."""
        delta = self._validate_event(event, delta)
        self._check_attached()
        with self._lock:
            entry = _Entry([event, delta])
            entries = self._entries + [entry]
            exceeded, detail = self._exceeds(entries)
            if exceeded:
                raise BudgetExceededError(self._exceeded_message(event, detail))
            self._entries.append(entry)
            return entry

    def _settle(self, entry, event):
        """Replace a reservation by the event actually released.

        The ledger then holds what was released, whatever happens next; if that
        exceeds the budget (a solver that spent more than it planned, at the
        accountant's delta), :class:`BudgetExceededError` is raised.
        """
        if not isinstance(event, PrivacyEvent):
            raise TypeError(f"Expected a PrivacyEvent; got {type(event).__name__}.")
        with self._lock:
            entry[0] = event
            exceeded, detail = self._exceeds(list(self._entries))
        if exceeded:
            raise BudgetExceededError(
                "The release that was just recorded exceeds the budget (it cost more than was "
                "reserved): " + self._exceeded_message(event, detail))

    def _exceeded_message(self, event, detail):
        total, delta = detail
        return (
            f"Charging {event!r} would bring the total to epsilon={total:.6g} at delta={delta:.3g}, "
            f"above this accountant's budget epsilon={self._epsilon:.6g}. Nothing was read from the "
            "data. Lower the estimator's epsilon or use a larger budget."
        )

    def reattach(self):
        """Use a detached copy as an independent, chargeable ledger in this process."""
        self._detached = False
        self._pid = os.getpid()
        return self

    # -- default accountant --------------------------------------------------------------
    @staticmethod
    def default():
        """The accountant charged by estimators whose ``accountant`` is None.

        Inside ``with BudgetAccountant(...) as acc:`` this is ``acc``; otherwise a
        process-wide accountant with an infinite budget that records every fit.
        """
        with _MODULE_LOCK:
            if _DEFAULT_STACK:
                return _DEFAULT_STACK[-1]
            if _GLOBAL["default"] is None:
                _GLOBAL["default"] = BudgetAccountant()
            return _GLOBAL["default"]

    def __enter__(self):
        with _MODULE_LOCK:
            _DEFAULT_STACK.append(self)
        return self

    def __exit__(self, *exc_info):
        with _MODULE_LOCK:
            for i in range(len(_DEFAULT_STACK) - 1, -1, -1):
                if _DEFAULT_STACK[i] is self:
                    del _DEFAULT_STACK[i]
                    break
        return False

    # -- identity under copies -----------------------------------------------------------
    def __reduce__(self):
        with self._lock:
            entries = [tuple(entry) for entry in self._entries]
        state = {"epsilon": self._epsilon, "delta": self._delta, "entries": entries}
        return _restore_accountant, (self._uid, state)

    def __copy__(self):
        return self

    def __deepcopy__(self, memo):
        return self

    def __sklearn_clone__(self):
        return self

    def __repr__(self):
        return f"BudgetAccountant(epsilon={self._epsilon!r}, delta={self._delta!r})"
