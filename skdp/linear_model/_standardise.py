"""Private standardisation of X and y for the linear-model solvers.

:class:`PrivateStandardiser` is the single source of both what standardisation
will release (:meth:`PrivateStandardiser.planned_event`, computed from public
inputs before the data are read) and what it releases
(:meth:`PrivateStandardiser.fit`): both walk the same list of steps, and
:meth:`~PrivateStandardiser.fit` refuses to return scales whose release cost more
than its step planned. The result, :class:`Scaling`, is public (every number in
it was released): it maps raw rows and labels to the solver's units and solver
coefficients back to the original units.

The default modes, for real tables ("columns", "coarse", "scale"; the first
that the budget funds, see :mod:`~skdp.linear_model._budget`):

1. per column of X and for y, a private centre and scale that neither collapse
   on 0/1, one-hot, count or constant columns nor lose large offsets
   (:func:`skdp.mechanisms.private_column_statistics`: 4, 2 or 1 quantiles per
   column; y always gets 4);
2. when it can detect it, a private magnitude check that enlarges the scale of
   columns whose values the quantiles could not see (a zero-inflated column of
   large amounts; :func:`skdp.mechanisms.private_magnitude_check`);
3. a private median of the norms of the rows ``[z, 1]``, ``z = (x - c) / s``,
   and one Gaussian release of their second-moment matrix, rows clipped to
   1.5 times that median (:func:`skdp.mechanisms.private_second_moment`);
   its post-processing (:mod:`~skdp.linear_model._whitening`) gives column
   means, the actual variances (a 0/1 column gets ``p (1 - p)``) and, on narrow
   tables, a joint whitening;
4. a private median of the norms of the whitened rows: ``1.5 m_B`` times it is
   the released row bound. Solvers that need bounded rows get their rows
   clipped to it; full-batch clipped gradient descent keeps every row whole
   (its per-sample gradients are clipped), so an informative heavy-tailed
   column is not cut off.

Declared public bounds (``declared``, :mod:`~skdp.linear_model._bounds`) replace
private estimates: a column of a declared one-hot block gets its public centre
and scale and no quantile; a standalone declared column the coarse statistics
(two quantiles) inside its bounds; the magnitude check runs on the columns
with private statistics only (its counts then have sensitivity
``sqrt(decades * n_free)``); and when every column is in a block the
second-moment clip is the public bound of ``[z, 1]`` (no private median, and
no row is clipped), released at :data:`BLOCK_GRAM_SHARE` of the budget, with
the noise of :data:`GRAM_SHARE` at 1.5 times that bound; when
every column is declared, the bound that the bounds and the released statistics
give caps the clip. The data are clipped to the bounds before they
reach the standardiser (a per-record map; the sensitivities above hold for any
input, clipped or not).

Block means. When every column is in a block (or declared constant), a fit
with an intercept, and the estimator asks for them (``block_means=True``, a
public rule: the classifier, whose few steps need rows centred well, see
:mod:`~skdp.linear_model._interpolating`), one more Gaussian release, at
:data:`BLOCK_MEAN_SHARE` of the budget and before the second moments: the
vector of the column means of ``z`` (for a block column ``z = x``: the level
frequencies). Sensitivity ``sqrt(2 B) / n`` for ``B`` blocks, for any input:
the release clips every block's part of each row to entries in ``[0, 1]`` and
then to norm at most 1, in float64 (its own per-record map, a no-op after the
declared clip, so the bound does not rest on that clip's float32 rounding or
on the bounds), so replacing a row changes that block's part of
the column sums by ``a - b`` with ``a, b >= 0``, ``||a - b||^2 = ||a||^2 +
||b||^2 - 2 a.b <= 2``; the columns outside the blocks (declared constant,
``z = 0``) add 0; the blocks are disjoint, so the squares add up to ``2 B``. The whitening combines
these means with the Gram's (post-processing,
:func:`~skdp.linear_model._whitening.whitening_from_second_moment`).

``m_B = max(1, (nu / 50)^(1/4))`` grows with the public budget per coefficient
``nu = n mu / p`` and is infinite at ``epsilon = inf``, where nothing is clipped.

Every step reads the rows through one chunk function (the per-record values of
a quantile, the exceedance counts, the clipped second moments; module-level
functions here and in :mod:`skdp.mechanisms.scaling`) applied to the rows as
they are held: an in-memory table is one chunk
(:class:`~skdp.linear_model._rows.RowsInMemory`), chunked rows on a Dask cluster
(:class:`~skdp.linear_model._rows.ChunkedRows`) are reduced chunk by chunk. A
chunk function gets released values and public constants only, and the jitter
of its rows from a public jitter stream, so both give the same releases.

The earlier modes stay available, and serve budgets too small for the above:

* ``"robust"`` — a robust centre and scale of every feature and of the target
  (:func:`skdp.mechanisms.private_robust_scaling`); rows clipped to the public
  norm ``sqrt(d) + 3``;
* ``"pooled"`` — one scale shared by all features, a robust target, and rows
  clipped to twice a private median row norm;
* ``"target"`` — only the target and the row-norm median;
* ``"minimal"`` — one pooled feature scale and a coarse centre and scale of
  the target (three quantiles with an intercept, two without);
* ``"none"`` — the data as they are; rows clipped to ``sqrt(d) + 3``.
"""

