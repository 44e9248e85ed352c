"""The problem a zeroth-order solver sees, and the one place where it touches the data.

A :class:`ZOProblem` holds the rows (in solver units, clipped to a public or
released bound), the labels, a *model* and a *loss* known by their values only,
the public per-row Lipschitz bound ``L`` that the finite differences are
clipped to, and the public starting point. Its two oracle sums
(:meth:`ZOProblem.grad_sum`, :meth:`ZOProblem.diff_sum`) are the only data
queries of the solvers; tests wrap them to answer every query on a neighbouring
dataset too (``tests/privacy_harness.py``).

The model protocol (duck-typed; :mod:`skdp.zeroth_order` has the linear model,
the one-hidden-layer network and the adapter of a user's callable):

* ``n_params`` — the number of parameters ``d``;
* ``predict_offsets(theta, V, X) -> (n_rows, k)`` — the prediction of every
  row of ``X`` under the parameters ``theta + V[j]``, ``V`` of shape
  ``(k, d)``;
* ``predict_rowwise(theta, V, X) -> (n_rows, k)`` — the same with offsets of
  shape ``(n_rows, k, d)``, row ``i`` under ``theta + V[i, j]`` (per-row
  directions);
* ``predict(theta, X) -> (n_rows,)``.

The loss: ``value(prediction, y)`` element-wise (``prediction`` of shape
``(n_rows, k)``, ``y`` of shape ``(n_rows, 1)``) and ``max_derivative`` or
``derivative_bound`` (its public Lipschitz constant in the prediction; not
needed here: ``L`` is given).

Evaluation rules (fixed before any data are read, the same for every row):

* rows are evaluated in chunks of :data:`CHUNK_ELEMENTS` ``/ (k w)`` rows (``w``
  the model's ``work_per_prediction``, 1 by default); a chunk
  whose model or loss call raises, or returns the wrong shape, is evaluated
  again one row at a time, so a row that makes a user's callable fail affects
  no other row's values;
* a row on which the callable raises on its own gets NaN values; non-finite
  values become a zero difference in the oracles
  (:meth:`~skdp.solvers.zeroth_order.directions.DirectionDraw.clip`), and every
  difference is clipped to the public bound whatever its size.

What is *not* enforceable here: a callable that reads other rows of the chunk
it is given (a batch mean, say) or keeps state across calls. The estimator
checks, on public synthetic rows and before anything is spent, that the
callables it is given compute each row from that row alone
(:func:`skdp.zeroth_order._callables.check_rowwise`); a callable that passes
that check and still mixes rows is outside the contract.
"""

import math
from dataclasses import dataclass, field, replace

import numpy as np

from .._contract import report_progress

__all__ = ["ZOProblem", "CHUNK_ELEMENTS"]

# Rows per chunk are CHUNK_ELEMENTS // k (k parameter vectors per row): about 32 MB per
# chunk of predictions, and a public number (it decides which rows share a call).
CHUNK_ELEMENTS = 1 << 22
_LABEL_LIMIT = 1e150


