"""Tree aggregation of a stream with Gaussian noise, in Fenwick-tree layout.

Leaf ``t`` is the ``t``-th value of the stream. The node ending at ``m`` covers
leaves ``m - lowbit(m) + 1 .. m`` and carries its own noise ``xi_m``; the noisy
prefix sum at time ``t`` adds the nodes along the chain
``t, t - lowbit(t), ...`` (``popcount(t)`` nodes), so its noise is
``N[t] = N[t - lowbit(t)] + xi_t`` with variance ``popcount(t) * noise_std^2``.

Privacy: it is assumed that a record contributes to one leaf only (one pass
over the data, each record in one step); a record that changes its leaf by at
most ``leaf_sensitivity`` (L2) changes the nodes that cover that leaf, and no leaf is covered by more than
``bit_length(n_steps)`` released nodes (the exact layer count; the
``ceil(log2 n) + 1`` and ``2 ln n`` of Zhang, Tran and Cutkosky's Algorithm 5 are
wrong at small n). The whole stream of
releases is therefore the composition of ``bit_length(n_steps)`` Gaussian
releases, even when later leaves depend on earlier releases.

References
----------
Q. Zhang, H. Tran and A. Cutkosky, "Private Zeroth-Order Nonsmooth Nonconvex
Optimization", 2024, arXiv:2406.19579 (Algorithm 5).
"""

import numpy as np

from ..accounting import GaussianRelease, Repeated
from ._audit import notify
from ._random import check_generator

__all__ = ["TreeAggregator", "tree_depth", "tree_nodes"]


def tree_depth(n_steps):
    """Largest number of released nodes covering one leaf of a stream of ``n_steps``.

    Examples
    --------
    >>> from skdp.mechanisms import tree_depth
    >>> [tree_depth(t) for t in (1, 2, 3, 4, 7, 8, 1000)]
    [1, 2, 2, 3, 3, 4, 10]
    """
    n_steps = int(n_steps)
    if n_steps < 1:
        raise ValueError(f"n_steps must be at least 1; got {n_steps!r}.")
    return n_steps.bit_length()


def tree_nodes(t):
    """The node intervals ``(start, end)`` whose sum is the prefix sum at time ``t``.

    Examples
    --------
    >>> from skdp.mechanisms import tree_nodes
    >>> tree_nodes(7)
    [(1, 4), (5, 6), (7, 7)]
    >>> tree_nodes(8)
    [(1, 8)]
    """
    t = int(t)
    nodes = []
    while t > 0:
        low = t & -t
        nodes.append((t - low + 1, t))
        t -= low
    return nodes[::-1]


def _prefix_chain(t):
    """``{t, t - lowbit(t), ..., 0}``: the prefixes whose noise later steps reuse."""
    chain = {0}
    while t > 0:
        chain.add(t)
        t -= t & -t
    return chain


class TreeAggregator:
    """Noisy running sums of a stream of ``n_steps`` values.

    Parameters
    ----------
    n_steps : int
        Length of the stream (public; it fixes the layer count).
    shape : int or tuple
        Shape of every value.
    noise_std : float
        Standard deviation of each node's Gaussian noise.
    random_state : None, int or Generator
    leaf_sensitivity : float or None, default=None
        The L2 sensitivity of every leaf, when known: each released node is
        then reported to :func:`~skdp.mechanisms._audit.record_releases` (its
        exact value before the noise and its event), so that coupled runs can
        audit it; it changes nothing in the output.

    Examples
    --------
    >>> import numpy as np
    >>> from skdp.mechanisms import TreeAggregator
    >>> tree = TreeAggregator(n_steps=4, shape=2, noise_std=0.0)
    >>> [tree.append(np.ones(2)).tolist() for _ in range(4)]
    [[1.0, 1.0], [2.0, 2.0], [3.0, 3.0], [4.0, 4.0]]
    >>> tree.privacy_event(leaf_sensitivity=1.0)
    Repeated(event=GaussianRelease(sensitivity=1.0, noise_std=0.0), count=3)
    """

    def __init__(self, n_steps, shape, noise_std, random_state=None, leaf_sensitivity=None):
        self.n_steps = int(n_steps)
        self.depth = tree_depth(self.n_steps)
        self.shape = (shape,) if np.isscalar(shape) else tuple(shape)
        self.noise_std = float(noise_std)
        if self.noise_std < 0:
            raise ValueError(f"noise_std must be non-negative; got {noise_std!r}.")
        self._rng = check_generator(random_state)
        self.leaf_sensitivity = None if leaf_sensitivity is None else float(leaf_sensitivity)
        self.t = 0
        self._sum = np.zeros(self.shape)
        # Noise (and exact sums) of the live prefixes, keyed by time: only the chain of the
        # current time is ever needed again (t+1 - lowbit(t+1) is on the chain of t).
        self._noise = {0: np.zeros(self.shape)}
        self._sums = {0: np.zeros(self.shape)}

    def append(self, value):
        """Add the next leaf and return the noisy prefix sum up to it."""
        if self.t >= self.n_steps:
            raise RuntimeError(f"The tree was sized for {self.n_steps} steps.")
        value = np.asarray(value, dtype=float)
        if value.shape != self.shape:
            raise ValueError(f"Expected a value of shape {self.shape}; got {value.shape}.")
        self.t += 1
        t = self.t
        self._sum = self._sum + value
        xi = self.noise_std * self._rng.standard_normal(self.shape) if self.noise_std > 0 else 0.0
        parent = t - (t & -t)
        noise_t = self._noise[parent] + xi
        if self.leaf_sensitivity is not None:
            # The node ending at t: its exact value is the sum of its leaves, its noise xi.
            node = GaussianRelease(self.leaf_sensitivity, self.noise_std)
            notify("gaussian", self._sum - self._sums[parent], node)
        chain = _prefix_chain(t)
        self._noise = {m: v for m, v in self._noise.items() if m in chain}
        self._sums = {m: v for m, v in self._sums.items() if m in chain}
        self._noise[t] = noise_t
        self._sums[t] = self._sum
        return self._sum + noise_t

    def privacy_event(self, leaf_sensitivity):
        """Event of the whole stream: ``depth`` Gaussian releases of the leaf sensitivity."""
        return Repeated(GaussianRelease(leaf_sensitivity, self.noise_std), self.depth)
