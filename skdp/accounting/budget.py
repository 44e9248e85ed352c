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
* Across processes on one machine the ledger is shared: the first time an
  accountant is pickled its entries move to a locked file
  (:mod:`skdp.accounting._ledger`), and a copy unpickled in a joblib worker
  process charges that file. The budget refuses across processes exactly as in
  one. The file lives as long as the accountant object that moved the ledger
  there (and at most as long as its process). A copy whose ledger cannot be
  reached (that object was garbage-collected or its process has ended, or a
  forked child holds a copy of a ledger its parent keeps in memory) is
  *detached*: it lists the events it last saw, but it gives no total (which
  could be stale) and cannot be charged; :class:`DetachedAccountantError` says
  which of these happened and what to do.
* The default accountant (estimators with ``accountant=None``) is per thread
  and asyncio task: the innermost ``with BudgetAccountant(...)`` block of the
  thread that fits, else (in a thread other than the main thread) the block of
  the main thread, else an implicit process-wide ledger without a budget; a
  block of another thread is never a thread's default. Copies of an estimator
  made inside a block (``clone``, pickling: how model selection hands fits to
  worker threads and processes) charge that block while it is open. The scope
  rule in full is in the Notes of :class:`BudgetAccountant`.
* Fits compose as events: ten rho-zCDP fits cost ``10 rho``, converted once.
* Totals never go down: a reported total is the larger of the composition at
  the reporting delta and the ledger's peak (the largest total it had after any
  earlier charge or report), kept with the entries so that every process sharing
  the ledger agrees (see the Notes of :class:`BudgetAccountant`).
* Noise: on a ledger the user created, a fit with a fixed ``random_state`` that
  is the ``k``-th entry of the ledger draws its noise from the stream
  ``(seed, k)``, so no two fits charged to one ledger share noise (their
  composition is then valid) and a rerun on a fresh ledger reproduces every
  model. The implicit ledger keeps scikit-learn's rule (same seed, same noise);
  when it sees a seed again (compared in this process by salted digests, never
  stored) it warns, and its total is reported as infinite from then on.
  Ledgers never hold seeds: the noise of a published model cannot be rebuilt
  from them.
* Worker processes: a fit in a child process (joblib's loky workers,
  ``multiprocessing``) that has neither an explicit accountant nor a ledger
  remembered from its parent refuses before spending: it would charge a ledger
  nobody can see.
