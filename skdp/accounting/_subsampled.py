"""RDP of the Poisson-subsampled Gaussian mechanism.

With noise multiplier ``s`` (noise std divided by the sensitivity) and sampling
rate ``q``, Mironov, Talwar and Zhang (2019, "Renyi differential privacy of the
sampled Gaussian mechanism") show that the RDP of order ``alpha`` is
``log(A_alpha) / (alpha - 1)`` with

    A_alpha = E_{z ~ N(0, s^2)} [ (1 - q + q exp((2z - 1) / (2 s^2)))^alpha ],

the worse of the two directions. For integer orders the binomial expansion gives
a finite sum; for fractional orders we integrate numerically around the peak of
the integrand. Both are evaluated in log space.
"""

import functools
import math

import numpy as np
from scipy import integrate, optimize, special

__all__ = ["poisson_gaussian_rdp"]


def _log_a_integer(q, s, alpha):
    k = np.arange(alpha + 1, dtype=float)
    log_binom = special.gammaln(alpha + 1) - special.gammaln(k + 1) - special.gammaln(alpha - k + 1)
    terms = log_binom + (alpha - k) * math.log1p(-q) + k * math.log(q) + (k * k - k) / (2.0 * s * s)
    return float(special.logsumexp(terms))


def _log_a_fractional(q, s, alpha):
    log_norm = -0.5 * math.log(2.0 * math.pi) - math.log(s)
    log_1mq, log_q = math.log1p(-q), math.log(q)

    def log_integrand(z):
        t = (2.0 * z - 1.0) / (2.0 * s * s)
        return log_norm - z * z / (2.0 * s * s) + alpha * np.logaddexp(log_1mq, log_q + t)

    # The integrand's log is concave with its peak in [0, alpha].
    res = optimize.minimize_scalar(
        lambda z: -log_integrand(z), bounds=(-1.0, alpha + 1.0), method="bounded",
        options={"xatol": 1e-10},
    )
    z_star = float(res.x)
    peak = float(log_integrand(z_star))

    def scaled(z):
        return math.exp(float(log_integrand(z)) - peak)

    width = 40.0 * s + 1.0
    total = 0.0
    for a, b in ((-np.inf, z_star - width), (z_star - width, z_star), (z_star, z_star + width),
                 (z_star + width, np.inf)):
        value, _ = integrate.quad(scaled, a, b, epsabs=0.0, epsrel=1e-11, limit=200)
        total += value
    return peak + math.log(total)


@functools.lru_cache(maxsize=4096)
def _rdp_single(q, s, alpha):
    if q == 0.0:
        return 0.0
    if q == 1.0:
        return alpha / (2.0 * s * s)
    if float(alpha).is_integer() and alpha <= 10000:
        log_a = _log_a_integer(q, s, int(alpha))
    else:
        log_a = _log_a_fractional(q, s, float(alpha))
    return max(0.0, log_a / (alpha - 1.0))


def poisson_gaussian_rdp(rate, noise_multiplier, orders):
    """RDP curve of one Poisson-subsampled Gaussian step.

    Parameters
    ----------
    rate : float
        Sampling probability in [0, 1].
    noise_multiplier : float
        Noise standard deviation divided by the sensitivity (> 0).
    orders : array-like of float
        Renyi orders (> 1).

    Returns
    -------
    rdp : ndarray
    """
    q = float(rate)
    s = float(noise_multiplier)
    orders = np.atleast_1d(np.asarray(orders, dtype=float))
    if s <= 0:
        return np.full(orders.shape, np.inf)
    if math.isinf(s):
        return np.zeros(orders.shape)
    return np.array([_rdp_single(q, s, float(a)) for a in orders])
