"""DPZerothOrderRegressor: private regression from loss values only (linear, MLP or callable models)."""

import math
import numbers

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.utils.validation import check_is_fitted, validate_data

from .._base import DPEstimatorMixin
from .._validation import Interval, InvalidParameterError, Options
from ..losses import AbsoluteLoss, CauchyLoss, HuberLoss, QuantileLoss, TukeyLoss, ValueLoss
from ..preprocessing import FeatureBounds
from ..linear_model._pipeline import PrivateLinearModel
from ..linear_model._rows import ChunkedRows, is_dask_collection
from ..linear_model._standardise import COEF_RADIUS, MODES
from ..solvers import ProblemSpec, Solver, solver_names
from ..solvers._contract import MAX_PUBLIC_CLIP, MIN_PUBLIC_CLIP
from ..solvers.clip_threshold import derivative_cap
from ..solvers.zeroth_order import DIRECTION_MODES, ZOProblem
from ._callables import check_rowwise
from ._chunked import ChunkedZOProblem, check_chunked_zeroth_order
from ._models import CallableModel, LinearModel, MLPModel

__all__ = ["DPZerothOrderRegressor"]

_LOSSES = ("absolute", "pinball", "huber", "tukey", "cauchy")
# The 95%-efficiency constants at the normal, in units of the residual scale.
_CONSTANTS = {"huber": 1.345, "tukey": 4.685, "cauchy": 2.385}
_LOSS_CLASSES = {"huber": HuberLoss, "tukey": TukeyLoss, "cauchy": CauchyLoss}
# Full-batch steps of the practical schedule: a linear model converges in a few dozen (each
# step costs sqrt(steps) more noise); a network needs more.
_LINEAR_STEPS = 50
_NETWORK_STEPS = 300
# Iterates of a linear model are projected onto a ball this many times the standardised
# coefficient radius (a guard against noise excursions; it never binds on a sane fit).
_LINEAR_RADIUS = 4.0 * COEF_RADIUS
# The linear model's clip: the loss's bound times hypot(m_L t, v), t the released typical
# (median) row norm, v the intercept column, m_L = max(1, (nu / NU0)^(1/4)) with
# nu = n mu / p the public budget per parameter (infinite without noise: no clip), and never
# above the released row bound.
_CLIP_NU0 = 1000.0
# Directions per row and step of the practical schedule: every coordinate axis for a linear
# model (its estimate is then the exact gradient of the coordinate-wise smoothed loss, for the
# cost of one pass over the rows), _NETWORK_DIRECTIONS axes for the network (a move of one
# weight changes one hidden unit: cheap), _CALLABLE_DIRECTIONS Haar directions for a callable.
_NETWORK_DIRECTIONS = 64
_CALLABLE_DIRECTIONS = 32


