"""Public moment bounds of the per-sample gradient norms, for the theory schedules.

The heavy-tail papers state their schedules in terms of ``G_k``, a bound on the
``k``-th moment of the per-sample gradient norms over the coefficient ball, and
``G_2`` for the sampling-variance terms. They are public inputs the user vouches
for; they affect accuracy only (the noise is always calibrated to the clip
threshold actually used).
"""

import math
from dataclasses import dataclass

from .._validation import Predicate

__all__ = ["MomentBounds", "VALID_MOMENTS"]


@dataclass(frozen=True)
class MomentBounds:
    """``(k, G_k, G_2)``: order, k-th moment bound and second-moment bound (``G_2`` defaults to ``G_k``).

    Examples
    --------
    >>> from skdp.solvers.moments import MomentBounds
    >>> MomentBounds(order=4, bound=2.0).second
    2.0
    """

    order: float = 4.0
    bound: float = None
    second_bound: float = None

    @property
    def known(self):
        return self.bound is not None

    @property
    def k(self):
        return float(self.order)

    @property
    def G(self):
        return float(self.bound)

    @property
    def second(self):
        return float(self.second_bound if self.second_bound is not None else self.bound)

    def require(self, what, min_order=None):
        """Raise ``ValueError`` when a theory schedule needs the bounds and they are missing or too weak."""
        if self.bound is None:
            raise ValueError(f"{what} with schedule='theory' needs public moment bounds "
                             "(moment_bound, moment_order).")
        if min_order is not None and not self.k >= min_order:
            raise ValueError(f"{what} with schedule='theory' needs moment_order >= {min_order:g}; "
                             f"got {self.order!r}.")
        return self

    @classmethod
    def from_options(cls, options):
        return cls(options.moment_order, options.moment_bound, options.second_moment_bound)

    def is_valid(self):
        """Whether the order and each bound (or None) are positive finite numbers.

        The theory schedules check more (an order above 1 or 4) in :meth:`require`.
        """
        def positive(v):
            return not isinstance(v, bool) and 0.0 < float(v) < math.inf
        return positive(self.order) and all(v is None or positive(v) for v in (self.bound, self.second_bound))


VALID_MOMENTS = Predicate(lambda m: isinstance(m, MomentBounds) and m.is_valid(),
                          "MomentBounds with a positive finite order and bounds None or positive finite numbers")
