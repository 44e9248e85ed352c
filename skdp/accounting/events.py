"""Immutable privacy events.

An event fully describes a randomised release (or a composition of releases) so
that its privacy can be computed without knowing the algorithm that produced it,
in the spirit of Google's dp-accounting. Every event answers two questions:

* ``event.epsilon(delta)``: the smallest epsilon we can certify at ``delta``;
* ``event.delta(epsilon)``: the smallest delta we can certify at ``epsilon``.

The neighbouring relation is replace-one (the dataset size is public), except for
:class:`PoissonSampled`, see its docstring. Sensitivities are therefore
replace-one sensitivities: the mean of ``m`` vectors clipped to norm ``C`` has L2
sensitivity ``2 C / m``.

Each value is the tightest bound among the valid methods available for the
event's shape: compositions of Gaussian releases are exactly mu-GDP; zCDP, RDP
and subsampled Gaussians go through the improved RDP conversion; pure releases
compose exactly at ``delta = 0``; anything else takes the best of RDP and basic
composition with an optimised split of delta (see ``_composition.py``).
"""

import functools
import math
from dataclasses import dataclass

import numpy as np

from ._composition import Item, compose_delta, compose_epsilon
from ._conversions import (
    DEFAULT_ORDERS,
    _check_delta,
    _check_epsilon,
    gdp_delta,
    gdp_epsilon,
    rdp_to_delta,
    rdp_to_epsilon,
)
from ._subsampled import poisson_gaussian_rdp

__all__ = [
    "PrivacyEvent",
    "GaussianRelease",
    "LaplaceRelease",
    "ExponentialMechanismRelease",
    "ZCDPRelease",
    "ApproxDPRelease",
    "Sequential",
    "Parallel",
    "Repeated",
    "PoissonSampled",
]


def _nonneg(name, value, allow_inf=True):
    try:
        value = float(value)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a real number; got {value!r}.") from None
    if math.isnan(value) or value < 0 or (not allow_inf and math.isinf(value)):
        raise ValueError(f"{name} must be a non-negative {'' if allow_inf else 'finite '}number; got {value!r}.")
    return value


@functools.lru_cache(maxsize=4096)
def _cached_epsilon(event, delta):
    # Events are frozen dataclasses (equal fields, equal guarantee), so a certified epsilon can be
    # reused: budget plans, tuners and ledgers ask for the same events' epsilons many times over
    # (a tuner's candidate plans were 80% of its fit time on small tables).
    return compose_epsilon(event._items(), delta)


class PrivacyEvent:
    """Base class of all privacy events.

    Subclasses are frozen dataclasses. The private ``_gdp_mu``, ``_rdp``,
    ``_pure_epsilon``, ``_fixed_point`` and ``_min_delta`` hooks tell the
    composition engine how the event may be described; ``None`` means "not
    available for this event".
    """

    # -- public API -----------------------------------------------------------------
    def epsilon(self, delta):
        """Smallest certified epsilon at ``delta``.

        Parameters
        ----------
        delta : float in [0, 1]

        Returns
        -------
        epsilon : float
            ``inf`` when no finite epsilon can be certified at this delta.
        """
        delta = _check_delta(delta)
        try:
            return _cached_epsilon(self, delta)
        except TypeError:  # an event with an unhashable field: computed every time
            return compose_epsilon(self._items(), delta)

    def releases(self, kind):
        """How many releases of the mechanism class ``kind`` this event holds.

        Repetitions multiply, sequential and parallel parts add up; an event
        wrapping another (a subsampled release) counts the one it wraps.

        Examples
        --------
        >>> from skdp.accounting import ExponentialMechanismRelease, GaussianRelease, Repeated, Sequential
        >>> fit = Sequential([Repeated(ExponentialMechanismRelease(0.1), 4), GaussianRelease(1.0, 3.0)])
        >>> fit.releases(ExponentialMechanismRelease), fit.releases(GaussianRelease)
        (4, 1)
        """
        if isinstance(self, kind):
            return 1
        if isinstance(self, Repeated):
            return self.count * self.event.releases(kind)
        if isinstance(self, (Sequential, Parallel)):
            return sum(event.releases(kind) for event in self.events)
        inner = getattr(self, "event", None)
        return inner.releases(kind) if isinstance(inner, PrivacyEvent) else 0

    def delta(self, epsilon):
        """Smallest certified delta at ``epsilon``.

        Parameters
        ----------
        epsilon : float >= 0

        Returns
        -------
        delta : float in [0, 1]
        """
        return compose_delta(self._items(), _check_epsilon(epsilon))

    # -- composition hooks ----------------------------------------------------------------
    def _items(self):
        return [Item(self, 1)]

    def _gdp_mu(self):
        return None

    def _has_rdp(self):
        return False

    def _rdp(self, orders):
        return None

    def _rdp_fn(self):
        return None

    def _pure_epsilon(self):
        return None

    def _fixed_point(self):
        return None

    def _min_delta(self):
        return 0.0

    def _rdp_is_linear(self):
        """True when the RDP curve is ``rho * alpha`` (Gaussian, zCDP)."""
        return False

    def _own_epsilon(self, delta):
        """Best epsilon of this single event (the composition engine's base case)."""
        if self._has_rdp():
            return rdp_to_epsilon(DEFAULT_ORDERS, self._rdp(DEFAULT_ORDERS), delta, rdp_fn=self._rdp_fn())
        return math.inf  # pragma: no cover - every leaf overrides or has RDP

    def _own_delta(self, epsilon):
        if self._has_rdp():
            return rdp_to_delta(DEFAULT_ORDERS, self._rdp(DEFAULT_ORDERS), epsilon, rdp_fn=self._rdp_fn())
        return 1.0  # pragma: no cover