@dataclass
class ZOProblem:
    """Rows, labels, a model and a loss known by values, and the public Lipschitz bound.

    Attributes
    ----------
    X : ndarray of shape (n_samples, n_inputs)
        Rows in solver units (for a linear model with an intercept, the last
        column is the constant intercept column).
    y : ndarray of shape (n_samples,)
    model : object
        The model protocol of the module docstring.
    loss : object
        ``value(prediction, y)`` element-wise.
    lipschitz : float
        Public bound ``L`` on ``|f(a, z) - f(b, z)| / ||a - b||`` for every row
        ``z`` (enforced by clipping, whatever the model and loss do).
    init : ndarray of shape (n_params,) or None
        The public starting point (None: the model's ``initial(rng)``, drawn
        independently of the data).
    row_bound : float
        Public or released bound on the row norms.
    """

    X: np.ndarray
    y: np.ndarray
    model: object
    loss: object
    lipschitz: float
    init: np.ndarray
    row_bound: float = math.inf
    n_evaluations: list = field(default_factory=lambda: [0], repr=False)

    def __post_init__(self):
        # Own, read-only copies: a user's callable gets views of them, and must not be able to
        # rewrite rows (its own or others') between calls.
        self.X = np.array(self.X, dtype=float, order="C", copy=True)
        # Labels beyond 1e150 in solver units are clipped (a fixed per-record map).
        self.y = np.clip(np.asarray(self.y, dtype=float), -_LABEL_LIMIT, _LABEL_LIMIT)
        self.X.setflags(write=False)
        self.y.setflags(write=False)
        if self.init is not None:
            self.init = np.asarray(self.init, dtype=float)
        if not (float(self.lipschitz) > 0 and math.isfinite(float(self.lipschitz))):
            raise ValueError(f"lipschitz must be a positive finite number; got {self.lipschitz!r}.")

    @property
    def n_samples(self):
        return self.X.shape[0]

    @property
    def n_params(self):
        return int(self.model.n_params)

    def start(self, rng):
        """The starting point: ``init``, else the model's public random initialisation."""
        if self.init is not None:
            return self.init.copy()
        initial = getattr(self.model, "initial", None)
        return np.zeros(self.n_params) if initial is None else np.asarray(initial(rng), dtype=float)

    def report(self, step, n_steps, step_size=None):
        """Report the run's progress to the solver contract's hook (public counts and released steps only)."""
        report_progress(step, n_steps, step_size, function_evaluations=self.n_evaluations[0])

    def subset(self, rows):
        """The same problem on a subset of rows (sharing the evaluation counter)."""
        return replace(self, X=self.X[rows], y=self.y[rows])

    def with_loss(self, loss):
        """The same problem with another loss (sharing the evaluation counter)."""
        return replace(self, loss=loss)

    # -- evaluation ------------------------------------------------------------------------------
    def losses(self, theta, offsets, rows=None):
        """Loss of every row of ``rows`` at ``theta + offsets``: shape ``(n_rows, k)``.

        ``offsets`` is ``(k, d)`` (the same for every row) or ``(n_rows, k, d)``
        (per row). Values may be NaN or infinite (the oracles map them).
        """
        per_row = offsets.ndim == 3

        def compute(X, y, V):
            model = self.model
            pred = model.predict_rowwise(theta, V, X) if per_row else model.predict_offsets(theta, V, X)
            return self._values(pred, y, (X.shape[0], V.shape[-2]))

        return self._chunked(compute, offsets, per_row, offsets.shape[-2], rows)

    def two_point(self, theta, V, rows=None, coordinates=None, step=None):
        """``f(theta + V_j) - f(theta - V_j)`` for every row and offset: shape ``(n_rows, m)``.

        Models with a ``predict_symmetric(theta, V, X) -> (plus, minus)`` method
        (the linear model: one product ``X V^T``) are asked for both at once;
        when the offsets are ``step`` times the unit vectors of ``coordinates``,
        models with ``predict_coordinates(theta, coordinates, step, X)`` are
        asked for those moves (a network: one forward pass for all of them).
        """
        per_row = V.ndim == 3
        m = V.shape[-2]
        symmetric = None if per_row else getattr(self.model, "predict_symmetric", None)
        by_axis = None if coordinates is None else getattr(self.model, "predict_coordinates", None)

        def compute(X, y, W):
            shape = (X.shape[0], m)
            if by_axis is not None:
                plus, minus = by_axis(theta, coordinates, step, X)
                return self._values(plus, y, shape) - self._values(minus, y, shape)
            if symmetric is not None:
                plus, minus = symmetric(theta, W, X)
                return self._values(plus, y, shape) - self._values(minus, y, shape)
            both = np.concatenate([W, -W], axis=-2)
            model = self.model
            pred = model.predict_rowwise(theta, both, X) if per_row else model.predict_offsets(theta, both, X)
            values = self._values(pred, y, (X.shape[0], 2 * m))
            return values[:, :m] - values[:, m:]

        # Moves along coordinates build (n_rows, 2 m) arrays only, whatever the model's width.
        work = 1 if by_axis is not None else None
        return self._chunked(compute, V, per_row, 2 * m, rows, width=m, work=work)

    def _values(self, pred, y, shape):
        pred = np.asarray(pred, dtype=float)
        if pred.shape != shape:
            raise ValueError("wrong prediction shape")
        values = np.asarray(self.loss.value(pred, y[:, None]), dtype=float)
        if values.shape != shape:
            raise ValueError("wrong loss shape")
        return values

    def _chunked(self, compute, offsets, per_row, k, rows, width=None, work=None, count=True):
        """``compute(X, y, V)`` over public chunks of rows, a failing chunk again row by row (NaN rows)."""
        X = self.X if rows is None else self.X[rows]
        y = self.y if rows is None else self.y[rows]
        n = X.shape[0]
        width = k if width is None else width
        # Models that build temporaries of k x w per row (a hidden layer of w units) declare w.
        if work is None:
            work = max(1, int(getattr(self.model, "work_per_prediction", 1)))
        chunk = max(1, CHUNK_ELEMENTS // (max(k, 1) * work))
        if count:  # loss evaluations (n_function_evals_); predictions alone are not counted
            self.n_evaluations[0] += n * k
        with np.errstate(all="ignore"):
            if n <= chunk:
                return self._evaluate_chunk(compute, X, y, offsets, per_row, width)
            out = np.empty((n, width))
            for start in range(0, n, chunk):
                part = slice(start, min(n, start + chunk))
                chunk_offsets = offsets[part] if per_row else offsets
                out[part] = self._evaluate_chunk(compute, X[part], y[part], chunk_offsets, per_row, width)
            return out

    @staticmethod
    def _evaluate_chunk(compute, X, y, V, per_row, width):
        try:
            return compute(X, y, V)
        except KeyboardInterrupt:  # the user's interrupt, not the data's
            raise
        except BaseException:  # noqa: BLE001 - evaluate row by row: a failure stays with its row
            pass
        out = np.full((X.shape[0], width), np.nan)
        for i in range(X.shape[0]):
            try:
                out[i] = compute(X[i:i + 1], y[i:i + 1], V[i:i + 1] if per_row else V)[0]
            except KeyboardInterrupt:
                raise
            except BaseException:  # noqa: BLE001 - the row's values stay NaN (a zero difference)
                pass
        return out

    def predict(self, theta, rows=None):
        """Predictions at ``theta`` (non-finite values kept), by the evaluation rules of the oracles.

        Used for private releases (the residual scale), so it runs after the budget is
        reserved: a chunk on which a user's model raises or returns the wrong shape is
        predicted again row by row, and a row that fails alone gets NaN (never an exception).
        """
        model = self.model

        def compute(X, y, V):
            out = np.asarray(model.predict(theta, X), dtype=float).reshape(-1)
            if out.shape != (X.shape[0],):
                raise ValueError("wrong prediction shape")
            return out[:, None]

        return self._chunked(compute, np.zeros((1, self.n_params)), False, 1, rows, count=False)[:, 0]

    # -- the oracle sums: the solvers' only data queries ------------------------------------------
    def grad_sum(self, theta, draw, smoothing, rows=None):
        """Sum over ``rows`` of the clipped per-row estimates of the smoothed gradient at ``theta``.

        Row ``i`` contributes ``v_i = d / (2 delta m) sum_j a_ij u_ij`` with
        ``a_ij = f(theta + delta u_ij) - f(theta - delta u_ij)`` clipped by the
        rule of ``draw`` (Algorithm 1; an unbiased estimate of the gradient of
        the ``delta``-ball smoothing while no clip binds).

        Returns
        -------
        total : ndarray of shape (d,)
        sensitivity : float
            Replace-one L2 sensitivity of ``total``: ``2 max ||v_i||``.
        """
        m, d = draw.n_directions, draw.dim
        threshold = draw.grad_threshold(self.lipschitz, smoothing)
        scale = d / (2.0 * float(smoothing) * m)
        total = self.clipped_two_point_sum(theta, draw, smoothing, threshold, rows)
        return scale * total, 2.0 * scale * draw.row_bound(threshold)

    def clipped_two_point_sum(self, theta, draw, smoothing, threshold, rows=None):
        """``sum_i sum_j a_ij u_ij`` with every row's two-point differences clipped at ``threshold``.

        ``a_ij = f(theta + delta u_ij) - f(theta - delta u_ij)`` by the clip rule
        of ``draw``: the sum over rows that :meth:`grad_sum` scales (before the
        scale). A sum of per-row terms, so rows held elsewhere (chunks on a
        cluster) add their partial sums to the same total.
        """
        step = float(smoothing)
        A = self.two_point(theta, step * draw.directions, rows, draw.coordinates, step)
        return draw.combine(draw.clip(A, threshold))

    def absolute_residuals(self, theta, ceiling):
        """``|prediction - y|`` of every row at ``theta``, a non-finite one read as ``ceiling`` (per record).

        The values whose private median :func:`~skdp.solvers.zeroth_order._base.release_residual_scale`
        releases.
        """
        residual = np.abs(self.predict(theta) - self.y)
        return np.where(np.isfinite(residual), residual, ceiling)

    def diff_sum(self, w, w_prev, draw, smoothing, rows=None, symmetric=False, max_distance=math.inf):
        """Sum over ``rows`` of the clipped per-row estimates of ``grad F_delta(w) - grad F_delta(w_prev)``.

        One-sided (Algorithm 2): ``c_ij = f(w + delta u_ij) - f(w_prev + delta u_ij)``
        with scale ``d / (delta m)``; symmetric [ours]: the difference of the two
        two-point differences, scale ``d / (2 delta m)`` (zero for a row whose
        loss is linear around both points, so much less variance). The same
        directions are used at both points; the clip follows ``||w - w_prev||``,
        capped at the public ``max_distance`` the solver calibrated its noise to
        (rounding can put the realised distance a few ulps above it).

        Returns
        -------
        total : ndarray of shape (d,)
        sensitivity : float
        """
        m, d = draw.n_directions, draw.dim
        V = float(smoothing) * draw.directions
        distance = float(np.linalg.norm(np.asarray(w) - np.asarray(w_prev)))
        if not math.isfinite(distance):  # iterates that overflowed: the largest public distance, or none
            distance = float(max_distance) if math.isfinite(max_distance) else 0.0
        distance = min(distance, float(max_distance))
        if symmetric:
            axes, step = draw.coordinates, float(smoothing)
            A = self.two_point(w, V, rows, axes, step) - self.two_point(w_prev, V, rows, axes, step)
            scale = d / (2.0 * float(smoothing) * m)
        else:
            A = self.losses(w, V, rows) - self.losses(w_prev, V, rows)
            scale = d / (float(smoothing) * m)
        threshold = draw.diff_threshold(self.lipschitz, distance, symmetric)
        return scale * draw.combine(draw.clip(A, threshold)), 2.0 * scale * draw.row_bound(threshold)
