"""A tour of skdp's privacy accounting.

Composes a few releases, compares the tight composition with summed epsilons,
calibrates noise for a target budget and shows a shared budget refusing a
release that would exceed it.
"""

from skdp import BudgetAccountant, BudgetExceededError
from skdp.accounting import (
    GaussianRelease,
    LaplaceRelease,
    Repeated,
    Sequential,
    calibrate_gaussian,
)

delta = 1e-6

# 200 full-batch gradient steps on n = 5000 rows clipped to norm 1: each step
# releases a clipped mean (sensitivity 2/n) with Gaussian noise.
n, steps = 5000, 200
std = calibrate_gaussian(sensitivity=2 / n, epsilon=1.0, delta=delta, count=steps)
training = Repeated(GaussianRelease(2 / n, std), steps)
print(f"noise std per step for (1.0, {delta})-DP: {std:.3e}")
print(f"spent: epsilon = {training.epsilon(delta):.4f} (exact Gaussian-DP composition)")

# A private clip threshold from a Laplace count, then the training.
pipeline = Sequential([LaplaceRelease(1.0, 20.0), training])
print(f"with a Laplace step first: epsilon = {pipeline.epsilon(delta):.4f}")

# Summing per-step epsilons would wildly overstate the cost.
per_step = GaussianRelease(2 / n, std).epsilon(delta / steps)
print(f"naive sum over steps: {steps * per_step:.1f}")

# A shared budget: two such trainings compose to well under 2 ...
budget = BudgetAccountant(epsilon=1.5, delta=delta)
budget.spend(training)
budget.spend(training)
print("two trainings:", budget.spent)
# ... and a third, which would exceed it, is refused before any data is touched.
try:
    budget.spend(training)
except BudgetExceededError as err:
    print("refused:", str(err).split(". ")[0])