class DPZerothOrderRegressor(PrivateLinearModel, RegressorMixin, BaseEstimator):
    """Differentially private regression that needs only the values of the loss.

    Minimises ``mean_i loss(y_i, model(params, x_i))`` with an (epsilon,
    delta)-DP zeroth-order method: the gradient is estimated from loss values
    at randomly perturbed parameters, every row's finite differences are
    clipped to a public Lipschitz bound, and Gaussian noise is added (Zhang,
    Tran and Cutkosky, 2024). No derivative of the loss or of the model is
    used, so non-differentiable losses (absolute, pinball), non-convex robust
    losses (Tukey, Cauchy), a one-hidden-layer network and a user's own model
    and loss given as Python functions are all fitted the same way, and the
    guarantee holds for any of them that computes each row's value from that
    row alone (discontinuous, huge, NaN or raising values included): a wrong
    Lipschitz bound costs accuracy, never privacy.

    X and y are standardised privately first, exactly as for
    :class:`~skdp.DPHeavyTailRegressor` (the shared private standardisation:
    per-column centres and scales from private quantiles, a private
    second-moment matrix that whitens the features, a released row bound);
    every fit ends with the shared private check that the model predicts
    better than a constant.

    Parameters
    ----------
    epsilon : float > 0, default=1.0
        Privacy budget of one fit (``inf``: no noise, not private).
    delta : float in (0, 1) or "auto", default="auto"
        "auto" is :func:`~skdp.accounting.default_delta` of the number of rows,
        ``min(1e-5, 1 / (10 n_samples))``. The solvers add Gaussian noise, so
        delta must be positive; an explicit delta should be well below
        ``1 / n_samples`` (a fit warns otherwise).
    loss : {"absolute", "pinball", "huber", "tukey", "cauchy"} or callable, default="absolute"
        The loss of a residual. A callable ``loss(prediction, y) -> values`` is
        called vectorised with arrays of shape ``(n_rows, k)`` and
        ``(n_rows, 1)`` in the units of y and must return the element-wise
        losses, each from its own row (checked on public synthetic rows before
        anything is spent); see :class:`~skdp.losses.ValueLoss`. Non-finite
        values and rows on which it raises count as a zero difference.
    quantile : float in (0, 1), default=0.5
        Level of the pinball loss (0.5: half the absolute loss).
    loss_constant : float > 0 or "auto", default="auto"
        The constant of the huber, tukey and cauchy losses in the units of y.
        "auto": the 95%-efficiency constant (1.345, 4.685 and 2.385) times a
        private robust scale of the residuals (one private median) after a
        warm-up with the absolute loss (with ``algorithm="variance_reduced"``:
        times the private scale of y).
    model : {"linear", "mlp"} or callable, default="linear"
        ``"mlp"``: one hidden layer of ``hidden_units`` ReLU units. A callable
        ``model(params, X) -> predictions`` receives ``params`` of shape
        ``(k, n_params)`` and the standardised features ``X`` of shape
        ``(n_rows, n_features)`` and returns shape ``(n_rows, k)`` in
        standardised target units; each prediction must depend on its own row
        only (checked on public synthetic rows). See
        :func:`~skdp.zeroth_order.scalar_model` for a (slow) scalar adapter.
    hidden_units : int, default=16
        Width of the hidden layer of ``model="mlp"``.
    n_params : int or None, default=None
        Number of parameters of a callable model (required for one).
    init : array-like or None, default=None
        Public starting parameters of a callable or MLP model (standardised
        units). None: zeros for a callable, a random (He) initialisation for
        the MLP, drawn independently of the data; the linear model starts at 0.
    lipschitz : float > 0 or None, default=None
        Public bound on how much one row's loss can change per unit change of
        the parameters, in standardised units: every row's finite differences
        are clipped to it. None: for the linear model the loss's bound in the
        prediction (1 for absolute, ``max(q, 1 - q)`` for pinball, the
        constant's bound for huber, tukey, cauchy; 1 for a callable loss) times
        the released row bound, capped at a public multiple of the released
        median row norm (longer rows are clipped, as in DP gradient descent;
        see the docs page); for the MLP that
        bound times ``sqrt(2 + hidden_units + row_bound^2)`` (the size of the
        network's gradient at initialisation); for a callable model, as for
        the linear one.
    fit_intercept : bool, default=True
        Fit an intercept (the linear model), and centre X and y (all models).
    algorithm : {"auto", "naive", "variance_reduced"} or Solver, default="auto"
        - "naive": a zeroth-order estimate plus fresh Gaussian noise at every
          step (Algorithm 6); the practical schedule uses every row at every
          step with many directions per row clipped jointly;
        - "variance_reduced": the online-to-nonconvex conversion with the
          variance-reduced oracle and tree-aggregated noise (Algorithms 1-5),
          one pass over the data;
        - "auto" chooses from public inputs only (see Notes).
    schedule : {"practical", "theory"}, default="practical"
        "theory" runs the paper's constants (random directions, the paper's
        block sizes and step radius; for fidelity). Changing the schedule
        changes accuracy, never the noise calibration.
    directions : {"orth", "coordinates", "iid"} or None, default=None
        Random directions: "orth", a Haar-random orthonormal frame per step
        shared by all rows; "coordinates", random coordinate axes per step
        (also an orthonormal frame; a network evaluates all its moves in one
        forward pass); with both, each row's differences are clipped jointly.
        "iid": the paper's independent directions per row, each difference
        clipped on its own. None: "coordinates" for the linear model and the
        network, "orth" for a callable model (practical schedule); "iid"
        with ``schedule="theory"``.
    n_directions : int or None, default=None
        Directions per row and step. None (practical schedule): every
        coordinate for the linear model, 64 for the network, 32 for a callable
        model (capped at the number of parameters); the paper's choices with
        ``schedule="theory"``.
    smoothing_radius : float > 0 or None, default=None
        The radius ``delta`` of the finite differences (standardised units).
        None: 1e-3 for "naive", 0.05 for "variance_reduced" and the theory
        schedules.
    max_iter : int or "auto", default="auto"
        Steps of the practical "naive" schedule (each uses every row). "auto":
        50 for the linear model, 300 otherwise.
    scaling : {"auto", "columns", "coarse", "scale", "robust", "pooled", "target", "minimal", "none"}, default="auto"
        The private standardisation (see :class:`~skdp.DPHeavyTailRegressor`).
    bounds : None, (lower, upper), dict or FeatureBounds, default=None
        Public per-column bounds that the user knows without looking at the
        data (an age in [17, 100], a one-hot column in [0, 1]). None: every
        column's centre and scale are estimated privately. ``(lower, upper)``:
        scalars or arrays of length ``n_features`` (``nan`` in both leaves a
        column undeclared); a dict ``{feature name: (lower, upper)}`` when X
        has feature names; or a :class:`~skdp.preprocessing.FeatureBounds`,
        which can also declare one-hot blocks
        (:func:`~skdp.preprocessing.bounds_for_column_transformer` builds one
        for a ``ColumnTransformer``). Values outside are clipped (never an
        error); one-hot columns (and constant ones) get public centres and
        scales and spend no private quantile, other declared columns a cheap
        private centre and scale inside their bounds (two quantiles instead
        of four); the budget saved goes to the model. Validated
        before anything is spent. See :ref:`bounds`.
    y_bounds : None or (lower, upper), default=None
        Public bounds of the target: ``y`` is clipped to them (its centre
        and scale are still estimated privately, inside the bounds).
    accountant : BudgetAccountant or None, default=None
    random_state : None, int, Generator or RandomState, default=None
        None draws noise and directions from operating-system entropy.
    verbose : int, default=0
        0 prints nothing. 1 prints one line per stage of the fit with its
        wall-clock time: the budget plan (solver, scaling mode, number of
        private quantiles and the share of the budget of every part), the
        released scales, the solver's schedule, the post-fit releases (the fit check)
        and the spend. 2 adds the solver's progress about every tenth of its
        iterations (iteration, elapsed time, step size, function evaluations). Only public
        inputs and released values are printed (see :doc:`/verbose`).

    Attributes
    ----------
    coef_ : ndarray of shape (n_features,)
        Linear model only.
    intercept_ : float
        Linear model only.
    params_ : ndarray
        Every model: for the linear model ``[coef_, intercept_]`` in the
        original units; for the others the parameters in standardised units
        (what ``model(params_, X)`` takes).
    algorithm_ : str
    n_iter_ : int
        Steps taken (public schedule).
    n_function_evals_ : int
        Loss evaluations (one per row and perturbed parameter vector).
    lipschitz_ : float
        The Lipschitz bound the finite differences were clipped to.
    fallback_constant_ : float or None
        Network and callable models: the constant ``predict`` returns when the
        private fit check replaced the model by it (None otherwise; a linear
        model then has ``coef_ = 0``).
    schedule_ : dict
        The public schedule (steps, directions, smoothing radius, noise).
    scaling_ : dict
    fit_check_ : dict
    privacy_spent_ : PrivacySpent
    privacy_event_ : PrivacyEvent
    n_features_in_ : int
    feature_names_in_ : ndarray of str

    Notes
    -----
    ``algorithm="auto"`` runs "naive" with the practical schedule and
    "variance_reduced" with the theory schedule. At every size measured
    (``benchmarks/zeroth_order``) the practical "naive" was the more accurate:
    with every row at every step its steps cost ``sqrt(steps)`` in noise, while
    the variance-reduced oracle's gradient differences have sensitivity
    proportional to ``sqrt(d) ||w_t - w_{t-1}|| / delta``, which forces steps
    so short that the one pass cannot travel to the solution.

    **Dask.** With ``model="linear"``, a built-in loss and the practical
    "naive" schedule (``directions`` "coordinates" or "orth"), ``fit`` accepts
    ``dask.array`` and ``dask.dataframe`` inputs chunked by rows: every step is
    one pass of per-chunk sums of the clipped finite differences (the residual
    scale a private quantile from per-chunk counts), the noise and the steps
    are drawn where ``fit`` runs, and the model and privacy event are the
    in-memory fit's of the same rows; ``predict`` on Dask input returns a lazy
    dask array. The other models, a callable loss, ``schedule="theory"``,
    ``algorithm="variance_reduced"`` and ``directions="iid"`` refuse Dask input
    before anything is spent (see :ref:`dask`).

    Privacy: every data-dependent number goes through an accounted release
    (the scales, the row bound, the residual scale, every gradient estimate,
    the fit check); the Lipschitz bound, the steps and the directions are
    public or drawn independently of the data. User callables must compute
    each row from that row alone: they are screened for it on public
    synthetic rows before anything is spent (a screen, not a proof: the
    guarantee for user functions assumes it), and any values they return are
    clipped, so huge, discontinuous, NaN or raising callables cannot make a
    fit raise after the budget is reserved. Wall-clock time is not protected
    (nor is it for any fit).

    Examples
    --------
    >>> import numpy as np
    >>> from skdp import BudgetAccountant, DPZerothOrderRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(20000, 3))
    >>> y = X @ [1.0, -2.0, 0.5] + 3.0 + rng.standard_cauchy(20000)
    >>> model = DPZerothOrderRegressor(epsilon=1.0, accountant=BudgetAccountant(), random_state=0).fit(X, y)
    >>> bool(np.all(np.abs(model.coef_ - [1.0, -2.0, 0.5]) < 0.1)), model.privacy_spent_.epsilon <= 1.0
    (True, True)

    References
    ----------
    Q. Zhang, H. Tran and A. Cutkosky, "Private Zeroth-Order Nonsmooth
    Nonconvex Optimization", ICLR 2024, arXiv:2406.19579.
    """

    _solver_family = "zeroth_order"
    # The linear model with a built-in loss and the practical "naive" schedule (skdp.zeroth_order._chunked).
    _dask_input = True
    _parameter_constraints = {
        **DPEstimatorMixin._privacy_parameter_constraints,
        "loss": [Options(set(_LOSSES)), "callable"],
        "quantile": [Interval(numbers.Real, 0, 1, closed="neither")],
        "loss_constant": [Interval(numbers.Real, MIN_PUBLIC_CLIP, MAX_PUBLIC_CLIP, closed="both"),
                          Options({"auto"})],
        "model": [Options({"linear", "mlp"}), "callable"],
        "hidden_units": [Interval(numbers.Integral, 1, None, closed="left")],
        "n_params": [Interval(numbers.Integral, 1, None, closed="left"), None],
        "init": ["array-like", None],
        "lipschitz": [Interval(numbers.Real, MIN_PUBLIC_CLIP, MAX_PUBLIC_CLIP, closed="both"), None],
        "fit_intercept": ["boolean"],
        "algorithm": [Options({"auto", *solver_names("zeroth_order")}), Solver],
        "schedule": [Options({"practical", "theory"})],
        "directions": [Options(set(DIRECTION_MODES)), None],
        "n_directions": [Interval(numbers.Integral, 1, None, closed="left"), None],
        "smoothing_radius": [Interval(numbers.Real, 0, None, closed="neither"), None],
        "max_iter": [Interval(numbers.Integral, 1, None, closed="left"), Options({"auto"})],
        "scaling": [Options({"auto", *MODES})],
        "bounds": [None, tuple, list, dict, FeatureBounds],
        "y_bounds": [None, tuple, list],
    }

    def __init__(self, *, epsilon=1.0, delta="auto", loss="absolute", quantile=0.5, loss_constant="auto",
                 model="linear", hidden_units=16, n_params=None, init=None, lipschitz=None, fit_intercept=True,
                 algorithm="auto", schedule="practical", directions=None, n_directions=None,
                 smoothing_radius=None, max_iter="auto", scaling="auto", bounds=None, y_bounds=None,
                 accountant=None, random_state=None, verbose=0):
        self.epsilon = epsilon
        self.delta = delta
        self.loss = loss
        self.quantile = quantile
        self.loss_constant = loss_constant
        self.model = model
        self.hidden_units = hidden_units
        self.n_params = n_params
        self.init = init
        self.lipschitz = lipschitz
        self.fit_intercept = fit_intercept
        self.algorithm = algorithm
        self.schedule = schedule
        self.directions = directions
        self.n_directions = n_directions
        self.smoothing_radius = smoothing_radius
        self.max_iter = max_iter
        self.scaling = scaling
        self.bounds = bounds
        self.y_bounds = y_bounds
        self.accountant = accountant
        self.random_state = random_state
        self.verbose = verbose

    # -- parameters (checked before any data value is read) -----------------------------------------
    def _linear(self):
        return isinstance(self.model, str) and self.model == "linear"

    def _check_parameters(self):
        if self._pure_dp_requested():
            raise InvalidParameterError(
                "The 'delta' parameter of DPZerothOrderRegressor must be in (0, 1): its solvers add Gaussian "
                "noise, whose guarantee needs delta > 0. Got delta=0.")
        if callable(self.model) and self.n_params is None:
            raise InvalidParameterError("A callable model needs n_params= (the length of its parameter "
                                        "vector).")
        if self.lipschitz is not None and not math.isfinite(float(self.lipschitz)):
            raise InvalidParameterError("lipschitz must be a finite positive number (it is the clip of every "
                                        "finite difference) or None.")
        if self.init is not None and self._linear():
            raise InvalidParameterError("init= is for the 'mlp' and callable models; the linear model starts "
                                        "at 0.")

    def _validate_fit_data(self, X, y):
        X, y = super()._validate_fit_data(X, y)
        n_params = self._n_params(X.shape[1])
        if self.init is not None:
            init = np.asarray(self.init, dtype=float).reshape(-1)
            if init.shape[0] != n_params or not np.all(np.isfinite(init)):
                raise ValueError(f"init must hold {n_params} finite numbers (the model's parameters); got "
                                 f"shape {np.shape(self.init)}. Nothing was spent.")
        if callable(self.model) or callable(self.loss):
            # Public synthetic rows only: refuses callables that mix rows, before anything is spent.
            what = " and ".join(w for w, f in (("model", self.model), ("loss", self.loss)) if callable(f))
            inputs = n_params if self._linear() else X.shape[1]  # a linear model's rows carry the intercept
            check_rowwise(self._model_object(X.shape[1]), self._loss_in_units(0.0, 1.0), inputs,
                          self._initial_guess(X.shape[1]), what=what)
        return X, y

    def _n_params(self, n_features):
        if self._linear():
            return n_features + int(self.fit_intercept)
        if self.model == "mlp":
            return MLPModel(n_features, self.hidden_units).n_params
        return int(self.n_params)

    def _model_object(self, n_features):
        if self._linear():
            return LinearModel(self._n_params(n_features))
        if self.model == "mlp":
            return MLPModel(n_features, int(self.hidden_units))
        return CallableModel(self.model, int(self.n_params),
                             None if self.init is None else np.asarray(self.init, dtype=float).reshape(-1))

    def _initial_guess(self, n_features):
        """A public parameter vector for the row-wise check (the init, else a fixed draw)."""
        if self.init is not None:
            return np.asarray(self.init, dtype=float).reshape(-1)
        return self._model_object(n_features).initial(np.random.default_rng(0))

    # -- Dask input (skdp.zeroth_order._chunked) -------------------------------------------------------
    def _chunked_rows(self, X, y):
        """Dask rows, after refusing what is not built on chunked rows (public parameters only)."""
        check_chunked_zeroth_order(self)  # before the collections are read (a dataframe's lengths cost a pass)
        return super()._chunked_rows(X, y)

    def _check_chunked_solver(self, solver):
        """Refuse a planned solver not built on chunked rows (public inputs only, before any spend)."""
        check_chunked_zeroth_order(self, solver)

    # -- routing (public inputs only) -----------------------------------------------------------------
    def _requested_solver(self):
        # A named algorithm is configured after the data are validated (its defaults depend on the
        # number of parameters, a public shape): only a Solver instance is taken as given here.
        return self.algorithm if isinstance(self.algorithm, Solver) else None

    def _choose_algorithm(self, n_samples, n_features):
        if self.algorithm != "auto":
            return self.algorithm
        # benchmarks/zeroth_order: the practical full-batch schedule was the more accurate in every
        # cell measured; the theory schedule defaults to the paper's main method.
        return "variance_reduced" if self.schedule == "theory" else "naive"

    def _configured(self, name):
        solver = super()._configured(name)
        changes = {}
        if self.directions is not None:
            changes["directions"] = self.directions
        elif self.schedule == "practical" and name == "naive":
            changes["directions"] = "orth" if callable(self.model) else "coordinates"
        if self.n_directions is not None:
            changes["n_directions"] = int(self.n_directions)
        elif self.schedule == "practical":
            changes["n_directions"] = self._default_directions()
        if self.smoothing_radius is not None:
            changes["smoothing"] = float(self.smoothing_radius)
        if name == "naive" and self.schedule == "practical":
            steps = _LINEAR_STEPS if self._linear() else _NETWORK_STEPS
            changes["n_steps"] = steps if self.max_iter == "auto" else int(self.max_iter)
            if not self._linear():
                changes["optimizer"] = "adam"
            if not callable(self.loss) and self.loss in _CONSTANTS:
                auto = self.loss_constant == "auto"
                # Redescending losses are not convex: start from the absolute loss's fit. With an
                # automatic constant the Huber loss does too (the residual scale is taken there).
                if auto or self.loss != "huber":
                    changes["warm_loss"] = AbsoluteLoss()
                changes["rescale_loss"] = auto
        return solver.replace(**changes) if changes else solver

    def _default_directions(self):
        """Directions per row and step of the practical schedule (public: the model and its size)."""
        n_params = self._n_params(self.n_features_in_)
        if self._linear():
            return n_params
        return min(n_params, _NETWORK_DIRECTIONS if self.model == "mlp" else _CALLABLE_DIRECTIONS)

    def _plan(self, solver, n, d):
        plan = super()._plan(solver, n, d)
        self._budget_per_param = n * plan.budget.mu / self._n_params(d)  # public: n, mu, d
        return plan

    # -- the problem in solver units ----------------------------------------------------------------
    def _spec_loss(self):
        return self._loss_in_units(0.0, 1.0, auto_scale=1.0)

    def _problem_loss(self, scaling):
        return self._loss_in_units(float(scaling.target_center), float(scaling.target_scale))

    def _loss_in_units(self, center, scale, auto_scale=1.0):
        """The loss of standardised predictions and labels (``y = center + scale t``), over ``scale``."""
        if callable(self.loss):
            fn = self.loss

            def standardised(prediction, t):
                return np.asarray(fn(center + scale * prediction, center + scale * t), dtype=float) / scale

            standardised.__name__ = getattr(fn, "__name__", "loss")
            # Assumed 1-Lipschitz in the standardised prediction, as the absolute loss (``lipschitz=``
            # overrides the whole bound).
            return ValueLoss(standardised, lipschitz=1.0)
        if self.loss == "absolute":
            return AbsoluteLoss()
        if self.loss == "pinball":
            return QuantileLoss(float(self.quantile))
        constant = _CONSTANTS[self.loss] * auto_scale
        if self.loss_constant != "auto":
            given = float(self.loss_constant) / scale
            # A degenerate released scale (0 or inf) must not make the loss refuse after the
            # reservation: the standard constant in target-scale units is used instead (public rule).
            constant = given if math.isfinite(given) and given > 0 else constant
        # Within the public range, so that the derived Lipschitz bound and noise stay finite (public rule).
        return _LOSS_CLASSES[self.loss](min(max(constant, MIN_PUBLIC_CLIP), MAX_PUBLIC_CLIP))

    def _problem_spec(self, solver, n, d, mode):
        return ProblemSpec(n_samples=n, n_coef=self._n_params(d), loss=self._spec_loss(),
                           intercept=bool(self.fit_intercept) and self._linear(), schedule=self.schedule,
                           radius=_LINEAR_RADIUS if self._linear() else None)

    def _build_problem(self, scaling, X, y, solver, released=None):
        d = X.shape[1]
        loss = self._problem_loss(scaling)
        G = derivative_cap(loss) or 1.0
        if self._linear():
            nu = self._budget_per_param
            if math.isfinite(nu):
                typical = (float(scaling.typical_row_norm) if scaling.typical_row_norm is not None
                           else math.sqrt(d) * float(scaling.unit))
                feature = min(float(scaling.row_bound), max(1.0, (nu / _CLIP_NU0) ** 0.25) * typical)
            else:
                feature = float(scaling.row_bound)  # no noise: nothing is clipped
            factor = math.hypot(feature, float(scaling.intercept_value)) if self.fit_intercept else feature
        else:
            bound = float(scaling.row_bound)
            factor = (math.sqrt(2.0 + self.hidden_units + bound**2) if self.model == "mlp"
                      else math.hypot(bound, 1.0))
        lipschitz = float(self.lipschitz) if self.lipschitz is not None else G * factor
        if not math.isfinite(lipschitz) or lipschitz <= 0:
            # A degenerate released bound (all rows 0): any positive public number keeps the clip finite.
            lipschitz = 1.0
        # A bound from extreme released scales stays within the public range, so that the clip, the
        # sensitivity and the noise are finite numbers whatever the data (the release stays exact).
        lipschitz = min(max(lipschitz, MIN_PUBLIC_CLIP), MAX_PUBLIC_CLIP)
        self._lipschitz = lipschitz
        if isinstance(X, ChunkedRows):  # the same rows, formed chunk by chunk on the cluster in every pass
            return ChunkedZOProblem.on(X, scaling, self._model_object(d), loss, lipschitz,
                                       row_bound=float(scaling.row_bound))
        rows = scaling.rows(X, clip=True) if self._linear() else scaling.features(X, clip=False)
        init = None if self.init is None else np.asarray(self.init, dtype=float).reshape(-1)
        return ZOProblem(rows, scaling.transform_target(y), self._model_object(d), loss, lipschitz, init,
                         row_bound=float(scaling.row_bound))

    # -- the released model ----------------------------------------------------------------------------
    def _unscale(self, scaling, coef):
        self._scaling = scaling
        if self._linear():
            # Drift along directions the released moments do not identify (where the smoothing of
            # the finite differences at a kink is not in the span of the rows) is removed.
            return super()._unscale(scaling, scaling.identified_coef(coef))
        return np.asarray(coef, dtype=float), 0.0

    def _check_predictions(self, X, scaling, coef, intercept):
        if self._linear():
            return None
        return self._network_predictions(X, coef, scaling)

    def _network_predictions(self, X, params, scaling):
        return _network_block(X, self._model_object(X.shape[1]), params, scaling)

    @property
    def _fallback_note(self):
        return "coef_ = 0" if self._linear() else "fallback_constant_ is set and predict returns it"

    def _after_failed_check(self, check, scaling, coef, intercept, n, d):
        new_coef, new_intercept = super()._after_failed_check(check, scaling, coef, intercept, n, d)
        if self._linear():
            return new_coef, new_intercept
        self._fallback = float(new_intercept) if check.fallback else None
        return coef, intercept

    def _store_model(self, coef, intercept, dtype):
        if self._linear():
            super()._store_model(coef, intercept, dtype)
            self.params_ = np.append(self.coef_, self.intercept_)
            for stale in ("fallback_constant_",):
                self.__dict__.pop(stale, None)
        else:
            for stale in ("coef_", "intercept_"):
                self.__dict__.pop(stale, None)
            self.params_ = np.asarray(coef, dtype=float)
            self.fallback_constant_ = getattr(self, "_fallback", None)
        self._fallback = None
        self.lipschitz_ = float(self._lipschitz)

    def _fit(self, X, y):
        self._fallback = None
        super()._fit(X, y)
        self.n_function_evals_ = int(self.schedule_.get("n_function_evals", 0))
        return self

    def predict(self, X):
        """Predict with the fitted model (post-processing: no privacy cost).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples,)
            A lazy dask array on Dask input (any model: the network's and a
            callable model's predictions are computed chunk by chunk).
        """
        if self._linear():
            return self._decision_function(X)
        check_is_fitted(self)
        model = self._model_object(self.n_features_in_)
        args = (model, self.params_, self._scaling, self.fallback_constant_)
        if is_dask_collection(X):  # a lazy dask array (post-processing: nothing is computed)
            # Only the released model travels to the workers (not the estimator and its accountant).
            return self._lazy_rows(X).map_blocks(_network_block, *args, drop_axis=1, dtype=float,
                                                 meta=np.empty((0,), dtype=float))
        X = validate_data(self, X, reset=False, accept_sparse=("csr", "csc"), dtype=[np.float64, np.float32])
        return _network_block(X, *args)


