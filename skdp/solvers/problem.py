"""The problem every linear-model solver sees: clipped rows, labels, a loss, penalties, a ball.

A :class:`GLMProblem` holds rows already clipped to a public norm
(``row_bound``), an optional constant intercept column, labels, a loss from
:mod:`skdp.losses` (or a user callable), per-coordinate ridge and L1 weights and
the public radius of the coefficient ball. Its :meth:`GLMProblem.clipped_gradient_sum`
is the one place where solvers touch the data for gradients; tests wrap it to
answer every query on a neighbouring dataset too.
"""

from dataclasses import dataclass, field

import numpy as np

from ..mechanisms import clip_factors, row_norms
from .geometry import project_ball

__all__ = ["GLMProblem"]

_LABEL_LIMIT = 1e150


@dataclass
class GLMProblem:
    """A regularised linear-model ERM after preprocessing.

    Attributes
    ----------
    X : ndarray of shape (n_samples, n_coef)
        Rows with norm at most ``row_bound`` (enforced by the caller).
    y : ndarray of shape (n_samples,)
    loss : Loss or CallableLoss
    penalty : ndarray of shape (n_coef,)
        Ridge weights: the objective is
        ``mean loss + 0.5 * sum(penalty * w**2) + sum(l1 * |w|)``.
    radius : float
        Public radius of the coefficient ball.
    row_bound : float
        Public bound on every row norm.
    intercept : bool
        Whether the last column is the constant intercept column (never
        penalised by the solvers' own regularisation).
    unit : float
        Typical size of one coordinate of a row (1 for standardised data): a
        public or privately released scale that solvers may use for step sizes.
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

    def __post_init__(self):
        # Column-major storage makes both X @ w and X.T @ v (two per full-batch
        # step) two to three times faster for tall matrices.
        self.X = np.asfortranarray(self.X, dtype=float)
        # Labels beyond 1e150 in solver units are clipped (a fixed per-record map):
        # products such as loss' x row norm then stay finite for every record.
        self.y = np.clip(np.asarray(self.y, dtype=float), -_LABEL_LIMIT, _LABEL_LIMIT)
        self.penalty = np.asarray(self.penalty, dtype=float)
        if self.norms is None:
            self.norms = row_norms(self.X)
        if self.norms.size and self.norms.max() > self.row_bound * (1 + 1e-9):
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
        return GLMProblem(self.X[index], self.y[index], self.loss, self.penalty, self.radius,
                          self.row_bound, intercept=self.intercept, unit=self.unit, norms=self.norms[index],
                          active=self.active[index], l1=self.l1)

    def with_loss(self, loss):
        """The same problem with another loss."""
        return GLMProblem(self.X, self.y, loss, self.penalty, self.radius, self.row_bound,
                          intercept=self.intercept, unit=self.unit, norms=self.norms, active=self.active,
                          l1=self.l1)

    def lipschitz_bounds(self):
        """Per-row Lipschitz constant of the loss over the coefficient ball (built-in losses)."""
        return self.loss.lipschitz_bound(self.norms, self.y, self.radius)

    def truncated(self, threshold):
        """Algorithm 4's map: rows whose Lipschitz bound exceeds ``threshold`` become dummies."""
        return self.with_active(self.lipschitz_bounds() <= threshold)

    def with_active(self, active):
        """The same problem where inactive rows are dummies with zero loss (n unchanged)."""
        return GLMProblem(self.X, self.y, self.loss, self.penalty, self.radius, self.row_bound,
                          intercept=self.intercept, unit=self.unit, norms=self.norms,
                          active=np.asarray(active, bool), l1=self.l1)

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

    def prox(self, v, step):
        """Exact proximal map of ``step * sum(l1 * |w|)`` plus the indicator of the coefficient ball.

        Soft thresholding followed by the radial projection: for an l2 ball
        centred at 0 this composition is the exact prox of the sum (KKT).
        """
        if self.has_l1:
            v = np.sign(v) * np.maximum(np.abs(v) - step * self.l1, 0.0)
        return project_ball(v, self.radius)

    def objective(self, w):
        """The regularised empirical objective at ``w`` (not private; for tests and diagnostics)."""
        values = np.where(self.active, self.loss.value(self.X @ w, self.y), 0.0)
        return float(np.mean(values) + 0.5 * np.sum(self.penalty * w * w) + np.sum(self.l1 * np.abs(w)))

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

    def clipped_gradient_sum(self, w, clip, rows=None):
        """Sum of per-sample loss gradients at ``w``, each clipped to norm ``clip``.

        The replace-one L2 sensitivity of the result is ``2 * clip``.
        """
        X = self.X if rows is None else self.X[rows]
        norms = self.norms if rows is None else self.norms[rows]
        deriv = self.derivatives(w, rows)
        factors = clip_factors(np.abs(deriv) * norms, clip)
        return X.T @ (deriv * factors)
