"""The zeroth-order regressor's releases on rows held on a Dask cluster: per-chunk sums added on the driver.

:class:`~skdp.DPZerothOrderRegressor` with its linear model and the practical
full-batch "naive" schedule touches its rows only through sums of per-row
terms and private quantiles:

* the shared private standardisation, exactly as
  :class:`~skdp.DPHeavyTailRegressor` (its chunk functions are listed in
  :mod:`skdp.linear_model._rows`);
* each of the ``T`` steps: the sum over rows of every row's two-point
  differences ``f(theta + delta u_j) - f(theta - delta u_j)`` along the step's
  frame, clipped jointly to the public (or released) Lipschitz bound
  (:meth:`~skdp.solvers.zeroth_order.ZOProblem.clipped_two_point_sum`);
* with the huber, tukey or cauchy loss and ``loss_constant="auto"``: one
  private median of the absolute residuals after the warm-up
  (:meth:`~skdp.solvers.zeroth_order.ZOProblem.absolute_residuals`, released
  by the chunked exponential-mechanism quantile);
* the fit check's clipped residual sums (the linear model's predictions are
  ``X @ coef + intercept``: the shared chunk function of
  :mod:`skdp.linear_model._fit_check`).

Each chunk function below forms the chunk's solver rows as the in-memory fit
forms all of them (the released ``Scaling``, rows clipped to the released row
bound, labels in solver units), builds the in-memory
:class:`~skdp.solvers.zeroth_order.ZOProblem` on that block, and calls the
same method the in-memory solver calls: every per-row rule (evaluation,
non-finite values, the joint clip) is written once. The driver adds the
partial sums in chunk order and does everything else with the fit's generator
in the in-memory order (the frames, the noise, the steps, the projection, the
quantile's selection), so the Dask fit releases the in-memory model and
privacy event up to the order of floating-point summation: a sum over rows
has the same sensitivity however the rows are split into chunks.

What each pass ships to the workers besides the chunk ``(X_c, y_c)``:

=======================================  ===========================================  ===============================
release                                  per-chunk function                           shipped with it
=======================================  ===========================================  ===============================
each step's clipped difference sum       :func:`_two_point_chunk` (returns a vector   the released ``Scaling``, the
                                         of ``n_params`` numbers)                     model (public size), the loss
                                                                                      (built-in; its constant public
                                                                                      or from released scales), the
                                                                                      clip (from released scales),
                                                                                      the current released iterate,
                                                                                      the step's frame, the public
                                                                                      smoothing radius and threshold
residual scale (a private median)        :func:`_residual_chunk` (values, through     the ``Scaling``, the model, the
                                         :class:`~skdp.linear_model._rows.            released iterate after the
                                         ChunkedValues`: counts over public bins,     warm-up, the public range, the
                                         then the values near the target)             quantile's jitter state (a
                                                                                      SHA-256 child)
=======================================  ===========================================  ===============================

The step's frame is data-independent randomness drawn on the driver from the
fit's generator, as in memory. Only the default frame is accepted on Dask
input: every coordinate axis (``directions="coordinates"``, ``n_directions`` =
the number of parameters), which is the identity and carries nothing of the
generator. A frame of fewer axes, or a Haar frame (``directions="orth"``),
would send raw outputs of the generator that also draws the steps' Gaussian
noise (a non-cryptographic generator) to the workers, against the rule that
only SHA-256-derived states leave the driver; they are refused before anything
is spent. Whoever can read the task graph, the scheduler or the workers' logs
must be trusted like the data in any case: the exact per-chunk sums they
return, with the released steps, give every noise draw.

Passes of a default fit (absolute loss, ``max_iter="auto"``: ``T = 50``):
``T + 24`` (74) for a table with up to 64 columns and ``n d < 4e5``: the
finite check before the reservation, 22 for the standardisation (the column
and target quantiles and the two row-norm medians, two passes each, the
magnitude check, the Gram matrix; 8 more from ``n d = 4e5``, where the column
statistics release two halves of the columns), ``T`` steps and the fit check.
The huber, tukey and cauchy losses with ``loss_constant="auto"`` add 2 (the
residual median). A quantile whose target lies in a crowded bin, or one
drawn from counts (on more than ``2^20 + 2`` rows), can take extra passes, a
number that depends on the data (see
:mod:`skdp.linear_model._rows` and the Dask docs).

Not built on chunked rows (refused before anything is read or spent, by
:func:`check_chunked_zeroth_order`): ``model="mlp"`` and a callable model (their
evaluation and fallback rules are not built per chunk), a callable loss (a
user function shipped to the workers; its row-wise screen runs on synthetic
rows in memory), ``algorithm="variance_reduced"`` and ``schedule="theory"``
(one pass over disjoint blocks or single rows in a private order),
``directions="iid"`` (an ``(n, m, p)`` array of per-row directions every
step), a warm-up loss that is not one of the library's, and declared bounds
(as for every estimator).
"""

