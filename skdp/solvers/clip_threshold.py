"""The clip-threshold rule shared by the solvers: a private quantile of per-sample gradient norms.

For a linear model the per-sample gradient is ``loss'(x.w, y) x`` with norm
``|loss'| ||x||``. Clipping it at ``C`` bounds the replace-one sensitivity of a
mean of ``m`` gradients by ``2 C / m`` whatever the data; the threshold itself
is data-dependent, so it is released by the exponential mechanism
(:func:`skdp.mechanisms.private_quantile`, epsilon-DP) on a log scale within the
public range ``CLIP_RANGE x row_bound``. Per-sample gradient norms are at most
``|loss'| x row_bound``, and a short public range keeps a starved quantile from
landing absurdly far from the data.

Losses with a public bound on ``|loss'|`` (absolute, quantile) need no
quantile: they clip at ``bound x row_bound``, which changes no gradient when the
rows are clipped to ``row_bound``. (On whitened rows kept whole it clips the
gradients of rows longer than ``row_bound``, as any clip would: the
sensitivity ``2 C / m`` holds either way.)
"""

import numpy as np

from ..losses import HuberLoss, SquaredLoss
from ..mechanisms import private_quantile

__all__ = ["CLIP_RANGE", "public_derivative_bound", "derivative_cap", "gradient_norms", "private_clip"]

CLIP_RANGE = (1e-6, 10.0)


def public_derivative_bound(loss):
    """Public bound on ``|loss'|`` for losses whose bound does not depend on the data, else None.

    Absolute and quantile losses have one (their gradients are then clipped at
    ``bound * row_bound``, which changes no gradient of a row clipped to
    ``row_bound``). Squared and Huber
    losses return None: the squared loss has no bound, and for the Huber loss
    a clip at a low private quantile of the gradient norms is much less noisy
    than ``delta * row_bound``. Callables return None.

    Examples
    --------
    >>> from skdp.losses import AbsoluteLoss, SquaredLoss
    >>> from skdp.solvers.clip_threshold import public_derivative_bound
    >>> public_derivative_bound(AbsoluteLoss()), public_derivative_bound(SquaredLoss())
    (1.0, None)
    """
    if isinstance(loss, (SquaredLoss, HuberLoss)) or not hasattr(loss, "derivative_bound"):
        return None
    value = float(np.max(loss.derivative_bound(np.array([np.inf]), np.array([0.0]))))
    return value if np.isfinite(value) else None


def derivative_cap(loss):
    """``max |loss'|`` when finite (the Huber threshold), else None."""
    bound = getattr(loss, "derivative_bound", None)
    if bound is None:
        return None
    value = float(np.max(bound(np.array([np.inf]), np.array([0.0]))))
    return value if np.isfinite(value) and value > 0 else None


def gradient_norms(problem, w, rows=None):
    """Norms ``|loss'(x_i . w, y_i)| ||x_i||`` of the per-sample gradients (per record: never released)."""
    return problem.gradient_norms(w, rows)


_WIDEST_RANGE = (1e-300, 1e300)
_JITTER = 0.05


def private_clip(problem, level, epsilon, rng, *, w=None, rows=None, values=None, upper=None):
    """Epsilon-DP ``level``-quantile of the per-sample gradient norms, as a clip threshold.

    Parameters
    ----------
    problem : GLMProblem
    level : float in (0, 1)
    epsilon : float
        Epsilon of the exponential-mechanism release.
    rng : numpy Generator
    w : ndarray, optional
        The point at which the gradients are taken (default 0).
    rows : index array, optional
        The rows whose gradient norms are used (default all): a solver's
        disjoint block, so that quantiles of disjoint blocks compose in parallel.
    values : ndarray, optional
        Per-record quantities to use instead of the gradient norms (for example
        per-sample Lipschitz bounds); each record contributes one value.
    upper : float, optional
        Upper end of the public range (default ``CLIP_RANGE[1] x row_bound``).

    Returns
    -------
    threshold : float
    event : PrivacyEvent
    """
    if values is None:
        values = gradient_norms(problem, np.zeros(problem.n_coef) if w is None else w, rows)
    lower = CLIP_RANGE[0] * problem.row_bound
    upper = CLIP_RANGE[1] * problem.row_bound if upper is None else upper
    if not (np.isfinite(lower) and np.isfinite(upper)):
        # An infinite row bound comes only with epsilon = inf (nothing is clipped without
        # noise): the exact quantile, within the widest public range.
        if not np.isinf(epsilon):
            raise ValueError("A private clip threshold needs a finite row bound.")
        lower, upper = _WIDEST_RANGE
    # Jitter: tied norms (binary labels, one-hot rows) would leave only zero-length intervals.
    threshold, event = private_quantile(values, level, epsilon, (lower, upper), scale="log", jitter=_JITTER,
                                        random_state=rng)
    return float(threshold), event
