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

The synthetic rows include zeros and extreme values (1e3, 1e8), so a
callable that treats out-of-range rows by a batch statistic (an imputation by
the chunk's mean) is caught too. The check screens; it cannot prove that a
callable is row-wise (one that recognises synthetic data, or mixes rows only
on some inputs, passes it), and Python gives no way to enforce it. The privacy
guarantee for callables therefore rests on an assumption about trusted code:
*each row's value is computed from that row alone*. Under that assumption the
clipping makes a callable safe whatever it computes per row (huge,
discontinuous, NaN or raising values included); a callable that breaks it can
break the guarantee.
"""

import numpy as np

__all__ = ["check_rowwise"]

_ROWS = 8
_PARAMS = 3
# Extreme synthetic rows: a callable that treats out-of-range rows by a batch statistic (an imputation by
# the chunk's mean) is row-wise on ordinary rows only.
_EXTREME = 1e8
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


def _probes(rng, n_inputs, n_params):
    """Public synthetic blocks ``(Z, t, V)``: ordinary rows, then ordinary rows mixed with zeros and extremes.

    The second block also moves the parameter vectors further from ``init``.
    """
    Z = rng.standard_normal((_ROWS, n_inputs))
    t = rng.standard_normal(_ROWS)
    yield Z, t, 0.1 * rng.standard_normal((_PARAMS, n_params)), _evaluate, ((0, 10.0),)
    scales = np.array([1.0, 0.0, 1e3, -1e3, 1.0, _EXTREME, -_EXTREME, 1.0, 1.0, 1e3, 1.0, 1.0])
    Z = scales[:, None] * rng.standard_normal((scales.size, n_inputs))
    t = scales * rng.standard_normal(scales.size)
    # A callable may raise on extreme rows (the solvers then evaluate the chunk row by row, and a row that
    # raises alone contributes nothing): the extreme block is evaluated by that same rule.
    # Replace an ordinary row and an extreme one, by an ordinary and by an extreme row.
    yield Z, t, rng.standard_normal((_PARAMS, n_params)), _evaluate_as_solvers_do, \
        ((5, 1.0), (0, _EXTREME), (scales.size - 1, 10.0))


def _evaluate_as_solvers_do(model, loss, theta, V, Z, t):
    """:func:`_evaluate`, and row by row if the chunk raises (a row that raises alone gets NaN)."""
    try:
        return _evaluate(model, loss, theta, V, Z, t)
    except ValueError as exc:
        if "shape" in str(exc):
            raise
    except Exception:  # noqa: BLE001 - the solvers' rule for a chunk that raises
        pass
    rows = []
    for i in range(Z.shape[0]):
        try:
            rows.append(_evaluate(model, loss, theta, V, Z[i:i + 1], t[i:i + 1]))
        except Exception:  # noqa: BLE001
            rows.append(np.full((1, V.shape[0]), np.nan))
    return np.vstack(rows)


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
    init = np.asarray(init, dtype=float)
    rowwise = ("The {what} must compute each row's value from that row alone (no batch statistics, no state "
               "kept across calls, no randomness): privacy is argued row by row and the rows are evaluated in "
               "chunks. On public synthetic rows, {problem}. Nothing was spent.")
    for Z, t, V, evaluate, replacements in _probes(rng, n_inputs, init.shape[0]):
        try:
            block = evaluate(model, loss, init, V, Z, t)
        except Exception as exc:  # noqa: BLE001 - reported to the user, who passed the callable
            raise ValueError(f"The {what} could not be evaluated on public synthetic rows (standard normal "
                             f"features and labels, and rows of zeros and of extreme values): {exc}. Nothing "
                             f"was spent.") from exc
        try:
            again = evaluate(model, loss, init, V, Z, t)
            alone = np.vstack([evaluate(model, loss, init, V, Z[i:i + 1], t[i:i + 1]) for i in range(len(t))])
            moved = []
            for i, scale in replacements:
                Z2, t2 = Z.copy(), t.copy()
                Z2[i], t2[i] = scale * rng.standard_normal(n_inputs), scale
                moved.append((i, evaluate(model, loss, init, V, Z2, t2)))
        except Exception as exc:  # noqa: BLE001
            raise ValueError(rowwise.format(what=what, problem=f"evaluating a subset of the rows failed ({exc})")) \
                from exc
        if not _same(block, again):
            raise ValueError(rowwise.format(what=what, problem="two identical calls gave different values"))
        if not _same(block, alone, _RTOL):
            raise ValueError(rowwise.format(what=what, problem="a row evaluated alone got another value than "
                                                               "within a chunk of rows"))
        for i, values in moved:
            others = np.arange(len(t)) != i
            if not _same(block[others], values[others]):
                raise ValueError(rowwise.format(what=what,
                                                problem="replacing one row changed the values of others"))
