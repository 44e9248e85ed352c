"""The exponential mechanism: one index drawn by its utility.

Index ``k`` of a utility vector ``u`` (each entry of replace-one sensitivity at
most ``Delta``) is drawn with probability proportional to
``exp(epsilon u_k / (2 Delta))``: ``epsilon``-DP, and ``epsilon``-bounded-range,
hence ``epsilon^2 / 8``-zCDP (Cesar and Rogers, 2021), whatever the number of
candidates. An entry that does not depend on the data (a public constant) has
sensitivity 0 and may sit among the others. The draw is Gumbel-max: the argmax
of ``epsilon u / (2 Delta)`` plus independent standard Gumbel noise, which has
exactly that distribution. Only the index is released.
"""

import math

import numpy as np

from ..accounting import ExponentialMechanismRelease
from ._audit import notify
from ._random import check_generator

__all__ = ["exponential_mechanism"]


class _UtilityRelease:
    """What the audit log records of a draw: its event and its utility's sensitivity."""

    def __init__(self, event, sensitivity):
        self.event = event
        self.sensitivity = sensitivity
        self.epsilon0 = event.epsilon0


def exponential_mechanism(utility, sensitivity, epsilon, random_state=None):
    """Draw an index with probability proportional to ``exp(epsilon u / (2 sensitivity))``.

    Parameters
    ----------
    utility : array-like of shape (k,)
        Finite utilities (higher is better); each entry's replace-one
        sensitivity must be at most ``sensitivity``.
    sensitivity : float > 0
    epsilon : float > 0 or inf
        ``inf`` returns the exact argmax (no noise: not private).
    random_state : None, int or Generator

    Returns
    -------
    index : int
    event : ExponentialMechanismRelease

    Examples
    --------
    >>> from skdp.mechanisms import exponential_mechanism
    >>> index, event = exponential_mechanism([0.0, 50.0, -50.0], sensitivity=1.0, epsilon=1.0,
    ...                                      random_state=0)
    >>> index, event
    (1, ExponentialMechanismRelease(epsilon=1.0))
    """
    utility = np.asarray(utility, dtype=float)
    event = ExponentialMechanismRelease(epsilon)
    notify("exponential", utility, _UtilityRelease(event, float(sensitivity)))
    if math.isinf(epsilon):
        return int(np.argmax(utility)), event
    rng = check_generator(random_state)
    logits = epsilon * utility / (2.0 * sensitivity)
    return int(np.argmax(logits + rng.gumbel(size=utility.size))), event
