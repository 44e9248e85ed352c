"""Additive noise mechanisms: Gaussian, Laplace and bounded (truncated) Laplace.

Each mechanism returns the noisy value together with the privacy event that
describes exactly the noise it drew.
"""

import math

import numpy as np

from ..accounting import ApproxDPRelease, GaussianRelease, LaplaceRelease
from ._audit import notify
from ._random import check_generator

__all__ = [
    "NON_PRIVATE_RELEASE",
    "gaussian_mechanism",
    "laplace_mechanism",
    "l2_laplace_mechanism",
    "bounded_laplace_noise",
    "bounded_laplace_mechanism",
    "bounded_laplace_event",
    "budgeted_release",
]


# The event of a value released exactly with no bound on its sensitivity (only ever at
# epsilon = inf): mu = inf, so any composition with it is not private. (A Gaussian release
# with sensitivity 0 would count as free instead.)
NON_PRIVATE_RELEASE = GaussianRelease(1.0, 0.0)


def _as_float_array(value):
    arr = np.array(value, dtype=float, copy=True)
    return arr


def gaussian_mechanism(value, sensitivity, noise_std, random_state=None):
    """Release ``value + N(0, noise_std^2 I)``.

    Parameters
    ----------
    value : float or array-like
        The exact value; its replace-one L2 sensitivity must be at most
        ``sensitivity``.
    sensitivity : float >= 0
    noise_std : float >= 0
    random_state : None, int or Generator

    Returns
    -------
    noisy : float or ndarray
    event : GaussianRelease

    Examples
    --------
    >>> from skdp.mechanisms import gaussian_mechanism
    >>> noisy, event = gaussian_mechanism([1.0, 2.0], sensitivity=0.1, noise_std=0.5,
    ...                                   random_state=0)
    >>> event
    GaussianRelease(sensitivity=0.1, noise_std=0.5)
    """
    event = GaussianRelease(sensitivity, noise_std)
    rng = check_generator(random_state)
    arr = _as_float_array(value)
    notify("gaussian", arr, event)
    noisy = arr + event.noise_std * rng.standard_normal(arr.shape) if event.noise_std > 0 else arr
    return (float(noisy) if noisy.ndim == 0 else noisy), event


def laplace_mechanism(value, sensitivity, scale, random_state=None):
    """Release ``value`` plus i.i.d. Laplace(scale) noise in every coordinate.

    Parameters
    ----------
    value : float or array-like
        The exact value; its replace-one L1 sensitivity must be at most
        ``sensitivity``.
    sensitivity : float >= 0
    scale : float >= 0
    random_state : None, int or Generator

    Returns
    -------
    noisy : float or ndarray
    event : LaplaceRelease

    Examples
    --------
    >>> from skdp.mechanisms import laplace_mechanism
    >>> noisy, event = laplace_mechanism(3.0, sensitivity=1.0, scale=2.0, random_state=0)
    >>> event.epsilon(0.0)
    0.5
    """
    event = LaplaceRelease(sensitivity, scale)
    rng = check_generator(random_state)
    arr = _as_float_array(value)
    notify("laplace", arr, event)
    noisy = arr + rng.laplace(0.0, event.scale, size=arr.shape) if event.scale > 0 else arr
    return (float(noisy) if noisy.ndim == 0 else noisy), event


def l2_laplace_mechanism(value, sensitivity, scale, random_state=None):
    """Release a vector plus noise of density proportional to ``exp(-||z||_2 / scale)``.

    For a value of replace-one L2 sensitivity ``Delta`` the density ratio of
    neighbouring outputs is at most ``exp(Delta / scale)`` (triangle
    inequality), so the release is pure ``Delta / scale``-DP whatever the
    dimension. The noise norm is Gamma(dim, scale) and its direction uniform.
    The event is a generic pure-DP release (:class:`~skdp.accounting.ApproxDPRelease`
    with ``delta = 0``), whose composition bounds hold for any pure mechanism.

    Parameters
    ----------
    value : array-like
    sensitivity : float >= 0
        L2 sensitivity of ``value``.
    scale : float >= 0
    random_state : None, int or Generator

    Returns
    -------
    noisy : ndarray
    event : ApproxDPRelease

    Examples
    --------
    >>> import numpy as np
    >>> from skdp.mechanisms import l2_laplace_mechanism
    >>> noisy, event = l2_laplace_mechanism(np.zeros(3), sensitivity=1.0, scale=4.0, random_state=0)
    >>> event.epsilon(0.0), noisy.shape
    (0.25, (3,))
    """
    sensitivity, scale = float(sensitivity), float(scale)
    # A value of sensitivity 0 is the same on every neighbour: releasing it costs nothing.
    epsilon = 0.0 if sensitivity == 0 else math.inf if scale == 0 else sensitivity / scale
    event = ApproxDPRelease(epsilon, 0.0)
    rng = check_generator(random_state)
    arr = _as_float_array(value)
    notify("l2_laplace", arr, event)
    if scale == 0 or arr.size == 0:
        return arr.copy(), event
    direction = rng.standard_normal(arr.shape)
    direction /= max(float(np.linalg.norm(direction)), 1e-300)
    return arr + rng.gamma(arr.size, scale) * direction, event


