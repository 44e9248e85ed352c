"""A private check that a fitted linear model predicts better than a constant.

At small budgets (``epsilon * n`` of a few per coefficient, or private
quantiles short of rows) a private fit can be worse than predicting the
target's centre, and nothing public says when: the rule of thumb depends on the
table (a 200-level one-hot block at ``epsilon * n / p = 5`` still gives a useful
model; a column with a 1e6 offset at 170 may not). So every fit releases one
noisy number that answers the question on the training rows:

``improvement = mean_i [min((y_i - c)^2, B^2) - min((y_i - yhat_i)^2, B^2)] / s_y^2``

with ``c`` the released target centre (0 without an intercept), ``s_y`` the
released target scale, ``B = 2 s_y`` and ``yhat`` the released model's
predictions. Each term lies in ``[-4, 4]`` whatever the row (a non-finite
prediction counts as an error of ``B``), so replacing one row moves the mean by
at most ``8 / n``: one Gaussian release with that sensitivity, funded by
:data:`CHECK_SHARE` of the fit's Gaussian budget. The decision below is
post-processing of released values.

When the released improvement is below ``-1`` noise standard deviation, the
model is replaced by the constant ``c`` (``coef_ = 0``) and a
:class:`~skdp.accounting.LowBudgetWarning` quoting ``epsilon * n`` says so. The
margin suits the asymmetric risk: a model that beats the constant by ``D``
target variances is dropped with probability ``Phi(-1 - D / sd)`` (at most 16%,
and then it was a model of little use), while the failures the check exists
for are large (at starved budgets private fits were up to hundreds of target
variances worse than the constant in our benchmarks; in the clipped units
above they lose about 3) and are caught whenever the noise is below about 2.
A released improvement between ``-1`` noise standard deviation and 0 keeps the
model with a :class:`~skdp.accounting.LowBudgetWarning` (it is more likely
worse than the constant than not). Without noise (``epsilon = inf``) the model
is always kept.

On a starved budget (a public property of the plan: the private quantiles that
locate and scale the data get ``epsilon * n`` below about 40 each, see
:mod:`~skdp.linear_model._budget`) the burden of proof is reversed: the model
is kept only when the released improvement is above ``+2`` noise standard
deviations, otherwise the constant is returned. There the scales themselves
are unreliable and a failed fit is not a few target variances worse than the
constant but up to 1e20 times (diabetes, ``epsilon * n = 33``), while the
check's noise (several target variances) cannot tell such a fit from a useful
one.

The released numbers are kept in the estimator's ``fit_check_`` attribute.

**Classifiers** (:func:`private_classification_check`) compare the released,
calibrated model's probabilities with the released class prior on the
training rows by the probability each gives the true class (a smooth
accuracy): ``improvement = mean_i w_i (p_i[y_i] - prior[y_i])``, each term
within ``[-w_max, w_max]`` (``w`` the class weights, 1 without them), so one
Gaussian (or Laplace, for pure DP) release of sensitivity ``2 w_max / n``.
Unlike accuracy it counts a model that ranks well on an imbalanced table even
when its calibrated probabilities never cross one half (for a calibrated
model the expected improvement is the variance of its probabilities, never
negative); unlike the Brier score its sensitivity is that of accuracy. A row's
term is bounded, never the unbounded losses of a regression, so the rule is
one for every budget: the model is kept when the released improvement exceeds
:data:`CLASSIFICATION_KEEP_SIGMAS` noise standard deviations, and otherwise the
prior is predicted. A useless model (no better than the prior) is then kept
with probability ``Phi(-0.5) = 0.31``; a model better by two noise standard
deviations with probability 0.93. When the noise standard deviation exceeds
:data:`NOISY_CHECK` (0.1 of the probability scale: tables of a few hundred
rows at epsilon = 1) the released value says little, and the models measured
there (wine and iris at epsilon = 1, 10 splits each) were mostly no better
than the prior, so the model must then clear :data:`NOISY_KEEP_SIGMAS`
standard deviations. The check's share of the budget grows on small tables
(:func:`classification_check_share`).
"""

import math
from dataclasses import dataclass

import numpy as np

from ..accounting import GaussianRelease
from ..mechanisms import budgeted_release, gaussian_mechanism
from ._calibration import ScoredRows
from ._rows import ChunkedRows

__all__ = ["CHECK_SHARE", "FitCheck", "fit_check_event", "private_fit_check", "private_classification_check",
           "classification_check_share", "CLASSIFICATION_KEEP_SIGMAS"]

# Share of the fit's zCDP (Gaussian) budget spent on the check: it costs the solver
# about 2% of its noise multiplier.
CHECK_SHARE = 0.04
# Residuals are clipped at RESIDUAL_CLIP target scales: a catastrophic model then loses
# about RESIDUAL_CLIP^2 - 1 target variances, far beyond the noise of the check.
RESIDUAL_CLIP = 2.0
# The model is replaced by the constant when the released improvement is below this
# many noise standard deviations under 0.
FALLBACK_SIGMAS = 1.0
# On a starved budget the model is kept only when the released improvement is above this
# many noise standard deviations.
STARVED_KEEP_SIGMAS = 2.0
# Classifiers keep the model when the released improvement over the prior exceeds this many noise
# standard deviations; when the noise itself exceeds NOISY_CHECK (tables of about 300 rows at
# epsilon = 1), NOISY_KEEP_SIGMAS.
CLASSIFICATION_KEEP_SIGMAS = 0.5
NOISY_CHECK = 0.1
NOISY_KEEP_SIGMAS = 2.0

