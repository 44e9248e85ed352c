"""The public schedules of the zeroth-order solvers: the paper's constants (with its errata fixed) and ours.

Everything here is a function of public inputs: the number of rows ``n``, the
number of parameters ``d``, the public Lipschitz bound ``L``, the smoothing
radius ``delta``, the loss gap ``F*`` (a public constant, never estimated from
the data) and the Gaussian-DP budget ``mu`` (the paper's ``rho``: the run is
``(alpha, alpha rho^2 / 2)``-RDP, which is ``mu``-GDP with ``mu = rho``).

Variance-reduced method (Zhang, Tran and Cutkosky, Theorem 4.9):

* ``T1 = (sqrt(d) L delta n / (F* + L delta))^(2/3)`` balances the optimisation
  progress against the variance of the variance-reduced oracle;
* ``T2 = (d^(3/2) L delta n / ((F* + L delta) rho))^(1/2)`` balances it against
  the privacy noise;
* ``T = max(T1, T2)`` clamped to ``[2, n / 2]``: the paper writes ``min``, but the
  error bound ``(F* + L delta) T / (delta n) + sqrt(d) L / sqrt(T) + d^(3/2) L / (T rho)``
  needs the *larger* of the balancing values (with ``min`` the limit
  ``rho -> inf`` gives ``T = 2``);
* ``B1 = T + 1``, ``B2 = 1``, ``K = floor(n / (2 T))`` epochs, ``D = delta / T``;
* noise ``sigma = sqrt(bit_length(T)) s_max / rho`` with ``s_max`` the largest
  leaf sensitivity: the paper's ``sqrt(2 ln T)`` under-counts the tree layers at
  ``T`` in {1, 2, 4}.

Naive method (Appendix E, Algorithm 6): one row per step, ``K T = n`` steps,
``D = delta / T``, ``sigma = 2 d L / (B rho)`` (the paper writes ``d L / (B rho)``,
which is the sensitivity of add-or-remove, not of replace-one) and
``T = max{(sqrt(d) L delta n / (F* + L delta))^(2/3), (d^(3/2) L delta n / ((F* + L delta) rho))^(2/3)}``
(``max`` again where the paper writes ``min``).
"""

import math
from dataclasses import dataclass

__all__ = ["VRSchedule", "variance_reduced_theory", "naive_theory_inner"]


@dataclass(frozen=True)
class VRSchedule:
    """Block layout of the variance-reduced method (public).

    Attributes
    ----------
    n_inner : int
        ``T``: steps per epoch (the tree's horizon).
    n_epochs : int
        ``K``: epochs, each on its own rows.
    checkpoint_batch : int
        ``B1``: rows of the gradient estimate at the start of an epoch.
    diff_batch : int
        ``B2``: rows of every gradient-difference estimate.
    step_radius : float
        ``D``: the largest step (``||x_{t+1} - x_t|| <= D``).
    """

    n_inner: int
    n_epochs: int
    checkpoint_batch: int
    diff_batch: int
    step_radius: float

    @property
    def rows_per_epoch(self):
        return self.checkpoint_batch + (self.n_inner - 1) * self.diff_batch

    @property
    def n_rows_used(self):
        return self.n_epochs * self.rows_per_epoch


def _balancing_values(n, d, lipschitz, smoothing, loss_gap, mu, naive=False):
    progress = (loss_gap + lipschitz * smoothing)
    t1 = (math.sqrt(d) * lipschitz * smoothing * n / progress) ** (2.0 / 3.0)
    if math.isinf(mu):
        return t1, 0.0
    base = d ** 1.5 * lipschitz * smoothing * n / (progress * mu)
    t2 = base ** (2.0 / 3.0) if naive else math.sqrt(base)
    return t1, t2


def variance_reduced_theory(n, d, lipschitz, smoothing, loss_gap, mu, diff_batch=1):
    """The paper's schedule (Theorem 4.9, ``T = max(T1, T2)``), for ``n >= 4`` rows.

    Examples
    --------
    >>> from skdp.solvers.zeroth_order.schedule import variance_reduced_theory
    >>> s = variance_reduced_theory(n=100_000, d=11, lipschitz=2 ** 0.5, smoothing=0.05, loss_gap=1.0,
    ...                             mu=0.268)
    >>> s.n_inner, s.n_epochs, s.checkpoint_batch, s.n_rows_used <= 100_000
    (948, 52, 949, True)
    """
    if n < 4:
        raise ValueError(f"The variance-reduced schedule needs at least 4 rows (one epoch of T = 2); "
                         f"got {n}.")
    t1, t2 = _balancing_values(n, d, lipschitz, smoothing, loss_gap, mu)
    diff_batch = max(1, int(diff_batch))
    # One epoch uses B1 + (T - 1) B2 = T + 1 + (T - 1) B2 rows.
    T = int(max(t1, t2))
    T = min(max(T, 2), max(2, (n + diff_batch - 1) // (1 + diff_batch)))
    while T > 2 and T + 1 + (T - 1) * diff_batch > n:
        T -= 1
    epoch = T + 1 + (T - 1) * diff_batch
    return VRSchedule(n_inner=T, n_epochs=max(1, n // epoch), checkpoint_batch=T + 1, diff_batch=diff_batch,
                      step_radius=smoothing / T)


def naive_theory_inner(n, d, lipschitz, smoothing, loss_gap, mu):
    """``T`` of the naive method (Appendix E with ``max``), clamped to ``[1, n]``."""
    t1, t2 = _balancing_values(n, d, lipschitz, smoothing, loss_gap, mu, naive=True)
    return int(min(max(max(t1, t2), 1.0), n))