"""

import contextvars
import hashlib
import math
import multiprocessing
import os
import socket
import sys
import threading
import uuid
import weakref
from collections import namedtuple

from ._conversions import _check_delta
from ._ledger import Entry, FileStore, MemoryStore, UnreachableStoreError
from .events import PrivacyEvent, Sequential

__all__ = [
    "AmbiguousAccountantError",
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
    """Raised when charging an accountant whose ledger this process cannot reach."""


class AmbiguousAccountantError(RuntimeError):
    """Raised, before any data is read, when the default accountant of a fit is ambiguous."""


class PrivacyLeakWarning(RuntimeWarning):
    """Warns that an explicitly requested shortcut releases something without privacy."""


class LowBudgetWarning(UserWarning):
    """Warns, from public inputs only, that a budget is too small for a reliable private fit."""


_REGISTRY = weakref.WeakValueDictionary()
_MODULE_LOCK = threading.RLock()
# The ``with`` blocks of the current context (thread or asyncio task), innermost last.
_CONTEXT_BLOCKS = contextvars.ContextVar("skdp_accountant_blocks", default=())
# Every block open in this process, in any context: accountant uid -> [accountant, count].
_OPEN_BLOCKS = {}
# The blocks open in the main thread, in the order they were entered: (accountant, root).
_MAIN_BLOCKS = []
_IMPLICIT = {"default": None}


def _restore_accountant(uid, state):
    """Unpickling hook: the live ledger in this process, a handle on the shared file, or a detached copy."""
    with _MODULE_LOCK:
        live = _REGISTRY.get(uid)
        if live is not None:
            return live
        acc = BudgetAccountant.__new__(BudgetAccountant)
        acc._init_state(state["epsilon"], state["delta"], uid=uid, implicit=state.get("implicit", False),
                        owner_pid=state.get("owner_pid"),
                        keeper=state.get("keeper", (None, state.get("owner_pid"))))
        path = state.get("path")
        if path is not None and os.path.exists(path):
            acc._store = FileStore(path)
            acc._detached = False
        else:
            acc._store = MemoryStore(_entries_from_state(state["entries"]), state.get("peak", 0.0))
            acc._detached = True
        return acc


def _entries_from_state(entries):
    out = []
    for item in entries:
        if isinstance(item, Entry):
            out.append(item)
        else:  # (event, delta) pairs
            event, delta = item[0], item[1]
            out.append(Entry(uuid.uuid4().hex, event, float(delta)))
    return out


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
        Everything charged so far, in order (from every process sharing the ledger).
    spent : PrivacySpent
        Total (epsilon, delta) of everything charged: a valid bound that never
        goes down (see Notes).
    remaining : PrivacySpent
        Epsilon headroom at the accountant's delta: the budget minus the epsilon
        spent. A pure epsilon-DP release of that size fits by basic composition;
        the engine may certify a tighter total, so this is conservative.
        :meth:`check` is the exact test.

    Notes
    -----
    **Totals never go down.** ``spent`` is reported at the *reporting delta*:
    the accountant's ``delta``, or without a delta ceiling the sum of the
    deltas the charges declared (capped at 1), which only grows. Its epsilon is
    the larger of (a) the epsilon of the composition of every charged event at
    that delta and (b) the ledger's *peak*: the largest total it had after any
    earlier charge (a :meth:`spend`, or a fit once its release is settled) or
    reported (``spent``, ``remaining``), in any process that shares the ledger.
    (a) alone is a valid bound but need not be monotone: without a delta
    ceiling, a charge that declares a large delta raises the reporting delta,
    and the composition's epsilon at a larger delta can be smaller than the
    last total (three fits of epsilon 1 at deltas 1e-5, 1e-5 and 0.3 give
    1.000, 1.402, then less than 1.402 at delta 0.30002); the root finding of
    the conversions can also lower it by a hair. Taking the larger of (a) and
    (b) keeps every total valid (it is at least (a)) and makes it
    non-decreasing in what was charged, as its delta is: the example reports
    1.000, 1.402 and 1.402 at delta 0.30002. A charge is refused when this
    total would exceed the budget. The implicit ledger (fits outside every
    ledger of the user's) has no budget: it raises its peak when its total is
    read rather than at every fit, so that such fits do not pay for measuring
    a composition that grows with every fit of the session; its totals never
    go down either. :meth:`spent_at` gives the composition's epsilon at any
    delta, computed afresh.

    Every bound the accountant reports is a valid upper bound up to the
    numerical tolerances of root finding (relative 1e-9); budgets are compared
    with the same relative tolerance: a charge is refused when the reported
    total would exceed the budget. Fits in joblib worker processes
    (``n_jobs > 1``) on this machine are charged to the same ledger through a
    locked file in a private temporary folder, created the first time the
    accountant is pickled and removed when it is garbage-collected.

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

    **Scope of a block.** A ``with BudgetAccountant(...)`` block makes the
    accountant the default of every estimator whose ``accountant`` is None. The
    ledger a fit charges is decided when ``fit`` is called, in this order:

    1. the innermost block open in the thread (or asyncio task) that calls ``fit``;
    2. for a *copy* of an estimator (``clone``, ``copy.deepcopy``, pickling),
       the block in force where the copy was made, while that block is still
       open: this is how ``GridSearchCV``, ``cross_validate`` and joblib hand fits
       to worker threads and processes, which have no block of their own (a
       worker process uses it while it can reach the ledger). joblib makes some
       copies in helper threads without a block: such a copy takes the one block
       open in the process, and when several are open it refuses to fit in any
       other thread or process (:class:`AmbiguousAccountantError`, before
       anything is spent); in the thread that made it, it is like any estimator;
    3. in a thread other than the main thread, the block open in the main
       thread (a script's block covers the threads it starts);
    4. the implicit process-wide ledger (in a joblib or multiprocessing worker
       process the fit refuses instead: nobody would see that ledger).

    So a block of another thread is never the default of a thread, and a block
    stops applying when it closes: an estimator created inside a block and
    fitted after it closed charges the default in force at fit time, and so
    does a copy made inside the block. Within the block, both charge it.

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
        self._store = MemoryStore()
        self._detached = False

    def _init_state(self, epsilon, delta, uid, implicit=False, owner_pid=None, keeper=None):
        self._epsilon = epsilon
        self._delta = delta
        self._uid = uid
        self._implicit = implicit
        self._pid = os.getpid()  # a forked child inherits the object, not an in-memory ledger
        self._owner_pid = os.getpid() if owner_pid is None else owner_pid  # the process that created it
        # (machine, pid) of the process that keeps the ledger: in its memory, or the owner of its file.
        self._keeper = (socket.gethostname(), os.getpid()) if keeper is None else tuple(keeper)
        self._lock = threading.RLock()  # guards the store across its move to a file
        # Implicit ledger only: salted digests of the seeds it has seen, in this process's memory.
        self._salt = os.urandom(16)
        self._seed_digests = set()
        self._shares_noise = False
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

    def _snapshot(self):
        return self._read()[0]

    def _read(self):
        """The entries and the peak (the largest total reported so far), read together."""
        with self._lock:
            try:
                return self._store.read()
            except UnreachableStoreError:
                self._lose_store()
                return self._store.read()

    def _raise_peak(self, value):
        with self._lock:
            try:
                self._store.raise_peak(value)
            except UnreachableStoreError:
                self._lose_store()
                self._store.raise_peak(value)

    def _lose_store(self):
        """The shared file is gone: keep what this process read of it, detached."""
        entries, peak = self._store.cached() if isinstance(self._store, FileStore) else self._store.read()
        self._store = MemoryStore(entries, peak)
        self._detached = True

    @property
    def events(self):
        return tuple(entry.event for entry in self._snapshot())

    @property
    def detached(self):
        """True when this process cannot reach the ledger (so charging it would lose the spend).

        A detached copy still lists the events it last saw (``events``), but it
        gives no total (``spent``, ``remaining`` and :meth:`spent_at` raise
        :class:`DetachedAccountantError`): the ledger may have been charged since.
        """
        if self._detached:
            return True
        if isinstance(self._store, FileStore):
            return not self._store.reachable()
        return self._pid != os.getpid()

    def _detached_reason(self):
        """Why this process cannot reach the ledger, in words (for :class:`DetachedAccountantError`)."""
        here = os.getpid()
        if not self._detached and isinstance(self._store, MemoryStore) and self._pid != here:
            return (f"this process (pid {here}) was forked from process {self._pid}, which keeps this ledger "
                    "in its memory: the child holds a copy made at the fork, which no charge would leave. "
                    "Share the ledger before starting the child processes: pickling the accountant (or an "
                    "estimator that holds it) once, for example with pickle.dumps(accountant), moves it to a "
                    "file that every process of this machine can charge. In model selection, n_jobs=1, "
                    "joblib's default process backend (loky) and the threading backend never detach a "
                    "ledger, nor do the 'spawn' and 'forkserver' start methods of multiprocessing")
        host, pid = self._keeper
        if host is not None and host != socket.gethostname():
            return (f"it was created on machine {host!r} and ledgers are shared between the processes of "
                    "one machine only. Pass this process a BudgetAccountant of its own")
        state = _process_state(pid)
        if pid == here:
            return ("this process kept the ledger's file and removed it when the BudgetAccountant that "
                    "created it was garbage-collected (a ledger lives as long as that object and at most as "
                    "long as its process). Keep a reference to the accountant while copies of it are in use")
        if state == "running":
            return (f"process {pid}, which keeps this ledger, is still running, but the ledger's file is "
                    "gone: that process removed it when its BudgetAccountant was garbage-collected, or the "
                    "file was deleted. Keep a reference to the accountant in that process while copies of it "
                    "are in use")
        if state == "ended":
            return f"process {pid}, which kept this ledger, has ended, and its ledger with it"
        keeper = "the process that kept it" if pid is None else f"process {pid}, which kept it,"
        return (f"its file is gone and {keeper} may have ended. In model selection, n_jobs=1, joblib's "
                "default process backend (loky) and the threading backend keep the ledger reachable")

    def _detached_error(self, what):
        entries = self._snapshot()
        return DetachedAccountantError(
            f"This BudgetAccountant's ledger cannot be reached from this process: {self._detached_reason()}. "
            f"{what} This copy holds the {len(entries)} entries it last saw; call accountant.reattach() to "
            "continue from them as an independent ledger in this process, or use a new BudgetAccountant.")

    @property
    def shared(self):
        """True when the ledger lives in a file that other processes on this machine can charge."""
        return isinstance(self._store, FileStore)

    def total_event(self):
        """The sequential composition of everything charged so far."""
        return Sequential(self.events)

    def _reporting_delta(self, entries=None):
        if self._delta < 1.0:
            return self._delta
        entries = self._snapshot() if entries is None else entries
        return min(1.0, sum(entry.delta for entry in entries))

    def _total_epsilon(self, entries, delta):
        if self._delta >= 1.0 and delta >= 1.0 and any(entry.delta > 0 for entry in entries):
            # Without a delta ceiling the spend is measured at the sum of the deltas
            # the fits declared; once that reaches 1 the guarantee is vacuous.
            return math.inf
        return Sequential([entry.event for entry in entries]).epsilon(delta)

    def _measure(self, entries):
        """The composition's epsilon at the reporting delta of ``entries`` (valid, not yet monotone)."""
        return self._total_epsilon(entries, self._reporting_delta(entries))

    @property
    def spent(self):
        if self.detached:
            raise self._detached_error("No total can be given: the ledger may have been charged since.")
        entries, peak = self._read()
        delta = self._reporting_delta(entries)
        if self._shares_noise:
            return PrivacySpent(math.inf, delta)  # fits with shared noise compose to nothing
        measured = self._measure(entries)
        if measured > peak:
            # Every report raises the peak, in every process sharing the ledger: a later
            # total at a larger reporting delta is never below this one.
            self._raise_peak(measured)
        return PrivacySpent(max(measured, peak), delta)

    @property
    def shares_noise(self):
        """True when two fits charged to this (implicit) ledger drew their noise from one seed."""
        return self._shares_noise

    def spent_at(self, delta):
        """Total epsilon of everything charged so far, measured at ``delta`` (computed afresh)."""
        if self.detached:
            raise self._detached_error("No total can be given: the ledger may have been charged since.")
        return self.total_event().epsilon(_check_delta(delta))

    @property
    def remaining(self):
        spent = self.spent
        return PrivacySpent(max(0.0, self._epsilon - spent.epsilon), self._delta)

    # -- charging ----------------------------------------------------------------------
    def _check_attached(self):
        if self.detached:
            raise self._detached_error("Nothing was charged and nothing was read from the data.")

    def _exceeds(self, entries, peak, measure=False):
        """Whether the total reported for ``entries`` exceeds the budget.

        Returns ``(exceeded, (total, delta, measured))``. The total is the larger
        of the peak and the composition of ``entries`` (which alone is
        ``measured``). With an infinite budget it is computed only when
        ``measure`` is true (else the detail is None).
        """
        if math.isinf(self._epsilon) and not measure:
            return False, None
        delta = self._reporting_delta(entries)
        measured = self._total_epsilon(entries, delta)
        total = max(measured, peak)
        return total > self._epsilon * (1.0 + _TOLERANCE) + 1e-12, (total, delta, measured)

    def _measures_charges(self):
        """Whether every charge raises the peak (a user's ledger) or only reads do (the implicit ledger).

        The implicit ledger has no budget and records every fit made outside a
        ledger of the user's: measuring its growing composition at each fit would
        slow every such fit down, so its peak is raised when its total is read.
        """
        return not self._implicit

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
        entries, peak = self._read()
        exceeded, detail = self._exceeds(entries + [Entry("check", event, delta)], peak)
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
        self._reserve(event, delta, final=True)

    def _reserve(self, event, delta=0.0, noise_seed=None, final=False):
        """Atomically check and record ``event``; return ``(entry, stream, shared)`` to settle it later.

        ``stream`` is the position of the entry in this ledger (0 on the implicit
        ledger and without a seed): a fit with a fixed seed draws its noise from
        ``(seed, stream)``. ``shared`` is True when the implicit ledger has
        already seen ``noise_seed`` (the fit then shares noise with an earlier one).
        ``final`` says that no settlement follows (a :meth:`spend`): the total
        after the charge then raises the peak now rather than at settlement.
        """
        delta = self._validate_event(event, delta)
        self._check_attached()
        entry = Entry(uuid.uuid4().hex, event, delta)
        outcome = {"stream": 0}

        records = final and self._measures_charges()

        def accept(entries, peak):
            exceeded, detail = self._exceeds(entries, peak, measure=records)
            if exceeded:
                outcome["detail"] = detail
                return None
            if noise_seed is not None and not self._implicit:
                outcome["stream"] = len(entries) - 1
            # The total after a charge joins the peak; a reservation's waits for its settlement.
            return detail[2] if records else peak

        with self._lock:
            try:
                accepted = self._store.append_if(entry, accept)
            except UnreachableStoreError:
                self._lose_store()
                self._check_attached()
                raise
            if not accepted:
                raise BudgetExceededError(self._exceeded_message(event, outcome["detail"]))
            shared = False
            if noise_seed is not None and self._implicit:
                digest = hashlib.blake2b(repr(tuple(noise_seed)).encode(), key=self._salt).digest()
                shared = digest in self._seed_digests
                self._seed_digests.add(digest)
                self._shares_noise = self._shares_noise or shared
        return entry, outcome["stream"], shared

    def _settle(self, entry, event):
        """Replace a reservation by the event actually released.

        The ledger then holds what was released, whatever happens next; if that
        exceeds the budget (a solver that spent more than it planned, at the
        accountant's delta), :class:`BudgetExceededError` is raised.
        """
        if not isinstance(event, PrivacyEvent):
            raise TypeError(f"Expected a PrivacyEvent; got {type(event).__name__}.")
        if isinstance(entry, tuple):
            entry = entry[0]
        with self._lock:
            self._store.replace(entry.key, event)
        exceeded, detail = self._exceeds(*self._read(), measure=self._measures_charges())
        if detail is not None:
            self._raise_peak(detail[2])
        if exceeded:
            raise BudgetExceededError(
                "The release that was just recorded exceeds the budget (it cost more than was "
                "reserved): " + self._exceeded_message(event, detail))

    def _exceeded_message(self, event, detail):
        total, delta, _ = detail
        return (
            f"Charging {event!r} would bring the total to epsilon={total:.6g} at delta={delta:.3g}, "
            f"above this accountant's budget epsilon={self._epsilon:.6g}. Nothing was read from the "
            "data. Lower the estimator's epsilon or use a larger budget."
        )

    def reattach(self):
        """Use a detached copy as an independent, chargeable ledger in this process.

        The copy keeps the entries it had when it was pickled; the original
        ledger is not charged by it.
        """
        with self._lock:
            if not self.detached:
                return self
            if isinstance(self._store, FileStore):
                self._lose_store()
            self._store = MemoryStore(*self._store.read())
            self._detached = False
            self._pid = os.getpid()
            self._keeper = (socket.gethostname(), os.getpid())
        return self

    def _share(self):
        """Move the entries to a file that other processes of this machine can charge.

        Under the ledger's lock, so that no reservation or settlement made
        meanwhile is lost between the copy and the swap.
        """
        with self._lock:
            if isinstance(self._store, MemoryStore) and not self.detached:
                self._store = FileStore.create(*self._store.read())
                self._keeper = (socket.gethostname(), os.getpid())

    # -- default accountant --------------------------------------------------------------
    @staticmethod
    def default():
        """The accountant charged by estimators whose ``accountant`` is None.

        The innermost ``with BudgetAccountant(...)`` block of the current thread
        or asyncio task; else, in a thread other than the main thread, the block
        open in the main thread (a script's block covers the threads it starts);
        else an implicit process-wide accountant with an infinite budget that
        records every fit. A block open in another thread is never the default
        of this one. (An estimator copied inside a block also remembers that
        block: see the scope rule in the class notes.)
        """
        return resolve_default(None)

    def __enter__(self):
        blocks = _CONTEXT_BLOCKS.get()
        _CONTEXT_BLOCKS.set(blocks + (self,))
        with _MODULE_LOCK:
            slot = _OPEN_BLOCKS.setdefault(self._uid, [self, 0])
            slot[1] += 1
            if _in_main_thread():
                # ``root``: opened where no block was open (not nested, not in a task that copied one).
                _MAIN_BLOCKS.append((self, not blocks))
        return self

    def __exit__(self, *exc_info):
        blocks = _CONTEXT_BLOCKS.get()
        for i in range(len(blocks) - 1, -1, -1):
            if blocks[i] is self:
                _CONTEXT_BLOCKS.set(blocks[:i] + blocks[i + 1:])
                break
        with _MODULE_LOCK:
            slot = _OPEN_BLOCKS.get(self._uid)
            if slot is not None:
                slot[1] -= 1
                if slot[1] <= 0:
                    del _OPEN_BLOCKS[self._uid]
            if _in_main_thread():
                for i in range(len(_MAIN_BLOCKS) - 1, -1, -1):
                    if _MAIN_BLOCKS[i][0] is self:
                        del _MAIN_BLOCKS[i]
                        break
        return False

    # -- identity under copies -----------------------------------------------------------
    def __reduce__(self):
        # Pickling is how joblib sends an accountant to a worker process: share the
        # ledger first, so that the worker's copy charges it.
        self._share()
        state = {"epsilon": self._epsilon, "delta": self._delta, "implicit": self._implicit,
                 "owner_pid": self._owner_pid, "keeper": self._keeper,
                 "path": self._store.path if isinstance(self._store, FileStore) else None}
        state["entries"], state["peak"] = self._read()
        return _restore_accountant, (self._uid, state)

    def __copy__(self):
        return self

    def __deepcopy__(self, memo):
        return self

    def __sklearn_clone__(self):
        return self

    def __repr__(self):
        if self._implicit:
            return "BudgetAccountant.default()"
        return f"BudgetAccountant(epsilon={self._epsilon!r}, delta={self._delta!r})"


