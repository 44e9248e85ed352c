"""A check, on public synthetic rows and before anything is spent, that a user's callables are row-wise.

The privacy argument of the zeroth-order solvers is per row: replacing one
row may change that row's loss values arbitrarily (they are clipped), and
nothing else. The solvers call the model and the loss on chunks of many rows
at once (one call per chunk is what makes them fast), so a callable that reads
other rows of its chunk — predictions centred by the batch mean, a batch
normalisation, a loss normalised by the batch's total — would let one row move
the values of others, and the clipped sum could move by more than its stated
sensitivity.

:func:`check_rowwise` calls the callables on public synthetic rows (standard
normal features and labels, drawn from a fixed seed: nothing of the data) and
refuses, with a ``ValueError`` raised before the budget is reserved, a
callable that

* returns the wrong shape (or raises on every row),
* gives a row a different value when it is evaluated alone than within the
  chunk (beyond rounding, relative ``1e-9``),
* changes any other row's value when one row of the chunk is replaced, or
* gives different values on a second identical call (state kept across calls,
  or randomness).

This catches the honest mistakes. It cannot prove that an adversarial
callable (one that recognises synthetic data, or mixes rows only sometimes) is
row-wise: Python gives no way to enforce it, and such a callable could as well
write the data to a file. Callables are trusted code; the check and the
clipping make an honest callable safe whatever it computes per row (huge,
discontinuous, NaN or raising values included).
"""

import numpy as np

__all__ = ["check_rowwise"]

_ROWS = 8
_PARAMS = 3
_RTOL = 1e-9
_SEED = 20240613


def _same(a, b, rtol=0.0):
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.shape != b.shape:
        return False
    both_nan = np.isnan(a) & np.isnan(b)
    with np.errstate(invalid="ignore"):
        close = (a == b) | (np.abs(a - b) <= rtol * np.maximum(np.abs(a), np.abs(b)))
    return bool(np.all(both_nan | close))


def _evaluate(model, loss, theta, V, Z, t):
    with np.errstate(all="ignore"):
        pred = np.asarray(model.predict_offsets(theta, V, Z), dtype=float)
        if pred.shape != (Z.shape[0], V.shape[0]):
            raise ValueError(f"the model returned predictions of shape {pred.shape}; expected "
                             f"(n_rows, n_parameter_vectors) = {(Z.shape[0], V.shape[0])}")
        values = np.asarray(loss.value(pred, t[:, None]), dtype=float)
        if values.shape != pred.shape:
            raise ValueError(f"the loss returned values of shape {values.shape}; expected the shape of the "
                             f"predictions, {pred.shape}")
    return values


def check_rowwise(model, loss, n_inputs, init, *, what="model and loss"):
    """Refuse callables that are not row-wise on public synthetic rows (see the module docstring).

    Parameters
    ----------
    model : object
        The model protocol of :class:`~skdp.solvers.zeroth_order.ZOProblem`.
    loss : object
        ``value(prediction, y)``.
    n_inputs : int
        Number of input columns the model sees.
    init : ndarray of shape (n_params,)
        A public parameter vector around which the callables are evaluated.
    what : str
        How the error message names the callables.

    Raises
    ------
    ValueError
        Naming the failed property. Called before anything is spent.

    Examples
    --------
    >>> import numpy as np
    >>> from skdp.losses import AbsoluteLoss
    >>> from skdp.zeroth_order._callables import check_rowwise
    >>> from skdp.zeroth_order._models import CallableModel
    >>> def centred(params, X):  # reads the other rows: the batch mean
    ...     pred = X @ params.T
    ...     return pred - pred.mean(axis=0)
    >>> check_rowwise(CallableModel(centred, 2), AbsoluteLoss(), 2, np.zeros(2))
    Traceback (most recent call last):
    ...
    ValueError: The model and loss must compute each row's value from that row alone ...
    """
    rng = np.random.default_rng(_SEED)
    Z = rng.standard_normal((_ROWS, n_inputs))
    t = rng.standard_normal(_ROWS)
    init = np.asarray(init, dtype=float)
    V = 0.1 * rng.standard_normal((_PARAMS, init.shape[0]))
    rowwise = ("The {what} must compute each row's value from that row alone (no batch statistics, no state "
               "kept across calls, no randomness): privacy is argued row by row and the rows are evaluated in "
               "chunks. On public synthetic rows, {problem}. Nothing was spent.")
    try:
        block = _evaluate(model, loss, init, V, Z, t)
    except Exception as exc:  # noqa: BLE001 - reported to the user, who passed the callable
        raise ValueError(f"The {what} could not be evaluated on public synthetic rows (standard normal "
                         f"features and labels): {exc}. Nothing was spent.") from exc
    try:
        again = _evaluate(model, loss, init, V, Z, t)
        alone = np.vstack([_evaluate(model, loss, init, V, Z[i:i + 1], t[i:i + 1]) for i in range(_ROWS)])
        Z2, t2 = Z.copy(), t.copy()
        Z2[0], t2[0] = 10.0 * rng.standard_normal(n_inputs), 10.0
        moved = _evaluate(model, loss, init, V, Z2, t2)
    except Exception as exc:  # noqa: BLE001
        raise ValueError(rowwise.format(what=what, problem=f"evaluating a subset of the rows failed ({exc})")) \
            from exc
    if not _same(block, again):
        raise ValueError(rowwise.format(what=what, problem="two identical calls gave different values"))
    if not _same(block, alone, _RTOL):
        raise ValueError(rowwise.format(what=what, problem="a row evaluated alone got another value than "
                                                           "within a chunk of rows"))
    if not _same(block[1:], moved[1:]):
        raise ValueError(rowwise.format(what=what, problem="replacing one row changed the values of others"))