# --------------------------------------------------------------------------------------
# leaves
# --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class GaussianRelease(PrivacyEvent):
    """A value of L2 sensitivity ``sensitivity`` released with N(0, noise_std^2 I) noise.

    This is exactly mu-GDP with ``mu = sensitivity / noise_std``; compositions of
    Gaussian releases are mu-GDP with ``mu^2`` summed, so their (epsilon, delta)
    curve is exact.

    Parameters
    ----------
    sensitivity : float >= 0
        Replace-one L2 sensitivity of the released value.
    noise_std : float > 0
        Standard deviation of the Gaussian noise in every coordinate
        (``0`` describes a non-private release, ``inf`` a release of pure noise).

    Examples
    --------
    >>> from skdp.accounting import GaussianRelease
    >>> round(GaussianRelease(sensitivity=1.0, noise_std=1.0).epsilon(1e-6), 4)
    4.8866
    """

    sensitivity: float
    noise_std: float

    def __post_init__(self):
        object.__setattr__(self, "sensitivity", _nonneg("sensitivity", self.sensitivity, allow_inf=False))
        object.__setattr__(self, "noise_std", _nonneg("noise_std", self.noise_std))

    @property
    def mu(self):
        """The Gaussian DP parameter ``sensitivity / noise_std``."""
        if self.sensitivity == 0.0:
            return 0.0
        if self.noise_std == 0.0:
            return math.inf
        return self.sensitivity / self.noise_std

    def _gdp_mu(self):
        return self.mu

    def _has_rdp(self):
        return True

    def _rdp(self, orders):
        return np.asarray(orders, dtype=float) * self.mu**2 / 2.0

    def _rdp_fn(self):
        rho = self.mu**2 / 2.0
        return lambda alpha: alpha * rho

    def _rdp_is_linear(self):
        return True

    def _own_epsilon(self, delta):
        return gdp_epsilon(self.mu, delta)

    def _own_delta(self, epsilon):
        return gdp_delta(self.mu, epsilon)


def _laplace_rdp(eps0, orders):
    # Mironov (2017), Table II: RDP of the Laplace mechanism, alpha > 1.
    a = np.asarray(orders, dtype=float)
    log_terms = np.logaddexp(
        np.log(a / (2 * a - 1)) + (a - 1) * eps0,
        np.log((a - 1) / (2 * a - 1)) - a * eps0,
    )
    return np.minimum(log_terms / (a - 1), eps0)


def _randomized_response_rdp(eps0, orders):
    # RDP of binary randomized response with parameter eps0: the largest RDP of any
    # eps0-DP mechanism (every eps0-DP mechanism is a post-processing of it).
    a = np.asarray(orders, dtype=float)
    log_p = -np.logaddexp(0.0, -eps0)  # log(e^eps/(1+e^eps))
    log_q = -np.logaddexp(0.0, eps0)  # log(1/(1+e^eps))
    log_terms = np.logaddexp(a * log_p + (1 - a) * log_q, a * log_q + (1 - a) * log_p)
    return np.minimum(np.maximum(log_terms / (a - 1), 0.0), eps0)


