"""DPRegularizationTuner: private choice of the regularisation strength, and the final private model.

Privacy argument of each method (replace-one neighbours; one ledger entry per fit, planned from
public inputs before any data value is read, its total equal to the target):

* ``"default"`` (and ``"auto"``): one fit of the estimator at the tuner's ``(epsilon, delta)``
  with its own ``alpha``. Its privacy is the estimator's own argument (each solver's module
  docstring); the tuner sets ``epsilon``, ``delta`` and the generator on a copy, plans the
  copy's event with the copy's pre-reservation checks (``_planned_event``), charges it, and
  records the event the fit released. No validation rows, no score, no choice: ``alpha_`` is a
  parameter, public.
* ``"select"`` on sufficient statistics: the two parts' statistics (disjoint rows) are released
  once each at the whole budget (parallel composition: a replaced row lies in one part); every
  later step is post-processing (``skdp/solvers/heavy_tail/sufficient_statistics.py``).
* ``"select"`` over inner fits: candidates on the training part (sequential composition among
  them), in parallel with one Gaussian release of the vector of clipped mean validation scores
  (validation rows only; sensitivity in ``_selection.py``), then the refit on all rows
  (sequential). The zCDP parts are scaled together by a public calibration to the target.
* ``"split"``: candidates on the training part sharing the budget, in parallel with the
  exponential mechanism on the validation part at the whole budget.
* ``"bilevel"`` and ``"bilevel_sgd"``: a private scaling, the inner releases (``2 outer_steps``
  output perturbations, or ``outer_steps * 100`` Poisson-sampled noisy SGD steps) and the
  refit, in sequence (``_bilevel.py``, ``_bilevel_sgd.py``).
* ``"path"`` and ``"noise_floor"``: one fit of the estimator (its own argument) in sequence with
  one exponential-mechanism draw among post-processed candidates of the released model, its
  utility of sensitivity ``2 SCORE_CLIP`` (``_path.py``; the noise floor's candidate and its head
  start are functions of released values only, ``_noise_floor.py``); the two parts are calibrated
  together to the target.
"""

import math
import numbers
import warnings

import numpy as np
from sklearn.base import BaseEstimator, MetaEstimatorMixin, clone, is_classifier
from sklearn.utils import get_tags
from sklearn.utils.metaestimators import available_if
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from .._base import DPEstimatorMixin, nested_fits
from .._validation import Interval, InvalidParameterError, Options, Predicate
from ..accounting import (
    ExponentialMechanismRelease,
    GaussianRelease,
    Parallel,
    PrivacyLeakWarning,
    Sequential,
    calibrate_scale,
    dp_to_zcdp,
    zcdp_to_dp,
)
from ..linear_model import DPHeavyTailRegressor
from ..linear_model._pipeline import PrivateLinearModel
from ..linear_model._rows import is_dask_collection
from ..solvers import SufficientStatistics
from ._bilevel import fit_bilevel
from ._noise_floor import threshold_at_noise_floor
from ._path import (FLOOR_MARGIN, FLOOR_SCORE_SHARE, KEEP_MARGIN, PATH_MIN_EPSILON_ROWS, SCORE_SHARE, ProximalPath, choose,
                    score_changes)
from ._selection import release_scores, report_noisy_min, row_scores, score_bound

__all__ = ["DPRegularizationTuner", "DEFAULT_ALPHAS"]

# alpha = 0 (only the privacy ridge of the sufficient statistics) and 1e-4 ... 1000 in the mean-loss units:
# the strong end lets a starved fit choose a model close to the constant (at epsilon 0.5 on 2000 rows and
# 200 correlated features the privacy ridge alone is about 130 in standardised units, and alpha = 10 still
# gave test R^2 -0.45).
DEFAULT_ALPHAS = (0.0, *np.round(np.logspace(-4, 3, 15), 12).tolist())
METHODS = ("auto", "default", "noise_floor", "path", "select", "split", "bilevel", "bilevel_sgd")


def _is_grid(value):
    if value is None:
        return True
    try:
        grid = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        return False
    return grid.ndim == 1 and grid.size > 0 and bool(np.all(np.isfinite(grid))) and bool(np.all(grid >= 0))


def _is_skdp_estimator(value):
    return value is None or (isinstance(value, DPEstimatorMixin) and "alpha" in value.get_params(deep=False))