import math
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from ..accounting import ExponentialMechanismRelease, GaussianRelease, Sequential
from ..mechanisms import (
    clip_factors,
    clip_rows,
    column_statistics_event,
    gaussian_mechanism,
    magnitude_check_sensitivity,
    pooled_scaling_event,
    private_column_statistics,
    private_magnitude_check,
    private_pooled_scale,
    private_quantile,
    private_robust_scaling,
    robust_scaling_event,
    row_norms,
)
from ..mechanisms.second_moment import clipped_second_moment_sum, release_second_moment
from ..solvers.design import LinearDesign
from ._bounds import STANDALONE_STAGES
from ._rows import ChunkedRows, RowsInMemory
from ._whitening import whitening_from_second_moment

__all__ = ["PrivateStandardiser", "Scaling", "MODES", "WHITENED_MODES"]

WHITENED_MODES = ("columns", "coarse", "scale")
MODES = WHITENED_MODES + ("robust", "pooled", "target", "minimal", "none")
_STAGES = {"columns": 4, "coarse": 2, "scale": 1}
# Radius of the coefficient ball in standardised units. With standardised
# features and target, ||w|| is about sqrt(explained variance) <= ~1.5 unless
# features are strongly collinear; the ball only bounds noise excursions.
COEF_RADIUS = 5.0
_JITTER = 0.05
_ROW_NORM_RANGE = (1e-12, 1e12)
# Shares of the Gaussian budget (mu^2) spent by the whitened modes.
GRAM_SHARE = 0.15
MAGNITUDE_SHARE = 0.05
# Share of the Gram release when every column is in a declared one-hot block (see _fit_whitened): its
# noise then equals that of GRAM_SHARE at 1.5 times the public row bound, the clip the whitening's
# variance floor was tuned with, at (1 / 1.5^4) of the budget.
BLOCK_GRAM_SHARE = GRAM_SHARE / 1.5**4
# Share of the block-means release (see the module docstring): about the budget of the classifier's own
# centring release, which it replaces. Its entries' noise is then sqrt(BLOCK_GRAM_SHARE / BLOCK_MEAN_SHARE)
# sqrt(2 B) / (1 + B) times that of the Gram's column means (0.37 for three blocks).
BLOCK_MEAN_SHARE = 0.08
# Row bounds are this multiple of m_B times a private median row norm.
_BOUND_MULTIPLE = 1.5
# Values beyond +-1e15 are clipped and standardised values to +-1e100 (public per-record
# maps): no product, norm or eigen-decomposition can then overflow for any input.
_MAGNITUDE_LIMIT = 1e15
_Z_LIMIT = 1e100