def _randomized_response_rdp_scalar(eps0, alpha):
    """Scalar version of :func:`_randomized_response_rdp` (pure Python, for refinement)."""
    log_p = -math.log1p(math.exp(-eps0)) if eps0 < 700 else 0.0
    log_q = -eps0 + log_p
    a = alpha * log_p + (1 - alpha) * log_q
    b = alpha * log_q + (1 - alpha) * log_p
    m = max(a, b)
    value = (m + math.log(math.exp(a - m) + math.exp(b - m))) / (alpha - 1)
    return min(max(value, 0.0), eps0)


def _pure_dp_profile_epsilon(eps0, delta):
    # Every eps0-DP mechanism is (eps', delta)-DP with
    # delta = (e^eps0 - e^eps') / (1 + e^eps0) (the randomized response profile).
    if delta <= 0.0:
        return eps0
    value = math.exp(eps0) - delta * (1.0 + math.exp(eps0)) if eps0 < 700 else math.inf
    if value <= 1.0:
        return 0.0
    return min(eps0, math.log(value))


def _pure_dp_profile_delta(eps0, epsilon):
    if epsilon >= eps0:
        return 0.0
    return float((math.exp(eps0) - math.exp(epsilon)) / (1.0 + math.exp(eps0))) if eps0 < 700 else 1.0


@dataclass(frozen=True)
class LaplaceRelease(PrivacyEvent):
    """A value of L1 sensitivity ``sensitivity`` released with i.i.d. Laplace(scale) noise.

    Pure ``epsilon0 = sensitivity / scale``-DP. A single release is accounted
    with the exact profile of the one-dimensional Laplace mechanism,
    ``delta(eps) = 1 - exp((eps - epsilon0) / 2)``, and its RDP curve. Using the
    one-dimensional pair for a vector release of the same L1 sensitivity rests
    on that pair being the worst case: the tests check it numerically (the
    Laplace RDP is superadditive in epsilon0, and the hockey-stick curve of a
    split sensitivity lies below the one-dimensional one); it is the same
    convention as dp-accounting's ``LaplaceDpEvent``.

    Parameters
    ----------
    sensitivity : float >= 0
        Replace-one L1 sensitivity.
    scale : float > 0
        Laplace scale ``b`` (density proportional to ``exp(-|x| / b)``).

    Examples
    --------
    >>> from skdp.accounting import LaplaceRelease, Repeated
    >>> LaplaceRelease(1.0, 2.0).epsilon(0.0)
    0.5
    >>> Repeated(LaplaceRelease(1.0, 2.0), 4).epsilon(0.0)
    2.0
    """

    sensitivity: float
    scale: float

    def __post_init__(self):
        object.__setattr__(self, "sensitivity", _nonneg("sensitivity", self.sensitivity, allow_inf=False))
        object.__setattr__(self, "scale", _nonneg("scale", self.scale))

    @property
    def pure_epsilon(self):
        """``sensitivity / scale``."""
        if self.sensitivity == 0.0:
            return 0.0
        if self.scale == 0.0:
            return math.inf
        return self.sensitivity / self.scale

    def _pure_epsilon(self):
        return self.pure_epsilon

    def _has_rdp(self):
        return True

    def _rdp(self, orders):
        eps0 = self.pure_epsilon
        if math.isinf(eps0):
            return np.full(np.shape(orders), np.inf)
        return _laplace_rdp(eps0, orders)

    def _rdp_fn(self):
        eps0 = self.pure_epsilon
        return lambda alpha: float(_laplace_rdp(eps0, [alpha])[0])

    def _own_epsilon(self, delta):
        eps0 = self.pure_epsilon
        if delta >= 1.0 or eps0 == 0.0:
            return 0.0
        if math.isinf(eps0):
            return math.inf
        return max(0.0, eps0 + 2.0 * math.log1p(-delta))

    def _own_delta(self, epsilon):
        eps0 = self.pure_epsilon
        if epsilon >= eps0:
            return 0.0
        return float(-math.expm1((epsilon - eps0) / 2.0))


