"""Noise calibration: from a target (epsilon, delta) to the noise scale of a given event shape."""

import math

import numpy as np
from scipy import optimize

from ._conversions import DEFAULT_ORDERS, _check_delta, _check_epsilon, gdp_mu_for, rdp_to_epsilon
from ._subsampled import poisson_gaussian_rdp
from .events import GaussianRelease, Repeated

__all__ = ["calibrate_gaussian", "calibrate_laplace", "calibrate_scale", "calibrate_sampled_gaussian"]

# The integer orders of the accountant's grid: the sampled Gaussian's RDP has a finite binomial sum there,
# while fractional orders need quadrature (about 0.3 s per noise multiplier on the whole grid).
_INTEGER_ORDERS = DEFAULT_ORDERS[(DEFAULT_ORDERS == np.round(DEFAULT_ORDERS)) & (DEFAULT_ORDERS > 1)]


def calibrate_gaussian(sensitivity, epsilon, delta, count=1):
    """Noise std for ``count`` Gaussian releases of L2 sensitivity ``sensitivity``.

    The composition is exactly mu-GDP with ``mu = sqrt(count) * sensitivity /
    noise_std``, so the returned std makes it (epsilon, delta)-DP with equality
    (up to root-finding tolerance, always on the private side).

    Parameters
    ----------
    sensitivity : float >= 0
    epsilon : float > 0
    delta : float in (0, 1)
    count : int >= 1

    Returns
    -------
    noise_std : float

    Examples
    --------
    >>> from skdp.accounting import GaussianRelease, Repeated, calibrate_gaussian
    >>> std = calibrate_gaussian(1.0, epsilon=1.0, delta=1e-5, count=10)
    >>> round(Repeated(GaussianRelease(1.0, std), 10).epsilon(1e-5), 6)
    1.0
    """
    sensitivity = float(sensitivity)
    epsilon = _check_epsilon(epsilon)
    delta = _check_delta(delta)
    if sensitivity < 0:
        raise ValueError(f"sensitivity must be non-negative; got {sensitivity!r}.")
    if count < 1:
        raise ValueError(f"count must be at least 1; got {count!r}.")
    if sensitivity == 0.0 or math.isinf(epsilon):
        return 0.0
    if epsilon == 0.0 or delta == 0.0:
        raise ValueError("A Gaussian release needs epsilon > 0 and delta > 0.")
    mu = gdp_mu_for(epsilon, delta)
    noise_std = math.sqrt(count) * sensitivity / mu
    # Recompute through the event itself, so rounding in std -> mu cannot overspend.
    event = Repeated(GaussianRelease(sensitivity, noise_std), count)
    while event.epsilon(delta) > epsilon:
        noise_std *= 1.0 + 1e-12
        event = Repeated(GaussianRelease(sensitivity, noise_std), count)
    return noise_std


def calibrate_laplace(sensitivity, epsilon, count=1):
    """Laplace scale for ``count`` releases of L1 sensitivity ``sensitivity`` at pure epsilon.

    Examples
    --------
    >>> from skdp.accounting import calibrate_laplace
    >>> calibrate_laplace(1.0, epsilon=0.5, count=2)
    4.0
    """
    sensitivity = float(sensitivity)
    epsilon = _check_epsilon(epsilon)
    if sensitivity < 0:
        raise ValueError(f"sensitivity must be non-negative; got {sensitivity!r}.")
    if count < 1:
        raise ValueError(f"count must be at least 1; got {count!r}.")
    if sensitivity == 0.0 or math.isinf(epsilon):
        return 0.0
    if epsilon == 0.0:
        raise ValueError("A Laplace release needs epsilon > 0.")
    return count * sensitivity / epsilon


def calibrate_scale(make_event, epsilon, delta, *, rtol=1e-9, initial=1.0):
    """Smallest noise scale ``s`` with ``make_event(s).epsilon(delta) <= epsilon``.

    ``make_event`` maps a positive scale to a privacy event whose epsilon does not
    increase with the scale (a global noise multiplier, for example). The result
    is on the private side of the root: the returned scale never overspends.

    Parameters
    ----------
    make_event : callable
        ``scale -> PrivacyEvent``.
    epsilon : float > 0
    delta : float in [0, 1)
    rtol : float
        Relative precision on the scale.
    initial : float
        Starting guess for the bracket search.

    Returns
    -------
    scale : float

    Examples
    --------
    >>> from skdp.accounting import (GaussianRelease, LaplaceRelease, Sequential,
    ...                              calibrate_scale)
    >>> make = lambda s: Sequential([GaussianRelease(1.0, s), LaplaceRelease(0.1, s)])
    >>> s = calibrate_scale(make, epsilon=1.0, delta=1e-5)
    >>> make(s).epsilon(1e-5) <= 1.0
    True
    """
    epsilon = _check_epsilon(epsilon)
    delta = _check_delta(delta)
    if epsilon == 0.0:
        raise ValueError("epsilon must be positive to calibrate a noise scale.")
    return _smallest_scale(lambda scale: make_event(scale).epsilon(delta), epsilon, rtol, initial)


