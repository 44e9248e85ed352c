"""Arithmetic on released quantities that cannot raise.

A solver's steps, radii and levels are computed from public inputs and earlier
releases. A starved budget can release a scale of 0 or 1e-300, and Python's
float division raises ``ZeroDivisionError`` on ``x / 0.0``: after the budget is
charged, an exception is a release (privacy contract, rule 7). Solvers divide
by released quantities through :func:`total_ratio`, whose degenerate results
(0 or inf) are then mapped by each solver's own public rule.
"""

import math

__all__ = ["total_ratio"]


def total_ratio(numerator, denominator):
    """``numerator / denominator`` for non-negative quantities, total: ``x / 0`` is inf, ``0 / 0`` is 0.

    NaN in either argument, or an infinite denominator, gives 0.

    Examples
    --------
    >>> from skdp.solvers.arithmetic import total_ratio
    >>> total_ratio(1.0, 4.0), total_ratio(1.0, 0.0), total_ratio(0.0, 0.0), total_ratio(3.0, float("inf"))
    (0.25, inf, 0.0, 0.0)
    """
    numerator, denominator = float(numerator), float(denominator)
    if math.isnan(numerator) or math.isnan(denominator) or math.isinf(denominator):
        return 0.0
    if denominator <= 0.0:
        return 0.0 if numerator == 0.0 else math.inf
    return numerator / denominator