def bounded_laplace_noise(scale, bound, size=None, random_state=None):
    """Draw Laplace(scale) noise conditioned on ``|noise| <= bound``.

    The magnitude is an exponential truncated at ``bound`` (inverse-CDF
    sampling), the sign is uniform; this is ``BLap(R, tau)`` of Asi, Liu and
    Tian (2024, arXiv:2406.02789, section 5).

    Parameters
    ----------
    scale : float > 0
    bound : float > 0
    size : int or tuple, optional
    random_state : None, int or Generator

    Returns
    -------
    noise : float or ndarray

    Examples
    --------
    >>> from skdp.mechanisms import bounded_laplace_noise
    >>> x = bounded_laplace_noise(1.0, 0.5, size=1000, random_state=0)
    >>> bool(abs(x).max() <= 0.5)
    True
    """
    scale = float(scale)
    bound = float(bound)
    if not scale > 0 or not bound > 0:
        raise ValueError("bounded Laplace noise needs scale > 0 and bound > 0.")
    rng = check_generator(random_state)
    u = rng.random(size)
    mass = -math.expm1(-bound / scale)  # P(|Lap(scale)| <= bound)
    magnitude = -scale * np.log1p(-u * mass)
    sign = np.where(rng.random(size) < 0.5, -1.0, 1.0)
    noise = np.minimum(magnitude, bound) * sign
    return float(noise) if np.ndim(noise) == 0 else noise


def bounded_laplace_event(sensitivity, scale, bound, n_draws=1):
    """(epsilon, delta) of a value released with bounded Laplace noise.

    The bounded noise is within total variation ``n_draws * exp(-bound/scale)``
    of the Laplace noise, which gives pure ``epsilon = sensitivity / scale``;
    hence the release is ``(epsilon, (1 + e^epsilon) * n_draws * exp(-bound/scale))``-DP.
    For ``epsilon, delta < 1`` and ``bound >= scale * log(4 / delta)`` this
    recovers Lemma 9 of Asi, Liu and Tian (2024, arXiv:2406.02789).

    Parameters
    ----------
    sensitivity : float >= 0
        L1 sensitivity of the released value(s).
    scale, bound : float > 0
    n_draws : int
        Number of coordinates that received bounded noise.

    Returns
    -------
    ApproxDPRelease
    """
    epsilon = float(sensitivity) / float(scale)
    # In log space: exp(epsilon) and exp(-bound/scale) overflow/underflow for
    # extreme parameters. A positive sensitivity never yields a pure-DP claim: the
    # supports of the two output distributions differ.
    log_delta = float(np.logaddexp(0.0, epsilon)) + math.log(n_draws) - float(bound) / float(scale)
    delta = min(1.0, math.exp(log_delta)) if log_delta < 0 else 1.0
    if epsilon > 0:
        delta = max(delta, 1e-300)
    return ApproxDPRelease(epsilon, delta)


def bounded_laplace_mechanism(value, sensitivity, scale, bound, random_state=None):
    """Release ``value`` plus bounded Laplace noise in every coordinate.

    Parameters
    ----------
    value : float or array-like
        Its replace-one L1 sensitivity must be at most ``sensitivity``.
    sensitivity : float >= 0
    scale : float > 0
    bound : float > 0
        Every noise coordinate lies in ``[-bound, bound]``.
    random_state : None, int or Generator

    Returns
    -------
    noisy : float or ndarray
    event : ApproxDPRelease
        See :func:`bounded_laplace_event`.

    Examples
    --------
    >>> from skdp.mechanisms import bounded_laplace_mechanism
    >>> noisy, event = bounded_laplace_mechanism(5.0, 1.0, scale=2.0, bound=40.0,
    ...                                          random_state=0)
    >>> event.epsilon0, event.delta0 < 1e-8
    (0.5, True)
    """
    arr = _as_float_array(value)
    noise = bounded_laplace_noise(scale, bound, size=arr.shape, random_state=random_state)
    noisy = arr + noise
    event = bounded_laplace_event(sensitivity, scale, bound, n_draws=max(1, arr.size))
    return (float(noisy) if noisy.ndim == 0 else noisy), event


def budgeted_release(value, budget, sensitivity, *, l1_sensitivity=None, random_state=None):
    """``value`` plus the noise of a ``("gaussian", mu)`` or ``("pure", epsilon)`` budget share.

    The budget shares of the estimators' small releases (class counts,
    calibration, fit checks, the classification solvers' vectors) come as a
    kind and a level; this is the one place that maps them to a mechanism.
    ``level = inf`` releases the value exactly (epsilon = inf).

    Parameters
    ----------
    value : float or array-like
    budget : tuple
        ``("gaussian", mu)``: Gaussian noise of standard deviation
        ``sensitivity / mu`` (a mu-GDP release). ``("pure", epsilon)``: Laplace
        noise of scale ``l1_sensitivity / epsilon`` on every coordinate when
        ``l1_sensitivity`` is given, else l2-Laplace noise of scale
        ``sensitivity / epsilon`` (an epsilon-DP release either way).
    sensitivity : float >= 0
        Replace-one L2 sensitivity of ``value``.
    l1_sensitivity : float >= 0, optional
        Replace-one L1 sensitivity of ``value`` (for per-coordinate Laplace noise).
    random_state : None, int or Generator

    Returns
    -------
    noisy : float or ndarray
    event : PrivacyEvent

    Examples
    --------
    >>> from skdp.mechanisms import budgeted_release
    >>> noisy, event = budgeted_release([3.0, 5.0], ("pure", 1.0), 2 ** 0.5, l1_sensitivity=2.0,
    ...                                 random_state=0)
    >>> event.epsilon(0.0)
    1.0
    >>> budgeted_release(4.0, ("gaussian", float("inf")), 1.0)[0]
    4.0
    """
    kind, level = budget
    exact = math.isinf(level)
    if kind == "gaussian":
        return gaussian_mechanism(value, sensitivity, 0.0 if exact else sensitivity / level,
                                  random_state=random_state)
    if l1_sensitivity is not None:
        return laplace_mechanism(value, l1_sensitivity, 0.0 if exact else l1_sensitivity / level,
                                 random_state=random_state)
    return l2_laplace_mechanism(value, sensitivity, 0.0 if exact else sensitivity / level,
                                random_state=random_state)
