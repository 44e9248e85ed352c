"""DPHeavyTailRegressor: private linear regression that stays accurate with heavy tails and outliers."""

import math
import numbers
import warnings

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.utils.validation import check_is_fitted, validate_data

from ._base import DPEstimatorMixin
from ._validation import Interval, Options
from .accounting import (
    ExponentialMechanismRelease,
    LowBudgetWarning,
    Sequential,
    calibrate_scale,
    dp_to_gdp,
    dp_to_zcdp,
)
from .losses import AbsoluteLoss, HuberLoss, QuantileLoss, SquaredLoss
from .mechanisms import (
    clip_rows,
    pooled_scaling_event,
    private_pooled_scale,
    private_quantile,
    private_robust_scaling,
    robust_scaling_event,
    row_norms,
)
from .solvers import SOLVER_CLASSES, SOLVERS, CallableLoss, GLMProblem, make_solver
from .solvers.svt_sgd import check_svt_sgd_available

__all__ = ["DPHeavyTailRegressor"]

_BUILTIN_LOSSES = ("squared", "huber", "absolute", "quantile")
# Public routing thresholds of algorithm="auto", in epsilon * n_samples per coefficient.
_SPARSE_STARVED_EPS_N_PER_COEF = 7.5
_QUANTILE_LOCALIZED_EPS_N_PER_COEF = 150.0
_SMOOTH_STARVED_EPS_N_PER_COEF = 12.0
# Solvers that clip every per-sample gradient without assuming anything of the loss.
_CALLABLE_SOLVERS = ("localized", "localized_subgradient")
_MIN_QUANTILE_EPS_TIMES_N = 80.0  # epsilon x rows for reliable private medians (fail prob ~ e^(-eps n / 4))
_MAX_SCALING_SHARE = 0.25
# When even the cheapest tier cannot fund its quantiles, fewer quantiles get a
# larger share: they decide whether the fit is sane at all.
_STARVED_SCALING_SHARE = 0.4
_STARVED_EPS_TIMES_N = 40.0
# When even that leaves the quantiles short of epsilon * n = 80, the "minimal"
# scaling releases only two quantiles (a pooled feature scale and an uncentred
# label scale) and the solver's clip threshold is public.
_MINIMAL_SCALING_SHARE = 0.5
# Public clip in standardised units: rows have norm about sqrt(d) and labels a
# magnitude of about 1, so initial gradient norms are about sqrt(d).
_MINIMAL_CLIP = 0.5
# Radius of the coefficient ball in standardised units. With standardised
# features and target, ||w|| is about sqrt(explained variance) <= ~1.5 unless
# features are strongly collinear; the ball only bounds noise excursions.
_COEF_RADIUS = 5.0


