"""Private standardisation of X and y for the linear-model solvers.

:class:`PrivateStandardiser` is the single source of both what standardisation
will release (:meth:`PrivateStandardiser.planned_event`, computed from public
inputs before the data are read) and what it releases
(:meth:`PrivateStandardiser.fit`): both walk the same list of steps, and
:meth:`~PrivateStandardiser.fit` refuses to return scales whose release cost more
than its step planned. The result, :class:`Scaling`, is public (every number in
it was released): it maps raw rows and labels to the solver's units (centre,
scale, clip rows to a public or released norm, append the intercept column) and
solver coefficients back to the original units.

Modes (what is released, per quantile at the plan's ``quantile_epsilon``):

* ``"robust"`` — a robust centre and scale of every feature and of the target
  (:func:`skdp.mechanisms.private_robust_scaling`: three quantiles per column
  with an intercept, one without); rows are clipped to the public norm
  ``sqrt(d) + 3``;
* ``"pooled"`` — one scale shared by all features
  (:func:`skdp.mechanisms.private_pooled_scale`), a robust target, and a private
  median of the row norms: rows are clipped to twice that median;
* ``"target"`` — only the target and the row-norm median;
* ``"minimal"`` — one pooled feature scale and an uncentred label scale (the
  intercept absorbs offsets); rows clipped to ``sqrt(d) + 3``;
* ``"none"`` — the data as they are; rows clipped to ``sqrt(d) + 3``.
"""

import math
from dataclasses import dataclass

import numpy as np

from ..accounting import ExponentialMechanismRelease, Sequential
from ..mechanisms import (
    clip_rows,
    pooled_scaling_event,
    private_pooled_scale,
    private_quantile,
    private_robust_scaling,
    robust_scaling_event,
    row_norms,
)

__all__ = ["PrivateStandardiser", "Scaling", "MODES"]

MODES = ("robust", "pooled", "target", "minimal", "none")
# Radius of the coefficient ball in standardised units. With standardised
# features and target, ||w|| is about sqrt(explained variance) <= ~1.5 unless
# features are strongly collinear; the ball only bounds noise excursions.
COEF_RADIUS = 5.0
_JITTER = 0.05
_ROW_NORM_RANGE = (1e-12, 1e12)


@dataclass(frozen=True)
class Scaling:
    """Public maps between the original units and the solver's units (every number was released).

    Attributes
    ----------
    mode : str
    feature_center, feature_scale : ndarray of shape (n_features,)
    target_center, target_scale : float
    row_bound : float
        Rows are clipped to this norm after centring and scaling.
    unit : float
        Typical size of one standardised coordinate (1 for column-wise scaling).
    fit_intercept : bool
    quantile_epsilon : float
    """

    mode: str
    feature_center: np.ndarray
    feature_scale: np.ndarray
    target_center: float
    target_scale: float
    row_bound: float
    unit: float
    fit_intercept: bool
    quantile_epsilon: float

    @property
    def intercept_value(self):
        """The value of the intercept column: the typical coordinate size, so it is not favoured."""
        return self.unit

    @property
    def coef_row_bound(self):
        """Bound on the norm of a solver row (the intercept column included)."""
        return math.hypot(self.row_bound, self.intercept_value) if self.fit_intercept else self.row_bound

    @property
    def radius(self):
        """Radius of the coefficient ball in solver units."""
        return COEF_RADIUS / self.unit

    def transform(self, X):
        """Solver rows: centred, scaled, clipped to ``row_bound``, intercept column appended."""
        Xs = clip_rows((X - self.feature_center) / self.feature_scale, self.row_bound)
        if self.fit_intercept:
            Xs = np.hstack([Xs, np.full((Xs.shape[0], 1), self.intercept_value)])
        return Xs

    def transform_target(self, y):
        return (y - self.target_center) / self.target_scale

    def unscale(self, w):
        """Coefficients and intercept in the original units from solver coefficients ``w``."""
        d = self.feature_center.shape[0]
        coef = w[:d] * self.target_scale / self.feature_scale
        if not self.fit_intercept:
            return coef, 0.0
        intercept = float(self.target_center + self.target_scale * self.intercept_value * w[d]
                          - coef @ self.feature_center)
        return coef, intercept

    def as_dict(self):
        return {"mode": self.mode, "feature_center": self.feature_center, "feature_scale": self.feature_scale,
                "target_center": float(self.target_center), "target_scale": float(self.target_scale),
                "quantile_epsilon": self.quantile_epsilon}


