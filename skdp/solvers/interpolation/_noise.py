"""Noisy releases of the interpolation-family solvers: Gaussian for (epsilon, delta), l2-Laplace for pure DP."""

import math

import numpy as np

from ...accounting import ApproxDPRelease, GaussianRelease
from ...mechanisms import budgeted_release, gaussian_mechanism, laplace_mechanism, top_eigenvalue

__all__ = ["release_vector", "release_curvature", "solver_event"]


def release_vector(value, sensitivity, budget, rng):
    """``value`` plus noise calibrated to its L2 ``sensitivity`` at ``budget`` (mu or a pure epsilon).

    ``budget`` is ``("gaussian", mu)`` or ``("pure", epsilon)``; ``inf`` releases the value
    exactly (epsilon = inf).
    """
    return budgeted_release(np.asarray(value, dtype=float), budget, sensitivity, random_state=rng)


def solver_event(budget):
    """The event of releases calibrated to ``budget`` (one release, or several on disjoint rows)."""
    kind, level = budget
    if kind == "gaussian":
        return GaussianRelease(1.0, 0.0 if math.isinf(level) else 1.0 / level)
    return ApproxDPRelease(level, 0.0)


def release_curvature(problem, budget, rng):
    """A private estimate of the largest eigenvalue of the mean of ``a a^T`` (the squared loss's curvature).

    Rows are clipped to the released ``row_bound`` for this release only:
    replacing one row changes the mean of rank-one matrices by a difference of
    two PSD terms of norm at most ``row_bound^2 / n``, so by Weyl's inequality the
    top eigenvalue moves by at most that much (its sensitivity; one dimension,
    so the l1 and l2 sensitivities agree). With row weights (class weights) the
    rows' terms are weighted and the sensitivity is ``max_weight`` times that.
    """
    n = problem.n_samples
    bound = float(problem.row_bound)
    kind, level = budget
    if math.isinf(level):
        return float(top_eigenvalue(problem.X)), solver_event(budget), 0.0
    if not math.isfinite(bound):
        raise ValueError("A private curvature release needs a finite row bound.")
    # The rows' weights (their clip factors squared, times their class weights): an array, or for rows
    # held in chunks a description the design forms them from on every chunk.
    value = float(top_eigenvalue(problem.X, problem.curvature_weights(bound)))
    sensitivity = getattr(problem, "max_weight", 1.0) * bound**2 / n
    if kind == "gaussian":
        noisy, event = gaussian_mechanism(value, sensitivity, sensitivity / level, random_state=rng)
        return noisy, event, sensitivity / level
    noisy, event = laplace_mechanism(value, sensitivity, sensitivity / level, random_state=rng)
    return noisy, event, math.sqrt(2.0) * sensitivity / level