def _process_state(pid):
    """"running", "ended" or "unknown" for a process of this machine (used in messages only)."""
    if pid is None or os.name != "posix":
        return "unknown"  # os.kill(pid, 0) would terminate the process on Windows
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return "ended"
    except PermissionError:
        return "running"  # a process of another user
    except OSError:
        return "unknown"
    return "running"


class _Ambiguous:
    """Marker: the default accountant was ambiguous when an estimator was copied."""

    def __repr__(self):
        return "<ambiguous default accountant>"

    def __reduce__(self):
        return (_ambiguous, ())


def _ambiguous():
    return AMBIGUOUS


AMBIGUOUS = _Ambiguous()


def _implicit_default():
    with _MODULE_LOCK:
        acc = _IMPLICIT["default"]
        if acc is None or acc.detached:
            acc = BudgetAccountant()
            acc._implicit = True
            _IMPLICIT["default"] = acc
        return acc


def _in_main_thread():
    return threading.current_thread() is threading.main_thread()


def _main_block():
    """The innermost block open in the main thread, or None (none, or several independent ones)."""
    with _MODULE_LOCK:
        roots = sum(1 for _, root in _MAIN_BLOCKS if root)
        return _MAIN_BLOCKS[-1][0] if roots == 1 else None


def _open_block():
    """The single distinct accountant with a ``with`` block open in this process, AMBIGUOUS, or None."""
    with _MODULE_LOCK:
        open_now = [slot[0] for slot in _OPEN_BLOCKS.values()]
    if len(open_now) == 1:
        return open_now[0]
    return AMBIGUOUS if open_now else None


