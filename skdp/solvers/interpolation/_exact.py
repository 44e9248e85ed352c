"""The exact (non-private) minimiser of a classification problem, for epsilon = inf."""

import numpy as np
from scipy import optimize

__all__ = ["exact_minimizer"]

# A vanishing ridge keeps the minimiser finite for losses without one (logistic on
# separable data) and unique; it is far below any ridge a user sets.
_TINY_RIDGE = 1e-8


def exact_minimizer(problem, slope=None, max_iter=1000):
    """Minimise ``mean loss + 0.5 sum penalty W^2`` with L-BFGS (the penalty has a tiny floor off the intercept)."""
    k, p = problem.n_outputs, problem.n_coef
    tiny = np.full(p, _TINY_RIDGE)
    if problem.intercept:
        tiny[-1] = 0.0

    def fun(x):
        W = x.reshape(k, p)
        value, grad = problem.mean_loss_and_gradient(W, slope)
        ridge_value, ridge_grad = problem.penalty_value_and_gradient(W)
        value += ridge_value + 0.5 * float((tiny * W * W).sum())
        return value, (grad + ridge_grad + tiny * W).ravel()

    result = optimize.minimize(fun, np.zeros(k * p), jac=True, method="L-BFGS-B",
                               options={"maxiter": max_iter, "gtol": 1e-8, "ftol": 1e-12})
    return result.x.reshape(k, p)
