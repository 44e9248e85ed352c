"""Composition engine: the tightest valid (epsilon, delta) bound for a set of releases.

A sequential composition is flattened into *items* (a leaf release or an opaque
parallel block, each with a multiplicity). Every item advertises what it can be
described by: an exact mu-GDP parameter, an RDP curve, a pure epsilon, a fixed
(epsilon, delta) point, and always its own epsilon(delta) curve. The engine then
evaluates several valid ways of composing them and returns the smallest value:

* all items Gaussian  -> exact mu-GDP (sum of mu^2), no other candidate needed;
* all items with RDP  -> sum of RDP curves, improved RDP -> DP conversion;
* basic composition over groups, with delta split between the groups:
  [RDP of everything that has RDP] + the rest;
  [GDP of the Gaussians] + [RDP of the other RDP items] + the rest;
  [GDP of the Gaussians] + [pure epsilons summed at delta 0] + [RDP of the rest] + the rest;
  every item on its own curve (only for a handful of items).

Every candidate is an upper bound on the true privacy loss, so their minimum is
too. The delta split is optimised numerically; any split is valid.
"""

import math

import numpy as np
from scipy import optimize

from ._conversions import DEFAULT_ORDERS, gdp_delta, gdp_epsilon, rdp_to_delta, rdp_to_epsilon

_MAX_INDIVIDUAL = 6


class Item:
    """One release (or opaque parallel block) repeated ``count`` times in sequence."""

    __slots__ = ("event", "count")

    def __init__(self, event, count):
        self.event = event
        self.count = int(count)

    # capabilities, scaled by the multiplicity --------------------------------------
    def gdp_mu(self):
        mu = self.event._gdp_mu()
        return None if mu is None else mu * math.sqrt(self.count)

    def rdp(self, orders):
        curve = self.event._rdp(orders)
        return None if curve is None else self.count * curve

    def has_rdp(self):
        return self.event._has_rdp()

    def rdp_fn(self):
        # The continuous refinement of the order only pays for linear curves
        # (Gaussian, zCDP); elsewhere the dense order grid is within ~1e-4.
        if not self.event._rdp_is_linear():
            return None
        fn = self.event._rdp_fn()
        if fn is None:
            return None
        count = self.count
        return lambda alpha: count * fn(alpha)

    def pure_epsilon(self):
        eps = self.event._pure_epsilon()
        return None if eps is None else eps * self.count

    def fixed_point(self):
        point = self.event._fixed_point()
        if point is None:
            return None
        return point[0] * self.count, min(1.0, point[1] * self.count)

    def min_delta(self):
        return min(1.0, self.event._min_delta() * self.count)

    def curve(self, delta):
        """Epsilon at ``delta`` of the ``count`` copies on their own.

        Exact GDP when the item is Gaussian, the RDP conversion of the summed
        curve when it has one, basic composition over the copies otherwise.
        """
        if self.count == 1:
            return self.event.epsilon(delta)
        mu = self.gdp_mu()
        if mu is not None:
            return gdp_epsilon(mu, delta)
        candidates = [self.count * self.event.epsilon(delta / self.count)]
        if self.has_rdp():
            candidates.append(rdp_to_epsilon(DEFAULT_ORDERS, self.rdp(DEFAULT_ORDERS), delta,
                                             rdp_fn=self.rdp_fn()))
        pure = self.pure_epsilon()
        if pure is not None:
            candidates.append(pure)
        return min(candidates)


    def fast_curve(self, delta):
        """A cheap upper bound of :meth:`curve` (used to search delta splits only).

        Exact GDP for Gaussian items; otherwise the smaller of the pure epsilon and
        the RDP conversion on the order grid (no refinement), when either exists.
        """
        mu = self.gdp_mu()
        if mu is not None:
            return gdp_epsilon(mu, delta)
        candidates = []
        if self.has_rdp():
            candidates.append(rdp_to_epsilon(DEFAULT_ORDERS, self.rdp(DEFAULT_ORDERS), delta))
        pure = self.pure_epsilon()
        if pure is not None:
            candidates.append(pure)
        return min(candidates) if candidates else self.curve(delta)


# --------------------------------------------------------------------------------------
# groups used in basic composition
# --------------------------------------------------------------------------------------
class _Fixed:
    def __init__(self, epsilon, delta):
        self.epsilon, self.delta = epsilon, delta


