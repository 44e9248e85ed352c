"""The classification problem the interpolation-family solvers see, and its multi-output losses.

A model is a coefficient matrix ``W`` of shape ``(k, p)`` (``k = 1`` for two
classes) acting on rows ``a`` of length ``p`` (the intercept column last):
the scores are ``z = W a``. The per-row loss is ``g(z; label)`` and its
gradient in ``W`` is ``g'(z) a^T``, of Frobenius norm ``||g'(z)|| ||a||``.

Each output loss also gives its **Lipschitzian extension** with a bound ``L``
in ``W`` (Asi, Chadha, Cheng and Duchi, Definition 2.5): the largest convex
``L``-Lipschitz minorant that agrees with the loss wherever its gradient is at
most ``L``. For these linear-prediction losses it is computed per row from the
scores alone (``M = L / ||a||`` bounds the derivative in ``z``):

* :class:`OneVsRestOutputs` (margin losses, one output per class or a single
  output for two classes): each output gets the one-dimensional extension with
  slope ``M / sqrt(k)``, so the sum is convex and its gradient norm is at most
  ``||a|| sqrt(k) M / sqrt(k) = L``;
* :class:`JointSquaredOutputs` (``||z - e_y||^2 / 2``): the extension is the
  vector Huber function, whose gradient is ``z - e_y`` clipped to norm ``M``,
  i.e. per-row gradient clipping in Frobenius norm;
* :class:`SoftmaxOutputs` (multinomial logistic): no extension is given; only
  gradient-clipping solvers (whose privacy rests on the clip, not on
  convexity) accept it.

The extension keeps every common minimiser of separable data (where all
gradients vanish), and makes every row's loss ``L``-Lipschitz for *any* input,
which is what the output-perturbation sensitivity of the localization solvers
needs.
"""

import math
from dataclasses import dataclass, field

import numpy as np
from scipy import special

from ...losses import LogisticLoss
from ...mechanisms import clipped_sum, row_norms

__all__ = ["ClassificationProblem", "OneVsRestOutputs", "JointSquaredOutputs", "SoftmaxOutputs",
           "LOGISTIC_CLIP_SCALE", "clipped_gradient_rows", "curvature_row_weights", "clipped_feature_sum_rows"]

# Clip of clipped descent for the binary (and one-vs-rest) logistic loss, as a multiple of the hinge
# losses' clip (see OneVsRestOutputs.gradient_scale).
LOGISTIC_CLIP_SCALE = 0.3


class OneVsRestOutputs:
    """A margin loss on each output: ``sum_k phi(s_k z_k)``, ``s_k = +1`` for the row's class, else ``-1``.

    With two classes there is one output and ``s = +1`` for the second class.

    Parameters
    ----------
    loss : MarginLoss
    n_classes : int
    """

    def __init__(self, loss, n_classes):
        self.loss = loss
        self.n_classes = int(n_classes)
        self.n_outputs = 1 if self.n_classes == 2 else self.n_classes
        self.smoothness = float(loss.smoothness)
        # Curvature at W = 0 (the step size of clipped descent) and the size of the per-row
        # derivative there relative to the hinge losses' (the clip's scale): the logistic loss
        # has phi''(0) = 1/4 = its smoothness, but |phi'(0)| = 1/2 against 2 for the squared hinge.
        self.step_curvature = self.smoothness
        logistic = isinstance(loss, LogisticLoss)
        self.gradient_scale = LOGISTIC_CLIP_SCALE if logistic else 1.0
        # Clipped descent's privacy ridge (ClippedGD.shrinkage) helps the hinge losses and not the
        # logistic ones (see SoftmaxOutputs.privacy_ridge).
        self.privacy_ridge = 0.0 if logistic else 1.0
        # A common minimiser exists on separable data unless the loss never reaches 0.
        self.has_extension = not isinstance(loss, LogisticLoss)

    def signs(self, labels):
        if self.n_outputs == 1:
            return np.where(labels == 1, 1.0, -1.0)[:, None]
        S = -np.ones((labels.shape[0], self.n_outputs))
        S[np.arange(labels.shape[0]), labels] = 1.0
        return S

    def value_and_gradient(self, Z, labels, slope=None):
        """Per-row values and ``d loss / d Z`` (extended with per-row slope ``slope`` when given)."""
        S = self.signs(labels)
        if slope is None:
            return self.loss.value(Z, S).sum(axis=1), self.loss.derivative(Z, S)
        M = (np.asarray(slope, dtype=float) / math.sqrt(self.n_outputs))[:, None]
        return self.loss.extended_value(Z, S, M).sum(axis=1), self.loss.extended_derivative(Z, S, M)