def _is_open(acc):
    with _MODULE_LOCK:
        return acc._uid in _OPEN_BLOCKS


class Remembered:
    """The default ledger an estimator copy remembers from where it was made (see :func:`capture_default`).

    Attributes
    ----------
    ledger : BudgetAccountant or AMBIGUOUS
    guessed : bool
        True when the copy was made in a thread without a block of its own and
        the ledger is the block open elsewhere in the process (AMBIGUOUS when
        several were): the copy was probably made for that block by one of
        joblib's helper threads.
    thread, pid : int
        The thread and the process that made the copy.
    """

    __slots__ = ("ledger", "guessed", "thread", "pid")

    def __init__(self, ledger, guessed=False, thread=None, pid=None):
        self.ledger = ledger
        self.guessed = bool(guessed)
        self.thread = threading.get_ident() if thread is None else thread
        self.pid = os.getpid() if pid is None else pid

    def __reduce__(self):
        return (Remembered, (self.ledger, self.guessed, self.thread, self.pid))

    def __repr__(self):
        return f"Remembered({self.ledger!r}, guessed={self.guessed})"

    def made_here(self):
        """True when the copy was made in the current thread of this process."""
        return self.pid == os.getpid() and self.thread == threading.get_ident()


def _as_remembered(value):
    """A :class:`Remembered` (estimators pickled by earlier versions hold the ledger itself)."""
    if value is None or isinstance(value, Remembered):
        return value
    return Remembered(value, guessed=value is AMBIGUOUS, thread=-1, pid=-1)