class PrivateStandardiser:
    """Private centring and scaling (see the module docstring for the modes).

    Parameters
    ----------
    mode : {"robust", "pooled", "target", "minimal", "none"}
    quantile_epsilon : float
        Epsilon of every private quantile (``inf``: exact, no noise).
    fit_intercept : bool
        Centre the data (robust and pooled modes) and append an intercept column.
    """

    def __init__(self, mode, quantile_epsilon, fit_intercept=True):
        if mode not in MODES:
            raise ValueError(f"Unknown scaling mode {mode!r}; choose one of {MODES}.")
        self.mode = mode
        self.quantile_epsilon = float(quantile_epsilon)
        self.fit_intercept = bool(fit_intercept)

    # -- the plan: one list of steps, each with the event it will release -------------------
    def _steps(self, n_features):
        mode, eps, center = self.mode, self.quantile_epsilon, self.fit_intercept
        steps = []
        if mode == "robust":
            steps.append(("features", robust_scaling_event(n_features, eps, center)))
        elif mode in ("pooled", "minimal"):
            steps.append(("features", pooled_scaling_event(eps)))
        if mode != "none":
            # "minimal" does not centre y: the intercept column absorbs the offset.
            steps.append(("target", robust_scaling_event(1, eps, center and mode != "minimal")))
        if mode in ("pooled", "target"):
            steps.append(("row_bound", ExponentialMechanismRelease(eps)))
        return steps

    @staticmethod
    def n_quantiles(mode, n_features, fit_intercept):
        """Number of quantiles a mode releases (public)."""
        per_col = 3 if fit_intercept else 1
        return {"robust": per_col * (n_features + 1), "pooled": 2 + per_col, "target": 1 + per_col,
                "minimal": 2, "none": 0}[mode]

    def planned_event(self, n_features):
        """Everything :meth:`fit` will release on data with ``n_features`` columns."""
        return Sequential([event for _, event in self._steps(n_features)])

    # -- the releases ------------------------------------------------------------------------
    def fit(self, X, y, rng):
        """Release the scales of ``X`` and ``y`` as planned.

        Returns
        -------
        scaling : Scaling
        event : PrivacyEvent
            What was released (never more expensive than :meth:`planned_event`).
        """
        n, d = X.shape
        eps = self.quantile_epsilon
        jitter = 0.0 if math.isinf(eps) else _JITTER
        cx, sx, cy, sy = np.zeros(d), np.ones(d), 0.0, 1.0
        row_bound, typical_norm = math.sqrt(d) + 3.0, math.sqrt(d)
        released = []
        for name, planned in self._steps(d):
            if name == "features" and self.mode == "robust":
                cx, sx, event = private_robust_scaling(X, eps, center=self.fit_intercept, jitter=jitter,
                                                       random_state=rng)
                cx, sx = np.atleast_1d(cx), np.atleast_1d(sx)
            elif name == "features":
                s_pool, event = private_pooled_scale(X, eps, jitter=jitter, random_state=rng)
                sx = np.full(d, s_pool)
            elif name == "target":
                center_y = self.fit_intercept and self.mode != "minimal"
                cy, sy, event = private_robust_scaling(y, eps, center=center_y, jitter=jitter,
                                                       random_state=rng)
            else:  # "row_bound"
                # Features are not standardised column by column: bound rows by twice a
                # private median of their norms, so that large features are kept
                # (clipping them would make predictions extrapolate) and small ones only
                # lose weight. (A higher quantile would fail upwards at these budgets and
                # leave leverage outliers unclipped.)
                median_norm, event = private_quantile(row_norms((X - cx) / sx), 0.5, eps, _ROW_NORM_RANGE,
                                                      scale="log", random_state=rng)
                row_bound, typical_norm = 2.0 * median_norm, median_norm
            _check_within_plan(name, event, planned)
            released.append(event)
        scaling = Scaling(self.mode, cx, sx, float(cy), float(sy), float(row_bound),
                          typical_norm / math.sqrt(d), self.fit_intercept, eps)
        return scaling, Sequential(released)


def _check_within_plan(name, released, planned):
    for delta in (0.0, 1e-6):
        if released.epsilon(delta) > planned.epsilon(delta) * (1.0 + 1e-9) + 1e-12:
            raise RuntimeError(f"Internal privacy error: the {name!r} scaling step released more than it "
                               "planned.")