class _Curve:
    """An epsilon(delta) curve; ``fast`` is a cheaper upper bound used to search delta splits."""

    def __init__(self, fn, min_delta=0.0, fast=None):
        self.fn, self.min_delta = fn, min_delta
        self.fast = fast or fn


def _gdp_group(items):
    mu = math.sqrt(sum(it.gdp_mu() ** 2 for it in items))
    return _Curve(lambda d: gdp_epsilon(mu, d))


def _rdp_group(items, orders=DEFAULT_ORDERS):
    curve = sum(it.rdp(orders) for it in items)
    fns = [it.rdp_fn() for it in items]
    fn = None
    if all(f is not None for f in fns):
        fn = lambda a: sum(f(a) for f in fns)  # noqa: E731
    # The grid-only conversion (no refinement between orders) is an upper bound of
    # the refined one and about 30 times cheaper: delta splits are searched with it.
    return _Curve(lambda d: rdp_to_epsilon(orders, curve, d, rdp_fn=fn),
                  fast=lambda d: rdp_to_epsilon(orders, curve, d))


def _item_group(item):
    point = item.fixed_point()
    if point is not None:
        return _Fixed(*point)
    return _Curve(item.curve, item.min_delta(), fast=item.fast_curve)


def _split_two(c1, c2, free):
    """Minimise c1(m1 + w free) + c2(m2 + (1 - w) free) over w in (0, 1).

    The split is searched on the curves' cheap upper bounds; the result is the
    exact curves at the best split found, also evaluated at the grid point that
    was best (every split gives a valid bound, so this only tightens).
    """

    def total(w, exact=False):
        f1, f2 = (c1.fn, c2.fn) if exact else (c1.fast, c2.fast)
        return f1(c1.min_delta + w * free) + f2(c2.min_delta + (1.0 - w) * free)

    # Coarse log-spaced grid on both ends, then a bounded refinement between the
    # neighbours of the best grid point.
    grid = np.array([1e-6, 1e-3, 0.03, 0.2, 0.5, 0.8, 0.97, 1 - 1e-3, 1 - 1e-6])
    values = np.array([total(w) for w in grid])
    i = int(np.argmin(values))
    w_best, best = float(grid[i]), float(values[i])
    lo = grid[max(i - 1, 0)]
    hi = grid[min(i + 1, len(grid) - 1)]
    if hi > lo and math.isfinite(best):
        res = optimize.minimize_scalar(total, bounds=(lo, hi), method="bounded",
                                       options={"xatol": 1e-9 * max(lo, 1e-12)})
        if math.isfinite(res.fun) and res.fun < best:
            w_best = float(res.x)
    return min(total(w_best, exact=True), total(float(grid[i]), exact=True))


def _split_many(curves, free):
    m = len(curves)

    def total(logits, exact=False):
        w = np.exp(logits - np.max(logits))
        w /= w.sum()
        return sum((c.fn if exact else c.fast)(c.min_delta + wi * free) for c, wi in zip(curves, w))

    # Searched on the cheap upper bounds, evaluated exactly at the start and at the
    # best split found (any split is valid).
    start = np.zeros(m)
    best = total(start, exact=True)
    if math.isfinite(total(start)):
        res = optimize.minimize(total, start, method="Nelder-Mead",
                                options={"maxiter": 200 * m, "xatol": 1e-6, "fatol": 1e-10})
        if math.isfinite(res.fun):
            best = min(best, total(res.x, exact=True))
    return best


def basic_composition(groups, delta):
    """Basic composition of fixed points and curves, with an optimised delta split."""
    fixed = [g for g in groups if isinstance(g, _Fixed)]
    curves = [g for g in groups if isinstance(g, _Curve)]
    eps_fixed = sum(g.epsilon for g in fixed)
    free = delta - sum(g.delta for g in fixed) - sum(c.min_delta for c in curves)
    if free < 0.0:
        return math.inf
    if not curves:
        return eps_fixed
    if len(curves) == 1:
        c = curves[0]
        return eps_fixed + c.fn(c.min_delta + free)
    if free == 0.0:
        return eps_fixed + sum(c.fn(c.min_delta) for c in curves)
    if len(curves) == 2:
        return eps_fixed + _split_two(curves[0], curves[1], free)
    return eps_fixed + _split_many(curves, free)


# --------------------------------------------------------------------------------------
# entry points
# --------------------------------------------------------------------------------------
def _equal_split(groups, delta):
    fixed = [g for g in groups if isinstance(g, _Fixed)]
    curves = [g for g in groups if isinstance(g, _Curve)]
    free = delta - sum(g.delta for g in fixed) - sum(c.min_delta for c in curves)
    if free < 0.0:
        return math.inf
    share = free / len(curves) if curves else 0.0
    return sum(g.epsilon for g in fixed) + sum(c.fn(c.min_delta + share) for c in curves)