def fit_check_event(mu):
    """The planned event of the check at Gaussian-DP budget ``mu`` (unit sensitivity)."""
    return GaussianRelease(1.0, 0.0 if math.isinf(mu) else 1.0 / mu)


@dataclass(frozen=True)
class FitCheck:
    """The released training-set improvement over a constant, in target variances.

    Attributes
    ----------
    improvement : float
        Released ``mean [min((y - c)^2, B^2) - min((y - yhat)^2, B^2)] / s_y^2``.
    noise_std : float
        Standard deviation of its noise (public).
    event : GaussianRelease
    starved : bool
        Whether the budget plan was starved (public): the model must then
        prove itself (see the module docstring).
    """

    improvement: float
    noise_std: float
    event: object
    starved: bool = False
    classification: bool = False

    @property
    def doubtful(self):
        """Whether the model is more likely worse than the constant than not, or replaced by it."""
        if self.classification:
            return self.fallback
        return self.noise_std > 0 and (self.improvement < 0.0 or self.fallback)

    @property
    def fallback(self):
        """Whether the model is replaced by the constant.

        Release below ``-FALLBACK_SIGMAS`` noise sds; on a starved budget, not
        above ``STARVED_KEEP_SIGMAS`` noise sds.
        """
        if self.noise_std == 0:
            return False
        if self.classification:
            sigmas = NOISY_KEEP_SIGMAS if self.noise_std > NOISY_CHECK else CLASSIFICATION_KEEP_SIGMAS
            return not self.improvement > sigmas * self.noise_std
        if self.starved:
            return not self.improvement > STARVED_KEEP_SIGMAS * self.noise_std
        return self.improvement < -FALLBACK_SIGMAS * self.noise_std

    def as_dict(self):
        return {"improvement": float(self.improvement), "noise_std": float(self.noise_std),
                "fallback": bool(self.fallback), "starved": bool(self.starved)}


def private_fit_check(X, y, coef, intercept, center, scale, mu, random_state=None, *, starved=False,
                      predictions=None, pure_epsilon=None):
    """Release the clipped training-set improvement of a model over the constant ``center``.

    Parameters
    ----------
    X : ndarray or sparse matrix of shape (n_samples, n_features)
    y : ndarray of shape (n_samples,)
    coef : ndarray of shape (n_features,)
    intercept : float
        The released model.
    center, scale : float
        The released target centre (the constant compared against) and scale (> 0).
    mu : float
        Gaussian-DP budget of the release (``inf``: no noise).
    random_state : None, int or Generator
    starved : bool, default=False
        Whether the fit's budget plan was starved (public; see :class:`FitCheck`).
    predictions : ndarray of shape (n_samples,) or None
        The released model's predictions on the training rows, for a model
        that is not linear (then ``X``, ``coef`` and ``intercept`` are not
        used). Each must depend on its own row only: the sensitivity argument
        is per row.
    pure_epsilon : float or None, default=None
        For a pure-DP fit: release with Laplace noise at this epsilon instead
        (``mu`` is then unused).

    Returns
    -------
    FitCheck

    Examples
    --------
    >>> import numpy as np
    >>> from skdp.linear_model._fit_check import private_fit_check
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(5000, 3))
    >>> y = X @ [1.0, 2.0, 0.0] + rng.normal(size=5000)
    >>> good = private_fit_check(X, y, np.array([1.0, 2.0, 0.0]), 0.0, 0.0, 2.4, mu=0.5, random_state=0)
    >>> bool(good.improvement > 0.5), good.fallback
    (True, False)
    >>> bad = private_fit_check(X, y, np.array([-30.0, 0.0, 0.0]), 0.0, 0.0, 2.4, mu=0.5, random_state=0)
    >>> bad.fallback
    True
    """
    bound = RESIDUAL_CLIP**2
    if isinstance(X, ChunkedRows) and predictions is None:  # rows on a cluster: a reduction of the same terms
        n = X.shape[0]
        value = float(X.sum(_chunk_improvement_sum, coef, intercept, center, scale)[0] / n)
    else:
        y = np.asarray(y, dtype=float)
        n = y.shape[0]
        if predictions is None:
            with np.errstate(over="ignore", invalid="ignore"):
                predictions = np.asarray(X @ np.asarray(coef, dtype=float)).ravel() + float(intercept)
        value = float(np.mean(improvement_terms(y, predictions, center, scale)))
    sensitivity = 2.0 * bound / n
    if pure_epsilon is not None:
        released, event = budgeted_release(value, ("pure", pure_epsilon), sensitivity, l1_sensitivity=sensitivity,
                                           random_state=random_state)
        scale = 0.0 if math.isinf(pure_epsilon) else sensitivity / pure_epsilon
        return FitCheck(float(released), math.sqrt(2.0) * scale, event, bool(starved))
    noise_std = 0.0 if math.isinf(mu) else sensitivity / mu
    released, event = gaussian_mechanism(value, sensitivity, noise_std, random_state=random_state)
    return FitCheck(float(released), noise_std, event, bool(starved))


