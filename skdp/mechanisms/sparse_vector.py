"""The sparse vector technique with bounded Laplace noise (Asi, Liu and Tian, Algorithm 6).

A stream of queries, each of sensitivity ``sensitivity``, is compared with a
noisy threshold. The mechanism answers "below" or "above" and halts after
``max_above`` answers "above". Every segment that ends with an "above" is one
AboveThreshold run (Dwork and Roth 2014, Thm 3.23): threshold noise of scale
``R = 2 Delta / eps0`` and query noise of scale ``2 R`` make it pure
``eps0``-DP, and the segments compose adaptively. Bounded (truncated) noise,
which the heavy-tail solvers need for deterministic bounds, is within total
variation ``draws * exp(-bound / R)`` of the Laplace version; that slack enters
delta with the factor ``1 + e^epsilon``.

References
----------
H. Asi, D. Liu and K. Tian, "Private Stochastic Convex Optimization with Heavy
Tails: Near-Optimality from Simple Reductions", 2024, arXiv:2406.02789 (Algorithm 6).

C. Dwork and A. Roth, "The Algorithmic Foundations of Differential Privacy", 2014.
"""

import math

import numpy as np

from ..accounting import ApproxDPRelease, Repeated
from ._random import check_generator
from .noise import bounded_laplace_noise

__all__ = ["SparseVector", "sparse_vector_event"]


def sparse_vector_event(sensitivity, scale, bound, max_above, max_queries, delta_split=0.5, delta=None):
    """Privacy of a sparse-vector run from its parameters (never from its transcript).

    Parameters
    ----------
    sensitivity : float
        Sensitivity of each query.
    scale : float
        Laplace scale ``R`` of the threshold noise (queries get ``2 R``).
    bound : float
        Truncation of the threshold noise (queries get ``2 * bound``).
    max_above : int
        Number of "above" answers after which the run halts.
    max_queries : int
        Largest number of queries the run may answer.
    delta : float
        Target delta. ``delta_split * delta`` goes to the composition of the
        AboveThreshold rounds; the truncation slack is added on top.

    Returns
    -------
    ApproxDPRelease
    """
    if delta is None or not 0.0 < delta < 1.0:
        raise ValueError("sparse_vector_event needs a target delta in (0, 1).")
    eps_round = 2.0 * float(sensitivity) / float(scale)
    rounds = Repeated(ApproxDPRelease(eps_round, 0.0), int(max_above))
    delta_rounds = delta_split * delta
    epsilon = rounds.epsilon(delta_rounds)
    # One query draw per query, and a threshold draw at the start and after every
    # 'above' (at most min(max_above, max_queries) of them).
    draws = int(max_queries) + min(int(max_above), int(max_queries)) + 1
    log_trunc = float(np.logaddexp(0.0, epsilon)) + math.log(draws) - float(bound) / float(scale)
    delta_trunc = max(math.exp(min(log_trunc, 0.0)), 1e-300)
    return ApproxDPRelease(epsilon, min(1.0, delta_rounds + delta_trunc))


def _round_epsilon_for(epsilon, delta_rounds, max_above):
    """Largest per-round epsilon whose ``max_above``-fold composition fits ``epsilon``."""
    lo, hi = 0.0, float(epsilon)
    if max_above == 1:
        return hi
    while hi - lo > 1e-10 * hi:
        mid = 0.5 * (lo + hi)
        if Repeated(ApproxDPRelease(mid, 0.0), max_above).epsilon(delta_rounds) <= epsilon:
            lo = mid
        else:
            hi = mid
    return lo