class DPRegularizationTuner(DPEstimatorMixin, MetaEstimatorMixin, BaseEstimator):
    """Choose the regularisation strength of an skdp estimator privately, and fit the final model.

    The private counterpart of ``RidgeCV``, ``LassoCV``, ``LogisticRegressionCV``
    and ``GridSearchCV`` over ``alpha``: the choice of ``alpha``, the candidates'
    released scores and the final model are all covered by one
    ``(epsilon, delta)`` for the whole procedure, whatever the wrapped
    estimator's own ``epsilon`` says (the tuner sets it on its copies).

    Methods (``method``):

    - ``"select"`` with the sufficient-statistics ridge
      (``DPHeavyTailRegressor(algorithm="sufficient_statistics")``, the default
      ``estimator``): the rows are split by a seeded permutation into a
      validation and a training part; ``X'X``, ``X'y`` and ``y'y`` of each
      part are released once (the parts are disjoint, so the two releases cost
      one release's budget); every ``alpha`` of the grid is then scored on the
      released validation statistics and the final model is solved at the
      best one from the sum of the two parts' statistics. Everything after
      the two releases is post-processing: tuning costs nothing beyond one fit.
    - ``"select"`` with any other estimator (classifiers included): every
      candidate is fitted privately on the training part, with an equal share
      of half of the budget; the vector of all candidates' mean validation
      scores (per-row scores clipped to a public bound: squared residuals in
      released target scales, or the Brier score of the probabilities) is
      released once with the Gaussian mechanism; it reads only the validation
      rows, disjoint from the training part, so it gets the same half. The
      noisy argmin is refitted on all rows with the other half of the budget.
      (Halves are of the zero-concentrated budget, then all parts are scaled
      together so that the composition spends exactly ``epsilon``.)
    - ``"split"`` (the classic baseline): candidates on the training part
      sharing the whole budget, one candidate chosen by report-noisy-min (the
      exponential mechanism) on the validation part at the whole budget, no
      refit: ``best_estimator_`` is that candidate.
    - ``"default"``: no selection. The estimator is fitted once on all rows
      with the whole budget at its own ``alpha`` (for ``estimator=None``:
      ``DPHeavyTailRegressor()``, the library's default solver with its
      privacy-driven shrinkage); ``alpha_`` is that ``alpha``.
    - ``"noise_floor"`` (``DPHeavyTailRegressor`` with the squared loss, no
      grid): one fit of the estimator at its own ``alpha`` with 95% of the
      zero-concentrated budget, and one candidate besides it: its
      coefficients with those within 3 standard deviations of the noise of
      the solver's averaged iterate zeroed (in the released standardised
      units, as the estimator's own L1 mode does; post-processing). The draw
      of ``"path"`` with the other 5% chooses between the two; tests on the
      released coefficients (are those below the floor as small as pure noise
      would make them, and are there more above it than noise would put
      there?) give the one they favour a head start of 3 Gumbel scales. ``noise_floor_`` is the threshold applied (None: the fitted
      model was kept). With little budget per row the privacy noise dwarfs
      the sampling noise, and a threshold at the noise level is the
      regularisation a sparse model needs (``docs/tuning.rst``).
    - ``"path"`` (``DPHeavyTailRegressor`` with the squared loss, no grid):
      one fit of the estimator at its own ``alpha`` with 90% of the
      zero-concentrated budget; its candidates are the proximal maps of the
      estimator's elastic-net penalty applied to the released coefficients in
      the released standardised units (coefficients times the released
      feature scales): soft thresholds for the Lasso form, shrinkage for the
      ridge form, at 12 strengths over three decades below the one that
      zeroes every coefficient (post-processing); one candidate, or the
      fitted model, is drawn by the exponential mechanism with the other 10%,
      on the summed per-row changes of the squared residual against the fitted
      model (clipped per row; see ``_path.py`` for the argument). Tuning costs
      one draw, not a division of the budget among fits. ``best_estimator_``
      is the fitted estimator holding the chosen candidate's coefficients (its
      ``alpha``, ``n_iter_`` and ``fit_check_`` still describe the fit);
      ``alpha_`` is the estimator's ``alpha`` and ``path_strength_`` the chosen
      strength. On the Lasso task of ``benchmarks/tuning`` at n = 20000 and
      epsilon 1 it beats the untuned default on every one of 8 seeds and
      recovers the whole oracle-minus-default gap (median test MSE 2.83
      against 2.92; the oracle strength 2.78); at n = 2000 its draw keeps the
      fitted model on most seeds and the 10% it takes from the fit is a loss.
    - ``"auto"`` (the default): ``"select"`` when a grid is given (a public
      input: the user asked for a model from that grid, as ``RidgeCV`` returns
      one); without a grid, ``"path"`` for the Lasso and elastic-net forms
      (``l1_ratio > 0``) when ``epsilon * n_samples >= 10000``; below it
      ``"noise_floor"`` for those forms at ``alpha = 0`` with the squared loss;
      else ``"default"``. The rule reads only parameters and the number of rows.
      In ``benchmarks/tuning`` (epsilon 1, 3 to 8 seeds) the strength chosen on
      test rows (an upper bound, not a procedure) beats the untuned private
      default by no more than seed noise on the ridge and logistic problems: the default solvers'
      own shrinkage is already at the best strength (``alpha = 0`` is the
      oracle of ``DPHeavyTailRegressor`` on the wide table, the correlated
      ridge task and diabetes; ``DPInterpolatingClassifier``'s ``alpha`` does
      not change its model at epsilon 1), and every method that tunes pays for
      it in the final model's noise (``"select"`` fits the final model with
      half of the zero-concentrated budget, the sufficient statistics are far
      noisier than the default solver on 200 or more columns, and ``"path"``
      gives the draw 10%). So there ``"auto"`` spends the whole budget on the
      default model. The Lasso form is the exception: its default
      (``alpha = 0``) is dense, the oracle strength beats it beyond the noise,
      and ``"path"`` recovers that gap.
    - ``"bilevel"`` (Kornowski's DP bilevel algorithm): a private
      pooled scaling (5% of the budget), then ``outer_steps`` outer steps, each
      releasing two L2-penalised models on the training part by output perturbation
      (one with the validation loss mixed in at weight ``1 / lambda``); the
      difference of their squared norms estimates the derivative of the
      validation loss in ``alpha``, and ``log alpha`` moves against it
      (post-processing); the final model is the estimator's own private fit
      at the chosen ``alpha`` with half of the budget. ``alphas`` gives the
      box (its positive range). See ``skdp/model_selection/_bilevel.py``.
      Ridge (``DPHeavyTailRegressor`` with ``loss="squared"``, ``l1_ratio=0``)
      and binary logistic regression (``DPInterpolatingClassifier`` with two
      classes, its default loss); it needs large ``epsilon * n``
      (``docs/tuning.rst``).
    - ``"bilevel_sgd"`` (the mini-batch variant, Kornowski's Algorithms 3
      and 4): the same scaling, split, box, penalty, outer rule and refit as
      ``"bilevel"``; each outer step solves the two L2-penalised problems by
      100 steps of noisy projected SGD on Poisson mini-batches (expected
      ``max(64, sqrt(n))`` rows; per-example gradients clipped, both solves on
      the same batches, each step one Gaussian release of the pair of clipped
      sums), warm-started at the previous step's released solutions. Cost:
      ``outer_steps * 100`` Poisson-sampled Gaussian steps whose noise spends
      the epsilon of the inner share of ``"bilevel"`` (45% of the
      zero-concentrated budget) alone, then the scaling (5%) and the refit (50%)
      scaled together so that the whole event spends exactly ``epsilon``. See
      ``skdp/model_selection/_bilevel_sgd.py``; it supports (and refuses) what
      ``"bilevel"`` does.

    Parameters
    ----------
    estimator : skdp estimator with an ``alpha`` parameter, default=None
        None is a ridge ``DPHeavyTailRegressor``: ``DPHeavyTailRegressor()``
        (its default solver) for ``"default"`` and ``"auto"``, and
        ``DPHeavyTailRegressor(algorithm="sufficient_statistics")`` (every
        strength's model from one release) for ``"select"`` and ``"split"``.
        ``DPInterpolatingClassifier`` is tuned through ``alpha`` (its ``C`` is
        reset to 1 on the copies).
    alphas : array-like of float >= 0, default=None
        The grid, in the estimators' mean-loss units (``ElasticNet``'s
        ``alpha``). A ``RidgeCV`` grid carries over as ``alphas / n_samples``
        (RidgeCV penalises the summed loss), a ``LassoCV`` grid as it is (with
        ``l1_ratio=1`` on the estimator), a ``LogisticRegressionCV`` grid of
        ``Cs`` as ``1 / (Cs * n_samples)``. None is ``DEFAULT_ALPHAS``: 0 and
        15 values from 1e-4 to 1000.
    method : str, default="auto"
        One of "auto", "default", "noise_floor", "path", "select", "split",
        "bilevel", "bilevel_sgd" (above).
    validation_fraction : float in (0, 1), default=0.5
        Share of the rows in the validation part.
    outer_steps : int >= 1, default=10
        Outer steps of ``"bilevel"`` and ``"bilevel_sgd"`` (the noise grows
        like ``sqrt(outer_steps)``).
    epsilon : float > 0, default=1.0
        The budget of the whole procedure (tuning and final model).
    delta : float in [0, 1) or "auto", default="auto"
        As for the estimators ("auto" is ``min(1e-5, 1 / (10 n_samples))``).
    accountant, random_state, verbose
        As for the estimators; the inner fits draw their noise from the
        tuner's generator and are charged as part of the tuner's one entry.

    Attributes
    ----------
    alpha_ : float
        The chosen strength.
    best_index_ : int
    best_estimator_ : estimator
        The final private model (its ``alpha`` is ``alpha_``).
    alphas_ : ndarray
        The grid (``[alpha_]`` for ``"default"``, ``"noise_floor"`` and ``"path"``, which fit at
        the estimator's own ``alpha`` only).
    path_strengths_ : ndarray
        ``"path"`` only: 0 (the fitted model) and the candidates' strengths, in
        the released standardised units (coefficients times
        ``best_estimator_.scaling_["feature_scale"]``, a robust private scale:
        about 0.67 standard deviations for normal columns; the target in its
        own units). ``best_index_`` indexes it.
    path_strength_ : float
        ``"path"`` only: the chosen strength (0: the fitted model was kept).
    noise_floor_ : float or None
        ``"noise_floor"`` only: the threshold applied to the standardised
        coefficients (coefficients times ``feature_scale / target_scale`` of
        ``best_estimator_.scaling_``), or None if the fitted model was kept.
    noise_floor_energy_ : float
        ``"noise_floor"`` only: the summed squares of the standardised
        coefficients below the floor over their expectation under pure noise
        (the test's statistic; nan when nothing was tested).
    validation_scores_ : ndarray or None
        The released validation scores of the candidates (half mean squared
        errors on the released statistics, or the released mean clipped
        scores); None for ``"split"`` and ``"path"``, which release only the
        index, and for ``"default"``, which scores nothing.
    method_ : str
    bilevel_path_ : dict
        ``"bilevel"`` and ``"bilevel_sgd"`` only: the path of ``omega`` (tuning
        units; ``alpha`` in the estimator's), the released hypergradients, the
        steps, the noise standard deviations (of each inner release; for
        ``"bilevel_sgd"`` of each step's gradient estimate, per coordinate),
        ``t_out``, the penalty ``lambda``, the box; for ``"bilevel_sgd"`` also
        ``batch_rate``, ``inner_steps`` and ``noise_multiplier``.
    coef_, intercept_, classes_
        Those of ``best_estimator_``.
    privacy_spent_ : PrivacySpent
        Tuning and final model together.
    privacy_event_ : PrivacyEvent
    n_features_in_ : int
    feature_names_in_ : ndarray of str

    Notes
    -----
    ``score`` on training data is not private.

    Examples
    --------
    >>> import numpy as np
    >>> from skdp.model_selection import DPRegularizationTuner
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(20000, 10))
    >>> y = X @ rng.normal(size=10) + rng.normal(size=20000)
    >>> from skdp import BudgetAccountant
    >>> ledger = BudgetAccountant(epsilon=1.0)
    >>> tuner = DPRegularizationTuner(epsilon=1.0, accountant=ledger, random_state=0).fit(X, y)
    >>> bool(tuner.score(X, y) > 0.85), round(ledger.spent.epsilon, 6)
    (True, 1.0)
    """

    _parameter_constraints = {
        **DPEstimatorMixin._privacy_parameter_constraints,
        "estimator": [Predicate(_is_skdp_estimator, "an skdp estimator with an 'alpha' parameter, or None")],
        "alphas": [Predicate(_is_grid, "None or a non-empty 1-d array of finite numbers >= 0")],
        "method": [Options(set(METHODS))],
        "validation_fraction": [Interval(numbers.Real, 0, 1, closed="neither")],
        "outer_steps": [Interval(numbers.Integral, 1, None, closed="left")],
    }

    def __init__(self, estimator=None, *, alphas=None, method="auto", validation_fraction=0.5, epsilon=1.0,
                 delta="auto", accountant=None, random_state=None, verbose=0, outer_steps=10):
        self.estimator = estimator
        self.alphas = alphas
        self.method = method
        self.validation_fraction = validation_fraction
        self.epsilon = epsilon
        self.delta = delta
        self.accountant = accountant
        self.random_state = random_state
        self.verbose = verbose
        self.outer_steps = outer_steps

    # -- public rules (parameters only) ---------------------------------------------------------
    def _base(self):
        if self.estimator is None:
            return DPHeavyTailRegressor(algorithm="sufficient_statistics")
        return self.estimator

    def _grid(self):
        grid = DEFAULT_ALPHAS if self.alphas is None else np.asarray(self.alphas, dtype=float)
        return tuple(float(a) for a in grid)

    @staticmethod
    def _statistics_solver(estimator):
        """The sufficient-statistics solver the estimator is configured with, or None."""
        algorithm = estimator.get_params(deep=False).get("algorithm")
        if isinstance(algorithm, SufficientStatistics):
            return algorithm
        if isinstance(algorithm, str) and algorithm == "sufficient_statistics":
            return SufficientStatistics()
        return None

    def _split_sizes(self, n):
        n_val = min(max(int(round(self.validation_fraction * n)), 2), n - 2)
        return n_val, n - n_val

    # -- fit ----------------------------------------------------------------------------------
    def fit(self, X, y, **fit_params):
        """Tune ``alpha`` privately and fit the final model.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
        **fit_params
            Only ``sample_weight=None`` is accepted (see the estimators).

        Returns
        -------
        self
        """
        for name, value in fit_params.items():
            if name != "sample_weight" or value is not None:
                raise TypeError(f"{type(self).__name__}.fit does not take {name}={value!r}. Nothing was "
                                "spent.")
        self._validate_privacy_params()
        if is_dask_collection(X) or is_dask_collection(y):
            # validate_data would compute the collection: every row would come to this process.
            raise ValueError(f"{type(self).__name__} does not accept Dask input yet: its candidate fits split "
                             "the rows into folds, which are not built on chunked rows. Fit "
                             "DPHeavyTailRegressor on the Dask collection, or tune on an in-memory table. "
                             "Nothing was spent.")
        base = self._base()
        classifier = is_classifier(base)
        X, y = validate_data(self, X, y, accept_sparse=("csr", "csc"), dtype=[np.float64, np.float32],
                             y_numeric=not classifier)
        if classifier:
            check_classification_targets(y)
        n = X.shape[0]
        if n < 4:
            raise ValueError(f"{type(self).__name__} needs at least 4 samples (two per part); got "
                             f"n_samples = {n}.")
        delta = self._resolve_delta(n)
        grid = self._grid()
        common = {"delta": delta, "random_state": None, "verbose": 0}
        if classifier:
            common["classes"] = self._classes(base, y)
        solver = self._statistics_solver(base)
        method = self.method
        if method == "auto":  # public inputs only (see the class docstring)
            method = ("select" if self.alphas is not None else "path" if self._sparse_path(delta, n)
                      else "noise_floor" if self._sparse_floor(delta) else "default")
        if method in ("bilevel", "bilevel_sgd"):
            fit_bilevel(self, X, y, common, classifier, self.outer_steps, method=method)
            self.method_ = method
            return self
        if method == "default":
            self._fit_default(common, X, y)
            self.method_ = method
            return self
        if method in ("path", "noise_floor"):
            with np.errstate(all="ignore"):  # nothing may raise after the reservation
                self._fit_path(common, X, y, candidates=method)
            self.method_ = method
            return self
        with np.errstate(all="ignore"):
            if method == "select" and solver is not None:
                self._fit_statistics(base, solver, grid, common, X, y)
            else:
                self._fit_candidates(base, method, grid, common, classifier, X, y)
        self.method_ = method
        self.alphas_ = np.asarray(grid)
        self.alpha_ = grid[self.best_index_]
        return self

    def _fit_default(self, common, X, y):
        """``"default"``: one fit of the estimator at its own ``alpha`` with the whole budget."""
        inner = clone(DPHeavyTailRegressor() if self.estimator is None else self.estimator)
        inner.set_params(epsilon=self.epsilon, **common)
        self._log(f"fitting the default model ({type(inner).__name__}, alpha as given) with the whole "
                  "budget")
        self._fit_whole_budget(inner, X, y)
        alpha = inner.get_params(deep=False)["alpha"]
        if alpha is None:  # DPInterpolatingClassifier given by C: its mean-loss strength
            alpha = inner._effective_alpha()
        self.best_estimator_ = inner
        self.alpha_ = float(alpha)
        self.alphas_ = np.asarray([self.alpha_])
        self.best_index_ = 0
        self.validation_scores_ = None

    def _sparse_floor(self, delta):
        """Whether ``"auto"`` without a grid runs ``"noise_floor"`` (public inputs only)."""
        base, _ = self._path_estimator(delta)
        if base is None:
            return False
        params = base.get_params(deep=False)
        return float(params["l1_ratio"]) > 0 and float(params["alpha"]) == 0.0

    def _sparse_path(self, delta, n):
        """Whether ``"auto"`` without a grid runs ``"path"`` (public inputs only; see the class docstring)."""
        base, _ = self._path_estimator(delta)
        return (base is not None and float(base.get_params(deep=False)["l1_ratio"]) > 0
                and n * float(self.epsilon) >= PATH_MIN_EPSILON_ROWS)

    def _path_estimator(self, delta, method="path"):
        """The estimator ``"path"`` (or ``"noise_floor"``) fits, or why it cannot (public inputs only)."""
        base = DPHeavyTailRegressor() if self.estimator is None else self.estimator
        if is_classifier(base) or not isinstance(base, DPHeavyTailRegressor):
            return None, (f"method={method!r} scores squared residuals and needs DPHeavyTailRegressor as "
                          f"estimator; got {type(base).__name__}. Use method='select' or 'default'.")
        if base.get_params(deep=False)["loss"] != "squared":
            return None, (f"method={method!r} scores squared residuals and needs loss='squared'; got "
                          f"loss={base.get_params(deep=False)['loss']!r}. Use method='select' or 'default'.")
        if delta == 0.0:
            return None, (f"method={method!r} splits a zero-concentrated budget between the fit and its draw "
                          "and needs delta > 0; with delta=0 use method='default'.")
        return base, None

    def _fit_path(self, common, X, y, candidates="path"):
        """One fit, candidates derived from it, one released vector of score changes.

        ``candidates="path"``: the proximal candidates (``ProximalPath``), the fitted model
        with a head start. ``"noise_floor"``: the fitted model and its hard threshold at the
        noise floor (``_noise_floor.py``), no head start, a smaller share for the draw.
        """
        floor = candidates == "noise_floor"
        n = X.shape[0]
        delta = self._resolve_delta(n, warn=False)
        base, why = self._path_estimator(delta, candidates)
        if base is None:
            raise InvalidParameterError(f"{why} Nothing was spent.")
        if self.alphas is not None:
            raise InvalidParameterError(
                f"method={candidates!r} takes its candidates from the released model; pass alphas=None, or "
                "use method='select' to choose from a grid. Nothing was spent.")
        share = FLOOR_SCORE_SHARE if floor else SCORE_SHARE
        inner = clone(base).set_params(**common)
        eps = float(self.epsilon)
        cache = {}

        def planned(eps_fit):
            if eps_fit not in cache:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    cache[eps_fit] = clone(inner).set_params(epsilon=eps_fit)._planned_event(X, y)
            return cache[eps_fit]

        if math.isinf(eps):
            eps_fit, eps_choice = math.inf, math.inf
            plan = Sequential([planned(eps_fit), _exponential(eps_choice)])
        else:
            rho = dp_to_zcdp(eps, delta)
            if not rho > 0.0:
                raise InvalidParameterError(
                    f"method={candidates!r} at epsilon={eps:g} and delta={delta:g} has no zero-concentrated "
                    "budget to split between the fit and its draw; raise epsilon or use method='default'. "
                    "Nothing was spent.")

            def parts(t):
                # The exponential mechanism at epsilon_s is epsilon_s^2 / 8-zCDP.
                return zcdp_to_dp(t * rho * (1.0 - share), delta), math.sqrt(8.0 * t * rho * share)

            def event_at(t):
                eps_fit, eps_choice = parts(t)
                return Sequential([planned(eps_fit), _exponential(eps_choice)])

            t = 1.0 / calibrate_scale(lambda s: event_at(1.0 / s), eps * (1.0 - 1e-10), delta, initial=1.0,
                                      rtol=1e-6)
            eps_fit, eps_choice = parts(t)
            plan = event_at(t)
        inner.set_params(epsilon=eps_fit)
        alpha0 = float(inner.get_params(deep=False)["alpha"])
        l1_ratio = float(inner.get_params(deep=False)["l1_ratio"])
        self._log(f"fitting {type(inner).__name__} at alpha={alpha0:g} (epsilon {eps_fit:.4g} of the "
                  f"budget), then choosing among candidates of the fit by one exponential-mechanism draw")

        def solve(rng):
            with nested_fits(rng) as run:
                inner.fit(X, y)
            path = ProximalPath(inner.coef_, inner.intercept_, inner.scaling_, l1_ratio=l1_ratio)
            if floor:  # post-processing of released values (_noise_floor.py)
                found = threshold_at_noise_floor(path.coef, path.intercept, inner.scaling_,
                                                 getattr(inner, "schedule_", {}).get("averaged_noise_sd"))
                coefs, intercepts = found.coef[None, :], np.array([found.intercept])
            else:
                found = None
                coefs = path.coefs()
                intercepts = path.intercepts(coefs)
            target_scale = _released_target_scale([inner], False)
            changes = score_changes(X, y, path.coef, path.intercept, coefs, intercepts, target_scale)
            # The fitted model's head start; for the noise floor it follows the test on released values.
            margin = KEEP_MARGIN if not floor else _floor_margin(found)
            best, choice_event = choose(changes, eps_choice, rng, margin=margin)
            return Sequential([Sequential(run.events), choice_event]), (path, coefs, intercepts, best, found)

        path, coefs, intercepts, best, found = self._run_private(plan, solve, n_samples=n)
        self.best_estimator_ = inner
        self.alpha_ = alpha0
        self.alphas_ = np.asarray([alpha0])
        self.best_index_ = best + 1
        self.validation_scores_ = None
        if floor:
            if best >= 0:
                inner._store_model(coefs[best], intercepts[best], inner.coef_.dtype)
            self.noise_floor_ = found.threshold if best >= 0 else None
            self.noise_floor_energy_ = found.energy_ratio
            self._log(f"noise floor: {found.reason}; the draw " + ("chose the thresholded model" if best >= 0
                                                                     else "kept the fitted model"))
            return
        if best >= 0:
            self._log(f"chose lambda={path.strengths[best]:.4g} on top of alpha={alpha0:g}")
            dtype = inner.coef_.dtype
            inner._store_model(coefs[best], intercepts[best], dtype)
        else:
            self._log("kept the fitted model (the draw chose no proximal step)")
        # The strengths act in released standardised units, not in alpha's: alpha_ stays the fit's.
        self.path_strengths_ = np.r_[0.0, path.strengths]
        self.path_strength_ = float(self.path_strengths_[self.best_index_])

    def _fit_whole_budget(self, inner, X, y):
        """Fit ``inner`` (an estimator at the tuner's budget) as the tuner's one ledger entry.

        The event is planned on a copy with the copy's own checks, before the
        reservation (they raise with nothing spent); the fit draws its noise from
        the tuner's generator and is charged through the tuner's reservation.
        """
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            planned = clone(inner)._planned_event(X, y)

        def solve(rng):
            with nested_fits(rng) as run:
                inner.fit(X, y)
            return Sequential(run.events), inner

        self._run_private(planned, solve, n_samples=X.shape[0])

    def _classes(self, base, y):
        classes = base.get_params(deep=False).get("classes")
        if classes is not None:
            return classes
        warnings.warn("The estimator has classes=None: the set of labels is read from y and released with "
                      "the "
                      "model (classes_); a rare label can reveal a person. Pass the public list of labels as "
                      "classes= to the estimator.", PrivacyLeakWarning, stacklevel=3)
        return np.unique(y)

    def _fit_statistics(self, base, solver, grid, common, X, y):
        """``"select"`` on the released sufficient statistics (one release's cost)."""
        inner = clone(base).set_params(
            epsilon=self.epsilon, alpha=1.0, l1_ratio=0.0,
            algorithm=solver.replace(alphas=grid, validation_fraction=float(self.validation_fraction)),
            **common)
        self._fit_whole_budget(inner, X, y)
        self.best_index_ = int(inner.schedule_["alpha_index"])
        self.validation_scores_ = np.asarray(inner.schedule_["validation_scores"])
        for alpha, score in zip(grid, self.validation_scores_):
            self._log(f"alpha={alpha:g}: validation loss {score:.5g} on the released statistics")
        self._log(f"chose alpha={grid[self.best_index_]:g} (privacy ridge factor "
                  f"{inner.schedule_['ridge_factor']:g}); final model from both parts' statistics")
        # The model was solved at alpha_ (a multiple of the unit penalty): say so in its parameters.
        inner.set_params(alpha=grid[self.best_index_], algorithm=solver)
        self.best_estimator_ = inner

    def _budget_parts(self, method, k, n):
        """(candidate epsilon, refit epsilon, score mu) at a common multiplier, calibrated (public)."""
        delta = self._resolve_delta(n, warn=False)
        eps = float(self.epsilon)
        if math.isinf(eps):
            return lambda t: (math.inf, math.inf, math.inf), 1.0
        if delta == 0.0:  # pure DP ("split" only): basic composition over the candidates
            return lambda t: (t * eps / k, None, None), 1.0
        rho = dp_to_zcdp(eps, delta)
        if method == "select":
            # Half of the zCDP budget for the refit, half for the selection: the candidates share
            # it on the training rows, the score vector (validation rows only) gets all of it.
            return lambda t: (zcdp_to_dp(t * rho / (2 * k), delta), zcdp_to_dp(t * rho / 2, delta),
                              math.sqrt(t * rho)), 1.0
        return lambda t: (zcdp_to_dp(t * rho / k, delta), None, None), 1.0

    def _fit_candidates(self, base, method, grid, common, classifier, X, y):
        """``"select"`` with inner private fits, or ``"split"``."""
        if not isinstance(base, PrivateLinearModel):
            raise ValueError(f"method={method!r} needs an skdp linear model as estimator; got "
                             f"{type(base).__name__}. Nothing was spent.")
        n = X.shape[0]
        n_val, n_train = self._split_sizes(n)
        k = len(grid)
        eps = float(self.epsilon)
        delta = self._resolve_delta(n, warn=False)
        if method == "select" and delta == 0.0:
            raise InvalidParameterError(
                "method='select' releases the candidates' scores with Gaussian noise, so it needs delta > 0; "
                "with delta=0 (pure DP) use the sufficient-statistics estimator or method='split'. Nothing "
                "was spent.")
        parts, _ = self._budget_parts(method, k, n)
        # The pick's epsilon, a relative margin below the target for the calibration's rounding.
        eps_pick = eps * (1.0 - 1e-10)
        extra = {"C": 1.0} if classifier else {}

        def candidate(alpha, epsilon):
            return clone(base).set_params(epsilon=epsilon, alpha=alpha, **common, **extra)

        def refit(alpha, epsilon):
            return clone(base).set_params(epsilon=epsilon, alpha=alpha, **common, **extra)

        cache = {}

        def planned(epsilon, alpha, rows):
            key = (epsilon, alpha > 0, rows)
            if key not in cache:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    cache[key] = candidate(alpha, epsilon)._planned_event(X[:rows], y[:rows])
            return cache[key]

        def event_at(t):
            eps_c, eps_r, mu_v = parts(t)
            train = Sequential([planned(eps_c, a, n_train) for a in grid])
            if method == "select":
                # The refit's plan depends on alpha only through whether it is positive: plan the dearer.
                refits = [planned(eps_r, a, n) for a in {0.0 if a == 0 else 1.0 for a in grid}]
                scores = GaussianRelease(1.0, 0.0 if math.isinf(mu_v) else 1.0 / mu_v)
                return Sequential([Parallel([train, scores]), _worst(refits, delta)])
            return Parallel([train, _exponential(eps_pick)])

        if math.isinf(eps):
            t = 1.0
        else:
            t = 1.0 / calibrate_scale(lambda s: event_at(1.0 / s), eps * (1.0 - 1e-10), delta, initial=1.0,
                                      rtol=1e-6)
        eps_c, eps_r, mu_v = parts(t)
        plan = event_at(t)
        bound = score_bound(classifier)

        def solve(rng):
            order = rng.permutation(n)
            val, train = np.sort(order[:n_val]), np.sort(order[n_val:])
            with nested_fits(rng) as run:
                fitted = []
                for j, alpha in enumerate(grid):
                    self._log(f"candidate {j + 1}/{k}: alpha={alpha:g} on {n_train} training rows")
                    fitted.append(candidate(alpha, eps_c).fit(X[train], y[train]))
                target_scale = _released_target_scale(fitted, classifier)
                scores = np.column_stack([row_scores(m, X[val], y[val], classifier, target_scale)
                                          for m in fitted])
                if method == "select":
                    means, score_event = release_scores(scores, bound, mu_v, rng)
                    best = int(np.argmin(np.where(np.isfinite(means), means, np.inf)))
                    self._log(f"chose alpha={grid[best]:g}; refit on all {n} rows")
                    final = refit(grid[best], eps_r).fit(X, y)
                    train_events, final_event = run.events[:k], run.events[k]
                    event = Sequential([Parallel([Sequential(train_events), score_event]), final_event])
                    return event, (best, means, final)
                best, pick_event = report_noisy_min(scores, bound, eps_pick, rng)
                event = Parallel([Sequential(run.events), pick_event])
                return event, (best, None, fitted[best])

        best, means, final = self._run_private(plan, solve, n_samples=n)
        self.best_index_ = best
        self.validation_scores_ = means
        self.best_estimator_ = final

    # -- delegation (post-processing) ------------------------------------------------------------
    def _final(self):
        check_is_fitted(self, "best_estimator_")
        return self.best_estimator_

    def predict(self, X):
        """Predict with the final model."""
        return self._final().predict(X)

    def score(self, X, y, sample_weight=None):
        """The final model's score (R^2 or accuracy); not private on training rows."""
        return self._final().score(X, y, sample_weight=sample_weight)

    def _base_is_classifier(self):
        return is_classifier(self._base())

    @available_if(_base_is_classifier)
    def predict_proba(self, X):
        """Class probabilities of the final model."""
        return self._final().predict_proba(X)

    @available_if(_base_is_classifier)
    def predict_log_proba(self, X):
        """Log class probabilities of the final model."""
        return self._final().predict_log_proba(X)

    @available_if(_base_is_classifier)
    def decision_function(self, X):
        """Decision function of the final model."""
        return self._final().decision_function(X)

    @property
    def classes_(self):
        if not self._base_is_classifier():
            raise AttributeError("classes_ exists for classifiers only.")
        return self._final().classes_

    @property
    def coef_(self):
        return self._final().coef_

    @property
    def intercept_(self):
        return self._final().intercept_

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        inner = get_tags(self._base())
        tags.estimator_type = inner.estimator_type
        tags.classifier_tags = inner.classifier_tags
        tags.regressor_tags = inner.regressor_tags
        tags.target_tags = inner.target_tags
        tags.input_tags.sparse = inner.input_tags.sparse
        return tags


def _worst(events, delta):
    """The dearest of the events at ``delta``."""
    return max(events, key=lambda ev: ev.epsilon(delta))


def _exponential(epsilon):
    return ExponentialMechanismRelease(epsilon)


def _floor_margin(found):
    """The fitted model's head start against the noise-floor candidate, in Gumbel scales (released values)."""
    if not found.looks_like_noise:
        return FLOOR_MARGIN if found.threshold is not None else 0.0
    return -FLOOR_MARGIN if found.signal_above_floor else 0.0


def _released_target_scale(fitted, classifier):
    """A released target scale of the candidates (their standardisation's), for the score clip."""
    if classifier:
        return 1.0
    scales = [float(m.scaling_["target_scale"]) for m in fitted if hasattr(m, "scaling_")]
    scales = [s for s in scales if math.isfinite(s) and s > 0]
    return float(np.median(scales)) if scales else 1.0