def _network_block(X, model, params, scaling, fallback=None):
    """Predictions of the network or callable model on rows ``X`` in the original units (or the fallback)."""
    if fallback is not None:
        return np.full(X.shape[0], fallback)
    Z = scaling.features(X, clip=False)
    out = np.empty(Z.shape[0])
    chunk = 1 << 14
    with np.errstate(all="ignore"):
        for start in range(0, Z.shape[0], chunk):
            part = slice(start, start + chunk)
            out[part] = _predict_rows(model, params, Z[part])
    return float(scaling.target_center) + float(scaling.target_scale) * out


def _predict_rows(model, params, Z):
    """Predictions of a chunk; when the (user's) model fails on it, row by row, NaN for the rows that fail."""
    try:
        out = np.asarray(model.predict(params, Z), dtype=float).reshape(-1)
        if out.shape == (Z.shape[0],):
            return out
    except KeyboardInterrupt:
        raise
    except BaseException:  # noqa: BLE001 - a user's model: fall back to one row at a time
        pass
    out = np.full(Z.shape[0], np.nan)
    for i in range(Z.shape[0]):
        try:
            value = np.asarray(model.predict(params, Z[i:i + 1]), dtype=float).reshape(-1)
            if value.shape == (1,):
                out[i] = value[0]
        except KeyboardInterrupt:
            raise
        except BaseException:  # noqa: BLE001 - this row predicts nothing (NaN)
            pass
    return out