def _still_applies(remembered):
    """Whether a remembered ledger still applies here; None when it does not (the fit uses its own default).

    * made by guess (or ambiguously) in this very thread: the copy was not
      handed to anyone, so the thread's own default applies;
    * AMBIGUOUS: the copy was handed to this thread or process, and for which
      of several blocks cannot be told (refuse, before anything is spent);
    * this process's implicit ledger: only worker processes record in it;
    * a copy made in this process: while its block is open;
    * a copy made in another process (a worker's): while the ledger can be
      reached (the parent waits in its block while its workers fit); a worker
      that cannot reach it refuses (its spend would be lost).
    """
    if remembered is None:
        return None
    ledger = remembered.ledger
    if remembered.guessed and remembered.made_here():
        return None
    if ledger is AMBIGUOUS:
        raise AmbiguousAccountantError(_AMBIGUOUS_MESSAGE)
    if ledger.detached:
        if multiprocessing.parent_process() is not None:
            raise ledger._detached_error("Nothing was charged and nothing was read from the data.")
        return None  # a ledger of another session that has ended: this process's default applies
    if ledger._implicit and ledger._owner_pid == os.getpid():
        return None
    if remembered.pid == os.getpid():
        return ledger if _is_open(ledger) else None
    return ledger


def capture_default(remembered=None, implicit=False):
    """What an estimator copy (clone, deepcopy, pickle) remembers of the default ledger where it is made.

    1. the innermost block of the current thread or task;
    2. else what the original remembered, if it still applies;
    3. else, in a thread other than the main thread (joblib's helper threads
       clone and pickle the copies they hand to workers), the one block open in
       the process, or AMBIGUOUS when several are (``guessed``);
    4. else, with ``implicit=True`` (pickling), this process's implicit ledger,
       so that a worker process records its fits where the parent can see them;
    5. else None.

    Returns
    -------
    Remembered or None
    """
    blocks = _CONTEXT_BLOCKS.get()
    if blocks:
        return Remembered(blocks[-1])
    remembered = _as_remembered(remembered)
    if remembered is not None:
        try:
            if remembered.ledger is AMBIGUOUS or _still_applies(remembered) is not None:
                return remembered
        except (AmbiguousAccountantError, DetachedAccountantError):
            return remembered  # the copy refuses wherever it is fitted, as its original would
    if not _in_main_thread():
        block = _open_block()
        if block is not None:
            return Remembered(block, guessed=True)
    return Remembered(_implicit_default()) if implicit else None


