"""The privacy mixin shared by every skdp estimator.

It owns the common parameters (``epsilon``, ``delta``, ``accountant``,
``random_state``, ``verbose``), their validation, the resolution of the budget
against the accountant before the solver touches the data, and the fitted
``privacy_spent_`` / ``privacy_event_`` attributes. A fit runs as::

    validate_params(self); X, y = validate_data(...)          # shapes, types
    planned = <event computed from public inputs only>        # n, d, parameters
    result = self._run_private(planned, solve)                 # charge, then solve

``_run_private`` reserves the planned event on the accountant (raising
:class:`~skdp.BudgetExceededError` if it does not fit), draws the fit's noise
generator, runs the solver, checks that the event the solver reports is no
more expensive than planned, and replaces the reservation by it. If the solver
raises, the reservation stays: the data may have been read.

Which ledger a fit charges: the ``accountant`` parameter; else, decided when
``fit`` is called (the scope rule, in full in the notes of
:class:`~skdp.BudgetAccountant`): the innermost ``with BudgetAccountant(...)``
block of the thread that fits; for a copy (``clone``, pickling) made inside a
block, that block while it is open, so fits in joblib worker threads and
processes charge it too; in a thread other than the main thread, the main
thread's block; else the implicit ledger. A block of another thread is never
charged by an estimator that was not copied inside it, and a closed block by
none: an estimator created inside a block and a clone made there behave alike
once the block has closed (both charge the default in force at fit time).

Delta: ``delta="auto"`` (the estimators' default) resolves, once the number
of rows ``n`` is known and before anything is reserved, to
:func:`~skdp.accounting.default_delta` ``(n) = min(1e-5, 1 / (10 n))``: 1e-5
up to 10,000 rows (the earlier default, so those fits are unchanged), ten times
below ``1 / n`` above. ``n`` is public, so the resolved delta is too; the fit
plans, reserves and reports (``privacy_spent_``) at it. An explicit delta that
is not below ``1 / n`` warns with :class:`~skdp.PrivacyLeakWarning`.

Noise: ``random_state=None`` draws from operating-system entropy. With a seed,
a fit charged to a ledger the user created as its ``k``-th entry draws from the
stream ``(seed, k)`` (see :mod:`skdp.accounting.budget`), so cloned estimators
in a grid search never share noise. On the implicit ledger a seed gives
scikit-learn's reproducibility (same seed, same noise); reusing it warns with
:class:`~skdp.PrivacyLeakWarning`.
"""

import contextvars
import math
import numbers
import warnings
from contextlib import contextmanager

import numpy as np

from .accounting import BudgetAccountant, PrivacyLeakWarning, PrivacySpent, default_delta
from .accounting.budget import capture_default, resolve_default
from .accounting.events import PrivacyEvent
from ._validation import Interval, Options, validate_params

__all__ = ["DPEstimatorMixin", "nested_fits"]

_PRIVACY_TOLERANCE = 1e-9
# The open private run of a meta-estimator in this context (see nested_fits), or None.
_NESTED_RUN = contextvars.ContextVar("skdp_nested_run", default=None)


class NestedRun:
    """What the fits inside :func:`nested_fits` released: their events, in order, and the noise source."""

    def __init__(self, rng):
        self.rng = rng
        self.events = []


@contextmanager
def nested_fits(rng):
    """Run inner fits inside a meta-estimator's private run (its ``solve``), charged by it.

    Inside the block, :meth:`DPEstimatorMixin._run_private` of any estimator
    does not touch an accountant: it runs the fit with a generator spawned from
    ``rng`` (the meta-estimator's noise), checks the released event against
    the fit's plan, and appends it to ``run.events``. The meta-estimator
    reserved, before reading the data, a planned event that covers all of
    them, and settles with their composition: every release reaches the user's
    ledger once, through one ``_run_private``.
    """
    run = NestedRun(rng)
    token = _NESTED_RUN.set(run)
    try:
        yield run
    finally:
        _NESTED_RUN.reset(token)