def calibrate_sampled_gaussian(rate, count, epsilon, delta, *, rtol=1e-6):
    """Noise multiplier of ``count`` Poisson-sampled Gaussian releases that spend at most ``epsilon``.

    Returns the smallest ``z`` (up to ``rtol``) for which the RDP curve of
    ``Repeated(PoissonSampled(GaussianRelease(1, z), rate), count)`` on the
    integer orders of the accountant's grid converts to at most ``epsilon``.
    Those orders are a subset of the grid the event itself is converted on, so
    the event's own epsilon is at most ``epsilon`` too (it may be slightly
    lower: calibrate a composition it is part of with :func:`calibrate_scale`
    to spend a target exactly). The integer orders have closed forms, so this
    takes a fraction of a second where the whole grid would take seconds. At
    ``rate = 1`` the steps are plain Gaussian releases, calibrated exactly by
    :func:`calibrate_gaussian`.

    Parameters
    ----------
    rate : float in (0, 1]
        Poisson sampling probability.
    count : int >= 1
    epsilon : float > 0
    delta : float in (0, 1)
    rtol : float
        Relative precision on the multiplier.

    Returns
    -------
    noise_multiplier : float
        Noise standard deviation per unit of sensitivity (0 when ``epsilon`` is infinite).

    Examples
    --------
    >>> from skdp.accounting import GaussianRelease, PoissonSampled, Repeated, calibrate_sampled_gaussian
    >>> z = calibrate_sampled_gaussian(0.01, 1000, epsilon=1.0, delta=1e-5)
    >>> steps = Repeated(PoissonSampled(GaussianRelease(1.0, z), 0.01), 1000)
    >>> 0.99 < steps.epsilon(1e-5) <= 1.0
    True
    """
    rate = float(rate)
    epsilon = _check_epsilon(epsilon)
    delta = _check_delta(delta)
    if not 0.0 < rate <= 1.0:
        raise ValueError(f"rate must lie in (0, 1]; got {rate!r}.")
    if isinstance(count, bool) or not float(count).is_integer() or count < 1:
        raise ValueError(f"count must be a positive integer; got {count!r}.")
    if math.isinf(epsilon):
        return 0.0
    if epsilon == 0.0 or not 0.0 < delta < 1.0:
        raise ValueError("A sampled Gaussian release needs epsilon > 0 and 0 < delta < 1.")
    if rate == 1.0:  # no sampling: the composition is exactly Gaussian DP
        return calibrate_gaussian(1.0, epsilon, delta, count=int(count))

    def spent(z):
        return rdp_to_epsilon(_INTEGER_ORDERS, count * poisson_gaussian_rdp(rate, z, _INTEGER_ORDERS), delta)

    # Without sampling the composition is exactly Gaussian: its multiplier is a good first guess (where the
    # Gaussian-DP inverse underflows, at delta near 1e-300, the RDP curve may still certify: start at 1).
    mu = gdp_mu_for(epsilon, delta)
    initial = math.sqrt(count) / mu if mu > 0.0 else 1.0
    return _smallest_scale(spent, epsilon, rtol, max(rate * initial, 1e-3))


def _smallest_scale(spent, epsilon, rtol, initial):
    """Smallest ``s`` with ``spent(s) <= epsilon`` for a non-increasing ``spent`` (on the private side)."""
    # Bracket the root geometrically around the initial guess (a good guess, e.g.
    # from the Gaussian-DP inverse, brackets in one or two steps).
    factor = 1.25
    lo = hi = float(initial)
    if spent(hi) > epsilon:
        while spent(hi) > epsilon:
            lo, hi = hi, hi * factor
            factor = min(factor * factor, 1e6)
            if hi > 1e300:
                raise ValueError("No finite noise scale meets the target budget.")
    else:
        while spent(lo) <= epsilon:
            hi, lo = lo, lo / factor
            factor = min(factor * factor, 1e6)
            if lo < 1e-300:
                return hi
    # Invariant: spent(lo) > epsilon >= spent(hi). Brent's method on the log scale
    # converges in a handful of evaluations; the result is then moved to the
    # private side of the root.
    if lo <= 0.0:
        lo = hi * 1e-300
    root = math.exp(optimize.brentq(lambda u: spent(math.exp(u)) - epsilon, math.log(lo),
                                    math.log(hi), xtol=rtol * 0.1, rtol=4 * np.finfo(float).eps))
    scale = root
    while spent(scale) > epsilon:
        scale *= 1.0 + rtol
    return min(scale, hi)
