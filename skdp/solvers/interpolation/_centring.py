"""Private centring of the rows of a classification problem (for clipped gradient descent).

A linear model with an intercept is unchanged by shifting the features:
``w . x + b = w . (x - m) + (b + w . m)``. Gradient descent is not: when the
columns sit far from 0 (amounts, counts, measurements that could not be
standardised per column), the mean direction dominates the curvature, the
step size follows it and every other direction is left unlearnt. Centring
first costs one vector release.
"""

import dataclasses
import math

import numpy as np

from ._noise import release_vector

__all__ = ["release_row_mean", "centred_problem", "uncentred_coef"]

# A column is centred only where its released mean exceeds this many noise standard
# deviations: elsewhere the noise would add an offset larger than the one it removes.
CENTRE_SIGNIFICANCE = 3.0


def release_row_mean(problem, budget, rng):
    """The private mean of the feature parts of the rows, thresholded at its noise level.

    Each row's feature part is clipped to the released ``row_bound`` ``B`` for
    this release only, so replacing one row moves the sum by at most ``2 B`` in
    L2 norm. The threshold (:data:`CENTRE_SIGNIFICANCE` noise standard
    deviations, computed from public quantities) is post-processing.

    Parameters
    ----------
    problem : ClassificationProblem
        With an intercept column (last).
    budget : tuple
        ``("gaussian", mu)`` or ``("pure", epsilon)``, finite.
    rng : Generator

    Returns
    -------
    mean : ndarray of shape (n_coef - 1,)
        The released mean where significant, else 0.
    event : PrivacyEvent
    """
    n, p = problem.X.shape
    bound = float(problem.row_bound)
    if not math.isfinite(bound):
        raise ValueError("A private row mean needs a finite row bound.")
    total = problem.clipped_feature_sum(bound)  # in memory, or one partial sum per chunk of rows
    noisy, event = release_vector(total, 2.0 * bound, budget, rng)
    kind, level = budget
    scale = 2.0 * bound / level
    # Per-coordinate noise standard deviation: sigma for the Gaussian; for the l2-Laplace
    # (norm Gamma(dim, scale), uniform direction) the root mean square sqrt(dim + 1) scale.
    coord_std = scale if kind == "gaussian" else scale * math.sqrt(p)
    mean = noisy / n
    return np.where(np.abs(mean) > CENTRE_SIGNIFICANCE * coord_std / n, mean, 0.0), event


def centred_problem(problem, mean):
    """The problem on the rows ``[x - mean, intercept]`` with a typical row norm to match (public).

    ``row_scale`` shrinks by the removed mean (``E||x - m||^2 = E||x||^2 - ||m||^2``),
    floored at a tenth of the feature part's square: it sets the clip and step, so it
    only changes accuracy.
    """
    X = problem.centred_rows(mean)
    intercept_value = problem.intercept_value
    features_sq = max(problem.row_scale**2 - intercept_value**2, 0.0)
    centred_sq = max(features_sq - float(mean @ mean), 0.1 * features_sq)
    row_scale = math.sqrt(centred_sq + intercept_value**2)
    return dataclasses.replace(problem, X=X, row_scale=row_scale, rows_clipped=False)


def uncentred_coef(coef, mean, problem):
    """Coefficients for the original rows: ``W m`` moves into the intercept (post-processing)."""
    coef = np.array(coef, dtype=float, copy=True)
    intercept_value = problem.intercept_value
    coef[:, -1] -= (coef[:, :-1] @ mean) / intercept_value
    return coef