def improvement_terms(y, predictions, center, scale):
    """Per-record terms of the check: clipped squared errors of the constant minus the model's.

    Each term lies in ``[-RESIDUAL_CLIP^2, RESIDUAL_CLIP^2]`` (target variances);
    a non-finite residual counts as clipped.
    """
    bound = RESIDUAL_CLIP**2
    scale = float(scale)
    with np.errstate(over="ignore", invalid="ignore"):
        predictions = np.asarray(predictions, dtype=float).ravel()
        model = ((y - predictions) / scale) ** 2
        constant = ((y - float(center)) / scale) ** 2
    model = np.where(np.isfinite(model), np.minimum(model, bound), bound)
    constant = np.where(np.isfinite(constant), np.minimum(constant, bound), bound)
    return constant - model


def _chunk_improvement_sum(X, y, coef, intercept, center, scale):
    """The sum of :func:`improvement_terms` over one chunk of rows (a pass on chunked rows)."""
    with np.errstate(over="ignore", invalid="ignore"):
        predictions = np.asarray(X @ np.asarray(coef, dtype=float)).ravel() + float(intercept)
    return np.array([np.sum(improvement_terms(np.asarray(y, dtype=float), predictions, center, scale))])


def _true_class_gain_sum(proba, labels, weights, prior):
    """``sum_i w_i (p_i[y_i] - prior[y_i])`` over the rows (non-finite rows count as uniform)."""
    k = proba.shape[1]
    proba = np.where(np.isfinite(proba).all(axis=1)[:, None], proba, 1.0 / k)
    return np.array([np.sum(weights * (proba[np.arange(proba.shape[0]), labels] - prior[labels]))])


def classification_check_share(n_samples, epsilon):
    """Share of a classifier's Gaussian budget (or of its epsilon) for the fit check (public rule).

    ``min(0.15, max(0.04, 40 / (epsilon n)))``: 0.04 from ``epsilon * n = 1000``,
    growing on smaller tables, where the model is most often no better than the
    prior and the check's noise (``2 / (n mu)``) is largest.

    Examples
    --------
    >>> from skdp.linear_model._fit_check import classification_check_share
    >>> classification_check_share(4000, 1.0), classification_check_share(112, 1.0)
    (0.04, 0.15)
    """
    if math.isinf(epsilon):
        return CHECK_SHARE
    return min(0.15, max(CHECK_SHARE, 40.0 / (epsilon * n_samples)))


def private_classification_check(proba, labels, prior, budget, random_state=None, *, weights=None,
                                 max_weight=1.0):
    """Release the mean probability of the true class under a classifier, less the prior's, on the training rows.

    Parameters
    ----------
    proba : ndarray of shape (n_samples, n_classes), or scored rows
        The released model's class probabilities on the training rows (rows
        that are not finite count as the uniform distribution: a per-row rule),
        or the rows with those probabilities, their labels and weights
        (:class:`~skdp.linear_model._calibration.ScoredRows`, or
        :class:`~skdp.linear_model._chunked_classifier.ChunkedScores` for rows on
        a cluster; ``labels`` and ``weights`` are then unused).
    labels : ndarray of int of shape (n_samples,)
    prior : ndarray of shape (n_classes,)
        The released class prior.
    budget : ("gaussian", mu) or ("pure", epsilon)
    random_state : None, int or Generator
    weights : ndarray of shape (n_samples,), optional
        The rows' class weights, at most ``max_weight``.
    max_weight : float, default=1.0

    Returns
    -------
    FitCheck

    Examples
    --------
    >>> import numpy as np
    >>> from skdp.linear_model._fit_check import private_classification_check
    >>> labels = np.array([0, 1] * 500)
    >>> perfect = np.eye(2)[labels]
    >>> check = private_classification_check(perfect, labels, np.array([0.5, 0.5]), ("gaussian", 0.5),
    ...                                      random_state=0)
    >>> round(check.noise_std, 4), round(check.improvement, 1), check.fallback
    (0.004, 0.5, False)
    """
    rows = proba if hasattr(proba, "n_samples") else ScoredRows(proba, labels, weights)
    n = rows.n_samples
    value = float(rows.sum(_true_class_gain_sum, np.asarray(prior, dtype=float))[0]) / n
    sensitivity = 2.0 * float(max_weight) / n
    kind, level = budget
    released, event = budgeted_release(value, budget, sensitivity, l1_sensitivity=sensitivity,
                                       random_state=random_state)
    # Standard deviation of the noise: sensitivity / mu, or a Laplace scale times sqrt(2).
    noise_std = 0.0 if math.isinf(level) else sensitivity / level * (1.0 if kind == "gaussian" else math.sqrt(2.0))
    return FitCheck(float(released), noise_std, event, classification=True)
