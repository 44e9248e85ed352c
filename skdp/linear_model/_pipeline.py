"""The private linear-model pipeline shared by every estimator of the library.

One ``fit``, in this order (everything before the reservation reads public
inputs only, or validates the data without using their values):

1. validate the parameters, and refuse a requested solver that is unavailable;
2. validate the data (shapes, types, finite values) and encode the target;
   resolve the declared public bounds (``bounds``, ``y_bounds``;
   :mod:`~skdp.linear_model._bounds`) and clip the data to them (a per-record
   map: every later step sees the clipped rows);
3. choose the solver (the estimator's routing table, public inputs only) and
   check the problem specification against its declared capabilities;
4. plan the budget (:func:`~skdp.linear_model._budget.plan_budget`): the
   standardisation mode, the quantile epsilon, the solver variant and the
   calibrated Gaussian budget, hence the planned event;
5. reserve the planned event on the accountant (:meth:`_run_private`), then
   release the scales (:class:`~skdp.linear_model._standardise.PrivateStandardiser`),
   build the solver's problem, run the solver, and settle the ledger with the
   event of what was drawn;
   map the coefficients back to the original units, and release the fit check
   (:mod:`~skdp.linear_model._fit_check`: is the model better than a constant
   on the training rows?);
6. warn, and fall back to the constant, when the check says so
   (post-processing).

An estimator is a subclass that declares its parameters, its docstring with
the exact objective, and the hooks below: its routing table
(:meth:`_choose_algorithm`), the loss and penalties in solver units, and how the
target is validated.
"""

import math
import warnings
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp
from sklearn.utils.validation import check_is_fitted, validate_data

from .._base import DPEstimatorMixin
from .._validation import validate_params
from ..accounting import LowBudgetWarning, Sequential
from ..solvers import GLMProblem, ProblemSpec, Solver, SolverOptions, get_solver, progress_hook, solver_names
from ._bounds import resolve_bounds
from ._budget import REGRESSION_POST_FIT, plan_budget, plan_pure_budget
from ._fit_check import private_fit_check
from ._rows import (ChunkedDesign, ChunkedProblem, ChunkedRows, check_chunked_estimator, check_chunked_plan,
                    is_dask_collection, lazy_decision_function)
from ._standardise import COEF_RADIUS, WHITENED_MODES
from ._verbose import FitReporter

__all__ = ["PrivateLinearModel", "PostFit"]


@dataclass
class PostFit:
    """What the post-fit releases gave: the model to keep, the fit check, their events, and extras.

    ``extras["verbose"]``, when present, maps names to released scalars shown on
    the post-fit line of ``verbose`` output (released values only).
    """

    coef: object
    intercept: object
    check: object = None
    events: list = field(default_factory=list)
    extras: dict = field(default_factory=dict)


