"""The problem every linear-model solver sees: clipped rows, labels, a loss, penalties, a ball.

A :class:`GLMProblem` holds rows already clipped to a public norm
(``row_bound``), an optional constant intercept column, labels, a loss from
:mod:`skdp.losses` (or a user callable), per-coordinate ridge and L1 weights and
the public radius of the coefficient ball. Its :meth:`GLMProblem.clipped_gradient_sum`
is the one place where solvers touch the data for gradients; tests wrap it to
answer every query on a neighbouring dataset too.
"""

from dataclasses import dataclass, field, replace

import numpy as np

from ..losses import RegressionLoss
from ..mechanisms import clip_factors, clipped_derivatives, row_norms
from .geometry import project_ball

__all__ = ["GLMProblem"]

_LABEL_LIMIT = 1e150


@dataclass
class GLMProblem:
    """A regularised linear-model ERM after preprocessing.

    Attributes
    ----------
    X : ndarray of shape (n_samples, n_coef) or LinearDesign
        The rows (a :class:`~skdp.solvers.design.LinearDesign` keeps a sparse
        design implicit); with ``rows_clipped`` their norms are at most
        ``row_bound`` (enforced by the caller).
    y : ndarray of shape (n_samples,)
    loss : Loss or CallableLoss
    penalty : ndarray of shape (n_coef,)
        Ridge weights: the objective is
        ``mean loss + 0.5 * sum(penalty * w**2) + sum(l1 * |w|)``.
    radius : float
        Public radius of the coefficient ball.
    row_bound : float
        Public or released bound on every row norm when ``rows_clipped``;
        otherwise a released typical scale of the rows (solvers use it for
        public ranges and clip it themselves where a release needs a bound).
    intercept : bool
        Whether the last column is the constant intercept column (never
        penalised by the solvers' own regularisation).
    unit : float
        Typical size of one coordinate of a row (1 for standardised data): a
        public or privately released scale that solvers may use for step sizes.
    rows_clipped : bool
        Whether every row norm is at most ``row_bound``.
    penalty_matrix : ndarray of shape (n_coef, n_coef) or None
        A ridge given as a matrix (joint whitening): the objective then has
        ``0.5 w^T penalty_matrix w`` instead of the ``penalty`` term (whose
        entries are its diagonal, for solvers' step sizes).
    """

    X: np.ndarray
    y: np.ndarray
    loss: object
    penalty: np.ndarray
    radius: float
    row_bound: float
    intercept: bool = False
    unit: float = 1.0
    norms: np.ndarray = field(default=None, repr=False)
    active: np.ndarray = field(default=None, repr=False)
    l1: np.ndarray = field(default=None)
    rows_clipped: bool = True
    penalty_matrix: np.ndarray = field(default=None, repr=False)

    def __post_init__(self):
        # Column-major storage makes both X @ w and X.T @ v (two per full-batch
        # step) two to three times faster for tall matrices.
        if isinstance(self.X, np.ndarray) or not hasattr(self.X, "rmatvec"):
            self.X = np.asfortranarray(self.X, dtype=float)
        # Labels beyond 1e150 in solver units are clipped (a fixed per-record map):
        # products such as loss' x row norm then stay finite for every record.
        self.y = np.clip(np.asarray(self.y, dtype=float), -_LABEL_LIMIT, _LABEL_LIMIT)
        self.penalty = np.asarray(self.penalty, dtype=float)
        if self.norms is None:
            self.norms = self.X.row_norms() if hasattr(self.X, "row_norms") else row_norms(self.X)
        if self.rows_clipped and self.norms.size and self.norms.max() > self.row_bound * (1 + 1e-9):
            raise ValueError("GLMProblem rows must be clipped to row_bound before solving.")
        if self.active is None:
            self.active = np.ones(self.X.shape[0], dtype=bool)
        # L1 weights of the (non-smooth, data-independent) penalty: solvers handle
        # it by exact proximal steps after the noise, never through the gradient oracle.
        self.l1 = np.zeros(self.X.shape[1]) if self.l1 is None else np.asarray(self.l1, dtype=float)

    @property
    def n_samples(self):
        return self.X.shape[0]

    @property
    def n_coef(self):
        return self.X.shape[1]

    def subset(self, index):
        """The same problem on a subset of rows (a disjoint block)."""
        return replace(self, X=self.X[index], y=self.y[index], norms=self.norms[index],
                       active=self.active[index])

    def with_loss(self, loss):
        """The same problem with another loss."""
        return replace(self, loss=loss)

    def lipschitz_bounds(self, center=None, radius=None):
        """Per-row Lipschitz constant of the loss over the coefficient ball (built-in losses).

        With ``center`` and ``radius``: the bound over ``Ball(0, R) ∩ Ball(center,
        radius)``. For a loss of the residual the prediction ranges over
        ``x.center +- radius ||x||`` there, so the bound is ``||x||
        derivative_bound(radius ||x||, y - x.center)``; the smaller of that and the
        bound over ``Ball(0, R)`` is returned (other losses: the latter). Every
        value depends on its own row only (a per-record quantity).
        """
        bounds = self.loss.lipschitz_bound(self.norms, self.y, self.radius)
        if center is not None and isinstance(self.loss, RegressionLoss):
            residual_at_center = self.y - self.X @ center
            local = self.loss.derivative_bound(float(radius) * self.norms, residual_at_center) * self.norms
            bounds = np.minimum(bounds, local)
        return bounds

    def truncated(self, threshold, center=None, radius=None):
        """Algorithm 4's map: rows whose Lipschitz bound exceeds ``threshold`` become dummies.

        The bound is over the coefficient ball, or over ``Ball(0, R) ∩ Ball(center,
        radius)`` when those are given (:meth:`lipschitz_bounds`).
        """
        return self.with_active(self.lipschitz_bounds(center, radius) <= threshold)

    def with_active(self, active):
        """The same problem where inactive rows are dummies with zero loss (n unchanged)."""
        return replace(self, active=np.asarray(active, bool))

    def loss_smoothness_or_one(self):
        """The loss's smoothness in the prediction (1 for non-smooth losses, for step sizes)."""
        value = float(getattr(self.loss, "smoothness", np.inf))
        return value if np.isfinite(value) else 1.0

    def uniform_smoothness(self):
        """Public bound on every row's smoothness in the coefficients, ridge included.

        ``loss.smoothness * row_bound^2 + max(penalty)``: it rests on the public row
        clipping only, never on the data. The privacy conditions of the one-pass
        solvers (non-expansive steps) are stated in terms of it.
        """
        return float(self.loss.smoothness) * self.row_bound**2 + float(np.max(self.penalty, initial=0.0))

    @property
    def has_l1(self):
        return bool(np.any(self.l1 > 0))

    def prox(self, v, step, project=True):
        """Exact proximal map of ``step * sum(l1 * |w|)`` plus the indicator of the coefficient ball.

        Soft thresholding followed by the radial projection: for an l2 ball
        centred at 0 this composition is the exact prox of the sum (KKT).
        ``project=False`` leaves out the ball.
        """
        if self.has_l1:
            v = np.sign(v) * np.maximum(np.abs(v) - step * self.l1, 0.0)
        return project_ball(v, self.radius) if project else v

    def objective(self, w):
        """The regularised empirical objective at ``w`` (not private; for tests and diagnostics)."""
        values = np.where(self.active, self.loss.value(self.X @ w, self.y), 0.0)
        ridge = (0.5 * w @ self.penalty_matrix @ w if self.penalty_matrix is not None
                 else 0.5 * np.sum(self.penalty * w * w))
        return float(np.mean(values) + ridge + np.sum(self.l1 * np.abs(w)))

    def free_coordinates(self):
        """1 for coefficients of features, 0 for the intercept."""
        mask = np.ones(self.n_coef)
        if self.intercept:
            mask[-1] = 0.0
        return mask

    def derivatives(self, w, rows=None):
        """Derivative of every (active) row's loss in its prediction; 0 for dummies."""
        X = self.X if rows is None else self.X[rows]
        y = self.y if rows is None else self.y[rows]
        active = self.active if rows is None else self.active[rows]
        return np.where(active, self.loss.derivative(X @ w, y), 0.0)

    def gradient_norms(self, w, rows=None):
        """Norms of the per-sample gradients at ``w``, ``|loss'(x_i w, y_i)| ||x_i||`` (never released)."""
        norms = self.norms if rows is None else self.norms[rows]
        return np.abs(self.derivatives(w, rows)) * norms

    def gram_clip_weights(self, bound):
        """Row weights that clip every row to norm ``bound`` in a Gram matrix: the squared clip factors."""
        return clip_factors(self.norms, bound) ** 2

    def absolute_residuals(self, w):
        """Absolute residuals ``|x_i w - y_i|`` of every row at ``w`` (never released)."""
        return np.abs(self.X @ w - self.y)

    def clipped_gradient_sum(self, w, clip, rows=None):
        """Sum of per-sample loss gradients at ``w``, each clipped to norm ``clip``.

        The replace-one L2 sensitivity of the result is ``2 * clip``.
        """
        X = self.X if rows is None else self.X[rows]
        norms = self.norms if rows is None else self.norms[rows]
        deriv = self.derivatives(w, rows)
        return X.T @ clipped_derivatives(deriv, norms, clip)