def resolve_default(remembered=None):
    """The accountant a fit with ``accountant=None`` charges (the scope rule of :class:`BudgetAccountant`).

    1. the innermost block of the current thread or task;
    2. else the ledger the estimator remembers from where it was copied, if it
       still applies (see :func:`_still_applies`);
    3. else, in a thread other than the main thread, the block open in the main thread;
    4. else, in a worker process, nothing (refuse); else the implicit ledger.

    Raises
    ------
    AmbiguousAccountantError
        When the estimator was copied in a thread without a block while
        several blocks were open elsewhere, and is fitted in another thread or process.
    DetachedAccountantError
        In a worker process, when there is no ledger of the parent to charge.
    """
    blocks = _CONTEXT_BLOCKS.get()
    if blocks:
        return blocks[-1]
    ledger = _still_applies(_as_remembered(remembered))
    if ledger is not None:
        return ledger
    if not _in_main_thread():
        block = _main_block()
        if block is not None:
            return block
    if multiprocessing.parent_process() is not None:
        raise DetachedAccountantError(_WORKER_MESSAGE)
    if _in_dask_worker():
        raise DetachedAccountantError(_DASK_WORKER_MESSAGE)
    return _implicit_default()


def _in_dask_worker():
    """Whether this code runs in a task of a Dask worker (never imports Dask).

    A worker may run in another process or on another machine, with no parent
    the rule above can see (``dask worker --no-nanny``), or in the user's process
    (``LocalCluster(processes=False)``); either way its implicit ledger is not one
    the user looks at.
    """
    distributed = sys.modules.get("distributed")
    if distributed is None:
        return False
    try:
        distributed.get_worker()
    except (ValueError, AttributeError):
        return False
    return True


