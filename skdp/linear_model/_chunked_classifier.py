"""The classifier's releases on rows held on a Dask cluster: each one per-chunk function and a sum on the driver.

:class:`~skdp.DPInterpolatingClassifier` (``algorithm`` "auto" -> "clipped_gd")
touches its rows only through sums of per-row terms and through private
quantiles. Each such step is one function of a block of rows, which the
in-memory fit applies to all its rows at once and the chunked fit to every
chunk of :class:`~skdp.linear_model._rows.ChunkedRows` (its ``y`` holds the
rows' class indices into the public ``classes``), adding the partial results
on the driver in chunk order. Every noise is drawn on the driver from the fit's
generator, in the in-memory order, so the chunked fit releases the in-memory
model and privacy event up to the order of floating-point summation: a sum
over rows has the same sensitivity however the rows are split into chunks.

Per-chunk functions of the classifier and what travels to the workers with
them (besides the chunk ``(X_c, labels_c)``): released values and public
constants only, never the fit's generator.

===================================  =============================================  ==================================
release                              per-chunk function                             shipped with it
===================================  =============================================  ==================================
class counts (the prior, "balanced"  :func:`~skdp.linear_model._calibration.        the public number of classes
weights)                             _class_counts` (a bincount)
the standardisation                  the standardiser's (:mod:`~skdp.linear_model.  as for the regressor (the labels
                                     _rows`)                                        are not read)
private row mean (centring)          :func:`~skdp.solvers.interpolation.problem.    the released ``Scaling``, the
                                     clipped_feature_sum_rows`                      public clip flag, the released
                                                                                    row bound
curvature                            ``Z^T diag(w) Z`` with ``w`` from              ``Scaling``, released centring
                                     :func:`~skdp.solvers.interpolation.problem.    mean, released row bound, class
                                     curvature_row_weights`                         weights (public or released)
each of the ``T`` steps              :func:`~skdp.solvers.interpolation.problem.    ``Scaling``, centring mean, the
                                     clipped_gradient_rows`                         output loss (public), the current
                                                                                    (released) ``W``, the clip, class
                                                                                    weights
score scale (a private quantile)     :func:`~skdp.linear_model._calibration.        the released model, class
                                     _magnitude_values` (counts over public bins,   weights, the quantile's jitter
                                     then the values near the target)               state (a SHA-256 child)
Platt histogram (two classes)        :func:`~skdp.linear_model._calibration.        the released model, scale, the
                                     _histogram_counts`                             public score clip and bin edges,
                                                                                    class weights
temperature bisection (more          :func:`~skdp.linear_model._calibration.        the released model, scale, the
classes), one pass per step          _temperature_term_sum`                         public clips, the step's
                                                                                    temperature (from released signs)
fit check                            :func:`~skdp.linear_model._fit_check.          the calibrated model, the
                                     _true_class_gain_sum`                          released prior, class weights
===================================  =============================================  ==================================

Passes of a default fit (``d <= 64`` columns, ``n d < 4e5``): ``T + 21`` for
two classes, ``T + 28`` for more (``T`` = ``max_iter``, 30 by default: 51 and
58), besides the finite-values-and-labels check before the reservation: 1 for
the class counts; 14 for the standardisation (its "columns" mode: 2 per
private quantile, 4 for the columns, all at once, and the 2 row-norm medians;
the magnitude check, when the plan runs it; the Gram matrix; the labels are not standardised); 1 for
the row mean (unless the scaling mode centres every column); 1 for the
curvature; ``T`` steps; 2 for the score scale; 1 for the histogram (8
bisection steps with more classes); 1 for the fit check. From ``n d = 4e5``
the column statistics release two halves of the columns (4 more quantiles, 8
more passes, as for the regressor).

Not built on chunked rows (refused before anything is spent): ``epsilon = inf``
(the exact minimiser and the exact calibration read every row's score),
``delta = 0``, the localization solvers, declared bounds, and ``classes=None``.
"""

from dataclasses import dataclass

import numpy as np

from ..mechanisms import row_norms
from ..solvers.interpolation import ClassificationProblem
from ..solvers.interpolation.problem import clipped_feature_sum_rows, clipped_gradient_rows, curvature_row_weights
from ._rows import ChunkedValues

__all__ = ["ChunkedSolverRows", "ChunkedClassificationProblem", "ChunkedScores", "linear_scores"]


def linear_scores(X, coef, intercept):
    """Decision values ``X @ coef.T + intercept`` (one column per output; raveled for one output)."""
    with np.errstate(over="ignore", invalid="ignore"):
        scores = np.asarray(X @ coef.T) + intercept
    return scores.ravel() if scores.shape[1] == 1 else scores


# -- the solver's rows, formed on every chunk ---------------------------------------------------
def _solver_rows(X, labels, scaling, clip, shift):
    """A chunk's solver rows (as the in-memory ``scaling.rows``, then centred by ``shift``) and labels."""
    Z = scaling.rows(X, clip=clip, implicit=False)
    if shift is not None:
        Z = Z.copy()
        Z[:, :-1] -= shift
    return Z, np.asarray(labels, dtype=int)


def _row_weights(labels, class_weights):
    return None if class_weights is None else class_weights[labels]