import math
from dataclasses import dataclass

import numpy as np

from ..linear_model._rows import ChunkedValues, _chunk_problem_rows
from ..solvers.zeroth_order import ZOProblem

__all__ = ["ChunkedZOProblem", "check_chunked_zeroth_order"]

_SUPPORTED = ("DPZerothOrderRegressor on Dask input supports model='linear' (the default) with a built-in loss "
              "('absolute', 'pinball', 'huber', 'tukey', 'cauchy') and algorithm 'auto' or 'naive' with "
              "schedule='practical' and every coordinate axis as directions (directions=None or 'coordinates' "
              "with n_directions=None); every scaling mode; no declared bounds. Nothing was spent.")


_FRAME_REFUSAL = ("On Dask input the steps' directions must be every coordinate axis (directions=None or "
                  "'coordinates', n_directions=None): a Haar frame or a subset of axes is drawn from the "
                  "generator of the fit's noise and would travel to the workers. " + _SUPPORTED)


def check_chunked_zeroth_order(estimator, solver=None):
    """Refuse, from public inputs only, a zeroth-order configuration not built on chunked rows.

    Called before the Dask collections are read (parameters alone), and again
    with the planned ``solver`` before anything is spent.

    Raises
    ------
    ValueError
        Naming what to change.
    """
    model, loss = estimator.model, estimator.loss
    if callable(model) or model != "linear":
        what = "a callable model" if callable(model) else f"model={model!r}"
        raise ValueError(f"{what} is not supported on Dask input yet (its evaluation rules are not built on "
                         f"chunked rows): use model='linear' or fit in memory. {_SUPPORTED}")
    if callable(loss):
        raise ValueError("A callable loss is not supported on Dask input (it would run on the workers, "
                         "unscreened on their rows): pass loss='absolute', 'pinball', 'huber', 'tukey' or "
                         f"'cauchy', or fit in memory. {_SUPPORTED}")
    if solver is None:
        if isinstance(estimator.algorithm, str):
            name, schedule, directions = estimator.algorithm, estimator.schedule, estimator.directions
            _check_schedule(name if name != "auto" else None, schedule, directions)
        else:
            solver = estimator.algorithm
    if solver is None and estimator.directions == "orth":
        raise ValueError(_FRAME_REFUSAL)
    if solver is not None:
        _check_schedule(solver.name, getattr(solver, "schedule", None), getattr(solver, "directions", None))
        if hasattr(solver, "_mode") and hasattr(estimator, "n_features_in_"):
            n_params = estimator._n_params(estimator.n_features_in_)
            if solver._mode() != "coordinates" or solver._n_directions(n_params) < n_params:
                raise ValueError(_FRAME_REFUSAL)
        warm = getattr(solver, "warm_loss", None)
        if warm is not None and not type(warm).__module__.startswith("skdp.losses"):
            raise ValueError(f"The warm-up loss {warm!r} is not one of the library's losses; on Dask input the "
                             f"losses run on the workers, so only built-in ones are accepted. {_SUPPORTED}")


def _check_schedule(name, schedule, directions):
    if name is not None and name != "naive":
        raise ValueError(f"algorithm={name!r} is not supported on Dask input (it makes one pass over blocks "
                         f"of rows in a private order, not passes of sums): use algorithm='naive' (the "
                         f"practical default). {_SUPPORTED}")
    if schedule == "theory":
        raise ValueError("schedule='theory' is not supported on Dask input (it uses one row per step, in a "
                         f"private order): use schedule='practical'. {_SUPPORTED}")
    if directions == "iid":
        raise ValueError("directions='iid' is not supported on Dask input (it draws directions for every row "
                         "at every step, which would all travel to the workers): use 'coordinates' or "
                         f"'orth'. {_SUPPORTED}")


# -- per-chunk functions: the in-memory problem on a block of rows ------------------------------
def _chunk_problem(X, y, scaling, model, loss, lipschitz):
    """The in-memory :class:`ZOProblem` of one chunk (its rows formed as the in-memory fit forms them)."""
    Z, t = _chunk_problem_rows(X, y, scaling, True)
    return ZOProblem(Z, t, model, loss, lipschitz, None)