class JointSquaredOutputs:
    """The one-hot squared loss ``||z - e_y||^2 / 2`` on ``k`` outputs (one per class).

    Parameters
    ----------
    n_classes : int
    """

    smoothness = 1.0
    step_curvature = 1.0
    gradient_scale = 1.0
    privacy_ridge = 1.0
    has_extension = True

    def __init__(self, n_classes):
        self.n_classes = self.n_outputs = int(n_classes)

    def value_and_gradient(self, Z, labels, slope=None):
        R = np.array(Z, dtype=float)
        R[np.arange(R.shape[0]), labels] -= 1.0
        norms = np.linalg.norm(R, axis=1)
        if slope is None:
            return 0.5 * norms**2, R
        M = np.asarray(slope, dtype=float)
        inside = norms <= M
        with np.errstate(invalid="ignore", divide="ignore"):
            factor = np.where(inside, 1.0, M / norms)
            value = np.where(inside, 0.5 * norms**2, M * norms - 0.5 * M**2)
        return value, R * factor[:, None]


class SoftmaxOutputs:
    """Multinomial logistic loss ``logsumexp(z) - z_y`` (no extension: for clipping solvers only)."""

    smoothness = 0.5
    has_extension = False
    gradient_scale = 1.0
    # Clipped descent's privacy ridge is off: with the step at the curvature of W = 0, digits at
    # epsilon = 1 reached 0.79 without it, 0.63 with a fifth of it and 0.43 with it (4 splits);
    # for the binary logistic loss it made no difference beyond seed noise.
    privacy_ridge = 0.0

    def __init__(self, n_classes):
        self.n_classes = self.n_outputs = int(n_classes)
        # The Hessian at W = 0 is (I - 11^T / k) / k (times the rows' second moment): its top
        # eigenvalue 1 / k, not the worst case 1 / 2, sets the step of clipped descent.
        self.step_curvature = 1.0 / self.n_classes

    def value_and_gradient(self, Z, labels, slope=None):
        if slope is not None:
            raise ValueError("The softmax loss has no Lipschitzian extension here; clip its gradients instead.")
        lse = special.logsumexp(Z, axis=1)
        P = np.exp(Z - lse[:, None])
        value = lse - Z[np.arange(Z.shape[0]), labels]
        P[np.arange(Z.shape[0]), labels] -= 1.0
        return value, P


