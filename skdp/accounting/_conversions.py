"""Numerical core of the privacy accounting: Gaussian DP curves and RDP conversions.

Everything here is a pure function of public numbers (noise multipliers, orders,
target epsilon/delta); no data ever reaches this module.

References
----------
Dong, Roth, Su (2022), "Gaussian differential privacy", for the exact
(epsilon, delta) curve of mu-GDP.
Canonne, Kamath, Steinke (2020), "The discrete Gaussian for differential
privacy", Prop. 12, and Asoodeh et al. (2021) for the improved RDP -> (epsilon,
delta) conversion used by :func:`rdp_to_epsilon`.
"""

import math

import numpy as np
from scipy import optimize, special

__all__ = [
    "DEFAULT_ORDERS",
    "gdp_delta",
    "gdp_epsilon",
    "gdp_mu_for",
    "rdp_to_epsilon",
    "rdp_to_delta",
    "gdp_to_dp",
    "dp_to_gdp",
    "zcdp_to_dp",
    "dp_to_zcdp",
]

# Renyi orders on which RDP curves are evaluated. Dense where the optimum usually
# lies for moderate epsilon, geometric further out for large noise multipliers
# and very small delta.
DEFAULT_ORDERS = np.unique(
    np.concatenate(
        [
            1.0 + np.array([0.001, 0.002, 0.005, 0.01, 0.02, 0.03, 0.05, 0.075]),
            np.round(np.arange(1.1, 11.0, 0.1), 10),
            np.arange(11.0, 64.0),
            [64.0, 80.0, 96.0, 128.0, 160.0, 192.0, 256.0, 384.0, 512.0],
            [768.0, 1024.0, 2048.0, 4096.0],
        ]
    )
)

_TINY = 1e-300


def _check_delta(delta):
    delta = float(delta)
    if not 0.0 <= delta <= 1.0 or math.isnan(delta):
        raise ValueError(f"delta must lie in [0, 1]; got {delta!r}.")
    return delta


def _check_epsilon(epsilon):
    epsilon = float(epsilon)
    if epsilon < 0 or math.isnan(epsilon):
        raise ValueError(f"epsilon must be non-negative; got {epsilon!r}.")
    return epsilon


# --------------------------------------------------------------------------------------
# Gaussian differential privacy
# --------------------------------------------------------------------------------------
def gdp_delta(mu, epsilon):
    """Exact ``delta(epsilon)`` of a mu-GDP mechanism.

    ``delta = Phi(-eps/mu + mu/2) - exp(eps) Phi(-eps/mu - mu/2)``, evaluated in
    log space so that large ``epsilon`` does not overflow.
    """
    mu = float(mu)
    epsilon = _check_epsilon(epsilon)
    if mu <= 0.0:
        return 0.0
    if math.isinf(mu):
        return 1.0
    if math.isinf(epsilon):
        return 0.0
    log_a = special.log_ndtr(-epsilon / mu + mu / 2.0)
    if math.isinf(log_a):
        return 0.0
    log_b = special.log_ndtr(-epsilon / mu - mu / 2.0)
    gap = epsilon + log_b - log_a  # <= 0 mathematically
    if gap >= 0.0:
        return 0.0
    return float(min(1.0, math.exp(log_a) * -math.expm1(gap)))


def gdp_epsilon(mu, delta):
    """Smallest ``epsilon`` such that a mu-GDP mechanism is (epsilon, delta)-DP."""
    mu = float(mu)
    delta = _check_delta(delta)
    if mu <= 0.0 or delta >= 1.0:
        return 0.0
    if math.isinf(mu) or delta < _TINY:
        # Below 1e-300 we do not resolve the curve; report the (valid) limit.
        return math.inf
    if gdp_delta(mu, 0.0) <= delta:
        return 0.0
    # The zCDP bound rho + 2 sqrt(rho log(1/delta)) with rho = mu^2/2 is valid for
    # mu-GDP, so delta(hi) <= delta and the root is bracketed.
    hi = mu * mu / 2.0 + mu * math.sqrt(2.0 * math.log(1.0 / delta)) + 1.0
    log_target = math.log(delta)

    def gap(eps):
        return math.log(max(gdp_delta(mu, eps), _TINY)) - log_target

    while gap(hi) > 0.0:  # pragma: no cover - defensive, the bound above holds
        hi *= 2.0
    eps = optimize.brentq(gap, 0.0, hi, xtol=1e-13, rtol=1e-13, maxiter=500)
    # Return a value on the safe side of the root.
    while gdp_delta(mu, eps) > delta * (1.0 + 1e-9):
        eps = eps * (1.0 + 1e-12) + 1e-15
    return float(eps)


