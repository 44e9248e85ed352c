"""The privacy mixin shared by every skdp estimator.

It owns the common parameters (``epsilon``, ``delta``, ``accountant``,
``random_state``, ``verbose``), their validation, the resolution of the budget
against the accountant before the solver touches the data, and the fitted
``privacy_spent_`` / ``privacy_event_`` attributes. A fit runs as::

    validate_params(self); X, y = validate_data(...)          # shapes, types
    planned = <event computed from public inputs only>        # n, d, parameters
    result = self._run_private(planned, solve)                 # charge, then solve

``_run_private`` reserves the planned event on the accountant (raising
:class:`~skdp.BudgetExceededError` if it does not fit), runs the solver, checks
that the event the solver reports is no more expensive than planned, and
replaces the reservation by it. If the solver raises, the reservation stays: the
data may have been read.
"""

import math
import numbers
import warnings

from .accounting import BudgetAccountant, PrivacyLeakWarning, PrivacySpent
from .accounting.events import PrivacyEvent
from ._validation import Interval, validate_params
from .mechanisms import check_generator

__all__ = ["DPEstimatorMixin"]

_PRIVACY_TOLERANCE = 1e-9


class DPEstimatorMixin:
    """Mixin for differentially private estimators (put it before ``BaseEstimator``).

    Subclasses declare ``epsilon``, ``delta``, ``accountant``, ``random_state``
    and ``verbose`` in their ``__init__`` and merge
    ``DPEstimatorMixin._privacy_parameter_constraints`` into their
    ``_parameter_constraints``.

    Attributes set by :meth:`_run_private`
    --------------------------------------
    privacy_event_ : PrivacyEvent
        Everything the fit released, as an event.
    privacy_spent_ : PrivacySpent
        ``(epsilon, delta)``: the event's epsilon at the estimator's ``delta``.
    """

    _privacy_parameter_constraints = {
        "epsilon": [Interval(numbers.Real, 0, None, closed="neither")],
        "delta": [Interval(numbers.Real, 0, 1, closed="left")],
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

    def _resolve_accountant(self):
        """The accountant to charge: the parameter, else the current default."""
        return self.accountant if self.accountant is not None else BudgetAccountant.default()

    def _fit_generator(self):
        """A fresh ``numpy.random.Generator`` for this fit (OS entropy when random_state is None)."""
        return check_generator(self.random_state)

    def _log(self, message):
        if self.verbose:
            print(f"[{type(self).__name__}] {message}")

    # -- the private part of a fit ----------------------------------------------------------
    def _run_private(self, planned_event, solve):
        """Charge ``planned_event``, run ``solve()`` and record what it released.

        Parameters
        ----------
        planned_event : PrivacyEvent
            Computed from public inputs only, before any data value is used.
        solve : callable
            ``() -> (event, result)``: runs the solver on the data and returns
            the event it actually released together with its result.

        Returns
        -------
        result
            Whatever ``solve`` returned besides the event.
        """
        if not isinstance(planned_event, PrivacyEvent):
            raise TypeError("planned_event must be a PrivacyEvent.")
        accountant = self._resolve_accountant()
        entry = accountant._reserve(planned_event, delta=self.delta)
        self._log(f"reserved {planned_event!r}")
        event, result = solve()
        if not isinstance(event, PrivacyEvent):
            raise TypeError("The solver must return a PrivacyEvent with its result.")
        # Compare at the estimator's delta and at the accountant's: an event can be
        # cheaper at one delta and dearer at another.
        deltas = {float(self.delta), accountant._reporting_delta(accountant._entries)}
        for delta in sorted(d for d in deltas if 0.0 < d < 1.0) or [float(self.delta)]:
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
        spent = event.epsilon(self.delta)
        self.privacy_event_ = event
        self.privacy_spent_ = PrivacySpent(spent, float(self.delta))
        self._log(f"spent epsilon={spent:.4g} at delta={self.delta:.3g}")
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
