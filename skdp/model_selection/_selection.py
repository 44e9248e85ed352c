"""Private choice among candidate models from their scores on validation rows.

Two mechanisms, each with its sensitivity argument (replace-one; the
validation rows are ``n_val`` of the rows, a public number):

* :func:`release_scores` — the Gaussian mechanism on the vector of the ``k``
  candidates' mean per-row scores. Every per-row score is clipped to
  ``[0, bound]`` (a per-record map), so replacing one validation row moves each
  mean by at most ``bound / n_val`` and the vector by at most
  ``sqrt(k) bound / n_val`` in L2. The noisy argmin is post-processing.
* :func:`report_noisy_min` — the exponential mechanism on the same means
  (utility ``-score``, sensitivity ``bound / n_val``): it returns index ``j``
  with probability proportional to ``exp(-epsilon score_j n_val / (2 bound))``,
  which is ``epsilon``-DP; only the index is released.

The per-row scores: for a regressor, the squared residual in released target
scales, ``((y - prediction) / s_y)^2``, clipped at ``RESIDUAL_BOUND^2``; for a
classifier, the Brier score ``sum_c (p_c - [y = c])^2`` of its probabilities,
which lies in ``[0, 2]`` for every row. A non-finite score counts as the bound.
"""

import math

import numpy as np

from ..mechanisms import exponential_mechanism, gaussian_mechanism

__all__ = ["RESIDUAL_BOUND", "row_scores", "score_bound", "release_scores", "report_noisy_min"]

# Residuals are clipped at this many released target scales (as the regressors' fit check does).
RESIDUAL_BOUND = 2.0


def score_bound(classifier):
    """The public bound of one row's score."""
    return 2.0 if classifier else RESIDUAL_BOUND**2


def row_scores(model, X, y, classifier, target_scale=1.0):
    """Per-row scores of a fitted (released) model on rows ``X, y``, each within ``[0, score_bound]``."""
    bound = score_bound(classifier)
    with np.errstate(all="ignore"):
        if classifier:
            proba = np.asarray(model.predict_proba(X), dtype=float)
            onehot = (np.asarray(y)[:, None] == model.classes_[None, :]).astype(float)
            scores = np.sum((proba - onehot) ** 2, axis=1)
        else:
            residual = (np.asarray(y, dtype=float) - np.asarray(model.predict(X), dtype=float)) / target_scale
            scores = residual**2
    return np.where(np.isfinite(scores), np.clip(scores, 0.0, bound), bound)


def release_scores(scores, bound, mu, rng):
    """Release the column means of ``(n_val, k)`` per-row scores (clipped to ``[0, bound]``) at ``mu``-GDP.

    Returns
    -------
    means : ndarray of shape (k,)
    event : GaussianRelease
    """
    n_val, k = scores.shape
    sensitivity = math.sqrt(k) * bound / n_val
    noise_std = 0.0 if math.isinf(mu) else sensitivity / mu
    means = np.clip(scores, 0.0, bound).mean(axis=0)
    return gaussian_mechanism(means, sensitivity, noise_std, random_state=rng)


def report_noisy_min(scores, bound, epsilon, rng):
    """The index of a noisy minimum of the mean scores (exponential mechanism, ``epsilon``-DP).

    Returns
    -------
    index : int
    event : ExponentialMechanismRelease
    """
    # The utility -sum of the clipped scores moves by at most bound when one validation row is replaced.
    utility = -np.clip(scores, 0.0, bound).sum(axis=0)
    return exponential_mechanism(utility, bound, epsilon, rng)