@dataclass(frozen=True)
class ExponentialMechanismRelease(PrivacyEvent):
    """One draw of the exponential mechanism with privacy parameter ``epsilon``.

    Sampling with probability proportional to ``exp(epsilon * u / (2 Delta))``
    for a utility ``u`` of sensitivity ``Delta`` is epsilon-DP and, more finely,
    epsilon-bounded-range, hence ``epsilon^2 / 8``-zCDP (Cesar and Rogers, 2021).
    Both descriptions are used; the accountant takes the tighter.

    Parameters
    ----------
    epsilon : float >= 0
        Stored as the attribute ``epsilon0`` (``epsilon`` is the method that
        answers privacy queries).

    Examples
    --------
    >>> from skdp.accounting import ExponentialMechanismRelease
    >>> ExponentialMechanismRelease(0.5).epsilon(0.0)
    0.5
    """

    epsilon0: float

    def __init__(self, epsilon):
        object.__setattr__(self, "epsilon0", _nonneg("epsilon", epsilon))

    def __repr__(self):
        return f"ExponentialMechanismRelease(epsilon={self.epsilon0!r})"

    def _pure_epsilon(self):
        return self.epsilon0

    def _has_rdp(self):
        return True

    def _rdp(self, orders):
        eps0 = self.epsilon0
        orders = np.asarray(orders, dtype=float)
        if math.isinf(eps0):
            return np.full(orders.shape, np.inf)
        return np.minimum(_randomized_response_rdp(eps0, orders), orders * eps0**2 / 8.0)

    def _rdp_fn(self):
        eps0 = self.epsilon0
        return lambda alpha: min(_randomized_response_rdp_scalar(eps0, alpha), alpha * eps0**2 / 8.0)

    def _own_epsilon(self, delta):
        return min(_pure_dp_profile_epsilon(self.epsilon0, delta), super()._own_epsilon(delta))

    def _own_delta(self, epsilon):
        return min(_pure_dp_profile_delta(self.epsilon0, epsilon), super()._own_delta(epsilon))


@dataclass(frozen=True)
class ZCDPRelease(PrivacyEvent):
    """A release that is rho-zCDP (Bun and Steinke): RDP ``alpha * rho`` at every order.

    Parameters
    ----------
    rho : float >= 0

    Examples
    --------
    >>> from skdp.accounting import ZCDPRelease, Repeated
    >>> round(ZCDPRelease(0.5).epsilon(1e-6), 3)
    5.222
    >>> Repeated(ZCDPRelease(0.05), 10).epsilon(1e-6) == ZCDPRelease(0.5).epsilon(1e-6)
    True
    """

    rho: float

    def __post_init__(self):
        object.__setattr__(self, "rho", _nonneg("rho", self.rho))

    def _has_rdp(self):
        return True

    def _rdp(self, orders):
        return np.asarray(orders, dtype=float) * self.rho

    def _rdp_fn(self):
        rho = self.rho
        return lambda alpha: alpha * rho

    def _rdp_is_linear(self):
        return True


@dataclass(frozen=True)
class ApproxDPRelease(PrivacyEvent):
    """A release known only to be (epsilon, delta)-DP.

    At a larger delta the event also certifies a smaller epsilon, through the
    privacy profile of the worst (epsilon, delta)-DP mechanism:
    ``delta' = delta + (1 - delta) (e^eps - e^eps') / (1 + e^eps)``.
    With ``delta = 0`` it is a pure epsilon-DP release.

    Parameters
    ----------
    epsilon : float >= 0
    delta : float in [0, 1]
        Stored as the attributes ``epsilon0`` and ``delta0`` (``epsilon`` and
        ``delta`` are the methods that answer privacy queries).

    Examples
    --------
    >>> from skdp.accounting import ApproxDPRelease, Sequential
    >>> ev = Sequential([ApproxDPRelease(0.5, 1e-6), ApproxDPRelease(0.25, 1e-6)])
    >>> ev.epsilon(2e-6)
    0.75
    """

    epsilon0: float
    delta0: float

    def __init__(self, epsilon, delta):
        object.__setattr__(self, "epsilon0", _nonneg("epsilon", epsilon))
        object.__setattr__(self, "delta0", _check_delta(delta))

    def __repr__(self):
        return f"ApproxDPRelease(epsilon={self.epsilon0!r}, delta={self.delta0!r})"

    def _pure_epsilon(self):
        return self.epsilon0 if self.delta0 == 0.0 else None

    def _has_rdp(self):
        return self.delta0 == 0.0

    def _rdp(self, orders):
        if self.delta0 > 0.0:
            return None
        if math.isinf(self.epsilon0):
            return np.full(np.shape(orders), np.inf)
        return _randomized_response_rdp(self.epsilon0, orders)

    def _rdp_fn(self):
        if self.delta0 > 0.0:
            return None
        eps0 = self.epsilon0
        return lambda alpha: _randomized_response_rdp_scalar(eps0, alpha)

    def _fixed_point(self):
        if self.delta0 == 0.0:
            return None
        return self.epsilon0, self.delta0

    def _min_delta(self):
        return self.delta0

    def _own_epsilon(self, delta):
        if delta < self.delta0:
            return math.inf
        if delta >= 1.0:
            return 0.0
        if math.isinf(self.epsilon0):
            return math.inf
        extra = (delta - self.delta0) / (1.0 - self.delta0)
        eps = _pure_dp_profile_epsilon(self.epsilon0, extra)
        if self.delta0 == 0.0:
            eps = min(eps, super()._own_epsilon(delta))
        return eps

    def _own_delta(self, epsilon):
        if math.isinf(self.epsilon0):
            return 1.0
        value = self.delta0 + (1.0 - self.delta0) * _pure_dp_profile_delta(self.epsilon0, epsilon)
        if self.delta0 == 0.0:
            value = min(value, super()._own_delta(epsilon))
        return value


