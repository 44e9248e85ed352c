"""The models of the zeroth-order regressor: linear, a one-hidden-layer network, and a user's callable.

Every model follows the protocol of :class:`~skdp.solvers.zeroth_order.ZOProblem`:
``n_params``, ``predict(theta, X)``, and the vectorised
``predict_offsets(theta, V, X)`` (every row under ``theta + V[j]`` for the
``k`` rows of ``V``) and ``predict_rowwise(theta, V, X)`` (row ``i`` under
``theta + V[i, j]``). The built-in models use their structure to evaluate many
parameter vectors at once (a linear model needs ``X @ V.T`` only; the network
shares the unperturbed hidden layer), which is why a zeroth-order step on them
costs a few matrix products rather than ``2 m`` forward passes.
"""

import numpy as np

__all__ = ["LinearModel", "MLPModel", "CallableModel", "scalar_model", "scalar_loss"]


class LinearModel:
    """``x . theta`` (an intercept is a constant column of the rows).

    Examples
    --------
    >>> import numpy as np
    >>> from skdp.zeroth_order._models import LinearModel
    >>> model = LinearModel(2)
    >>> X = np.array([[1.0, 2.0], [3.0, 1.0]])
    >>> model.predict_offsets(np.array([1.0, 0.0]), np.array([[0.0, 1.0], [1.0, 0.0]]), X).tolist()
    [[3.0, 2.0], [4.0, 6.0]]
    """

    work_per_prediction = 1

    def __init__(self, n_params):
        self.n_params = int(n_params)

    def predict(self, theta, X):
        return X @ theta

    def predict_offsets(self, theta, V, X):
        return (X @ theta)[:, None] + X @ V.T

    def predict_symmetric(self, theta, V, X):
        """Predictions at ``theta + V_j`` and ``theta - V_j``: one product ``X V^T`` for both."""
        base = (X @ theta)[:, None]
        moved = X @ V.T
        return base + moved, base - moved

    def predict_rowwise(self, theta, V, X):
        return (X @ theta)[:, None] + np.einsum("ip,ikp->ik", X, V)

    def predict_coordinates(self, theta, coordinates, step, X):
        """Predictions at ``theta +- step e_c`` for the axes ``c`` in ``coordinates``."""
        base = (X @ theta)[:, None]
        moved = step * X[:, coordinates]
        return base + moved, base - moved

    def initial(self, rng):
        return np.zeros(self.n_params)


_ACTIVATIONS = {"relu": lambda H: np.maximum(H, 0.0), "tanh": np.tanh}