def gdp_mu_for(epsilon, delta):
    """Largest mu such that mu-GDP implies (epsilon, delta)-DP (never an overspending mu)."""
    epsilon = _check_epsilon(epsilon)
    delta = _check_delta(delta)
    if delta >= 1.0 or math.isinf(epsilon):
        return math.inf
    if delta < _TINY:
        return 0.0  # the curve is not resolved below 1e-300: certify nothing
    lo, hi = 0.0, 1.0
    while gdp_delta(hi, epsilon) <= delta:
        lo, hi = hi, hi * 2.0
        if hi > 1e12:
            break
    log_target = math.log(delta)

    def gap(mu):
        return math.log(max(gdp_delta(mu, epsilon), _TINY)) - log_target

    if gap(hi) > 0.0 and gap(max(lo, 1e-300)) < 0.0:
        mu = optimize.brentq(gap, max(lo, 1e-300), hi, xtol=1e-300, rtol=1e-13, maxiter=500)
    else:
        mu = lo
    # Never return a mu that overspends, in either direction of the curve (the
    # epsilon reported for this mu must not exceed the target either). Bisect
    # down if needed; a bounded number of steps always ends on the safe side.
    step = 1e-12
    for _ in range(200):
        if gdp_delta(mu, epsilon) <= delta and gdp_epsilon(mu, delta) <= epsilon:
            return float(mu)
        mu *= 1.0 - step
        step = min(2.0 * step, 0.5)
    return 0.0


# --------------------------------------------------------------------------------------
# Renyi differential privacy
# --------------------------------------------------------------------------------------
def _rdp_eps_terms(orders, rdp, delta):
    with np.errstate(divide="ignore", invalid="ignore"):
        return rdp + np.log1p(-1.0 / orders) - (math.log(delta) + np.log(orders)) / (orders - 1.0)


def rdp_to_epsilon(orders, rdp, delta, rdp_fn=None):
    """Convert an RDP curve to epsilon at ``delta`` with the improved conversion.

    ``epsilon = min_alpha rdp(alpha) + log(1 - 1/alpha) - (log delta + log alpha)/(alpha - 1)``.

    Parameters
    ----------
    orders, rdp : ndarray
        Orders (> 1) and the RDP values at those orders.
    delta : float
    rdp_fn : callable, optional
        The RDP curve as a function of a scalar order. When given, the minimum
        found on the grid is refined by a bounded scalar search between the
        neighbouring grid orders (any order gives a valid bound, so refinement can
        only tighten).
    """
    delta = _check_delta(delta)
    if delta >= 1.0:
        return 0.0
    if delta < _TINY:
        return math.inf
    orders = np.asarray(orders, dtype=float)
    rdp = np.asarray(rdp, dtype=float)
    terms = _rdp_eps_terms(orders, rdp, delta)
    terms = np.where(np.isnan(terms), np.inf, terms)
    i = int(np.argmin(terms))
    best = float(terms[i])
    if rdp_fn is not None and math.isfinite(best):
        lo = orders[max(i - 1, 0)]
        hi = orders[min(i + 1, len(orders) - 1)]
        if hi > lo:

            def objective(alpha):
                value = rdp_fn(alpha) + math.log1p(-1.0 / alpha)
                return value - (math.log(delta) + math.log(alpha)) / (alpha - 1.0)

            res = optimize.minimize_scalar(
                objective, bounds=(lo, hi), method="bounded", options={"xatol": 1e-10}
            )
            if res.success and math.isfinite(res.fun):
                best = min(best, float(res.fun))
    return max(0.0, best)