class SparseVector:
    """Online sparse vector technique with bounded Laplace noise.

    Parameters
    ----------
    threshold : float
        Public threshold ``L``.
    scale : float
        Laplace scale ``R`` of the threshold noise; queries receive ``2 R``.
    bound : float
        Truncation ``tau`` of the threshold noise; queries receive ``2 tau``.
    sensitivity : float
        Sensitivity of every query.
    max_above : int
        Halt after this many "above" answers.
    max_queries : int
        Refuse more queries than this (the privacy event depends on it).
    random_state : None, int or Generator

    See Also
    --------
    SparseVector.calibrated : choose ``scale`` and ``bound`` from a target budget.

    Examples
    --------
    >>> from skdp.mechanisms import SparseVector
    >>> svt = SparseVector.calibrated(threshold=100.0, sensitivity=1.0, epsilon=1.0,
    ...                               delta=1e-6, max_above=2, max_queries=100,
    ...                               random_state=0)
    >>> answers = [svt.test(q) for q in [0.0, 0.0, 500.0, 1.0, 600.0]]
    >>> answers
    [False, False, True, False, True]
    >>> svt.halted
    True
    >>> svt.privacy_event(delta=1e-6).epsilon(1e-6) <= 1.0
    True
    """

    def __init__(self, threshold, *, scale, bound, sensitivity, max_above, max_queries,
                 random_state=None):
        self.threshold = float(threshold)
        self.scale = float(scale)
        self.bound = float(bound)
        self.sensitivity = float(sensitivity)
        self.max_above = int(max_above)
        self.max_queries = int(max_queries)
        if not (self.scale > 0 and self.bound > 0 and self.sensitivity >= 0):
            raise ValueError("SparseVector needs scale > 0, bound > 0 and sensitivity >= 0.")
        if self.max_above < 1 or self.max_queries < 1:
            raise ValueError("SparseVector needs max_above >= 1 and max_queries >= 1.")
        self._rng = check_generator(random_state)
        self.n_queries = 0
        self.n_above = 0
        self._noisy_threshold = self._draw_threshold()

    @classmethod
    def calibrated(cls, threshold, *, sensitivity, epsilon, delta, max_above, max_queries,
                   random_state=None, delta_split=0.5):
        """A sparse vector whose whole run is (epsilon, delta)-DP.

        ``delta_split * delta`` is given to the adaptive composition of the
        ``max_above`` AboveThreshold rounds, the rest bounds the truncation slack.
        """
        epsilon, delta = float(epsilon), float(delta)
        if not epsilon > 0 or not 0 < delta < 1:
            raise ValueError("calibrated sparse vector needs epsilon > 0 and delta in (0, 1).")
        eps_round = _round_epsilon_for(epsilon, delta_split * delta, int(max_above))
        scale = 2.0 * float(sensitivity) / eps_round
        draws = int(max_queries) + min(int(max_above), int(max_queries)) + 1
        # A relative margin keeps rounding from pushing the total delta above target.
        # bound = scale * log(draws (1 + e^eps) / slack_delta), in log space.
        log_slack = math.log((1.0 - 1e-9) * (1.0 - delta_split) * delta) - float(np.logaddexp(0.0, epsilon))
        bound = scale * (math.log(draws) - log_slack)
        return cls(threshold, scale=scale, bound=bound, sensitivity=sensitivity,
                   max_above=max_above, max_queries=max_queries, random_state=random_state)

    def _draw_threshold(self):
        return self.threshold + bounded_laplace_noise(self.scale, self.bound, random_state=self._rng)

    @property
    def halted(self):
        """True once ``max_above`` answers "above" have been given."""
        return self.n_above >= self.max_above

    def test(self, query_value):
        """Answer whether the noisy query is at or above the noisy threshold.

        Raises
        ------
        RuntimeError
            When called after the run halted or beyond ``max_queries``.
        """
        if self.halted:
            raise RuntimeError("The sparse vector has halted; it cannot answer more queries.")
        if self.n_queries >= self.max_queries:
            raise RuntimeError(f"The sparse vector was sized for {self.max_queries} queries.")
        self.n_queries += 1
        noise = bounded_laplace_noise(2.0 * self.scale, 2.0 * self.bound, random_state=self._rng)
        if float(query_value) + noise >= self._noisy_threshold:
            self.n_above += 1
            if not self.halted:
                self._noisy_threshold = self._draw_threshold()
            return True
        return False

    def privacy_event(self, delta, delta_split=0.5):
        """The (epsilon, delta) event of the whole run, from its public parameters."""
        return sparse_vector_event(self.sensitivity, self.scale, self.bound, self.max_above,
                                   self.max_queries, delta_split=delta_split, delta=delta)