class DPHeavyTailRegressor(DPEstimatorMixin, RegressorMixin, BaseEstimator):
    """Differentially private linear regression robust to heavy tails and outliers.

    Fits ``y ~ X @ coef_ + intercept_`` by minimising

    ``mean_i loss(y_i - x_i @ coef - intercept) + alpha * l1_ratio * ||coef||_1
    + 0.5 * alpha * (1 - l1_ratio) * ||coef||^2``

    (scikit-learn's ElasticNet objective when the loss is squared: with
    ``l1_ratio=1`` it targets what ``Lasso(alpha)`` targets)

    with an (epsilon, delta)-DP algorithm, on raw data and without user-supplied
    bounds. By default (``scaling="auto"``) a declared share of the budget buys
    a private robust centre and scale of every feature and of the target
    (:func:`skdp.mechanisms.private_robust_scaling`); the solver then works on
    standardised data, with every row clipped to the public norm
    ``sqrt(n_features) + 3``, so leverage outliers have bounded influence and
    the model is equivariant to the units of X and y.

    Parameters
    ----------
    epsilon : float > 0, default=1.0
        Privacy budget of one fit. ``inf`` fits without noise (not private;
        warns with :class:`~skdp.PrivacyLeakWarning`).
    delta : float in [0, 1), default=1e-5
        Privacy parameter delta; choose it well below ``1 / n_samples``.
    loss : {"squared", "huber", "absolute", "quantile"} or callable, default="squared"
        The per-row loss of the residual. A callable ``f(prediction, y) ->
        (values, derivatives)`` is accepted by ``algorithm="localized"``.
    huber_delta : float or "auto", default="auto"
        Huber threshold in the units of ``y``. "auto": with
        ``algorithm="clipped_gd"`` and a two-stage run, 1.345 private robust
        standard deviations of the residuals at the warm-up iterate (one more
        private quantile); otherwise (other solvers, or a starved budget that
        runs one stage) 1.345 times the private robust scale of ``y`` (free:
        that scale is released anyway). ``schedule_["huber_delta"]`` records
        the threshold in standardised units.
    quantile : float in (0, 1), default=0.5
        Level of the quantile loss.
    alpha : float >= 0, default=0.0
        Penalty strength (on the original feature scale, as in ElasticNet).
    l1_ratio : float in [0, 1], default=0.0
        Share of ``alpha`` on the L1 norm (0: ridge; 1: Lasso). An L1 penalty
        is handled by exact proximal steps; algorithms without proximal steps
        refuse ``alpha * l1_ratio > 0``. "clipped_gd" scales both penalties
        by the nominal unclipped fraction of the rows (its clip quantile), so
        that the clipped loss keeps the balance of the unclipped one; the other
        algorithms use the penalties as given (their clips bind less).
    fit_intercept : bool, default=True
    algorithm : {"auto", "clipped_gd", "localized", "known_lipschitz", "svt_sgd", "one_pass_glm", \
            "localized_subgradient", "accelerated", "averaged_sgd", "proximal_sgd"}, default="auto"
        The solver; "auto" chooses from public inputs only (see Notes):

        - "clipped_gd": full-batch clipped DP gradient descent with private,
          adaptive clip thresholds (the practical default);
        - "localized": population localization over clipped DP-SGD subproblems
          with aggregation (paper 000, Theorem 1; any convex loss, callables
          included);
        - "known_lipschitz": per-sample Lipschitz truncation (Algorithm 4) over
          the localized noisy clipped subgradient method;
        - "svt_sgd": disabled (refuses to fit, before any spend): the
          privacy proof of this sparse-vector method does not hold (see
          :mod:`skdp.solvers.svt_sgd`);
        - "one_pass_glm": one-pass clipped SGD for smooth GLMs (Algorithm 8);
        - "localized_subgradient": localized noisy clipped subgradient method
          (paper 001, Algorithm 3 over Algorithm 2; non-smooth convex losses;
          with a ridge, the strongly convex restart wrapper);
        - "accelerated": one-pass accelerated stochastic approximation (paper
          001, Algorithm 4; smooth losses);
        - "averaged_sgd": one-pass projected SGD with weighted averaging (paper
          001, Algorithm 5; smooth losses);
        - "proximal_sgd": one-pass proximal SGD (paper 001, Algorithm 6; smooth
          losses, L1 and elastic-net penalties).

        Only "clipped_gd" and "proximal_sgd" take an L1 penalty.
    schedule : {"practical", "theory"}, default="practical"
        "theory" keeps the papers' constants (for fidelity tests). Changing the
        schedule changes accuracy, never the noise calibration.
    scaling : {"auto", "robust", "pooled", "target", "minimal", "none"}, default="auto"
        How X and y are standardised before solving. "robust": a private
        robust centre and scale per column; "pooled": one private scale for all
        features (cheap; for features on a common scale) and a robust target;
        "target": only the target (use it when the features were standardised
        with public knowledge, e.g. one-hot columns); "minimal": one pooled
        feature scale and one uncentred label scale (two quantiles; the
        intercept absorbs offsets); "none": the data are used as they are.
        "auto" picks the first of robust, pooled, target that the budget funds
        reliably; when none is, "minimal" with a public clip threshold for
        the solver (see ``scaling_["mode"]``).
    scaling_share : float in (0, 1) or "auto", default="auto"
        Share of the (zCDP) budget spent on private quantiles (scaling and clip
        thresholds). "auto" gives each quantile ``epsilon * n >= 80`` when that
        costs at most 25% of the budget.
    max_iter : int or "auto", default="auto"
        Number of noisy steps of iterative solvers (per block for the
        localized solvers). The noise is calibrated to the steps taken.
    moment_order, moment_bound, second_moment_bound : float, optional
        Public moment bounds ``k``, ``G_k`` and ``G_2`` of the per-sample
        gradient norms (in standardised units), used by ``schedule="theory"``.
    accountant : BudgetAccountant or None, default=None
        Ledger to charge; None charges ``BudgetAccountant.default()``.
    random_state : None, int, Generator or RandomState, default=None
        None draws noise from operating-system entropy.
    verbose : int, default=0

    Attributes
    ----------
    coef_ : ndarray of shape (n_features,)
    intercept_ : float
    algorithm_ : str
        The solver used.
    n_iter_ : int
        Number of noisy steps taken (public schedule).
    schedule_ : dict
        The public schedule: steps, stages, clip thresholds (private outputs).
    scaling_ : dict
        The private centres and scales used for standardisation, the scaling
        mode (``"robust"``, ``"pooled"``, ``"target"``, ``"minimal"`` or ``"none"``) and the
        epsilon of each private quantile.
    privacy_spent_ : PrivacySpent
    privacy_event_ : PrivacyEvent
    n_features_in_ : int
    feature_names_in_ : ndarray of str

    Warns
    -----
    LowBudgetWarning
        When ``epsilon * n_samples`` is too small for the private quantiles that
        locate and scale the data (decided from public inputs only).

    Notes
    -----
    ``algorithm="auto"`` decides from public inputs only (the loss, the
    penalty, ``epsilon``, ``n_samples`` and ``n_features``), following the
    benchmarks in ``benchmarks/heavy_tail``:

    - a callable loss: "localized";
    - an L1 penalty with ``epsilon * n_samples / n_coef < 7.5``:
      "proximal_sgd" (there the privacy noise floor of "clipped_gd" would
      zero every coefficient);
    - the squared or Huber loss without L1 and with
      ``epsilon * n_samples / n_coef < 12``: "averaged_sgd";
    - the quantile loss at a level other than 0.5 with
      ``epsilon * n_samples / n_coef < 150``: "localized_subgradient";
    - everything else: "clipped_gd", the most accurate (or tied) algorithm
      in every other benchmark cell.

    Privacy holds for any input: every data-dependent quantity (scales, clip
    thresholds, the Huber threshold) is released by an accounted mechanism, rows
    are clipped to a public norm, per-sample gradients are clipped, and the
    reported epsilon is computed from the events of what was drawn. ``score``
    on training data is not private.

    Examples
    --------
    >>> import numpy as np
    >>> from skdp import DPHeavyTailRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(5000, 3)) * [1.0, 10.0, 1000.0]
    >>> y = 1000 * (X @ [1.0, 0.1, 0.001] + rng.standard_t(2.5, size=5000))
    >>> model = DPHeavyTailRegressor(epsilon=1.0, random_state=0).fit(X, y)
    >>> np.round(model.coef_ / [1000.0, 100.0, 1.0], 1).tolist()
    [1.0, 1.0, 1.0]
    >>> model.privacy_spent_.epsilon <= 1.0
    True
    """

    _parameter_constraints = {
        **DPEstimatorMixin._privacy_parameter_constraints,
        "loss": [Options(_BUILTIN_LOSSES), "callable"],
        "huber_delta": [Interval(numbers.Real, 0, None, closed="neither"), Options({"auto"})],
        "quantile": [Interval(numbers.Real, 0, 1, closed="neither")],
        "alpha": [Interval(numbers.Real, 0, None, closed="left")],
        "l1_ratio": [Interval(numbers.Real, 0, 1, closed="both")],
        "fit_intercept": ["boolean"],
        "algorithm": [Options({"auto", *SOLVERS})],
        "schedule": [Options({"practical", "theory"})],
        "scaling": [Options({"auto", "robust", "pooled", "target", "minimal", "none"})],
        "scaling_share": [Interval(numbers.Real, 0, 1, closed="neither"), Options({"auto"})],
        "max_iter": [Interval(numbers.Integral, 1, None, closed="left"), Options({"auto"})],
        "moment_order": [Interval(numbers.Real, 2, None, closed="left")],
        "moment_bound": [Interval(numbers.Real, 0, None, closed="neither"), None],
        "second_moment_bound": [Interval(numbers.Real, 0, None, closed="neither"), None],
    }

    def __init__(self, *, epsilon=1.0, delta=1e-5, loss="squared", huber_delta="auto", quantile=0.5,
                 alpha=0.0, l1_ratio=0.0, fit_intercept=True, algorithm="auto", schedule="practical",
                 scaling="auto", scaling_share="auto", max_iter="auto", moment_order=4, moment_bound=None,
                 second_moment_bound=None, accountant=None, random_state=None, verbose=0):
        self.epsilon = epsilon
        self.delta = delta
        self.loss = loss
        self.huber_delta = huber_delta
        self.quantile = quantile
        self.alpha = alpha
        self.l1_ratio = l1_ratio
        self.fit_intercept = fit_intercept
        self.algorithm = algorithm
        self.schedule = schedule
        self.scaling = scaling
        self.scaling_share = scaling_share
        self.max_iter = max_iter
        self.moment_order = moment_order
        self.moment_bound = moment_bound
        self.second_moment_bound = second_moment_bound
        self.accountant = accountant
        self.random_state = random_state
        self.verbose = verbose

    # -- public choices ------------------------------------------------------------------
    def _choose_algorithm(self, n_samples, n_features):
        """The solver for this fit, from public inputs only (loss, sizes, parameters)."""
        if self.algorithm != "auto":
            return self.algorithm
        if callable(self.loss):
            return "localized"
        p = n_features + int(self.fit_intercept)
        if (self.alpha * self.l1_ratio > 0 and math.isfinite(self.epsilon)
                and self.epsilon * n_samples / p < _SPARSE_STARVED_EPS_N_PER_COEF):
            # With an L1 penalty and fewer than ~8 epsilon-rows per coefficient, the
            # noise floor of clipped_gd zeroes every coefficient; proximal_sgd's
            # dense, shrunk estimate predicts better (sparse benchmark, n = 2000,
            # d = 200, epsilon = 0.5).
            return "proximal_sgd"
        if (self.loss in ("squared", "huber") and self.alpha * self.l1_ratio == 0
                and math.isfinite(self.epsilon)
                and self.epsilon * n_samples / p < _SMOOTH_STARVED_EPS_N_PER_COEF):
            # Starved smooth problems: a one-pass method with a handful of large
            # batches beats 100 noisy full-batch steps (heavy-tail benchmark, n = 2000,
            # epsilon = 0.1: 3.6 vs 5.1 x Bayes; diabetes at epsilon = 0.1 fails
            # for every method).
            return "averaged_sgd"
        if (self.loss == "quantile" and self.quantile != 0.5 and math.isfinite(self.epsilon)
                and self.epsilon * n_samples / p < _QUANTILE_LOCALIZED_EPS_N_PER_COEF):
            # Asymmetric quantile losses at small epsilon * n per coefficient: the
            # localized subgradient method is 10-15% better (losses benchmark,
            # n = 2000, epsilon <= 1); beyond that the two tie or clipped_gd wins.
            return "localized_subgradient"
        return "clipped_gd"

    def _make_solver(self, algorithm, loss, n_samples, n_coef):
        """The solver object for this fit, with its public schedule."""
        n_iter = None if self.max_iter == "auto" else int(self.max_iter)
        return make_solver(algorithm, loss=loss, n_samples=n_samples, n_coef=n_coef, schedule=self.schedule,
                           max_iter=n_iter, huber_auto=(self.loss == "huber" and self.huber_delta == "auto"),
                           moment_order=self.moment_order, moment_bound=self.moment_bound,
                           second_moment_bound=self.second_moment_bound,
                           ridge=bool(self.alpha * (1.0 - self.l1_ratio) > 0))

    def _standardised_loss(self):
        """The loss in standardised units (thresholds fixed after scaling)."""
        if callable(self.loss):
            return CallableLoss(self.loss)
        if self.loss == "squared":
            return SquaredLoss()
        if self.loss == "huber":
            return HuberLoss(1.345)  # replaced once the label scale is known
        if self.loss == "absolute":
            return AbsoluteLoss()
        return QuantileLoss(self.quantile)

    def _quantile_epsilon(self, n_samples, n_quantiles, rho_total, eps_times_n=_MIN_QUANTILE_EPS_TIMES_N,
                          cap=_MAX_SCALING_SHARE):
        """Per-quantile epsilon of the scaling/threshold releases (public rule)."""
        if n_quantiles == 0 or math.isinf(rho_total):
            return math.inf
        if self.scaling_share == "auto":
            eps_needed = eps_times_n / n_samples
            share = n_quantiles * eps_needed**2 / 8.0 / rho_total
            share = min(cap, max(share, 0.02))
        else:
            share = float(self.scaling_share)
        return math.sqrt(8.0 * share * rho_total / n_quantiles)

    def _scaling_plan(self, n_samples, n_features, solver_quantiles, rho_total, cap=_MAX_SCALING_SHARE,
                      modes=None):
        """How to standardise, and the epsilon of every private quantile (public rule).

        ``"robust"`` scales and centres every column privately (three quantiles
        per column with an intercept); ``"pooled"`` gives all features one
        private scale (one quantile) and standardises the target; ``"target"``
        only standardises the target; ``"none"`` uses the data as they are.
        With ``scaling="auto"`` the first of robust, pooled, target whose
        quantiles each get ``epsilon * n >= 80`` within the scaling share is
        used, so that fewer, better-funded quantiles degrade accuracy gracefully
        instead of risking wrong scales. ``modes`` restricts the choice (the
        theory schedules need the public row bound of "robust" or "none").
        """
        per_col = 3 if self.fit_intercept else 1
        # pooled and target modes also release a private row bound (one quantile).
        counts = {"robust": per_col * (n_features + 1), "pooled": 2 + per_col, "target": 1 + per_col,
                  "minimal": 2, "none": 0}
        need = dict.fromkeys(counts, _MIN_QUANTILE_EPS_TIMES_N)
        need["none"] = 0.0

        def eps_for(mode):
            return self._quantile_epsilon(n_samples, counts[mode] + solver_quantiles, rho_total,
                                          need[mode], cap)

        if self.scaling != "auto":
            if modes is not None and self.scaling not in modes:
                raise ValueError(
                    f"schedule='theory' with algorithm={self.algorithm!r} needs a public smoothness bound, "
                    f"so scaling must be one of {modes} (got scaling={self.scaling!r}).")
            return self.scaling, eps_for(self.scaling)
        if modes is not None:
            return modes[0], eps_for(modes[0])
        if math.isinf(rho_total):
            return "robust", math.inf
        for mode in ("robust", "pooled"):
            eps_q = eps_for(mode)
            if eps_q * n_samples >= need[mode]:
                return mode, eps_q
        return "target", eps_for("target")

    def _public_smoothness(self, loss, mode, n_features):
        """Uniform per-row smoothness of the standardised problem, from public inputs only.

        In the "robust" and "none" modes rows are clipped to the public norm
        ``sqrt(d) + 3`` and the intercept column is 1; the ridge weights are
        public when ``alpha = 0`` or (mode "none") when no scale is applied.
        """
        if mode == "robust" and self.alpha > 0:
            raise ValueError(
                "schedule='theory' with svt_sgd or one_pass_glm needs alpha=0 with private scaling (the "
                "ridge in standardised units would depend on private scales); use scaling='none' or "
                "schedule='practical'.")
        row_bound = math.sqrt(n_features) + 3.0
        if self.fit_intercept:
            row_bound = math.hypot(row_bound, 1.0)
        ridge = float(self.alpha) if mode == "none" else 0.0
        return float(loss.smoothness) * row_bound**2 + ridge

    # -- fit -----------------------------------------------------------------------------
    def fit(self, X, y):
        """Fit the private model.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)

        Returns
        -------
        self
        """
        # The accounting and the solvers are written for IEEE arithmetic (underflow to
        # 0, overflow to inf, both handled); a user's np.seterr(all="raise") must not
        # turn those into exceptions, least of all after the budget is reserved.
        with np.errstate(all="ignore"):
            return self._fit(X, y)

    def _fit(self, X, y):
        self._validate_privacy_params()
        if self.algorithm == "svt_sgd":
            check_svt_sgd_available()  # refuses before any data is read or budget spent
        if callable(self.loss) and self.algorithm not in ("auto",) + _CALLABLE_SOLVERS:
            raise ValueError(f"A callable loss is supported by algorithm in {_CALLABLE_SOLVERS} only.")
        X, y = validate_data(self, X, y, y_numeric=True, dtype=np.float64)
        n, d = X.shape
        if n < 2:
            raise ValueError(f"{type(self).__name__} needs at least 2 samples; got n_samples = {n}.")
        algorithm = self._choose_algorithm(n, d)
        p = d + int(self.fit_intercept)
        loss = self._standardised_loss()
        solver = self._make_solver(algorithm, loss, n, p)
        if self.alpha * self.l1_ratio > 0 and not getattr(solver, "supports_l1", False):
            with_l1 = sorted(name for name, cls in SOLVER_CLASSES.items() if getattr(cls, "supports_l1", False))
            raise ValueError(f"algorithm={algorithm!r} does not support an L1 penalty (l1_ratio > 0); "
                             f"use one of {with_l1}.")
        if (self.schedule == "theory" and algorithm in ("averaged_sgd", "proximal_sgd")
                and not self.alpha * (1.0 - self.l1_ratio) > 0):
            raise ValueError(f"algorithm={algorithm!r} with schedule='theory' needs a public "
                             "strong-convexity constant: a ridge (alpha > 0, l1_ratio < 1), or use "
                             "schedule='practical'.")
        if hasattr(solver, "check_loss"):
            solver.check_loss(loss)  # refuse unsupported losses before anything is spent
        approx = getattr(solver, "budget_kind", "gdp") == "approx"
        # The theory schedules of svt_sgd and one_pass_glm refuse to fit when the
        # paper's step breaks their privacy conditions; those conditions involve
        # the uniform smoothness, which must then be public (checked below,
        # before any data is read).
        needs_public_smoothness = self.schedule == "theory" and algorithm in ("svt_sgd", "one_pass_glm")
        if approx:
            delta_solver = self.delta / 2.0

            def solver_event(budget):
                # The event's privacy does not depend on beta (its sensitivities and noise
                # scales all scale with beta); the public beta is used when it is known.
                return solver.event_for(n, p, beta_public or 1.0, _COEF_RADIUS, budget, delta_solver)
        else:

            def solver_event(budget):
                return solver.event(loss, budget, eps_q, n)

        # Budget plan, from public quantities only.
        non_private = math.isinf(self.epsilon)
        rho_total = math.inf if non_private else dp_to_zcdp(self.epsilon, self.delta)
        modes = ("robust", "none") if needs_public_smoothness else None
        mode, eps_q = self._scaling_plan(n, d, solver.n_quantiles(loss), rho_total, modes=modes)
        beta_public = self._public_smoothness(loss, mode, d) if needs_public_smoothness else None
        if (self.scaling_share == "auto" and eps_q * n < _MIN_QUANTILE_EPS_TIMES_N
                and getattr(solver, "adaptive_clip", False)):
            # Starved budget (public rule): one clip threshold instead of two, and a
            # larger share for the quantiles that remain.
            solver.adaptive_clip = False
            mode, eps_q = self._scaling_plan(n, d, solver.n_quantiles(loss), rho_total,
                                             cap=_STARVED_SCALING_SHARE, modes=modes)
        if (self.scaling == "auto" and self.scaling_share == "auto" and modes is None
                and eps_q * n < _MIN_QUANTILE_EPS_TIMES_N):
            # Still starved (public rule): two scaling quantiles, and a public clip for
            # solvers that would spend a quantile on their per-sample gradient clip.
            if (getattr(solver, "gradient_clip", False) and self.schedule == "practical"
                    and solver.n_quantiles(loss) > 0 and solver.clip is None):
                solver.clip = _MINIMAL_CLIP * math.sqrt(d)
                if hasattr(solver, "adaptive_clip"):
                    solver.adaptive_clip = False
            mode, eps_q = self._scaling_plan(n, d, solver.n_quantiles(loss), rho_total,
                                             cap=_MINIMAL_SCALING_SHARE, modes=("minimal",))
        if mode != "none" and eps_q * n < _STARVED_EPS_TIMES_N:
            warnings.warn(
                f"With epsilon={self.epsilon:g} and {n} rows the private quantiles that locate and "
                f"scale the data get epsilon * n = {eps_q * n:.0f}; below about {_STARVED_EPS_TIMES_N:.0f} "
                "they are unreliable and the fit can be far off. Standardise X and y with public "
                "knowledge and use scaling='none', or use a larger epsilon.",
                LowBudgetWarning, stacklevel=2)
        pre_parts = []
        if mode == "robust":
            pre_parts.append(robust_scaling_event(d, eps_q, self.fit_intercept))
        elif mode in ("pooled", "minimal"):
            pre_parts.append(pooled_scaling_event(eps_q))
        if mode in ("pooled", "target"):
            pre_parts.append(ExponentialMechanismRelease(eps_q))  # private row bound
        if mode != "none":
            pre_parts.append(robust_scaling_event(1, eps_q, self.fit_intercept and mode != "minimal"))
        pre_event = Sequential(pre_parts)
        if non_private:
            if approx:
                raise ValueError("svt_sgd is an (epsilon, delta) algorithm; it needs a finite epsilon.")
            budget = math.inf
        else:
            # A relative margin of 1e-10 absorbs the rounding between the planned
            # event (unit sensitivities) and the released one (actual thresholds).
            guess = 1.0 / max(dp_to_gdp(self.epsilon, self.delta), 1e-12)
            scale = calibrate_scale(lambda s: Sequential([pre_event, solver_event(1.0 / s)]),
                                    self.epsilon * (1.0 - 1e-10), self.delta, initial=guess, rtol=1e-7)
            budget = 1.0 / scale
        planned = Sequential([pre_event, solver_event(budget)])
        if needs_public_smoothness:
            if approx:
                solver.parameters(n, p, beta_public, _COEF_RADIUS, budget, delta_solver)  # raises
            else:
                solver.check_theory(n, p, beta_public, _COEF_RADIUS, budget)  # raises
        def solve(rng):
            events = []
            jitter = 0.0 if non_private else 0.05
            cx, sx, cy, sy = np.zeros(d), np.ones(d), 0.0, 1.0
            if mode == "robust":
                cx, sx, ev_x = private_robust_scaling(X, eps_q, center=self.fit_intercept, jitter=jitter,
                                                      random_state=rng)
                events.append(ev_x)
            elif mode in ("pooled", "minimal"):
                s_pool, ev_x = private_pooled_scale(X, eps_q, jitter=jitter, random_state=rng)
                sx = np.full(d, s_pool)
                events.append(ev_x)
            if mode != "none":
                # "minimal" does not centre y: the intercept column absorbs the offset.
                center_y = self.fit_intercept and mode != "minimal"
                cy, sy, ev_y = private_robust_scaling(y, eps_q, center=center_y, jitter=jitter,
                                                      random_state=rng)
                events.append(ev_y)
            cx, sx = np.atleast_1d(cx), np.atleast_1d(sx)
            Xs = (X - cx) / sx
            # Standardised rows have norm about sqrt(d): the coefficient ball and the
            # intercept column are set for that scale. In the pooled and target modes
            # the typical row norm is a private median instead, and both follow it.
            typical_norm = math.sqrt(d)
            if mode in ("pooled", "target"):
                # Features are not standardised column by column: bound rows by
                # twice a private median of their norms, so that large features
                # are kept (clipping them would make predictions extrapolate) and
                # small ones only lose weight. (A higher quantile would fail upwards
                # at these budgets and leave leverage outliers unclipped.)
                median_norm, ev_a = private_quantile(row_norms(Xs), 0.5, eps_q, (1e-12, 1e12),
                                                     scale="log", random_state=rng)
                row_bound = 2.0 * median_norm
                typical_norm = median_norm
                events.append(Sequential([ev_a]))
            else:
                row_bound = math.sqrt(d) + 3.0  # standardised rows: ~sqrt(d) +- a few
            Xs = clip_rows(Xs, row_bound)
            unit = typical_norm / math.sqrt(d)  # size of one standardised coordinate
            radius = _COEF_RADIUS / unit
            intercept_value = unit
            ys = (y - cy) / sy
            if self.fit_intercept:
                Xs = np.hstack([Xs, np.full((n, 1), intercept_value)])
            problem_loss = loss
            if self.loss == "huber" and self.huber_delta != "auto":
                problem_loss = HuberLoss(float(self.huber_delta) / sy)
            penalty, l1 = self._penalties(sx, sy, p)
            coef_row_bound = math.hypot(row_bound, intercept_value) if self.fit_intercept else row_bound
            problem = GLMProblem(Xs, ys, problem_loss, penalty, radius=radius, row_bound=coef_row_bound,
                                 intercept=self.fit_intercept, unit=unit, l1=l1)
            if approx:
                solver.clip = coef_row_bound
                result = solver.solve(problem, budget, delta_solver, rng)
            else:
                result = solver.solve(problem, budget, eps_q, rng)
            events.append(result.event)
            return Sequential(events), (result, cx, sx, cy, sy, intercept_value)

        result, cx, sx, cy, sy, intercept_value = self._run_private(planned, solve)
        w = result.coef
        self.coef_ = w[:d] * sy / sx
        self.intercept_ = (float(cy + sy * intercept_value * w[d] - self.coef_ @ cx) if self.fit_intercept
                           else 0.0)
        self.algorithm_ = algorithm
        self.schedule_ = result.schedule
        self.n_iter_ = int(result.schedule.get("n_steps", 0))
        self.scaling_ = {"mode": mode, "feature_center": cx, "feature_scale": sx,
                         "target_center": float(cy), "target_scale": float(sy), "quantile_epsilon": eps_q}
        return self

    def _penalties(self, sx, sy, p):
        """Ridge and L1 weights in standardised units (the intercept is never penalised).

        With ``x = cx + sx * xs``, ``y = cy + sy * ys`` and ``coef = sy * w / sx``,
        the squared and Huber losses scale as ``sy^2`` and the absolute and
        quantile losses as ``sy``; the objective is divided by that factor.
        """
        ridge, l1 = np.zeros(p), np.zeros(p)
        if self.alpha > 0:
            loss_scale = sy if self.loss in ("absolute", "quantile") else sy**2
            ridge[: len(sx)] = self.alpha * (1.0 - self.l1_ratio) * sy**2 / sx**2 / loss_scale
            l1[: len(sx)] = self.alpha * self.l1_ratio * sy / sx / loss_scale
        return ridge, l1

    def predict(self, X):
        """Predict with the fitted linear model (post-processing: no privacy cost).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples,)
        """
        check_is_fitted(self)
        X = validate_data(self, X, reset=False, dtype=np.float64)
        return X @ self.coef_ + self.intercept_
