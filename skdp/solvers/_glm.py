"""Shared pieces of the linear-model solvers: the problem container and geometry.

A :class:`GLMProblem` is what every solver sees: rows already clipped to a
public norm (``row_bound``), an optional constant intercept column, labels, a
loss from :mod:`skdp.losses` (or a user callable), per-coordinate ridge
weights and the public radius of the coefficient ball. Solvers are pure
functions of a problem, a privacy budget and a random generator; they return a
:class:`SolverResult` with the exact privacy event of what they released and a
record of their (public) schedule.
"""

from dataclasses import dataclass, field

import numpy as np

from ..losses import HuberLoss, SquaredLoss
from ..mechanisms import clip_factors, row_norms

_LABEL_LIMIT = 1e150
# Private clip thresholds are searched in [1e-6, 10] x row_bound: per-sample gradient
# norms are |loss'| x ||x|| with ||x|| <= row_bound, and a short public range keeps a
# starved quantile from landing absurdly far from the data.
CLIP_RANGE = (1e-6, 10.0)

__all__ = ["GLMProblem", "SolverResult", "CallableLoss", "project_ball", "project_two_balls",
           "aggregate_points", "public_derivative_bound", "CLIP_RANGE"]


def public_derivative_bound(loss):
    """Public bound on ``|loss'|`` for losses whose bound does not depend on the data, else None.

    Absolute and quantile losses have one (their gradients are then clipped at
    ``bound * row_bound``, which never changes a gradient). Squared and Huber
    losses return None: the squared loss has no bound, and for the Huber loss
    a clip at a low private quantile of the gradient norms is much less noisy
    than ``delta * row_bound`` (its automatic delta is data-dependent anyway).
    Callables return None.
    """
    if isinstance(loss, (SquaredLoss, HuberLoss)) or not hasattr(loss, "derivative_bound"):
        return None
    value = float(np.max(loss.derivative_bound(np.array([np.inf]), np.array([0.0]))))
    return value if np.isfinite(value) else None


class CallableLoss:
    """Adapter for a user loss ``f(prediction, y) -> (values, derivatives)``.

    Contract: ``f`` is a pure function of its arguments that maps arrays of
    predictions and labels to arrays of per-row loss values and derivatives in
    the prediction. Privacy rests on each row's value and derivative depending
    on that row only, so skdp enforces it: the callable is evaluated on one row
    at a time (arrays of length 1). A callable that couples rows (residuals
    centred by the batch mean, say) then sees a single row and cannot mix
    records; a callable that keeps state across calls is outside the contract.

    Nothing else is assumed for privacy: every per-sample gradient is clipped by
    the solver, and a record whose derivative is not a finite number, or on which
    the callable raises, gets derivative 0 (a fixed per-record rule), so that
    neither a NaN nor an exception can reveal a record. The price is one Python
    call per row and step: callable losses are much slower than built-in ones.
    """

    smoothness = np.inf
    is_classification = False

    def __init__(self, fn):
        self.fn = fn

    def _evaluate(self, z, y):
        z = np.asarray(z, dtype=float)
        y = np.asarray(y, dtype=float)
        shape = z.shape
        z, y = z.ravel(), np.broadcast_to(y, shape).ravel()
        values = np.full(z.size, np.nan)
        deriv = np.zeros(z.size)
        fn = self.fn
        for i in range(z.size):
            try:
                v, g = fn(z[i:i + 1].copy(), y[i:i + 1].copy())
                v = np.asarray(v, dtype=float).reshape(-1)
                g = np.asarray(g, dtype=float).reshape(-1)
                if v.size == 1 and g.size == 1:
                    values[i], deriv[i] = v[0], g[0]
            except Exception:  # noqa: BLE001 - any failure maps to the fixed per-record rule
                pass
        deriv = np.where(np.isfinite(deriv), deriv, 0.0)
        return values.reshape(shape), deriv.reshape(shape)

    def derivative(self, z, y):
        return self._evaluate(z, y)[1]

    def value(self, z, y):
        return self._evaluate(z, y)[0]

    def __repr__(self):
        return f"CallableLoss({getattr(self.fn, '__name__', self.fn)!r})"


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


@dataclass
class SolverResult:
    """Coefficients, the privacy event of everything released, and the public schedule."""

    coef: np.ndarray
    event: object
    schedule: dict


def project_ball(v, radius, center=None):
    """Euclidean projection onto the ball of ``radius`` around ``center`` (exact)."""
    c = 0.0 if center is None else center
    diff = v - c
    norm = float(np.linalg.norm(diff))
    if norm <= radius:
        return v
    return c + diff * (radius / norm)


def project_two_balls(v, r1, c2, r2):
    """Exact projection onto ``Ball(0, r1) ∩ Ball(c2, r2)`` (assumed non-empty).

    If ``v`` is in both balls it is returned; else the projection onto one ball
    is returned when it lies in the other; else both constraints are active and
    ``v`` is projected onto the sphere where the two boundary spheres meet.
    """
    in1 = np.linalg.norm(v) <= r1
    in2 = np.linalg.norm(v - c2) <= r2
    if in1 and in2:
        return v
    p1 = project_ball(v, r1)
    if np.linalg.norm(p1 - c2) <= r2 * (1 + 1e-12):
        return p1
    p2 = project_ball(v, r2, c2)
    if np.linalg.norm(p2) <= r1 * (1 + 1e-12):
        return p2
    dist = float(np.linalg.norm(c2))
    if dist == 0.0:
        return project_ball(v, min(r1, r2))
    u = c2 / dist
    a = (dist**2 + r1**2 - r2**2) / (2 * dist)
    h = np.sqrt(max(r1**2 - a**2, 0.0))
    m = a * u
    w = v - m - ((v - m) @ u) * u
    norm_w = float(np.linalg.norm(w))
    if norm_w == 0.0:
        # Any point of the intersection circle is a projection; pick a fixed one.
        basis = np.zeros_like(v)
        basis[int(np.argmin(np.abs(u)))] = 1.0
        w = basis - (basis @ u) * u
        norm_w = float(np.linalg.norm(w))
    return m + h * w / norm_w


def aggregate_points(points):
    """Radius-free geometric aggregation (paper 000 notes, P6).

    For every point, the distance to its ``ceil(0.51 J)``-th nearest point (itself
    included) is computed; the point with the smallest such radius is returned.
    If at least 0.51 J of the points lie within R of some z, the output is within
    3R of z, without knowing R. Pure post-processing of private points.
    """
    P = np.asarray(points, dtype=float)
    J = P.shape[0]
    k = int(np.ceil(0.51 * J))
    dist = np.linalg.norm(P[:, None, :] - P[None, :, :], axis=2)
    radius = np.sort(dist, axis=1)[:, k - 1]
    return P[int(np.argmin(radius))].copy()