@dataclass
class ClassificationProblem:
    """A linear classification ERM after preprocessing.

    Attributes
    ----------
    X : ndarray of shape (n_samples, n_coef)
        The rows in solver units (intercept column last when ``intercept``).
        Their norms need not be bounded: every solver of the family bounds the
        influence of a row through the gradient clip or the extension.
    labels : ndarray of int of shape (n_samples,)
        Class indices into the public list of classes.
    outputs : OneVsRestOutputs, JointSquaredOutputs or SoftmaxOutputs
    penalty : ndarray of shape (n_coef,) or (n_coef, n_coef)
        Ridge weights (0 on the intercept): the objective adds
        ``0.5 * sum_k sum_j penalty_j W_kj^2``, or ``0.5 * trace(W P W^T)`` for a
        matrix ``P`` (joint whitening).
    radius : float
        Public radius (Frobenius norm) of the coefficient ball.
    row_scale : float
        A released (or public) typical row norm, for step sizes and clip levels.
    intercept : bool
    rows_clipped : bool
        Whether every row norm is at most ``row_bound``.
    row_bound : float
        Released or public bound of the row norms when ``rows_clipped``.
    weights : ndarray of shape (n_samples,) or None
        Per-row weights (the class weights of the rows' labels): the objective
        is ``mean_i weights_i loss_i``. None: every weight is 1.
    max_weight : float
        A public bound of the weights (the largest class weight, never a
        maximum over the rows): it multiplies every sensitivity.
    """

    X: np.ndarray
    labels: np.ndarray
    outputs: object
    penalty: np.ndarray
    radius: float
    row_scale: float
    intercept: bool = True
    rows_clipped: bool = False
    row_bound: float = math.inf
    weights: np.ndarray = None
    max_weight: float = 1.0
    # The row norms, computed once (every clipped-gradient step needs them).
    _norms: np.ndarray = field(default=None, init=False, repr=False, compare=False)

    @property
    def n_samples(self):
        return self.X.shape[0]

    @property
    def n_coef(self):
        return self.X.shape[1]

    @property
    def n_outputs(self):
        return self.outputs.n_outputs

    def subset(self, index):
        """The problem on the rows ``index`` (a public selection)."""
        return ClassificationProblem(self.X[index], self.labels[index], self.outputs, self.penalty, self.radius,
                                     self.row_scale, self.intercept, self.rows_clipped, self.row_bound,
                                     None if self.weights is None else self.weights[index], self.max_weight)

    def penalty_value_and_gradient(self, W):
        """The ridge term and its gradient (``W * penalty`` or ``W @ P``)."""
        P = self.penalty
        G = W @ P if P.ndim == 2 else W * P
        return 0.5 * float((W * G).sum()), G

    @property
    def max_penalty(self):
        P = self.penalty
        return float(np.linalg.eigvalsh(P)[-1]) if P.ndim == 2 else float(np.max(P, initial=0.0))

    def row_norms(self):
        if self._norms is None:
            self._norms = row_norms(self.X)
        return self._norms

    def mean_loss_and_gradient(self, W, slope=None):
        """Mean per-row (extended) loss and its gradient in ``W`` (shape ``(k, p)``), penalty excluded."""
        Z = self.X @ W.T
        values, G = self.outputs.value_and_gradient(Z, self.labels, slope)
        n = self.X.shape[0]
        if self.weights is not None:
            values, G = values * self.weights, G * self.weights[:, None]
        return float(values.sum()) / n, (G.T @ self.X) / n

    def clipped_gradient_sum(self, W, clip):
        """Sum of the per-row gradients, each clipped to Frobenius norm ``clip`` then weighted.

        Its sensitivity is ``2 clip max_weight``: a replaced row's clipped,
        weighted gradient has norm at most ``clip max_weight`` on both datasets.
        """
        return clipped_gradient_rows(self.X, self.labels, self.outputs, W, clip, self.row_norms(), self.weights)

    def curvature_weights(self, bound):
        """Row weights of the curvature's Gram matrix: squared factors clipping rows to ``bound``, times the weights."""
        return curvature_row_weights(self.row_norms(), bound, self.weights)

    def clipped_feature_sum(self, bound):
        """Sum of the feature parts of the rows (the intercept column excluded), each clipped to norm ``bound``."""
        return clipped_feature_sum_rows(self.X, bound)

    @property
    def intercept_value(self):
        """The value of the intercept column (the last; 1 for a problem without rows)."""
        return float(self.X[0, -1]) if self.X.shape[0] else 1.0

    def centred_rows(self, mean):
        """The rows with ``mean`` subtracted from their feature parts (a new array)."""
        X = self.X.copy()
        X[:, :-1] -= mean
        return X


# -- the per-row sums of the solvers, one function for rows in memory and for one chunk of rows ---------
def clipped_gradient_rows(X, labels, outputs, W, clip, norms, weights=None):
    """``sum_i weights_i clip(g_i)`` over the rows ``X`` (solver units) with their ``labels`` and row ``norms``.

    ``g_i`` is the row's gradient of the output loss in ``W``, clipped to
    Frobenius norm ``clip``. A row whose gradient is not finite (overflowing
    scores) contributes nothing: a per-row map, so every row's contribution
    still has norm at most ``clip`` (times its weight).
    """
    Z = X @ W.T
    _, G = outputs.value_and_gradient(Z, labels)
    G = np.where(np.isfinite(G).all(axis=1)[:, None], G, 0.0)
    norms = np.linalg.norm(G, axis=1) * norms
    with np.errstate(divide="ignore", invalid="ignore"):
        factor = np.where(norms > clip, clip / norms, 1.0)
    factor = np.where(np.isfinite(factor), factor, 0.0)
    if weights is not None:
        factor = factor * weights
    return (G * factor[:, None]).T @ X


def curvature_row_weights(norms, bound, weights=None):
    """``min(1, bound / norm)^2`` per row (the squared factor clipping the row to ``bound``), times ``weights``."""
    with np.errstate(divide="ignore", invalid="ignore"):
        factors = np.where(norms > bound, (bound / norms) ** 2, 1.0)
    if weights is not None:
        factors = factors * weights
    return factors


def clipped_feature_sum_rows(X, bound):
    """Sum of the rows' feature parts (every column but the last), each clipped to L2 norm ``bound``."""
    return clipped_sum(X[:, : X.shape[1] - 1], bound)