def _gradient_chunk(X, labels, scaling, clip, shift, outputs, W, threshold, class_weights):
    Z, labels = _solver_rows(X, labels, scaling, clip, shift)
    return clipped_gradient_rows(Z, labels, outputs, W, threshold, row_norms(Z), _row_weights(labels, class_weights))


def _curvature_gram_chunk(X, labels, scaling, clip, shift, bound, class_weights):
    Z, labels = _solver_rows(X, labels, scaling, clip, shift)
    weights = curvature_row_weights(row_norms(Z), bound, _row_weights(labels, class_weights))
    return Z.T @ (Z * weights[:, None])


def _feature_sum_chunk(X, labels, scaling, clip, shift, bound):
    Z, _ = _solver_rows(X, labels, scaling, clip, shift)
    return clipped_feature_sum_rows(Z, bound)


@dataclass(frozen=True)
class CurvatureWeights:
    """The curvature's row weights (clip factors to ``bound`` squared, times class weights), formed per chunk."""

    bound: float
    class_weights: object = None


class ChunkedSolverRows:
    """The classifier's solver rows ``scaling.rows(X)`` (minus a released centring ``shift``), never formed.

    A design for :func:`~skdp.mechanisms.top_eigenvalue` (``weighted_gram``);
    the other row queries are methods of :class:`ChunkedClassificationProblem`.
    """

    def __init__(self, rows, scaling, clip, shift=None):
        self.rows, self.scaling, self.clip, self.shift = rows, scaling, bool(clip), shift
        n, d = rows.shape
        self.shape = (n, d + int(scaling.fit_intercept))

    def shifted(self, mean):
        shift = np.asarray(mean, dtype=float) if self.shift is None else self.shift + mean
        return ChunkedSolverRows(self.rows, self.scaling, self.clip, shift)

    def sum(self, func, *args):
        return self.rows.sum(func, self.scaling, self.clip, self.shift, *args)

    def weighted_gram(self, weights=None):
        """The Gram matrix of the rows weighted by a :class:`CurvatureWeights` (one pass)."""
        if not isinstance(weights, CurvatureWeights):  # pragma: no cover - epsilon = inf is refused before spend
            raise NotImplementedError("The Gram matrix of chunked rows is formed with CurvatureWeights.")
        return self.sum(_curvature_gram_chunk, weights.bound, weights.class_weights)


@dataclass
class ChunkedClassificationProblem(ClassificationProblem):
    """A :class:`~skdp.solvers.interpolation.ClassificationProblem` whose rows stay on the cluster.

    ``X`` is a :class:`ChunkedSolverRows`, ``labels`` and ``weights`` are None
    (the labels are in the chunks; each row's weight is ``class_weights`` at its
    label). Offers what full-batch clipped descent asks: the clipped gradient
    sum, the curvature's row weights, the clipped feature sum, the centred rows;
    the other queries refuse (their solvers are refused before any spend).
    """

    class_weights: np.ndarray = None
    intercept_column: float = 1.0

    def clipped_gradient_sum(self, W, clip):
        return self.X.sum(_gradient_chunk, self.outputs, np.asarray(W, dtype=float), float(clip),
                          self.class_weights)

    def curvature_weights(self, bound):
        return CurvatureWeights(float(bound), self.class_weights)

    def clipped_feature_sum(self, bound):
        return self.X.sum(_feature_sum_chunk, float(bound))

    @property
    def intercept_value(self):
        return self.intercept_column

    def centred_rows(self, mean):
        return self.X.shifted(mean)

    def _unsupported(self, *args, **kwargs):  # pragma: no cover - refused before any spend
        raise NotImplementedError("This row query is not built for chunked rows (refused before any spend).")

    subset = row_norms = mean_loss_and_gradient = _unsupported


# -- the released model's scores, formed on every chunk -----------------------------------------
def _scored_chunk(X, labels, coef, intercept, class_weights, link, func, args):
    scores = linear_scores(X, coef, intercept)
    if link is not None:
        scores = link(scores)
    labels = np.asarray(labels, dtype=int)
    weights = np.ones(labels.shape[0]) if class_weights is None else class_weights[labels]
    return func(scores, labels, weights, *args)


class ChunkedScores:
    """A released model's scores (or ``link`` of them) on chunked rows, with labels and class weights.

    The chunked counterpart of :class:`~skdp.linear_model._calibration.ScoredRows`:
    ``sum(func, *args)`` adds ``func(scores_c, labels_c, weights_c, *args)`` over
    the chunks (one pass), and ``values(func)`` gives per-row values for a
    private quantile (:class:`~skdp.linear_model._rows.ChunkedValues`). Only the
    released model, the public ``link``, the class weights and ``args`` travel.
    """

    def __init__(self, rows, coef, intercept, class_weights=None, link=None):
        self.rows = rows
        self.coef = np.atleast_2d(np.asarray(coef, dtype=float))
        self.intercept = np.atleast_1d(np.asarray(intercept, dtype=float))
        self.class_weights = class_weights
        self.link = link
        self.n_samples = rows.shape[0]
        self.ndim = 1 if self.coef.shape[0] == 1 else 2  # the shape of the scores (before the link)

    def _args(self):
        return self.coef, self.intercept, self.class_weights, self.link

    def sum(self, func, *args):
        return self.rows.sum(_scored_chunk, *self._args(), func, args)

    def values(self, func, *args):
        return ChunkedValues(self.rows, 1, _scored_chunk, *self._args(), func, args)