class PrivateLinearModel(DPEstimatorMixin):
    """Base of the private linear models (put it before scikit-learn's mixins and ``BaseEstimator``).

    Subclasses set ``_solver_family`` and define :meth:`_choose_algorithm`,
    :meth:`_spec_loss`, :meth:`_problem_loss` and :meth:`_penalties`; they may
    override :meth:`_check_parameters` and :meth:`_validate_fit_data`.
    """

    _solver_family = None
    # How a fallback to the constant shows in the fitted attributes (for the warning).
    _fallback_note = "coef_ = 0"
    # Whether y is a numeric target to standardise, and whether the regression fit check runs.
    _scales_target = True
    _has_fit_check = True
    # Whether fit accepts Dask collections (the configurations of skdp.linear_model._rows).
    _dask_input = False
    # Whether the whitened modes release the block means when every column is in a declared one-hot
    # block (skdp.linear_model._standardise; a public rule per estimator).
    _block_means = False

    # -- hooks ---------------------------------------------------------------------------------
    def _check_parameters(self):
        """Estimator-specific checks of the parameters alone (before any data is read)."""

    def _choose_algorithm(self, n_samples, n_features):
        """The solver name for ``algorithm="auto"``, from public inputs only (the routing table)."""
        raise NotImplementedError

    def _solver_options(self):
        return SolverOptions(schedule=getattr(self, "schedule", "practical"))

    def _spec_loss(self):
        """The loss in solver units as far as it is known before the data (its type and public constants)."""
        raise NotImplementedError

    def _problem_loss(self, scaling):
        """The loss in solver units once the scales are released (default: :meth:`_spec_loss`)."""
        return self._spec_loss()

    def _penalties(self, scaling, n_coef):
        """Ridge and L1 weights in solver units: ``(ridge, l1, ridge_matrix or None)``."""
        return np.zeros(n_coef), np.zeros(n_coef), None

    def _has_l1(self):
        return False

    def _effective_alpha(self):
        """The ridge strength of the mean loss in original units (0 for estimators without ``alpha``)."""
        return float(getattr(self, "alpha", 0.0))

    def _has_ridge(self):
        return False

    def _validate_fit_data(self, X, y):
        """Validate X and a numeric target (every check here runs before anything is spent)."""
        X, y = validate_data(self, X, y, accept_sparse=("csr", "csc"), y_numeric=True,
                             dtype=[np.float64, np.float32])
        if y.dtype.kind not in "biuf":
            try:  # numeric strings ("1.5") are numbers; anything else is refused before any spend
                y = y.astype(np.float64)
            except (TypeError, ValueError):
                raise ValueError(f"{type(self).__name__} needs a numeric target y; got values of dtype "
                                 f"{y.dtype}. Nothing was spent.") from None
            if not np.all(np.isfinite(y)):
                raise ValueError("Input y contains NaN or infinity. Nothing was spent.")
        return X, y

    # -- the pipeline ----------------------------------------------------------------------------
    def fit(self, X, y, **fit_params):
        """Fit the private model.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Finite real values (the data domain of the privacy guarantee).
        y : array-like of shape (n_samples,)
        **fit_params
            Only ``sample_weight=None`` is accepted. Weighted fits are refused:
            the guarantee bounds the influence of one row, and a weight
            multiplies it, so a weighted fit would need a public bound on the
            weights and noise scaled to it.

        Returns
        -------
        self
        """
        self._check_fit_params(fit_params)
        # The accounting and the solvers are written for IEEE arithmetic (underflow to
        # 0, overflow to inf, both handled); a user's np.seterr(all="raise") must not
        # turn those into exceptions, least of all after the budget is reserved.
        with np.errstate(all="ignore"):
            return self._fit(X, y)

    def _check_fit_params(self, fit_params):
        for name, value in fit_params.items():
            if name == "sample_weight":
                if value is not None:
                    raise TypeError(
                        f"{type(self).__name__} does not support sample_weight: its privacy guarantee bounds "
                        "the influence of one row, and a weight multiplies that influence (a weight of 10 "
                        "is ten people). Replicate or drop rows with public knowledge instead. Nothing was "
                        "spent.")
            else:
                raise TypeError(f"{type(self).__name__}.fit got an unexpected keyword argument {name!r}.")

    def _prepare_fit(self, X, y, *, warn=True):
        """Every check a fit makes before its reservation, and the budget plan (public inputs only).

        Returns the validated (and, with declared bounds, clipped) ``X`` and ``y``,
        ``n``, ``d`` and the plan. Used by :meth:`_fit` and by :meth:`_planned_event`.
        """
        if warn:
            self._validate_privacy_params()
        else:
            validate_params(self)
        requested = self._requested_solver()  # refuses unavailable solvers before reading data
        self._check_parameters()
        if is_dask_collection(X) or is_dask_collection(y):
            check_chunked_estimator(self)
            X = self._chunked_rows(X, y)  # rows stay on the cluster; y is held by X
            self._set_chunked_features(X)
        else:
            X, y = self._validate_fit_data(X, y)
        n, d = X.shape
        if n < 2:
            raise ValueError(f"{type(self).__name__} needs at least 2 samples; got n_samples = {n}.")
        self._declared = resolve_bounds(getattr(self, "bounds", None), getattr(self, "y_bounds", None), d,
                                        getattr(self, "feature_names_in_", None), sp.issparse(X))
        if self._declared is not None:
            X, y = self._declared.clip(X), self._declared.clip_target(y)
        self._resolve_delta(n, warn=warn)  # "auto" -> default_delta(n); an explicit delta >= 1 / n warns
        solver = requested if requested is not None else self._configured(self._choose_algorithm(n, d))
        solver.check(self._problem_spec(solver, n, d, "none"))
        plan = self._plan(solver, n, d)
        if plan.solver is not solver:
            plan.solver.check(plan.spec)  # a variant chosen by the plan is checked too, before any spend
        if isinstance(X, ChunkedRows):
            check_chunked_plan(self, plan, n, d)  # public inputs only: before any value of the rows is read
            X.check_finite()
        return X, y, n, d, plan

    def _chunked_rows(self, X, y):
        """The Dask rows ``(X, y)`` as :class:`~skdp.linear_model._rows.ChunkedRows` (public checks only)."""
        return ChunkedRows.from_inputs(self, X, y)

    def _set_chunked_features(self, rows):
        """``n_features_in_`` and ``feature_names_in_`` of chunked rows, as ``validate_data`` sets them."""
        self.n_features_in_ = rows.shape[1]
        if rows.feature_names is not None:
            self.feature_names_in_ = rows.feature_names
        elif hasattr(self, "feature_names_in_"):
            del self.feature_names_in_

    def _planned_event(self, X, y):
        """The event a fit on ``(X, y)`` would plan, with every check a fit makes before its reservation.

        Reads only what a fit reads before spending (shapes, types, finiteness,
        the public label set): a meta-estimator calls it on a clone, before
        its own reservation, for every inner fit it will run.
        """
        return self._prepare_fit(X, y, warn=False)[4].event

    def _fit(self, X, y):
        reporter = FitReporter(self)
        X, y, n, d, plan = self._prepare_fit(X, y)
        self._warn_if_predicted_poor(plan, n, d)
        reporter.plan(plan, n, d, self._resolve_delta(n, warn=False), isinstance(self.delta, str), self.epsilon)

        def private_fit(rng):
            # The reporter prints public and released values only, and never raises (see _verbose).
            released, pre_events = self._pre_fit(X, y, plan, rng)
            scaling, scaling_event = plan.standardiser.fit(X, y, rng)
            reporter.scales(scaling, self._scales_target)
            problem = self._build_problem(scaling, X, y, plan.solver, released)
            with progress_hook(reporter.progress_callback(plan.solver.name)):
                result = plan.solver.run(plan.spec, problem, plan.budget, rng)
            reporter.solver(plan.solver.name, result.schedule)
            coef, intercept = self._unscale(scaling, result.coef)
            post = self._post_fit(X, y, scaling, coef, intercept, plan, rng, released, result.coef)
            reporter.post_fit(plan, post)
            return Sequential([*pre_events, scaling_event, result.event, *post.events]), (result, scaling, post)

        result, scaling, post = self._run_private(plan.event, private_fit, n_samples=n)
        if reporter:
            reporter.emit(f"fit done in {reporter.elapsed():.2f} s")
        coef, intercept, check = post.coef, post.intercept, post.check
        if check is not None and check.doubtful:
            coef, intercept = self._after_failed_check(check, scaling, coef, intercept, n, d)
        self._store_model(coef, intercept, X.dtype)
        self.algorithm_ = plan.solver.name
        self.schedule_ = result.schedule
        self.n_iter_ = int(result.schedule.get("n_steps", 0))
        self.scaling_ = scaling.as_dict()
        if check is not None:
            self.fit_check_ = check.as_dict()
        return self

    def _check_predictions(self, X, scaling, coef, intercept):
        """Training predictions for the fit check when the model is not ``X @ coef + intercept``, else None."""
        return None

    def _store_model(self, coef, intercept, dtype):
        """Set the fitted attributes from the (unscaled, possibly fallen-back) solution."""
        # Coefficients in the input's floating dtype (float32 stays float32), as scikit-learn does.
        self.coef_ = coef.astype(dtype, copy=False)
        self.intercept_ = (np.asarray(intercept, dtype=dtype) if np.ndim(intercept)
                           else dtype.type(intercept) if dtype == np.float32 else float(intercept))

    def _plan(self, solver, n, d):
        """The budget plan (public inputs only): pure DP when ``delta = 0``, else the Gaussian plan.

        The plan uses the fit's delta (``default_delta(n)`` for ``delta="auto"``).
        """
        delta = self._resolve_delta(n, warn=False)
        common = {"epsilon": float(self.epsilon), "n_samples": n, "n_features": d,
                  "fit_intercept": self.fit_intercept, "solver": solver,
                  "make_spec": lambda mode: self._problem_spec(solver, n, d, mode),
                  "scaling": getattr(self, "scaling", "auto"),
                  "scaling_share": getattr(self, "scaling_share", "auto"), "scale_target": self._scales_target,
                  "declared": getattr(self, "_declared", None), "block_means": self._block_means}
        post_fit, extra_quantiles = self._post_fit_plan(n)
        if delta == 0.0:
            return plan_pure_budget(**common, stacklevel=5, post_fit=post_fit, extra_quantiles=extra_quantiles)
        return plan_budget(**common, delta=delta, schedule=getattr(self, "schedule", "practical"),
                           adapt_solver=not isinstance(self.algorithm, Solver), stacklevel=5,
                           post_fit=post_fit, extra_quantiles=extra_quantiles)

    def _post_fit_plan(self, n_samples):
        """The post-fit releases and their budget shares, and the extra private quantiles (public inputs only).

        Regressors: the fit check (:data:`~skdp.linear_model._budget.REGRESSION_POST_FIT`).
        """
        return (dict(REGRESSION_POST_FIT) if self._has_fit_check else {}), 0

    def _pre_fit(self, X, y, plan, rng):
        """The estimator's own releases before the solver: ``(released values, events)`` (default: none).

        Their budgets are among the plan's post-fit shares (:meth:`_post_fit_plan`).
        """
        return {}, []

    def _post_fit(self, X, y, scaling, coef, intercept, plan, rng, released, solver_coef):
        """The releases made on the released model after the solver (inside the private part of the fit).

        ``coef`` and ``intercept`` are in the original units, ``solver_coef`` in the
        solver's (all released). Regressors: the fit check. Returns a
        :class:`PostFit` with the model to keep, the check and the events released.
        """
        if not self._has_fit_check:
            return PostFit(coef, intercept)
        kind, level = plan.post_budget("check") if plan.post_budgets else ("gaussian", plan.check_mu)
        check = private_fit_check(X, y, coef, intercept, self._constant_prediction(scaling), scaling.target_scale,
                                  plan.check_mu, rng, starved=plan.starved,
                                  predictions=self._check_predictions(X, scaling, coef, intercept),
                                  pure_epsilon=level if kind == "pure" else None)
        return PostFit(coef, intercept, check, [check.event])

    def _unscale(self, scaling, coef):
        """Solver coefficients (a vector, or one row per output) in the original units."""
        if np.ndim(coef) == 1:
            return scaling.unscale(coef)
        pairs = [scaling.unscale(row) for row in coef]
        return np.array([c for c, _ in pairs]), np.array([b for _, b in pairs])

    def _constant_prediction(self, scaling):
        """The constant the fit check compares against: the released target centre (0 without intercept)."""
        return float(scaling.target_center) if self.fit_intercept else 0.0

    def _after_failed_check(self, check, scaling, coef, intercept, n, d):
        """Warn after a doubtful fit check; fall back to the constant when it is confident (post-processing)."""
        eps_n = float(self.epsilon) * n
        p = d + int(self.fit_intercept)
        constant = self._constant_prediction(scaling)
        released = (f"(released improvement {check.improvement:+.3g} target variances, noise standard deviation "
                    f"{check.noise_std:.2g})")
        if check.starved and check.improvement >= 0.0:
            found = (f"On this starved budget a private check on the training rows could not confirm that the "
                     f"fitted model is better than predicting the constant {constant:.4g} {released}")
        else:
            found = (f"A private check on the training rows found the fitted model worse than predicting the "
                     f"constant {constant:.4g} {released}")
        advice = (f"epsilon * n_samples = {eps_n:.0f} ({eps_n / p:.1f} per coefficient) is likely too small for "
                  "this table: use a larger epsilon, more rows or fewer features (for example fewer one-hot "
                  "levels).")
        if check.fallback:
            warnings.warn(f"{found}, so the constant is returned ({self._fallback_note}). {advice}",
                          LowBudgetWarning, stacklevel=4)
            return np.zeros(d), constant
        warnings.warn(f"{found}; within its noise, so the model is kept, but it is likely no better than the "
                      f"constant. {advice}", LowBudgetWarning, stacklevel=4)
        return coef, intercept

    def _warn_if_predicted_poor(self, plan, n, d):
        """Warn when the planned solver predicts a poor fit here, naming what ``algorithm="auto"`` would run.

        The solver's rule (:meth:`~skdp.solvers.Solver.poor_fit_reason`) reads the
        public specification and the calibrated budget only, and runs before
        anything is reserved: the warning reveals nothing about the data.
        """
        reason = plan.solver.poor_fit_reason(plan.spec, plan.budget)
        better = self._choose_algorithm(n, d) if reason is not None else None
        if better is None or better == plan.solver.name:
            return
        warnings.warn(f"algorithm={plan.solver.name!r} is predicted to be poor at n_samples={n} and "
                      f"epsilon={self.epsilon:g}: {reason}. algorithm='auto' would run {better!r}, which is "
                      "more accurate here.", LowBudgetWarning, stacklevel=4)

    def _requested_solver(self):
        """The solver the user asked for (None for "auto"); unavailable solvers refuse here."""
        algorithm = self.algorithm
        if isinstance(algorithm, Solver):
            if algorithm.family != self._solver_family:
                offered = ", ".join(repr(name) for name in solver_names(self._solver_family))
                raise ValueError(
                    f"algorithm={algorithm!r} is a solver of the {algorithm.family!r} family; "
                    f"{type(self).__name__} takes a solver of the {self._solver_family!r} family "
                    f"(one of {offered}, by name or as an instance). Nothing was spent.")
            algorithm.validate()
            return algorithm
        if algorithm == "auto":
            return None
        return self._configured(algorithm)

    def _configured(self, name):
        cls = get_solver(name, self._solver_family)
        if cls.unavailable:
            raise ValueError(cls.unavailable)
        return cls.from_options(self._solver_options())

    def _n_outputs(self):
        """Rows of the coefficient matrix (1 except for multiclass models)."""
        return 1

    def _problem_spec(self, solver, n, d, mode):
        """The public problem specification under a scaling mode."""
        loss = self._spec_loss()
        public_smoothness = None
        if solver.needs_public_smoothness() and mode in ("robust", "none"):
            public_smoothness = self._public_smoothness(loss, mode, d)
        return ProblemSpec(n_samples=n, n_coef=d + int(self.fit_intercept), loss=loss,
                           intercept=bool(self.fit_intercept), l1=self._has_l1(), ridge=self._has_ridge(),
                           schedule=getattr(self, "schedule", "practical"),
                           public_smoothness=public_smoothness,
                           radius=COEF_RADIUS if mode in ("robust", "none", *WHITENED_MODES) else None,
                           n_outputs=self._n_outputs())

    def _public_smoothness(self, loss, mode, n_features):
        """Uniform per-row smoothness of the standardised problem, from public inputs only.

        In the "robust" and "none" modes rows are clipped to the public norm
        ``sqrt(d) + 3`` and the intercept column is 1; the ridge weights are
        public when ``alpha = 0`` or (mode "none") when no scale is applied.
        """
        alpha = self._effective_alpha()
        if mode == "robust" and alpha > 0:
            raise ValueError(
                "A theory schedule that needs a public smoothness bound needs alpha=0 with private scaling "
                "(the ridge in standardised units would depend on private scales); use scaling='none' or "
                "schedule='practical'.")
        row_bound = math.sqrt(n_features) + 3.0
        if self.fit_intercept:
            row_bound = math.hypot(row_bound, 1.0)
        ridge = alpha if mode == "none" else 0.0
        return float(loss.smoothness) * row_bound**2 + ridge

    def _build_problem(self, scaling, X, y, solver, released=None):
        """The solver's problem in standardised units.

        Rows are clipped to the released (or public) row bound unless the
        solver declares that its privacy does not rest on it and the rows are
        whitened (then an informative heavy-tailed column is kept whole); a
        sparse X stays implicit for solvers that accept a design object.
        """
        caps = solver.capabilities
        unbounded = scaling.whitened and caps.unbounded_rows
        if isinstance(X, ChunkedRows):  # the same rows, formed chunk by chunk on the cluster in every pass
            rows, target, problem_class = ChunkedDesign(X, scaling, not unbounded), None, ChunkedProblem
        else:
            rows = scaling.rows(X, clip=not unbounded, implicit=caps.implicit_design)
            target, problem_class = scaling.transform_target(y), GLMProblem
        ridge, l1, matrix = self._penalties(scaling, rows.shape[1])
        if matrix is not None and not caps.matrix_penalty:  # pragma: no cover - the plan prevents it
            raise RuntimeError(f"{solver.name} cannot take a ridge given as a matrix.")
        return problem_class(rows, target, self._problem_loss(scaling), ridge,
                          radius=scaling.radius, row_bound=scaling.coef_row_bound,
                          intercept=self.fit_intercept, unit=scaling.unit, l1=l1, rows_clipped=not unbounded,
                          penalty_matrix=matrix)

    # -- prediction (post-processing: no privacy cost) ---------------------------------------------
    def _decision_function(self, X):
        check_is_fitted(self)
        if self._dask_input and is_dask_collection(X):
            return self._lazy_decision_function(X)
        X = validate_data(self, X, reset=False, accept_sparse=("csr", "csc"), dtype=[np.float64, np.float32])
        return np.asarray(X @ self.coef_.astype(X.dtype, copy=False)).ravel() + X.dtype.type(self.intercept_)

    def _lazy_decision_function(self, X):
        """Predictions on Dask input as a lazy Dask array (post-processing; nothing is computed)."""
        return lazy_decision_function(self._lazy_rows(X), self.coef_, self.intercept_)

    def _lazy_rows(self, X):
        """Dask input to predict on, checked against the fitted features, as a row-chunked Dask array (lazy)."""
        if hasattr(X, "to_dask_array"):
            columns = list(getattr(X, "columns", []))
            names = getattr(self, "feature_names_in_", None)
            if names is not None and columns != list(names):
                raise ValueError("The feature names should match those that were passed during fit.")
            X = X.to_dask_array(lengths=True)
        if X.ndim != 2 or X.shape[1] != self.n_features_in_:
            raise ValueError(f"X has {X.shape[-1]} features, but {type(self).__name__} is expecting "
                             f"{self.n_features_in_} features as input.")
        if len(X.chunks[1]) > 1:
            X = X.rechunk({1: -1})
        return X

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True  # CSR/CSC input; the default solver keeps it sparse
        return tags
