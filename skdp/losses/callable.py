"""Adapters that let a user's Python function serve as a per-row loss (with derivatives, or values only)."""

import numpy as np

__all__ = ["CallableLoss", "ValueLoss"]


class CallableLoss:
    """Adapter for a user loss ``f(prediction, y) -> (values, derivatives)``.

    Contract: ``f`` is a pure function of its arguments that maps arrays of
    predictions and labels to arrays of per-row loss values and derivatives in
    the prediction. Privacy rests on each row's value and derivative depending
    on that row only, so skdp enforces what it can: the callable is evaluated
    on one row at a time (arrays of length 1), so a callable that couples rows
    (residuals centred by the batch mean, say) sees a single row and cannot mix
    records. A callable that keeps state across calls (a running mean in a
    closure or an object) can still carry one row's value into another's
    derivative; Python offers no way to prevent that, so such callables are
    outside the contract and their fits are not private.

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
            except KeyboardInterrupt:  # the user's interrupt, not the data's: let it through
                raise
            except BaseException:  # noqa: BLE001 - any failure maps to the fixed per-record rule
                pass
        deriv = np.where(np.isfinite(deriv), deriv, 0.0)
        return values.reshape(shape), deriv.reshape(shape)

    def derivative(self, z, y):
        return self._evaluate(z, y)[1]

    def value(self, z, y):
        return self._evaluate(z, y)[0]

    def __repr__(self):
        return f"CallableLoss({getattr(self.fn, '__name__', self.fn)!r})"


class ValueLoss:
    """Adapter for a user loss known only by its values: ``f(prediction, y) -> loss values``.

    For solvers that use loss values only (:mod:`skdp.solvers.zeroth_order`).
    ``f`` is called vectorised, with ``prediction`` of shape ``(n_rows, k)``
    (row ``i`` under ``k`` parameter vectors) and ``y`` of shape
    ``(n_rows, 1)``, and must return the element-wise losses, shape
    ``(n_rows, k)``: every value must depend on its own row only (no batch
    means, no state kept across calls). The solvers check this on public
    synthetic rows before anything is spent and evaluate every row that makes
    the call fail on its own; see :class:`~skdp.solvers.zeroth_order.ZOProblem`.

    Nothing about ``f`` is assumed for privacy: the solvers clip every row's
    finite differences to the public bound ``lipschitz`` (in the prediction)
    times the model's, and map non-finite values to a zero difference, so a
    wrong ``lipschitz`` costs accuracy (the optimised loss is a clipped
    surrogate), never privacy.

    Parameters
    ----------
    fn : callable
    lipschitz : float > 0, default=1.0
        Public bound on ``|d f / d prediction|``.

    Examples
    --------
    >>> import numpy as np
    >>> from skdp.losses import ValueLoss
    >>> loss = ValueLoss(lambda z, y: np.log(np.cosh(z - y)), lipschitz=1.0)
    >>> np.round(loss.value(np.array([[0.0, 1.0]]), np.array([[1.0]])), 4).tolist()
    [[0.4338, 0.0]]
    """

    smoothness = np.inf
    is_classification = False
    name = "callable"

    def __init__(self, fn, lipschitz=1.0):
        lipschitz = float(lipschitz)
        if not (lipschitz > 0 and np.isfinite(lipschitz)):
            raise ValueError(f"lipschitz must be a positive finite number; got {lipschitz!r}.")
        self.fn = fn
        self.max_derivative = lipschitz

    def value(self, z, y):
        """The user's values as a float array (the caller handles failures and checks the shape)."""
        return np.asarray(self.fn(z, y), dtype=float)

    def derivative_bound(self, prediction_bound, y):
        shape = np.broadcast(np.asarray(prediction_bound), np.asarray(y)).shape
        return np.full(shape, self.max_derivative)

    def __repr__(self):
        return f"ValueLoss({getattr(self.fn, '__name__', self.fn)!r}, lipschitz={self.max_derivative!r})"
