"""Public schedules shared by the solvers: phase layouts, batches, step sizes and averaging weights.

Everything here is a function of public inputs only (``n``, ``p``, the budget
``mu``, constants): a schedule may change accuracy, never the privacy of a run.
"""

import math

import numpy as np

__all__ = ["halving_phase_sizes", "fractional_phase_sizes", "split_batches", "permuted_blocks", "clamp_steps",
           "sgd_practical_steps", "stich_schedule", "decaying_steps", "tail_average_weights"]


def halving_phase_sizes(n):
    """Disjoint phase sizes ``2^(I-1), ..., 2, 1`` (``I = floor(log2 n)``), leftover rows added to phase 1.

    Examples
    --------
    >>> from skdp.solvers.schedules import halving_phase_sizes
    >>> halving_phase_sizes(20)  # phases 8, 4, 2, 1 and the 5 leftover rows in phase 1
    [13, 4, 2, 1]
    """
    I = int(math.floor(math.log2(n)))
    sizes = [2 ** (I - i) for i in range(1, I + 1)]
    sizes[0] += n - sum(sizes)
    return sizes


def fractional_phase_sizes(n, fractions):
    """Disjoint phase sizes in the proportions ``fractions`` (rounded at the cumulative cuts).

    Empty phases are dropped.

    Examples
    --------
    >>> from skdp.solvers.schedules import fractional_phase_sizes
    >>> fractional_phase_sizes(1001, (0.5, 0.5)), fractional_phase_sizes(10, (1, 1, 1))
    ([500, 501], [3, 4, 3])
    """
    fr = np.asarray(fractions, dtype=float)
    if fr.ndim != 1 or fr.size == 0 or not np.all(fr >= 0) or not fr.sum() > 0:
        raise ValueError(f"Phase fractions must be non-negative with a positive sum; got {fractions!r}.")
    cuts = np.round(np.cumsum(fr / fr.sum()) * n).astype(int)
    sizes = np.diff(np.concatenate([[0], cuts])).tolist()
    return [int(s) for s in sizes if s > 0]


def split_batches(n, n_batches, random_state):
    """``n_batches`` disjoint batches from a data-independent random permutation of ``range(n)``.

    The permutation is cut into consecutive blocks whose sizes differ by at
    most one, so every row is used once and the batches are disjoint by
    construction.
    """
    if not 1 <= n_batches <= n:
        raise ValueError(f"Need 1 <= n_batches <= n; got {n_batches} batches for {n} rows.")
    order = random_state.permutation(n)
    return np.array_split(order, n_batches)


def permuted_blocks(n, sizes, random_state):
    """Disjoint blocks of ``sizes`` rows, cut in order from a data-independent permutation of ``range(n)``.

    Rows beyond ``sum(sizes)`` are left out. The permutation is drawn first, from
    the fit's generator only, so the blocks are public randomness.
    """
    if sum(sizes) > n or min(sizes, default=1) < 0:
        raise ValueError(f"Blocks of {list(sizes)} rows do not fit in {n} rows.")
    order = random_state.permutation(n)
    cuts = np.cumsum([0] + [int(s) for s in sizes])
    return [order[a:b] for a, b in zip(cuts[:-1], cuts[1:])]


def clamp_steps(T, n):
    """A step count rounded up and clamped to ``[1, n]`` (``n`` when ``T`` is not finite)."""
    if not math.isfinite(T):
        return int(n)
    return int(min(max(int(math.ceil(T)), 1), n))


def sgd_practical_steps(n, p, mu):
    """Practical number of batches of one-pass SGD: ``min(2 log2(m) - 1.5, 4 sqrt(n / p))``, ``m = n mu / p``.

    With steps about ``1 / curvature`` the first half contracts the initial
    error by about 1/2 per step (``2^-T`` in squared distance) while the
    averaged privacy noise grows like ``2 T / m^2`` (the noise of a batch is
    ``2 C T / (n mu)`` with ``C ~ sqrt(p)``); the two balance at
    ``2^-T = 2 / (m^2 ln 2)``. The cap is the noise-free regime, where more
    steps only shrink the batches.
    """
    m = n * mu / p
    T_private = 2.0 * math.log2(m) - 1.5 if m > 1.0 else 1.0
    return min(T_private, 4.0 * math.sqrt(n / p))


def stich_schedule(n_steps, beta, mu):
    """Steps ``eta_t`` and averaging weights ``zeta_t`` of Stich (2019, Lemma 3), ``t = 0..T-1``.

    With ``kappa = beta / mu`` and ``t0 = ceil(T / 2)``: if ``T <= 2 kappa``,
    ``eta_t = 1 / beta`` and ``zeta_t = (1 - mu / (2 beta))^-(t+1)``; otherwise
    ``eta_t = 1 / beta`` and ``zeta_t = 0`` for ``t < t0``, then
    ``eta_t = 4 / (mu (4 kappa + t - t0))`` and ``zeta_t = (4 kappa + t - t0)^2``.

    Parameters
    ----------
    n_steps : int
        ``T``.
    beta, mu : float
        Smoothness and strong convexity (``0 < mu <= beta``).

    Returns
    -------
    steps, weights : ndarray of shape (T,)
    """
    T = int(n_steps)
    if not 0.0 < mu <= beta:
        raise ValueError(f"Stich's schedule needs 0 < mu <= beta; got mu={mu!r}, beta={beta!r}.")
    kappa = beta / mu
    t = np.arange(T, dtype=float)
    if T <= 2.0 * kappa:
        # The weights grow geometrically; their exponent stays below ~1 since
        # T mu / (2 beta) <= 1, so nothing overflows.
        return np.full(T, 1.0 / beta), (1.0 - mu / (2.0 * beta)) ** -(t + 1.0)
    t0 = math.ceil(T / 2)
    late = t >= t0
    shift = 4.0 * kappa + t - t0
    steps = np.where(late, 4.0 / (mu * np.where(late, shift, 1.0)), 1.0 / beta)
    weights = np.where(late, shift**2, 0.0)
    return steps, weights


def decaying_steps(eta0, n_steps, tau=None):
    """Steps ``eta0 * min(1, tau / (t + 1))``, ``t = 0..T-1`` (``tau`` a quarter of the steps by default)."""
    tau = max(1.0, n_steps / 4.0) if tau is None else tau
    return [eta0 * min(1.0, tau / (t + 1)) for t in range(n_steps)]


def tail_average_weights(n_steps):
    """Averaging weights of the iterates ``w_0 .. w_T``: the plain average of the last half.

    Weight 1 on ``w_{t+1}`` for ``t >= T // 2`` and 0 elsewhere (the window of
    'clipped_gd'): early iterates carry the start's error, late ones average the
    noise. For :func:`skdp.solvers.descent.noisy_clipped_descent` (``weights``).

    Examples
    --------
    >>> from skdp.solvers.schedules import tail_average_weights
    >>> tail_average_weights(5)
    [0.0, 0.0, 0.0, 1.0, 1.0, 1.0]
    """
    T = int(n_steps)
    return [0.0] * (T // 2 + 1) + [1.0] * (T - T // 2)