def _two_point_chunk(X, y, scaling, model, loss, lipschitz, theta, draw, smoothing, threshold):
    problem = _chunk_problem(X, y, scaling, model, loss, lipschitz)
    return problem.clipped_two_point_sum(theta, draw, smoothing, threshold)


def _residual_chunk(X, y, scaling, model, loss, lipschitz, theta, ceiling):
    return _chunk_problem(X, y, scaling, model, loss, lipschitz).absolute_residuals(theta, ceiling)


@dataclass(frozen=True)
class ChunkedZORows:
    """The solver rows of chunked rows (``rows`` a ChunkedRows, formed per chunk with ``scaling``)."""

    rows: object
    scaling: object

    @property
    def shape(self):
        n, d = self.rows.shape
        return n, d + int(self.scaling.fit_intercept)


@dataclass
class ChunkedZOProblem(ZOProblem):
    """A :class:`~skdp.solvers.zeroth_order.ZOProblem` whose rows stay on the cluster.

    ``X`` is a :class:`ChunkedZORows` and ``y`` is None (the labels are in
    the chunks). Offers what the practical full-batch "naive" schedule asks:
    the clipped two-point sum of a shared frame (one pass) and the absolute
    residuals (chunked values, for the private median); the other queries
    refuse (their configurations are refused before any spend).

    Examples
    --------
    >>> import numpy as np
    >>> import dask.array as da
    >>> from skdp.linear_model._rows import ChunkedRows
    >>> from skdp.linear_model._standardise import Scaling
    >>> from skdp.losses import AbsoluteLoss
    >>> from skdp.solvers.zeroth_order import ZOProblem, draw_directions
    >>> from skdp.zeroth_order._chunked import ChunkedZOProblem
    >>> from skdp.zeroth_order._models import LinearModel
    >>> rng = np.random.default_rng(0)
    >>> X, y = rng.normal(size=(50, 2)), rng.normal(size=50)
    >>> scaling = Scaling("none", np.zeros(2), np.ones(2), 0.0, 1.0, row_bound=10.0, unit=1.0,
    ...                   fit_intercept=True, quantile_epsilon=1.0)
    >>> rows = ChunkedRows(da.from_array(X, chunks=(20, 2)), da.from_array(y, chunks=20))
    >>> chunked = ChunkedZOProblem.on(rows, scaling, LinearModel(3), AbsoluteLoss(), 10.0)
    >>> memory = ZOProblem(scaling.rows(X), y, LinearModel(3), AbsoluteLoss(), 10.0, None)
    >>> draw = draw_directions("coordinates", rng, 50, 3, 3)
    >>> a, b = chunked.grad_sum(np.zeros(3), draw, 1e-3), memory.grad_sum(np.zeros(3), draw, 1e-3)
    >>> bool(np.allclose(a[0], b[0], rtol=1e-12)), a[1] == b[1]
    (True, True)
    """

    @classmethod
    def on(cls, rows, scaling, model, loss, lipschitz, row_bound=math.inf):
        """The problem of the chunked ``rows`` under the released ``scaling`` (nothing is computed)."""
        return cls(ChunkedZORows(rows, scaling), None, model, loss, lipschitz, None, row_bound=row_bound)

    def __post_init__(self):
        if not (float(self.lipschitz) > 0 and math.isfinite(float(self.lipschitz))):
            raise ValueError(f"lipschitz must be a positive finite number; got {self.lipschitz!r}.")

    def _args(self):
        return self.X.scaling, self.model, self.loss, float(self.lipschitz)

    def clipped_two_point_sum(self, theta, draw, smoothing, threshold, rows=None):
        if rows is not None or not draw.shared:  # pragma: no cover - refused before any spend
            raise NotImplementedError("Row subsets and per-row directions are not built on chunked rows.")
        # The evaluations the in-memory problem counts: 2 m per row (public: n and m).
        self.n_evaluations[0] += self.n_samples * 2 * draw.n_directions
        return self.X.rows.sum(_two_point_chunk, *self._args(), np.asarray(theta, dtype=float), draw,
                               float(smoothing), float(threshold))

    def absolute_residuals(self, theta, ceiling):
        return ChunkedValues(self.X.rows, 1, _residual_chunk, *self._args(), np.asarray(theta, dtype=float),
                             float(ceiling))

    def _unsupported(self, *args, **kwargs):  # pragma: no cover - refused before any spend
        raise NotImplementedError("This row query is not built for chunked rows (refused before any spend).")

    subset = losses = two_point = diff_sum = predict = _unsupported