@dataclass(frozen=True)
class PoissonSampled(PrivacyEvent):
    """A Gaussian release applied to a Poisson subsample with inclusion probability ``rate``.

    The RDP curve is that of the sampled Gaussian mechanism (Mironov, Talwar and
    Zhang, 2019), evaluated exactly at integer orders and by quadrature at
    fractional ones. That analysis is for the add-or-remove-one relation; under
    skdp's replace-one relation, give the inner :class:`GaussianRelease` the
    replace-one sensitivity (``2 C`` for a sum of vectors clipped to ``C``), for
    which the bound is conservative (the test-suite compares it with the exact
    replace-one divergence). The tuner's ``method="bilevel_sgd"`` charges its
    mini-batch steps this way; the event also serves users' own DP-SGD style
    pipelines and comparison with other accountants.

    Parameters
    ----------
    event : GaussianRelease
    rate : float in [0, 1]

    Examples
    --------
    >>> from skdp.accounting import GaussianRelease, PoissonSampled, Repeated
    >>> steps = Repeated(PoissonSampled(GaussianRelease(1.0, 1.1), 0.01), 1000)
    >>> 1.5154 <= steps.epsilon(1e-5) <= 1.7119
    True
    """

    event: GaussianRelease
    rate: float

    def __post_init__(self):
        if not isinstance(self.event, GaussianRelease):
            raise TypeError(
                "PoissonSampled supports a GaussianRelease inside; got "
                f"{type(self.event).__name__}."
            )
        rate = _nonneg("rate", self.rate)
        if rate > 1.0:
            raise ValueError(f"rate must lie in [0, 1]; got {rate!r}.")
        object.__setattr__(self, "rate", rate)

    def _noise_multiplier(self):
        mu = self.event.mu
        return math.inf if mu == 0.0 else (0.0 if math.isinf(mu) else 1.0 / mu)

    def _has_rdp(self):
        return True

    def _rdp(self, orders):
        if self.rate == 0.0 or self.event.mu == 0.0:
            return np.zeros(np.shape(orders))
        return poisson_gaussian_rdp(self.rate, self._noise_multiplier(), orders)

    def _gdp_mu(self):
        if self.rate == 1.0 or self.event.mu == 0.0:
            return self.event.mu
        if self.rate == 0.0:
            return 0.0
        return None


# --------------------------------------------------------------------------------------
# combinators
# --------------------------------------------------------------------------------------
def _check_events(events):
    events = tuple(events)
    for ev in events:
        if not isinstance(ev, PrivacyEvent):
            raise TypeError(f"expected PrivacyEvent instances; got {type(ev).__name__}.")
    return events


def _merge(items):
    merged = {}
    order = []
    for it in items:
        try:
            key = it.event
            hash(key)
        except TypeError:  # pragma: no cover - all events are hashable
            key = id(it.event)
        if key in merged:
            merged[key].count += it.count
        else:
            merged[key] = Item(it.event, it.count)
            order.append(key)
    return [merged[k] for k in order if merged[k].count > 0]


def _composite_gdp(event):
    items = event._items()
    mus = [it.gdp_mu() for it in items]
    if any(m is None for m in mus):
        return None
    return math.sqrt(sum(m * m for m in mus))


def _composite_rdp(event, orders):
    items = event._items()
    if not all(it.has_rdp() for it in items):
        return None
    return sum((it.rdp(orders) for it in items), np.zeros(np.shape(orders)))


