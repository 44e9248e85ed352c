"""Noisy clipped gradients and the noisy clipped descent loop shared by the solvers.

One step releases the mean of the per-sample loss gradients of ``m`` rows, each
clipped to norm ``C``, plus Gaussian noise (through
:func:`skdp.mechanisms.gaussian_mechanism`). Replacing one row moves the
clipped mean by at most ``2 C / m`` (both clipped gradients lie in the C-ball),
so ``T`` such releases with noise ``sqrt(T) 2 C / (m mu)`` are exactly mu-GDP
together. Everything added after the noise (a ridge gradient, a regulariser
towards a released anchor, projections, proximal steps, averaging) is the same
on neighbouring datasets: post-processing.
"""

import math

import numpy as np

from ..accounting import GaussianRelease, Repeated
from ..mechanisms import clip_factors, gaussian_mechanism
from ._contract import report_progress

__all__ = ["noise_std", "step_noise_std", "noisy_clipped_gradient", "noisy_clipped_descent",
           "clipped_gaussian_mean"]


def noise_std(sensitivity, mu):
    """Standard deviation ``sensitivity / mu`` of a mu-GDP Gaussian release (0 when ``mu = inf``)."""
    if math.isinf(mu):
        return 0.0
    return float(sensitivity) / float(mu)


def step_noise_std(clip, n_rows, n_steps, mu):
    """Noise of each of ``n_steps`` clipped-mean releases on ``n_rows`` rows that are mu-GDP together."""
    return noise_std(math.sqrt(n_steps) * 2.0 * clip / n_rows, mu)


def noisy_clipped_gradient(problem, w, clip, std, rng, rows=None):
    """Release the clipped mean gradient of ``rows`` (all rows by default) at ``w`` with noise ``std``.

    Returns
    -------
    noisy_gradient : ndarray of shape (n_coef,)
    event : GaussianRelease
        Sensitivity ``2 clip / m`` for ``m`` rows.
    """
    m = problem.n_samples if rows is None else len(rows)
    mean = problem.clipped_gradient_sum(w, clip, rows) / m
    if not math.isfinite(clip):
        if math.isnan(clip) or not std == 0:  # NaN noise counts as noise
            raise ValueError("A noisy release needs a finite clip threshold.")
        # No clipping, no noise (epsilon = inf): accounted as not private (mu = inf).
        return gaussian_mechanism(mean, 1.0, 0.0, random_state=rng)
    return gaussian_mechanism(mean, 2.0 * clip / m, std, random_state=rng)


def noisy_clipped_descent(problem, w0, *, clip, std, steps, rng, rows=None, anchor=None, lam=0.0,
                          proximal=False, project=None, weights=None):
    """Noisy clipped (sub)gradient descent on ``rows``, regularised towards ``anchor``.

    Minimises ``mean_rows f_C(w) + (lam / 2) ||w - anchor||^2 + 0.5 w^T diag(penalty) w``
    (``f_C``: the loss whose per-sample gradients are clipped to norm ``clip``)
    with one noisy release per step.

    Parameters
    ----------
    problem : GLMProblem
    w0 : ndarray of shape (p,)
        Start point.
    clip : float
    std : float
        Noise of every step's release.
    steps : sequence of float
        Step sizes ``eta_t``, ``t = 0..T-1``.
    rng : numpy Generator
    rows : index array, optional
    anchor : ndarray, optional
        Centre of the regulariser (default: ``w0``).
    lam : float
        Regularisation towards ``anchor``.
    proximal : bool
        Apply the regulariser by its exact proximal step
        ``(w - eta g + eta lam anchor) / (1 + eta lam)`` (stable for every ``eta lam``)
        instead of the explicit step.
    project : callable, optional
        Projection onto the domain, applied after every step.
    weights : sequence of float of length T + 1, optional
        Averaging weights of the iterates ``w_0 .. w_T`` (``w_0`` the start); the
        weighted average is returned. None returns the last iterate.

    Returns
    -------
    w : ndarray of shape (p,)
    event : Repeated
        ``T`` Gaussian releases of sensitivity ``2 clip / m``.
    """
    anchor = w0 if anchor is None else anchor
    w = np.array(w0, dtype=float, copy=True)
    total = None
    weight = 0.0
    if weights is not None:
        total = weights[0] * w
        weight = float(weights[0])
    event = None
    for t, eta in enumerate(steps):
        g, event = noisy_clipped_gradient(problem, w, clip, std, rng, rows)
        g = g + problem.penalty * w
        if proximal:
            z = (w - eta * g + (eta * lam) * anchor) / (1.0 + eta * lam)
        else:
            z = w - eta * (g + lam * (w - anchor))
        w = project(z) if project is not None else z
        if weights is not None and weights[t + 1]:
            total = total + weights[t + 1] * w
            weight += float(weights[t + 1])
        report_progress(t + 1, len(steps), eta)
    n_steps = len(steps)
    m = problem.n_samples if rows is None else len(rows)
    event = Repeated(GaussianRelease(2.0 * clip / m, std), n_steps)
    out = total / weight if (weights is not None and weight > 0) else w
    return out, event


def clipped_gaussian_mean(vectors, clip, mu, random_state):
    """Clipped mean of a batch of vectors plus isotropic Gaussian noise (mu-GDP).

    Every vector is scaled to norm at most ``clip`` and the batch is averaged:
    replace-one sensitivity ``2 clip / s`` for ``s`` vectors, noise
    ``2 clip / (s mu)``.

    Parameters
    ----------
    vectors : ndarray of shape (..., s, d)
        One batch of ``s`` vectors, or a stack of independent batches (the
        leading axes), which is how tests run many repetitions at once.
    clip : float > 0
    mu : float > 0
        Gaussian-DP parameter of the release (``inf``: no noise).
    random_state : numpy Generator

    Returns
    -------
    noisy_mean : ndarray of shape (..., d)
    event : GaussianRelease
    """
    G = np.asarray(vectors, dtype=float)
    # A vector with a non-finite entry counts as zero (a per-record rule; inf * 0 would be NaN).
    G = np.where(np.isfinite(G).all(axis=-1, keepdims=True), G, 0.0)
    s = G.shape[-2]
    factors = clip_factors(np.linalg.norm(G, axis=-1), clip)
    mean = np.einsum("...ij,...i->...j", G, factors) / s
    sensitivity = 2.0 * float(clip) / s
    return gaussian_mechanism(mean, sensitivity, noise_std(sensitivity, mu), random_state=random_state)