class MLPModel:
    """One hidden layer: ``act(x W1 + b1) . w2 + b2``, parameters ``[W1 (row-major), b1, w2, b2]``.

    Parameters
    ----------
    n_inputs : int
    hidden_units : int
    activation : {"relu", "tanh"}

    Examples
    --------
    >>> import numpy as np
    >>> from skdp.zeroth_order._models import MLPModel
    >>> model = MLPModel(n_inputs=2, hidden_units=3)
    >>> model.n_params
    13
    >>> theta = np.random.default_rng(0).normal(size=13)
    >>> X = np.random.default_rng(1).normal(size=(4, 2))
    >>> V = np.random.default_rng(2).normal(size=(5, 13))
    >>> direct = np.column_stack([model.predict(theta + v, X) for v in V])
    >>> bool(np.allclose(model.predict_offsets(theta, V, X), direct))
    True
    """

    def __init__(self, n_inputs, hidden_units, activation="relu"):
        self.n_inputs = int(n_inputs)
        self.hidden_units = int(hidden_units)
        self.activation = activation
        self._act = _ACTIVATIONS[activation]
        self.n_params = self.n_inputs * self.hidden_units + 2 * self.hidden_units + 1
        self.work_per_prediction = self.hidden_units + 1

    def _split(self, theta):
        """``W1 (..., p, h), b1 (..., h), w2 (..., h), b2 (...)`` of one or many parameter vectors."""
        p, h = self.n_inputs, self.hidden_units
        lead = theta.shape[:-1]
        W1 = theta[..., :p * h].reshape(lead + (p, h))
        return W1, theta[..., p * h:p * h + h], theta[..., p * h + h:p * h + 2 * h], theta[..., -1]

    def predict(self, theta, X):
        W1, b1, w2, b2 = self._split(np.asarray(theta, dtype=float))
        return self._act(X @ W1 + b1) @ w2 + b2

    def predict_offsets(self, theta, V, X):
        W1, b1, w2, b2 = self._split(np.asarray(theta, dtype=float))
        V1, vb1, vw2, vb2 = self._split(V)
        n, k, h = X.shape[0], V.shape[0], self.hidden_units
        # The unperturbed pre-activations are shared; each offset adds X V1_j + vb1_j.
        base = X @ W1 + b1
        moved = (X @ V1.transpose(1, 0, 2).reshape(self.n_inputs, k * h)).reshape(n, k, h)
        hidden = self._act(base[:, None, :] + moved + vb1[None])
        return np.einsum("ikh,kh->ik", hidden, w2[None] + vw2) + (b2 + vb2)[None]

    def predict_coordinates(self, theta, coordinates, step, X):
        """Predictions at ``theta +- step e_c`` for the axes ``c`` in ``coordinates``: one forward pass.

        Moving ``W1[a, b]`` or ``b1[b]`` changes hidden unit ``b`` only, and
        moving ``w2[b]`` or ``b2`` the output only, so every move costs one
        column of work instead of a forward pass. (Computed with the moves as
        rows, ``(k, n)``, so that every gather reads contiguous memory.)
        """
        W1, b1, w2, b2 = self._split(np.asarray(theta, dtype=float))
        p, h = self.n_inputs, self.hidden_units
        c = np.asarray(coordinates)
        pre = (X @ W1 + b1).T  # (h, n)
        hidden = self._act(pre)
        base = hidden.T @ w2 + b2  # (n,)
        XT = X.T  # (p, n)
        plus = np.empty((c.shape[0], X.shape[0]))
        minus = np.empty_like(plus)
        hidden_part = c < p * h + h  # a weight or bias of the hidden layer
        idx = np.flatnonzero(hidden_part)
        if idx.size:
            weights = c[idx] < p * h
            unit = np.where(weights, c[idx] % h, c[idx] - p * h)
            # W1[a, b] moves unit b by step * x_a; b1[b] by step.
            shift = np.ones((idx.size, X.shape[0]))
            shift[weights] = XT[c[idx][weights] // h]
            shift *= step
            column, out = pre[unit], hidden[unit]
            scale = w2[unit][:, None]
            for sign, target in ((1.0, plus), (-1.0, minus)):
                moved = self._act(column + sign * shift)
                moved -= out
                moved *= scale
                moved += base
                target[idx] = moved
        idx = np.flatnonzero(~hidden_part)
        if idx.size:
            unit = c[idx] - (p * h + h)  # w2[b] for b < h; h is b2
            moved = np.ones((idx.size, X.shape[0]))
            moved[unit < h] = hidden[unit[unit < h]]
            moved *= step
            plus[idx] = base + moved
            minus[idx] = base - moved
        return plus.T, minus.T

    def predict_rowwise(self, theta, V, X):
        W1, b1, w2, b2 = self._split(np.asarray(theta, dtype=float))
        V1, vb1, vw2, vb2 = self._split(V)
        pre = (X @ W1 + b1)[:, None, :] + np.einsum("ip,ikph->ikh", X, V1) + vb1
        return np.einsum("ikh,ikh->ik", self._act(pre), w2 + vw2) + b2 + vb2

    def initial(self, rng):
        """He initialisation of ``W1`` (public randomness: drawn independently of the data), ``w2`` of scale
        ``1 / sqrt(h)``, biases 0."""
        p, h = self.n_inputs, self.hidden_units
        scale = np.sqrt(2.0 / p) if self.activation == "relu" else np.sqrt(1.0 / p)
        return np.concatenate([rng.normal(scale=scale, size=p * h), np.zeros(h),
                               rng.normal(scale=1.0 / np.sqrt(h), size=h), [0.0]])


class CallableModel:
    """A user's model ``fn(params, X) -> predictions`` called vectorised.

    ``fn`` receives ``params`` of shape ``(k, n_params)`` and rows ``X`` of
    shape ``(n_rows, n_features)`` (in standardised units) and returns the
    predictions of shape ``(n_rows, k)``: entry ``[i, j]`` is row ``i`` under
    parameter vector ``j``, computed from row ``i`` alone.

    Parameters
    ----------
    fn : callable
    n_params : int
    init : array-like of shape (n_params,) or None
        The public starting point (None: zeros).
    """

    work_per_prediction = 1

    def __init__(self, fn, n_params, init=None):
        self.fn = fn
        self.n_params = int(n_params)
        self.init = None if init is None else np.asarray(init, dtype=float).reshape(-1)

    def predict(self, theta, X):
        return np.asarray(self.fn(np.asarray(theta, dtype=float)[None], X), dtype=float)[:, 0]

    def predict_offsets(self, theta, V, X):
        return self.fn(np.asarray(theta, dtype=float)[None] + V, X)

    def predict_rowwise(self, theta, V, X):
        # Per-row parameters: one call per row (the directions differ from row to row).
        return np.vstack([np.asarray(self.fn(theta[None] + V[i], X[i:i + 1]), dtype=float).reshape(1, -1)
                          for i in range(X.shape[0])])

    def initial(self, rng):
        return np.zeros(self.n_params) if self.init is None else self.init.copy()


def scalar_model(fn):
    """Adapt a scalar model ``fn(theta, x) -> float`` (one parameter vector, one row) to the vectorised form.

    Slow: one Python call per row and parameter vector (``2 m`` per row and
    step). Write the model vectorised when the data are large.

    Examples
    --------
    >>> import numpy as np
    >>> from skdp.zeroth_order import scalar_model
    >>> model = scalar_model(lambda theta, x: float(theta[0] * np.sin(x[0])))
    >>> model(np.array([[1.0], [2.0]]), np.array([[0.0], [np.pi / 2]])).tolist()
    [[0.0, 0.0], [1.0, 2.0]]
    """

    def vectorised(params, X):
        return np.array([[fn(theta, x) for theta in params] for x in X], dtype=float).reshape(X.shape[0],
                                                                                              params.shape[0])

    vectorised.__name__ = getattr(fn, "__name__", "scalar_model")
    return vectorised


def scalar_loss(fn):
    """Adapt a scalar loss ``fn(prediction, y) -> float`` to the element-wise form (slow: one call per value).

    Examples
    --------
    >>> import numpy as np
    >>> from skdp.zeroth_order import scalar_loss
    >>> loss = scalar_loss(lambda p, y: abs(p - y) ** 0.5)
    >>> loss(np.array([[0.0, 4.0]]), np.array([[0.0]])).tolist()
    [[0.0, 2.0]]
    """

    def elementwise(prediction, y):
        prediction, y = np.broadcast_arrays(np.asarray(prediction, dtype=float), np.asarray(y, dtype=float))
        return np.array([fn(p, t) for p, t in zip(prediction.ravel(), y.ravel())],
                        dtype=float).reshape(prediction.shape)

    elementwise.__name__ = getattr(fn, "__name__", "scalar_loss")
    return elementwise