def _composite_rdp_fn(event):
    fns = [it.rdp_fn() for it in event._items()]
    if any(f is None for f in fns):
        return None
    return lambda alpha: sum(f(alpha) for f in fns)


def _composite_pure(event):
    items = event._items()
    values = [it.pure_epsilon() for it in items]
    if any(v is None for v in values):
        return None
    return float(sum(values))


@dataclass(frozen=True)
class Sequential(PrivacyEvent):
    """Adaptive sequential composition of ``events`` (all touch the same rows).

    Examples
    --------
    >>> from skdp.accounting import GaussianRelease, Sequential
    >>> a = Sequential([GaussianRelease(1.0, 2.0), GaussianRelease(1.0, 2.0)])
    >>> b = GaussianRelease(1.0, 2.0 / 2 ** 0.5)
    >>> abs(a.epsilon(1e-5) - b.epsilon(1e-5)) < 1e-9
    True
    """

    events: tuple

    def __init__(self, events=()):
        object.__setattr__(self, "events", _check_events(events))

    def _items(self):
        items = []
        for ev in self.events:
            items.extend(ev._items())
        return _merge(items)


@dataclass(frozen=True)
class Repeated(PrivacyEvent):
    """``count`` adaptive repetitions of ``event`` on the same rows.

    Examples
    --------
    >>> from skdp.accounting import Repeated, ZCDPRelease
    >>> Repeated(ZCDPRelease(0.01), 10).epsilon(1e-6) == ZCDPRelease(0.1).epsilon(1e-6)
    True
    """

    event: PrivacyEvent
    count: int

    def __post_init__(self):
        _check_events([self.event])
        count = self.count
        if isinstance(count, bool) or not float(count).is_integer() or count < 0:
            raise ValueError(f"count must be a non-negative integer; got {count!r}.")
        object.__setattr__(self, "count", int(count))

    def _items(self):
        return _merge([Item(it.event, it.count * self.count) for it in self.event._items()])


@dataclass(frozen=True)
class Parallel(PrivacyEvent):
    """Releases on pairwise disjoint blocks of rows: the privacy loss is the maximum.

    Under replace-one neighbours the changed row lies in one block, so only that
    block's release differs; every other release is identically distributed. Each
    block may therefore spend the full budget.

    Examples
    --------
    >>> from skdp.accounting import GaussianRelease, LaplaceRelease, Parallel
    >>> ev = Parallel([GaussianRelease(1.0, 1.0), LaplaceRelease(1.0, 0.5)])
    >>> ev.epsilon(1e-6) == max(GaussianRelease(1.0, 1.0).epsilon(1e-6),
    ...                        LaplaceRelease(1.0, 0.5).epsilon(1e-6))
    True
    """

    events: tuple

    def __init__(self, events=()):
        object.__setattr__(self, "events", _check_events(events))

    def epsilon(self, delta):
        delta = _check_delta(delta)
        return max((ev.epsilon(delta) for ev in self.events), default=0.0)

    def delta(self, epsilon):
        epsilon = _check_epsilon(epsilon)
        return max((ev.delta(epsilon) for ev in self.events), default=0.0)

    def _items(self):
        return [Item(self, 1)] if self.events else []

    def _gdp_mu(self):
        values = [_composite_gdp(ev) for ev in self.events]
        if any(v is None for v in values):
            return None
        return max(values, default=0.0)

    def _has_rdp(self):
        return all(all(it.has_rdp() for it in ev._items()) for ev in self.events)

    def _rdp(self, orders):
        curves = [_composite_rdp(ev, orders) for ev in self.events]
        if any(c is None for c in curves):
            return None
        return np.max(np.stack(curves), axis=0) if curves else np.zeros(np.shape(orders))

    def _rdp_fn(self):
        fns = [_composite_rdp_fn(ev) for ev in self.events]
        if not fns or any(f is None for f in fns):
            return None
        return lambda alpha: max(f(alpha) for f in fns)

    def _pure_epsilon(self):
        values = [_composite_pure(ev) for ev in self.events]
        if any(v is None for v in values):
            return None
        return max(values, default=0.0)

    def _min_delta(self):
        return max((sum(it.min_delta() for it in ev._items()) for ev in self.events), default=0.0)

    def _own_epsilon(self, delta):
        return self.epsilon(delta)

    def _own_delta(self, epsilon):
        return self.delta(epsilon)