class DPEstimatorMixin:
    """Mixin for differentially private estimators (put it before ``BaseEstimator``).

    Subclasses declare ``epsilon``, ``delta``, ``accountant``, ``random_state``
    and ``verbose`` in their ``__init__`` and merge
    ``DPEstimatorMixin._privacy_parameter_constraints`` into their
    ``_parameter_constraints``. ``delta`` is a float in [0, 1) or "auto"; a
    fit reads it only through :meth:`_resolve_delta` (the number of rows is
    needed to resolve "auto") and passes ``n_samples`` to :meth:`_run_private`.

    Attributes set by :meth:`_run_private`
    --------------------------------------
    privacy_event_ : PrivacyEvent
        Everything the fit released, as an event.
    privacy_spent_ : PrivacySpent
        ``(epsilon, delta)``: the event's epsilon at the fit's delta (the
        resolved value when ``delta="auto"``).
    """

    _privacy_parameter_constraints = {
        "epsilon": [Interval(numbers.Real, 0, None, closed="neither")],
        "delta": [Interval(numbers.Real, 0, 1, closed="left"), Options({"auto"})],
        "accountant": [BudgetAccountant, None],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
    }

    # -- parameters -----------------------------------------------------------------------
    def _validate_privacy_params(self):
        """Validate all constructor parameters; warn about an explicit non-private request."""
        validate_params(self)
        if math.isinf(self.epsilon):
            warnings.warn(
                f"{type(self).__name__} was given epsilon=inf: the fit adds no noise and the "
                "fitted model is not private.",
                PrivacyLeakWarning,
                stacklevel=3,
            )

    def _pure_dp_requested(self):
        """True when ``delta`` is an explicit 0 (pure DP); "auto" always resolves to a positive delta."""
        return not isinstance(self.delta, str) and float(self.delta) == 0.0

    def _resolve_delta(self, n_samples=None, *, warn=True):
        """The delta of a fit on ``n_samples`` rows (public inputs only, before anything is reserved).

        An explicit ``delta`` is used as given; with ``warn=True`` it warns
        (:class:`~skdp.PrivacyLeakWarning`) when it is not below ``1 / n_samples``.
        ``"auto"`` is :func:`~skdp.accounting.default_delta` ``(n_samples)``,
        which is always below that bound, so it never warns.
        """
        if isinstance(self.delta, str):  # "auto" (validate_params refuses any other string)
            if n_samples is None:
                raise TypeError(f"{type(self).__name__} has delta={self.delta!r}: resolving it needs "
                                "n_samples, which the fit must pass.")
            return default_delta(int(n_samples))
        delta = float(self.delta)
        if warn and n_samples is not None and delta * n_samples >= 1.0:
            warnings.warn(
                f"delta={delta:g} is not below 1 / n_samples = {1.0 / n_samples:.3g}: a guarantee with such "
                "a delta allows releasing a whole record with non-negligible probability. Choose delta at "
                f"most about 1 / (10 n_samples) = {0.1 / n_samples:.3g}, or delta='auto'.",
                PrivacyLeakWarning, stacklevel=4)
        return delta

    def _resolve_accountant(self):
        """The accountant to charge: the parameter, else the default of this context (or remembered)."""
        if self.accountant is not None:
            return self.accountant
        return resolve_default(getattr(self, "_inherited_accountant", None))

    def _noise_seed_material(self):
        """Public seed material of this fit's noise: None (OS entropy) or a tuple of integers.

        A Generator or RandomState is advanced (as scikit-learn does), so
        successive fits with one generator object draw different noise.
        """
        rs = self.random_state
        if rs is None:
            return None
        if isinstance(rs, numbers.Integral):
            if not 0 <= int(rs) < 2**32:
                # Checked before the budget is reserved (numpy's generators refuse negative seeds).
                raise ValueError(f"An integer random_state must lie in [0, 2**32); got {rs!r}.")
            return (int(rs),)
        if isinstance(rs, np.random.Generator):
            return tuple(int(v) for v in rs.integers(0, 2**63, size=4))
        if isinstance(rs, np.random.RandomState):
            return tuple(int(v) for v in rs.randint(0, 2**32, size=4, dtype=np.uint64))
        raise ValueError(f"random_state must be None, an int, a Generator or a RandomState; got {rs!r}.")

    # -- copies remember the default accountant of the block they were made in -------------
    def __sklearn_clone__(self):
        new = super().__sklearn_clone__()
        if new.accountant is None:
            remembered = capture_default(getattr(self, "_inherited_accountant", None))
            if remembered is not None:
                new._inherited_accountant = remembered
        return new

    def __getstate__(self):
        state = super().__getstate__()
        if self.accountant is None:
            # Pickling is how joblib sends an estimator to a worker process: it takes
            # along the ledger it would charge here, so the worker charges it too.
            state = dict(state)
            state["_inherited_accountant"] = capture_default(state.get("_inherited_accountant"),
                                                             implicit=True)
        return state

    def _log(self, message):
        """Print one verbose line (public or released values only); never raises."""
        if self.verbose:
            try:
                print(f"[{type(self).__name__}] {message}", flush=True)
            except Exception:  # noqa: BLE001 - a failing stream must not raise after the budget is reserved
                pass

    # -- the private part of a fit ----------------------------------------------------------
    def _run_private(self, planned_event, solve, *, n_samples=None):
        """Charge ``planned_event``, run ``solve()`` and record what it released.

        Parameters
        ----------
        planned_event : PrivacyEvent
            Computed from public inputs only, before any data value is used.
        solve : callable
            ``(rng) -> (event, result)``: runs the solver on the data with the
            fit's noise generator and returns the event it actually released
            together with its result.
        n_samples : int or None, default=None
            Rows of the training data; needed when ``delta="auto"`` (the
            charge, the checks and ``privacy_spent_`` use the resolved delta).

        Returns
        -------
        result
            Whatever ``solve`` returned besides the event.
        """
        if not isinstance(planned_event, PrivacyEvent):
            raise TypeError("planned_event must be a PrivacyEvent.")
        nested = _NESTED_RUN.get()
        if nested is not None:
            return self._run_nested(planned_event, solve, nested, n_samples)
        fit_delta = self._resolve_delta(n_samples, warn=False)
        accountant = self._resolve_accountant()
        material = self._noise_seed_material()
        entry, stream, shared = accountant._reserve(planned_event, delta=fit_delta, noise_seed=material)
        if shared:
            warnings.warn(
                f"{type(self).__name__} was fitted with random_state={self.random_state!r}, a seed an "
                "earlier fit charged to the implicit ledger (no accountant, no `with BudgetAccountant()` "
                "block) already used: if the data differ, the two models share their noise and together are "
                "not private (their difference has none). The implicit ledger now reports an infinite total. "
                "Use random_state=None for releases, or a BudgetAccountant, on which every fit draws its own "
                "noise stream.",
                PrivacyLeakWarning, stacklevel=3)
        rng = _noise_generator(material, stream)
        # Floating-point events (overflow, invalid) must not raise under a user's
        # np.seterr(all="raise"): an exception after the reservation is a release.
        with np.errstate(all="ignore"):
            event, result = solve(rng)
        if not isinstance(event, PrivacyEvent):
            raise TypeError("The solver must return a PrivacyEvent with its result.")
        # Compare at the estimator's delta and at the accountant's: an event can be
        # cheaper at one delta and dearer at another.
        deltas = {fit_delta, accountant._reporting_delta()}
        for delta in sorted(d for d in deltas if 0.0 < d < 1.0) or [fit_delta]:
            planned_eps = planned_event.epsilon(delta)
            actual_eps = event.epsilon(delta)
            if actual_eps > planned_eps * (1.0 + _PRIVACY_TOLERANCE) + 1e-12:
                # Keep the ledger honest before refusing to return a model.
                try:
                    accountant._settle(entry, event)
                finally:
                    raise RuntimeError(
                        "Internal privacy error: the solver released more than planned "
                        f"(epsilon {actual_eps:.6g} > {planned_eps:.6g} at delta={delta:.3g}). "
                        "The model is withheld."
                    )
        accountant._settle(entry, event)
        spent = event.epsilon(fit_delta)
        self.privacy_event_ = event
        self.privacy_spent_ = PrivacySpent(spent, fit_delta)
        self._log(f"spent epsilon={spent:.4g} at delta={fit_delta:.3g}")
        return result

    def _run_nested(self, planned_event, solve, nested, n_samples):
        """The private part of a fit inside a meta-estimator's run (:func:`nested_fits`): no accountant."""
        fit_delta = self._resolve_delta(n_samples, warn=False)
        rng = nested.rng.spawn(1)[0]
        # The block is closed while the inner solver runs: its own inner fits (none today) would
        # otherwise be recorded twice.
        token = _NESTED_RUN.set(None)
        try:
            with np.errstate(all="ignore"):
                event, result = solve(rng)
        finally:
            _NESTED_RUN.reset(token)
        if not isinstance(event, PrivacyEvent):
            raise TypeError("The solver must return a PrivacyEvent with its result.")
        nested.events.append(event)
        if fit_delta > 0 and event.epsilon(fit_delta) > planned_event.epsilon(fit_delta) * (
                1.0 + _PRIVACY_TOLERANCE) + 1e-12:
            raise RuntimeError("Internal privacy error: an inner fit released more than planned. The model is "
                               "withheld.")
        self.privacy_event_ = event
        self.privacy_spent_ = PrivacySpent(event.epsilon(fit_delta), fit_delta)
        return result

    # -- scikit-learn tags ------------------------------------------------------------------
    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # Private models are noisy by design; on the tiny datasets of
        # check_estimator their scores are poor, which the tags must say.
        if tags.regressor_tags is not None:
            tags.regressor_tags.poor_score = True
        if tags.classifier_tags is not None:
            tags.classifier_tags.poor_score = True
        return tags


def _noise_generator(material, stream):
    """The fit's generator: OS entropy, the seed itself (stream 0), or the stream ``(seed, stream)``.

    Streams are told apart by numpy's spawn key, which is kept separate from the
    seed's own words, so ``(seed, k)`` never collides with another seed's stream.
    """
    if material is None:
        return np.random.default_rng()
    entropy = material[0] if len(material) == 1 else list(material)
    if stream == 0:
        return np.random.default_rng(entropy)
    return np.random.default_rng(np.random.SeedSequence(entropy, spawn_key=(int(stream),)))
