"""Choosing a clip threshold privately for heavy-tailed data.

Clipping per-row vectors bounds the sensitivity of their mean, but a threshold
read from the data (the maximum norm, say) leaks it. Here the threshold is a
private quantile of the row norms on a log scale, paid from a small share of
the budget, and the mean is released with Gaussian noise.
"""

import numpy as np

from skdp import BudgetAccountant
from skdp.accounting import calibrate_gaussian
from skdp.mechanisms import clipped_sum, gaussian_mechanism, private_quantile, row_norms

rng = np.random.default_rng(0)
n, d = 20_000, 10
X = rng.standard_t(df=2.5, size=(n, d)) + 1.0  # heavy tails, true mean 1 in every coordinate

with BudgetAccountant(epsilon=1.0, delta=1e-6) as budget:
    clip, event = private_quantile(row_norms(X), 0.95, epsilon=0.1, bounds=(1e-4, 1e4), scale="log",
                                   random_state=rng)
    budget.spend(event)
    sensitivity = 2 * clip / n
    std = calibrate_gaussian(sensitivity, epsilon=0.85, delta=1e-6)
    mean, event = gaussian_mechanism(clipped_sum(X, clip) / n, sensitivity, std, random_state=rng)
    budget.spend(event, delta=1e-6)

print(f"private clip threshold: {clip:.2f} (exact 0.95-quantile {np.quantile(row_norms(X), 0.95):.2f})")
print(f"private mean error: {np.linalg.norm(mean - 1.0):.3f}; "
      f"non-private mean error: {np.linalg.norm(X.mean(axis=0) - 1.0):.3f}")
print("total spent:", budget.spent)