def _all(items, method):
    return all(getattr(it, method)() is not None for it in items)


def compose_epsilon(items, delta):
    """Tightest valid epsilon at ``delta`` for the sequential composition of ``items``."""
    items = [it for it in items if it.count > 0]
    if not items or delta >= 1.0:
        return 0.0
    if _all(items, "gdp_mu"):
        mu = math.sqrt(sum(it.gdp_mu() ** 2 for it in items))
        return gdp_epsilon(mu, delta)
    if len(items) == 1 and items[0].count == 1:
        return items[0].event._own_epsilon(delta)

    has_rdp = [it for it in items if it.has_rdp()]
    no_rdp = [it for it in items if it not in has_rdp]
    candidates = []

    if not no_rdp:
        candidates.append(_rdp_group(has_rdp).fn(delta))
    elif has_rdp:
        candidates.append(basic_composition([_rdp_group(has_rdp)] + [_item_group(i) for i in no_rdp], delta))

    gauss = [it for it in has_rdp if it.gdp_mu() is not None]
    others = [it for it in has_rdp if it.gdp_mu() is None]
    rest_groups = [_item_group(i) for i in no_rdp]
    if gauss and others:
        candidates.append(basic_composition([_gdp_group(gauss), _rdp_group(others)] + rest_groups, delta))
    pure = [it for it in others if it.pure_epsilon() is not None]
    if pure:
        remaining = [it for it in others if it.pure_epsilon() is None]
        groups = [_Fixed(sum(it.pure_epsilon() for it in pure), 0.0)] + rest_groups
        if gauss:
            groups.append(_gdp_group(gauss))
        if remaining:
            groups.append(_rdp_group(remaining))
        candidates.append(basic_composition(groups, delta))
    # Each item on its own curve, except that Gaussian items always share one exact
    # GDP curve (never worse than splitting delta between them).
    individual = [_Curve(it.curve, it.min_delta(), fast=it.fast_curve) if it.fixed_point() is None
                  else _item_group(it)
                  for it in items if it.gdp_mu() is None]
    if gauss:
        individual.append(_gdp_group(gauss))
    if len(items) <= _MAX_INDIVIDUAL:
        candidates.append(basic_composition(individual, delta))
    else:
        # Always-valid fallback with a cheap split: fixed points as they are, and an
        # equal share of the remaining delta for every curve.
        candidates.append(_equal_split(individual, delta))
    return max(0.0, min(candidates))


def compose_delta(items, epsilon):
    """Smallest delta (up to a relative 1e-6) such that the composition is (epsilon, delta)-DP."""
    items = [it for it in items if it.count > 0]
    if not items:
        return 0.0
    if math.isinf(epsilon):
        return 0.0
    if _all(items, "gdp_mu"):
        mu = math.sqrt(sum(it.gdp_mu() ** 2 for it in items))
        return gdp_delta(mu, epsilon)
    if len(items) == 1 and items[0].count == 1:
        return items[0].event._own_delta(epsilon)
    if _all(items, "pure_epsilon") and sum(it.pure_epsilon() for it in items) <= epsilon:
        return 0.0
    best = 1.0
    if all(it.has_rdp() for it in items):
        curve = sum(it.rdp(DEFAULT_ORDERS) for it in items)
        best = rdp_to_delta(DEFAULT_ORDERS, curve, epsilon)
    return min(best, invert_epsilon_curve(lambda d: compose_epsilon(items, d), epsilon, upper=best))


def invert_epsilon_curve(epsilon_of_delta, epsilon, upper=1.0):
    """Smallest delta in (0, upper] with ``epsilon_of_delta(delta) <= epsilon`` (log bisection)."""
    if upper <= 0.0:
        return 0.0
    if epsilon_of_delta(upper) > epsilon:
        return upper
    lo, hi = math.log(1e-300), math.log(upper)
    if epsilon_of_delta(math.exp(lo)) <= epsilon:
        return 0.0 if epsilon_of_delta(0.0) <= epsilon else math.exp(lo)
    while hi - lo > 1e-6:
        mid = 0.5 * (lo + hi)
        if epsilon_of_delta(math.exp(mid)) <= epsilon:
            hi = mid
        else:
            lo = mid
    return math.exp(hi)