def rdp_to_delta(orders, rdp, epsilon, rdp_fn=None):
    """Smallest delta certified by an RDP curve at ``epsilon`` (inverse of the conversion).

    ``rdp_fn`` (a scalar function of the order) refines the grid minimum as in
    :func:`rdp_to_epsilon`.
    """
    epsilon = _check_epsilon(epsilon)
    orders = np.asarray(orders, dtype=float)
    rdp = np.asarray(rdp, dtype=float)
    if math.isinf(epsilon):
        return 0.0
    with np.errstate(invalid="ignore", over="ignore"):
        log_delta = (orders - 1.0) * (rdp - epsilon + np.log1p(-1.0 / orders)) - np.log(orders)
    log_delta = np.where(np.isnan(log_delta), np.inf, log_delta)
    i = int(np.argmin(log_delta))
    best = float(log_delta[i])
    if rdp_fn is not None and math.isfinite(best):
        lo = orders[max(i - 1, 0)]
        hi = orders[min(i + 1, len(orders) - 1)]
        if hi > lo:

            def objective(alpha):
                return (alpha - 1.0) * (rdp_fn(alpha) - epsilon + math.log1p(-1.0 / alpha)) - math.log(alpha)

            res = optimize.minimize_scalar(objective, bounds=(lo, hi), method="bounded",
                                           options={"xatol": 1e-10})
            if res.success and math.isfinite(res.fun):
                best = min(best, float(res.fun))
    return float(min(1.0, math.exp(best))) if best < 0 else 1.0


# --------------------------------------------------------------------------------------
# Public conversions
# --------------------------------------------------------------------------------------
def gdp_to_dp(mu, delta):
    """Epsilon of a mu-GDP mechanism at ``delta`` (exact curve).

    Parameters
    ----------
    mu : float
        The Gaussian DP parameter (sensitivity divided by the noise standard
        deviation for a single Gaussian release).
    delta : float

    Returns
    -------
    epsilon : float

    Examples
    --------
    >>> from skdp.accounting import gdp_to_dp
    >>> round(gdp_to_dp(1.0, 1e-6), 4)
    4.8866
    """
    return gdp_epsilon(mu, delta)


def dp_to_gdp(epsilon, delta):
    """Largest mu such that mu-GDP implies (epsilon, delta)-DP.

    This is the calibration target of every all-Gaussian solver: with
    ``mu = dp_to_gdp(epsilon, delta)`` a composition of Gaussian releases with
    ``sum (sensitivity / noise_std)**2 <= mu**2`` is (epsilon, delta)-DP.

    Examples
    --------
    >>> from skdp.accounting import dp_to_gdp, gdp_to_dp
    >>> mu = dp_to_gdp(1.0, 1e-5)
    >>> round(gdp_to_dp(mu, 1e-5), 6)
    1.0
    """
    return gdp_mu_for(epsilon, delta)


def zcdp_to_dp(rho, delta):
    """Epsilon at ``delta`` of a rho-zCDP mechanism (improved RDP conversion).

    Examples
    --------
    >>> from skdp.accounting import zcdp_to_dp
    >>> round(zcdp_to_dp(0.5, 1e-6), 3)
    5.222
    """
    rho = float(rho)
    if rho < 0 or math.isnan(rho):
        raise ValueError(f"rho must be non-negative; got {rho!r}.")
    if rho == 0.0:
        return 0.0
    if math.isinf(rho):
        return math.inf
    return rdp_to_epsilon(DEFAULT_ORDERS, rho * DEFAULT_ORDERS, delta, rdp_fn=lambda a: rho * a)


def dp_to_zcdp(epsilon, delta):
    """Largest rho such that rho-zCDP implies (epsilon, delta)-DP (via :func:`zcdp_to_dp`).

    Examples
    --------
    >>> from skdp.accounting import dp_to_zcdp, zcdp_to_dp
    >>> rho = dp_to_zcdp(1.0, 1e-5)
    >>> round(rho, 4), zcdp_to_dp(rho, 1e-5) <= 1.0
    (0.0306, True)
    """
    epsilon = _check_epsilon(epsilon)
    delta = _check_delta(delta)
    if math.isinf(epsilon) or delta >= 1.0:
        return math.inf
    if delta <= 0.0 or epsilon == 0.0:
        return 0.0
    lo, hi = 0.0, max(epsilon, 1.0)
    while zcdp_to_dp(hi, delta) <= epsilon:
        lo, hi = hi, hi * 2.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if zcdp_to_dp(mid, delta) <= epsilon:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-13 * hi:
            break
    return lo