@dataclass(frozen=True)
class Scaling:
    """Public maps between the original units and the solver's units (every number was released).

    A solver row is ``u = [f (x A - b), v]``: an affine map of the raw row (for
    column-wise scaling ``A = diag(1 / s)`` and ``b = c / s``; the whitened
    modes fold in the whitening), a factor ``f <= 1`` that clips it to
    ``row_bound`` (when the solver needs bounded rows) and the intercept column
    ``v``. Labels become ``(y - target_center) / target_scale``.

    Attributes
    ----------
    mode : str
    feature_center, feature_scale : ndarray of shape (n_features,)
        The released column statistics ``c`` and ``s``.
    target_center, target_scale : float
    row_bound : float
        Public or released bound of the rows (``inf`` without noise in the
        whitened modes).
    unit : float
        Typical size of one standardised coordinate.
    fit_intercept : bool
    quantile_epsilon : float
    intercept_value : float
        Value of the intercept column.
    whitening_mean, whitening_matrix : ndarray or None
        ``u = ((x - c) / s - mean) @ matrix`` in the whitened modes.
    whitening_identified : ndarray or None
        Projector onto the whitened directions the released second moments
        support (:func:`~skdp.linear_model._whitening.whitening_from_second_moment`).
    typical_row_norm : float or None
        The released median norm of the feature part of the (whitened) rows, in
        the whitened modes; None in the others, where ``sqrt(d) * unit`` is the
        typical norm. Whitening from a noisy second-moment matrix floors the
        variances at the noise level, so whitened rows can be much shorter than
        ``sqrt(d)``; a clip set from ``sqrt(d)`` would then add noise for
        gradients that are never that large.
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
    intercept_value: float = None
    whitening_mean: np.ndarray = None
    whitening_matrix: np.ndarray = None
    whitening_identified: np.ndarray = None
    typical_row_norm: float = None

    def __post_init__(self):
        if self.intercept_value is None:
            # The typical coordinate size: the intercept column is then not favoured.
            object.__setattr__(self, "intercept_value", self.unit)

    @property
    def whitened(self):
        return self.whitening_matrix is not None

    # -- the affine map x -> x A - b ----------------------------------------------------------
    @property
    def linear(self):
        """``A``: a vector (diagonal) for column-wise scaling, a matrix when whitened."""
        if not self.whitened:
            return 1.0 / self.feature_scale
        return self.whitening_matrix / self.feature_scale[:, None]

    @property
    def offset(self):
        """``b``."""
        shift = self.feature_center / self.feature_scale
        if not self.whitened:
            return shift
        return (shift + self.whitening_mean) @ self.whitening_matrix

    @property
    def coef_row_bound(self):
        """Bound (or typical scale) of the norm of a solver row, the intercept column included."""
        return math.hypot(self.row_bound, self.intercept_value) if self.fit_intercept else self.row_bound

    @property
    def radius(self):
        """Radius of the coefficient ball in solver units."""
        return COEF_RADIUS / self.unit

    def rows(self, X, clip=True, implicit=False, order="C"):
        """The solver's rows: an ndarray, or a :class:`~skdp.solvers.design.LinearDesign` for a sparse X.

        Parameters
        ----------
        clip : bool
            Clip the feature part of every row to ``row_bound``.
        implicit : bool
            Keep a sparse X sparse (the solver accepts a design object).
        order : {"C", "F"}
            Memory layout of the dense rows: "F" writes them column by column
            (the layout of the chunked passes' products) in one copy, instead
            of forming the C-ordered rows and copying them again; the values
            are the same.
        """
        iv = self.intercept_value if self.fit_intercept else None
        if sp.issparse(X) and implicit:
            X = sp.csr_matrix(X, dtype=float)
            X.data = np.clip(X.data, -_MAGNITUDE_LIMIT, _MAGNITUDE_LIMIT)
            design = LinearDesign(X, self.linear, self.offset, iv)
            if clip and math.isfinite(self.row_bound):
                feature = LinearDesign(X, self.linear, self.offset, None)
                design = design.with_factors(clip_factors(feature.row_norms(), self.row_bound))
            return design
        Z = self.features(X, clip=clip)
        if order == "F":
            if not self.fit_intercept:
                return np.asfortranarray(Z)
            out = np.empty((Z.shape[0], Z.shape[1] + 1), order="F")
            out[:, :-1] = Z
            out[:, -1] = self.intercept_value
            return out
        if self.fit_intercept:
            Z = np.hstack([Z, np.full((Z.shape[0], 1), self.intercept_value)])
        return Z

    def features(self, X, clip=False):
        """The standardised (in the whitened modes, whitened) features as a dense array, no intercept column.

        The inputs of a non-linear model (:mod:`skdp.zeroth_order`), which has
        biases of its own. ``clip`` clips every row to ``row_bound``.
        """
        # One float64 copy of X, owned here, then every elementwise step in place: the values of
        # ((X - c) / s, its clips, the whitening) are those of the out-of-place expressions, bit for bit
        # (the same IEEE operations on the same operands), and the copy keeps X's memory layout (order
        # "K"), so the whitening product sees the layout it always saw. Out of place, a chunk of a
        # chunked pass allocated and wrote five to seven arrays of its size; this is most of a
        # gradient pass's work on the workers besides reading the chunk.
        if sp.issparse(X):
            X = X.toarray()
            if self.whitened:
                # In the matrix's own dtype, as a sparse X was always clipped (float32 at float32(1e15));
                # the float64 clip below then changes nothing.
                X = np.clip(X, -_MAGNITUDE_LIMIT, _MAGNITUDE_LIMIT)
        Z = np.array(X, dtype=float, order="K", copy=True)
        if self.whitened:
            np.clip(Z, -_MAGNITUDE_LIMIT, _MAGNITUDE_LIMIT, out=Z)
        Z -= self.feature_center
        Z /= self.feature_scale
        if self.whitened:
            np.clip(Z, -_Z_LIMIT, _Z_LIMIT, out=Z)
            Z -= self.whitening_mean
            Z = Z @ self.whitening_matrix
        if clip:
            Z = clip_rows(Z, self.row_bound, copy=False)
        return Z

    def feature_norms(self, X):
        """Norms of the feature parts of the (unclipped) solver rows."""
        if sp.issparse(X):
            design = self.rows(X, clip=False, implicit=True)
            return LinearDesign(design.X, design.A, design.b, None).row_norms()
        d = self.feature_center.shape[0]
        return row_norms(self.rows(X, clip=False)[:, :d])

    def transform(self, X):
        """Solver rows clipped to ``row_bound`` (dense), intercept column appended."""
        return self.rows(X, clip=True)

    def transform_target(self, y):
        return (y - self.target_center) / self.target_scale

    def identified_coef(self, w):
        """Solver coefficients with their feature part projected on the identified whitened directions.

        Post-processing of released values (the projector comes from the
        released second moments); the identity outside the whitened modes.
        """
        if not self.whitened or self.whitening_identified is None:
            return w
        d = self.feature_center.shape[0]
        out = np.array(w, dtype=float, copy=True)
        out[:d] = self.whitening_identified @ out[:d]
        return out

    def unscale(self, w):
        """Coefficients and intercept in the original units from solver coefficients ``w``."""
        d = self.feature_center.shape[0]
        if not self.whitened:
            coef = w[:d] * self.target_scale / self.feature_scale
            if not self.fit_intercept:
                return coef, 0.0
            intercept = float(self.target_center + self.target_scale * self.intercept_value * w[d]
                              - coef @ self.feature_center)
            return coef, intercept
        coef = self.target_scale * (self.linear @ w[:d])
        if not self.fit_intercept:
            return coef, 0.0
        intercept = float(self.target_center + self.target_scale * (self.intercept_value * w[d]
                                                                    - self.offset @ w[:d]))
        return coef, intercept

    def penalties(self, ridge, l1, loss_power, n_coef):
        """Ridge and L1 weights on the solver's coefficients for penalties on the original ones.

        ``ridge / 2 ||coef||^2 + l1 ||coef||_1`` with ``coef = s_y A w`` and a
        loss that scales as ``s_y^loss_power``, divided by that factor. Returns
        ``(ridge_weights, l1_weights, ridge_matrix)``: vectors over the
        coefficients (the intercept never penalised), and for a joint whitening
        the ridge as a matrix (then ``ridge_weights`` is its diagonal) —
        ``l1`` must then be 0, since the L1 norm is not separable in whitened
        coordinates.
        """
        d = self.feature_center.shape[0]
        sy = self.target_scale
        loss_scale = sy**loss_power
        ridge_w, l1_w = np.zeros(n_coef), np.zeros(n_coef)
        A = self.linear
        if A.ndim == 1 or np.count_nonzero(A - np.diag(np.diag(A))) == 0:
            a = A if A.ndim == 1 else np.diag(A)
            ridge_w[:d] = ridge * sy**2 * a**2 / loss_scale
            l1_w[:d] = l1 * sy * np.abs(a) / loss_scale
            return ridge_w, l1_w, None
        if l1 > 0:
            raise ValueError("An L1 penalty needs column-wise (diagonal) whitening.")
        matrix = np.zeros((n_coef, n_coef))
        matrix[:d, :d] = ridge * sy**2 * (A.T @ A) / loss_scale
        ridge_w[:d] = np.diag(matrix)[:d]
        return ridge_w, l1_w, (matrix if ridge > 0 else None)

    def as_dict(self):
        out = {"mode": self.mode, "feature_center": self.feature_center, "feature_scale": self.feature_scale,
               "target_center": float(self.target_center), "target_scale": float(self.target_scale),
               "quantile_epsilon": self.quantile_epsilon, "row_bound": float(self.row_bound)}
        if self.whitened:
            out.update(whitening_mean=self.whitening_mean, whitening_matrix=self.whitening_matrix,
                       intercept_value=float(self.intercept_value))
        if self.typical_row_norm is not None:
            out["typical_row_norm"] = float(self.typical_row_norm)
        return out


class PrivateStandardiser:
    """Private centring and scaling (see the module docstring for the modes).

    Parameters
    ----------
    mode : str
        One of :data:`MODES`.
    quantile_epsilon : float
        Epsilon of every private quantile (``inf``: exact, no noise).
    fit_intercept : bool
        Centre the data and append an intercept column.
    mu : float, default=inf
        The fit's total Gaussian-DP budget; the whitened modes spend the shares
        :data:`GRAM_SHARE` (and :data:`MAGNITUDE_SHARE` when the check runs) of
        ``mu^2`` (see :meth:`gaussian_share`).
    bound_multiplier : float, default=1.0
        ``m_B`` of the row bounds (public; ``inf``: no clipping).
    full_whitening : bool, default=True
        Whether joint (off-diagonal) whitening may be used.
    magnitude_check : bool, default=False
        Whether the whitened modes run the magnitude check (public rule:
        :meth:`magnitude_check_useful`).
    scale_target : bool, default=True
        Whether ``y`` is a numeric target to centre and scale. A classifier's
        labels are not: then nothing about ``y`` is released and the target
        centre and scale are 0 and 1.
    declared : DeclaredBounds or None, default=None
        Public bounds of the columns (the data passed to :meth:`fit` must
        already be clipped to them).
    block_means : bool, default=False
        Release the column means when every column is in a declared block
        (see the module docstring and :func:`releases_block_means`).
    """

    def __init__(self, mode, quantile_epsilon, fit_intercept=True, *, mu=math.inf, bound_multiplier=1.0,
                 full_whitening=True, magnitude_check=False, scale_target=True, declared=None, block_means=False):
        if mode not in MODES:
            raise ValueError(f"Unknown scaling mode {mode!r}; choose one of {MODES}.")
        self.mode = mode
        self.quantile_epsilon = float(quantile_epsilon)
        self.fit_intercept = bool(fit_intercept)
        self.mu = float(mu)
        self.bound_multiplier = float(bound_multiplier)
        self.full_whitening = bool(full_whitening)
        self.magnitude_check = bool(magnitude_check) and mode in WHITENED_MODES
        self.scale_target = bool(scale_target)
        self.declared = declared
        self.block_means = bool(block_means) and releases_block_means(mode, fit_intercept, declared)

    # -- public rules ------------------------------------------------------------------------
    @staticmethod
    def n_quantiles(mode, n_features, fit_intercept, scale_target=True, declared=None):
        """Number of quantiles a mode releases (public; columns of declared one-hot blocks release none)."""
        free = n_features if declared is None else declared.n_free(n_features)
        if mode in WHITENED_MODES:
            stages = _STAGES[mode] if fit_intercept else 1
            standalone = 0 if declared is None else declared.n_standalone(n_features)
            medians = 1 if declared is not None and declared.all_public() else 2
            # X's statistics (standalone declared columns: the coarse ones), y's (4 with an intercept,
            # else a scale), the row-norm medians.
            return (stages * (free - standalone) + min(stages, STANDALONE_STAGES) * standalone
                    + ((4 if fit_intercept else 1) if scale_target else 0) + medians)
        per_col = 3 if fit_intercept else 1
        target = per_col if scale_target else 0
        pooled = 1 if free else 0
        return {"robust": per_col * free + target, "pooled": pooled + 1 + target, "target": 1 + target,
                "minimal": pooled + ((2 if fit_intercept else 1) if scale_target else 0), "none": 0}[mode]

    @staticmethod
    def magnitude_check_useful(n_samples, n_features, mu_over_estimate):
        """Whether the check can detect a column with 10% of its rows out of range (public rule)."""
        noise = magnitude_check_sensitivity(n_features) / (math.sqrt(MAGNITUDE_SHARE) * mu_over_estimate)
        return 3.5 * noise <= 0.1 * n_samples

    def gaussian_share(self):
        """Share of the fit's Gaussian budget ``mu^2`` that this standardiser spends."""
        if self.mode not in WHITENED_MODES:
            return 0.0
        return (self._gram_share() + (MAGNITUDE_SHARE if self.magnitude_check else 0.0)
                + (BLOCK_MEAN_SHARE if self.block_means else 0.0))

    def _gram_share(self):
        """Share of ``mu^2`` of the second-moment release (public rule: smaller when every column is in a block)."""
        return BLOCK_GRAM_SHARE if self._public_gram_bound() else GRAM_SHARE

    # -- the plan: one list of steps, each with the event it will release -------------------
    # -- declared bounds (public) ------------------------------------------------------------
    def _free(self, n_features):
        """Indices of the columns whose centre and scale are released here (all without declared bounds)."""
        if self.declared is None or self.declared.features is None:
            return np.arange(n_features)
        return np.flatnonzero(~self.declared.public)

    def _standalone(self, n_features):
        """Indices of the declared columns outside blocks (released with the coarse statistics)."""
        if self.declared is None or self.declared.features is None:
            return np.arange(0)
        return np.flatnonzero(self.declared.standalone)

    def _undeclared(self, n_features):
        if self.declared is None or self.declared.features is None:
            return np.arange(n_features)
        return np.flatnonzero(~self.declared.bounded)

    def _target_released(self):
        return self.scale_target

    def _public_gram_bound(self):
        return self.declared is not None and self.declared.all_public()

    def _declared_statistics(self, d):
        """Centres and scales with the public columns filled in (zeros and ones elsewhere), and y's (None)."""
        cx, sx = np.zeros(d), np.ones(d)
        if self.declared is not None and self.declared.features is not None:
            mask = self.declared.public
            c, s = self.declared.centre_scale()
            cx[mask], sx[mask] = c[mask], s[mask]
        return cx, sx, None, None

    def _steps(self, n_features):
        mode, eps, center = self.mode, self.quantile_epsilon, self.fit_intercept
        free = len(self._free(n_features))
        steps = []
        if mode in WHITENED_MODES:
            stages = _STAGES[mode] if center else 1
            undeclared, standalone = len(self._undeclared(n_features)), len(self._standalone(n_features))
            if undeclared:
                steps.append(("feature_statistics", column_statistics_event(undeclared, eps, stages)))
            if standalone:
                steps.append(("declared_statistics",
                              column_statistics_event(standalone, eps, min(stages, STANDALONE_STAGES))))
            if self._target_released():
                steps.append(("target_statistics", column_statistics_event(1, eps, 4 if center else 1)))
            if self.magnitude_check and free:
                steps.append(("magnitude_check", GaussianRelease(1.0, self._std(MAGNITUDE_SHARE))))
            if not self._public_gram_bound():
                steps.append(("second_moment_bound", ExponentialMechanismRelease(eps)))
            if self.block_means:
                steps.append(("block_means", GaussianRelease(1.0, self._std(BLOCK_MEAN_SHARE))))
            steps.append(("second_moment", GaussianRelease(1.0, self._std(self._gram_share()))))
            steps.append(("row_bound", ExponentialMechanismRelease(eps)))
            return steps
        if mode == "robust" and free:
            steps.append(("features", robust_scaling_event(free, eps, center)))
        elif mode in ("pooled", "minimal") and free:
            steps.append(("features", pooled_scaling_event(eps)))
        if not self._target_released():
            pass
        elif mode == "minimal":
            # Two quantiles for y (a signed-log centre, then a scale): any offset is found
            # to about 1e-3 of itself, so that a fit that falls back to the constant
            # (the fit check) predicts the centre of y, not 0.
            steps.append(("target", column_statistics_event(1, eps, 2 if center else 1)))
        elif mode != "none":
            steps.append(("target", robust_scaling_event(1, eps, center)))
        if mode in ("pooled", "target"):
            steps.append(("row_bound", ExponentialMechanismRelease(eps)))
        return steps

    def _std(self, share):
        """Noise multiplier (std per unit sensitivity) of a Gaussian release with ``share`` of mu^2."""
        return 0.0 if math.isinf(self.mu) else 1.0 / (math.sqrt(share) * self.mu)

    def planned_event(self, n_features):
        """Everything :meth:`fit` will release on data with ``n_features`` columns."""
        return Sequential([event for _, event in self._steps(n_features)])

    # -- the releases ------------------------------------------------------------------------
    def fit(self, X, y, rng):
        """Release the scales of ``X`` and ``y`` as planned.

        ``X`` is an array (dense or sparse), or :class:`~skdp.linear_model._rows.ChunkedRows`
        (rows on a Dask cluster, which hold ``y``; ``y`` is then None).

        Returns
        -------
        scaling : Scaling
        event : PrivacyEvent
            What was released (never more expensive than :meth:`planned_event`).
        """
        if self.mode in WHITENED_MODES:
            return self._fit_whitened(_as_rows(X, y), rng)
        return self._fit_columnwise(_as_rows(X.toarray() if sp.issparse(X) else X, y), rng)

    def _fit_columnwise(self, rows, rng):
        n, d = rows.shape
        eps = self.quantile_epsilon
        jitter = 0.0 if math.isinf(eps) else _JITTER
        cx, sx, cy, sy = np.zeros(d), np.ones(d), 0.0, 1.0
        if self.mode != "none":  # "none" leaves the data as they are (only clipped to declared bounds)
            cx, sx, dcy, dsy = self._declared_statistics(d)
            cy, sy = (cy, sy) if dcy is None else (dcy, dsy)
        free = self._free(d)
        every = free.size == d  # no declared column: the released statistics are used as they come
        row_bound, typical_norm = math.sqrt(d) + 3.0, math.sqrt(d)
        released = []
        for name, planned in self._steps(d):
            if name == "features" and self.mode == "robust":
                c, s, event = private_robust_scaling(rows.columns(None if every else free), eps,
                                                     center=self.fit_intercept, jitter=jitter, random_state=rng)
                if every:
                    cx, sx = np.atleast_1d(c), np.atleast_1d(s)
                else:
                    cx[free], sx[free] = c, s
            elif name == "features":
                s_pool, event = private_pooled_scale(rows.columns(None if every else free), eps, jitter=jitter,
                                                     random_state=rng)
                sx[free] = s_pool
            elif name == "target" and self.mode == "minimal":
                c, s, event = private_column_statistics(rows.target(), eps, stages=2 if self.fit_intercept else 1,
                                                        random_state=rng)
                cy, sy = float(c[0]), float(s[0])
            elif name == "target":
                c, s, event = private_robust_scaling(rows.target(), eps, center=self.fit_intercept, jitter=jitter,
                                                     random_state=rng)
                cy, sy = float(c[0]), float(s[0])
            else:  # "row_bound"
                # Features are not standardised column by column: bound rows by twice a
                # private median of their norms, so that large features are kept
                # (clipping them would make predictions extrapolate) and small ones only
                # lose weight. (A higher quantile would fail upwards at these budgets and
                # leave leverage outliers unclipped.)
                median_norm, event = private_quantile(rows.values(_scaled_row_norms, cx, sx), 0.5, eps,
                                                      _ROW_NORM_RANGE, scale="log", jitter=jitter, random_state=rng)
                row_bound, typical_norm = 2.0 * median_norm, median_norm
            _check_within_plan(name, event, planned)
            released.append(event)
        scaling = Scaling(self.mode, cx, sx, float(cy), float(sy), float(row_bound),
                          typical_norm / math.sqrt(d), self.fit_intercept, eps)
        return scaling, Sequential(released)

    def _fit_whitened(self, rows, rng):
        n, d = rows.shape
        eps = self.quantile_epsilon
        center = self.fit_intercept
        exact = math.isinf(self.mu)
        bound_multiple = _BOUND_MULTIPLE * self.bound_multiplier
        released = []
        cx = sx = whitening = None
        cy, sy = (None, None) if self.scale_target else (0.0, 1.0)
        free, undeclared, standalone = self._free(d), self._undeclared(d), self._standalone(d)
        every = undeclared.size == d  # no declared column: the statistics are used as they come
        if self.declared is not None:
            cx, sx, _, _ = self._declared_statistics(d)
        gram_bound = row_bound = math.inf
        means, means_std = None, 0.0
        if self._public_gram_bound():
            # Every column in a block: the norm of [z, 1] is bounded publicly (1 + 1 per block), so the clip
            # is that bound and clips no row. The release's noise is what it was with the clip at 1.5 times
            # the bound and GRAM_SHARE (the level the whitening's variance floor was tuned at: noise at the
            # bound itself whitened the rare levels fully, lengthened their rows and raised the solver's
            # clip; sparse one-hot table, n = 10000, epsilon = 1, three seeds: test R^2 0.716 against
            # 0.760), at BLOCK_GRAM_SHARE = GRAM_SHARE / 1.5^4 of the budget: the sensitivity falls with
            # the square of the clip, and the rest of the budget goes to the solver.
            gram_bound = self.declared.gram_row_bound()
        typical_norm = None
        for name, planned in self._steps(d):
            if name == "feature_statistics":
                stages = _STAGES[self.mode] if center else 1
                if every:
                    cx, sx, event = private_column_statistics(rows.columns(), eps, stages=stages, random_state=rng)
                else:
                    cx[undeclared], sx[undeclared], event = private_column_statistics(
                        rows.columns(undeclared), eps, stages=stages, random_state=rng)
            elif name == "declared_statistics":
                # Inside the declared bounds (X is clipped to them): the coarse centre and scale of the
                # values minus the bounds' midpoint (a public shift). The coarse scale is floored at 2e-3
                # of the coarse centre, and after the shift that centre is within the half-width: an
                # offset column (1e6 + N(0, 1) declared [999000, 1001000]) keeps its spread (unshifted,
                # the floor compressed it and the offsets table lost 0.03 of R^2).
                stages = min(_STAGES[self.mode] if center else 1, STANDALONE_STAGES)
                mid = 0.5 * (self.declared.features.lower[standalone] + self.declared.features.upper[standalone])
                c, sx[standalone], event = private_column_statistics(rows.columns(standalone, shift=mid), eps,
                                                                     stages=stages, random_state=rng)
                cx[standalone] = c + mid
            elif name == "target_statistics":
                c, s, event = private_column_statistics(rows.target(limit=_MAGNITUDE_LIMIT), eps,
                                                        stages=4 if center else 1, random_state=rng)
                cy, sy = float(c[0]), float(s[0])
            elif name == "magnitude_check":
                # Post-processing: a column with many standardised values beyond 10^k gets
                # its scale multiplied by 10^k.
                if free.size == d:
                    off, event = private_magnitude_check(rows.columns(), cx, sx, self._std(MAGNITUDE_SHARE)
                                                         * magnitude_check_sensitivity(d), random_state=rng)
                    sx = sx * 10.0 ** off
                else:  # declared columns are within their bounds: only the others are checked
                    off, event = private_magnitude_check(rows.columns(free), cx[free], sx[free],
                                                         self._std(MAGNITUDE_SHARE)
                                                         * magnitude_check_sensitivity(free.size), random_state=rng)
                    sx[free] = sx[free] * 10.0 ** off
            elif name == "second_moment_bound":
                norms = rows.values(_standardised_row_norms, cx, sx)
                median, event = private_quantile(norms, 0.5, eps, (1e-6, 1e12), scale="log",
                                                 jitter=_JITTER, random_state=rng)
                # The Gram's clip does not grow with the budget (m_B = 1): the solution does not
                # depend on the whitening (clipped descent keeps rows whole), only its conditioning
                # does, and outlying rows let in by a larger clip distort it. With m_B here, the
                # contaminated task at n = 100000 went from 1.003 to 1.04-1.26 x Bayes at
                # epsilon 1 to 5; informative heavy tails were unchanged either way.
                # Capped, when every column is declared, by the bound of [z, 1] that the bounds and the
                # released centres and scales give (post-processing).
                cap = (math.inf if self.declared is None
                       else _BOUND_MULTIPLE * self.declared.gram_row_bound(cx, sx))
                gram_bound = min(_BOUND_MULTIPLE * median, cap)
            elif name == "block_means":
                # Every column in a block or constant: the column means of z (see the module docstring).
                sensitivity = block_means_sensitivity(len(self.declared.features.blocks), n)
                means_std = self._std(BLOCK_MEAN_SHARE) * sensitivity
                sums = rows.sum(_standardised_column_sums, cx, sx, self.declared.features.blocks)
                means, event = gaussian_mechanism(sums / n, sensitivity, means_std, random_state=rng)
            elif name == "second_moment":
                bound = gram_bound if not exact else math.inf
                std = 0.0 if exact else self._std(self._gram_share()) * _sensitivity_of_gram(gram_bound, n)
                gram, event = release_second_moment(rows.sum(_standardised_second_moments, cx, sx, bound), n,
                                                    bound, std, random_state=rng)
                if not center:
                    # Without an intercept the columns are not centred: uncentred second moments.
                    gram[:d, d] = gram[d, :d] = 0.0
                whitening = whitening_from_second_moment(gram, std, d, full_allowed=self.full_whitening,
                                                         mean=means, mean_std=means_std)
            else:  # "row_bound": median of the norms of the whitened feature rows
                scaling = self._scaling(cx, sx, cy, sy, math.inf, whitening)
                norms = rows.values(_feature_norms, scaling)
                median, event = private_quantile(norms, 0.5, eps, (1e-6, 1e12), scale="log", jitter=_JITTER,
                                                 random_state=rng)
                row_bound, typical_norm = bound_multiple * median, float(median)
                if exact:
                    # Without noise nothing is clipped, but solvers that read the bound (step
                    # sizes, clip ranges) get the largest row norm, a finite number.
                    row_bound = max(rows.maximum(_feature_norms, scaling), 1e-12)
            _check_within_plan(name, event, planned)
            released.append(event)
        return self._scaling(cx, sx, cy, sy, row_bound, whitening, typical_norm), Sequential(released)

    def _scaling(self, cx, sx, cy, sy, row_bound, whitening, typical_norm=None):
        return Scaling(self.mode, cx, sx, cy, sy, float(row_bound), 1.0, self.fit_intercept,
                       self.quantile_epsilon, intercept_value=whitening.kappa if self.fit_intercept else 1.0,
                       whitening_mean=whitening.mean, whitening_matrix=whitening.matrix,
                       whitening_identified=whitening.identified,
                       typical_row_norm=typical_norm)

    @staticmethod
    def _standardised(X, cx, sx):
        """The rows ``[z, 1]``, ``z = (x - c) / s`` (values clipped to public limits), as a design."""
        if sp.issparse(X):
            Xs = sp.csr_matrix(X, dtype=float)
            Xs.data = np.clip(Xs.data, -_MAGNITUDE_LIMIT, _MAGNITUDE_LIMIT)
            return LinearDesign(Xs, 1.0 / sx, cx / sx, 1.0)
        return _DenseRows(np.hstack([np.clip((np.clip(X, -_MAGNITUDE_LIMIT, _MAGNITUDE_LIMIT) - cx) / sx,
                                             -_Z_LIMIT, _Z_LIMIT), np.ones((X.shape[0], 1))]))


class _DenseRows:
    """A dense matrix with the two methods of a design the standardiser uses."""

    def __init__(self, Z):
        self.Z = Z

    def row_norms(self):
        return row_norms(self.Z)

    def blocks(self, chunk=4096):
        for i0 in range(0, self.Z.shape[0], chunk):
            yield self.Z[i0:i0 + chunk]


def _as_rows(X, y):
    """The rows as the steps read them: chunked rows as they are, arrays as one in-memory chunk."""
    return X if isinstance(X, ChunkedRows) else RowsInMemory(X, y)


# -- chunk functions of the standardiser: per-record values or sums of a chunk of rows ----------
# Each gets the chunk's raw rows and released values only (centres, scales, the released Scaling).
def _standardised_row_norms(X, y, cx, sx):
    """The norms of the rows ``[z, 1]``, ``z = (x - c) / s`` (the second moment's clip)."""
    return PrivateStandardiser._standardised(X, cx, sx).row_norms()


def _standardised_second_moments(X, y, cx, sx, bound):
    """``sum a a^T`` over the rows ``a = [z, 1]`` clipped to ``bound`` (the second-moment release)."""
    return clipped_second_moment_sum(PrivateStandardiser._standardised(X, cx, sx).blocks(), bound)[0]


def _standardised_column_sums(X, y, cx, sx, blocks):
    """``sum z`` over the rows, each block's part of ``z = (x - c) / s`` clipped (the block-means release).

    Every row's part in each block is clipped to ``[0, 1]`` and then to
    Euclidean norm 1, in float64: a no-op on the rows the declared clip leaves,
    but it makes the release's sensitivity ``sqrt(2 B) / n`` rest on this map
    alone (a float32 block clip can leave a norm of ``1 + 1e-5``; a bound changed
    after validation could let negative values in). The columns outside the
    blocks are declared constant (``z = 0`` after the declared clip) and add 0.
    O(nnz) for a sparse X. A vector of length d.
    """
    d = cx.shape[0]
    sums = np.zeros(d)
    if sp.issparse(X):
        # Duplicate entries of one (row, column) are summed first: clipped one by one they would put more than
        # 1 into a column of that row (the row's part would pass the norm clip as two entries).
        X = sp.csr_matrix(X, copy=True)
        X.sum_duplicates()
        block_of = np.full(d, -1)
        for k, block in enumerate(blocks):
            block_of[list(block)] = k
        kept = block_of[X.indices] >= 0
        cols = X.indices[kept]
        # A block column's public centre is 0 (its bounds are (0, 1)), so its implicit zeros have z = 0.
        z = np.clip((np.clip(X.data[kept].astype(float), -_MAGNITUDE_LIMIT, _MAGNITUDE_LIMIT) - cx[cols])
                    / sx[cols], 0.0, 1.0)
        rows = np.repeat(np.arange(X.shape[0]), np.diff(X.indptr))[kept]
        _, part = np.unique(rows * len(blocks) + block_of[cols], return_inverse=True)
        norms = np.sqrt(np.bincount(part, weights=z * z))
        z = z / np.maximum(norms, 1.0)[part]
        return sums + np.bincount(cols, weights=z, minlength=d)
    Z = PrivateStandardiser._standardised(X, cx, sx).Z
    for block in blocks:
        cols = list(block)
        part = np.clip(Z[:, cols].astype(float, copy=False), 0.0, 1.0)
        norms = np.sqrt(np.einsum("ij,ij->i", part, part))
        sums[cols] = np.einsum("ij->j", part / np.maximum(norms, 1.0)[:, None])
    return sums


def _feature_norms(X, y, scaling):
    """The norms of the whitened feature rows (the row bound)."""
    return scaling.feature_norms(X)


def _scaled_row_norms(X, y, cx, sx):
    """The norms of ``(x - c) / s`` (the row bound of the "pooled" and "target" modes)."""
    return row_norms((X - cx) / sx)


def releases_block_means(mode, fit_intercept, declared):
    """Whether a fit that asks for them releases the block means (public rule, see the module docstring).

    A whitened mode, an intercept, and every column in a declared one-hot block
    or declared constant, with at least one block.
    """
    return (mode in WHITENED_MODES and bool(fit_intercept) and declared is not None and declared.all_public()
            and len(declared.features.blocks) > 0)


def block_means_sensitivity(n_blocks, n):
    """L2 sensitivity of the column means of ``z`` when every column is in one of ``n_blocks`` blocks or constant."""
    return math.sqrt(2.0 * n_blocks) / n


def _sensitivity_of_gram(bound, n):
    return math.sqrt(2.0) * bound**2 / n


def _check_within_plan(name, released, planned):
    for delta in (0.0, 1e-6):
        if released.epsilon(delta) > planned.epsilon(delta) * (1.0 + 1e-9) + 1e-12:
            raise RuntimeError(f"Internal privacy error: the {name!r} scaling step released more than it "
                               "planned.")
