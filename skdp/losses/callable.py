"""Adapter that lets a user's Python function serve as the per-row loss of a linear model."""

import numpy as np

__all__ = ["CallableLoss"]


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