_WORKER_MESSAGE = (
    "This fit runs in a worker process and has no ledger to charge: it has no accountant of its own and "
    "none was remembered from the parent process, so its spend would be recorded where nobody can see it. "
    "Nothing was read from the data. Pass accountant=BudgetAccountant(...) created in the parent process "
    "(it is shared with the workers), or build the estimator in the parent and send it to the workers.")

_DASK_WORKER_MESSAGE = (
    "This fit runs in a Dask worker and has no ledger to charge: it has no accountant of its own, none was "
    "remembered from where it was copied and no `with BudgetAccountant(...)` block applies, so its spend "
    "would be recorded where nobody can see it. Nothing was read from the data. Pass "
    "accountant=BudgetAccountant(...) created by the client (workers on the client's machine charge it), or "
    "fit on the client: skdp fits on Dask collections run their steps there and send only the sums to the "
    "workers.")

_AMBIGUOUS_MESSAGE = (
    "This estimator was copied (cloned or pickled, as model selection does for its workers) in a thread "
    "without a `with BudgetAccountant(...)` block of its own while several blocks were open in other "
    "threads, and it is fitted in another thread or process: which block it works for cannot be told. "
    "Nothing was read from the data. Pass accountant= to the estimator, or run the model selection in a "
    "thread that has its own block.")
