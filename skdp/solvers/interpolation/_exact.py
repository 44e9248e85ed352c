"""The exact (non-private) minimiser of a classification problem, for epsilon = inf."""

import numpy as np
from scipy import optimize

__all__ = ["exact_minimizer"]

# A vanishing ridge keeps the minimiser finite for losses without one (logistic on
# separable data) and unique; it is far below any ridge a user sets.
_TINY_RIDGE = 1e-8


def _preconditioner(problem):
    """``T = (I + P)^(-1/2)`` for the ridge ``P`` (a vector or a matrix), so that ``W = V T`` is well scaled.

    A ridge in original units becomes, in standardised or whitened units, a
    penalty whose eigenvalues can reach 1e11 (digits: near-constant columns,
    whose standardised coefficients a unit of original penalty pins down). The
    loss's curvature there is about 1, so L-BFGS on ``W`` stopped on its
    relative-reduction test at an objective 15 times LogisticRegression's;
    on ``V`` the objective's curvature is about 1 in every direction.
    """
    P = problem.penalty
    if P.ndim == 1:
        return 1.0 / np.sqrt(1.0 + np.maximum(P, 0.0))
    values, vectors = np.linalg.eigh(0.5 * (P + P.T))
    return (vectors / np.sqrt(1.0 + np.maximum(values, 0.0))) @ vectors.T


def exact_minimizer(problem, slope=None, max_iter=1000):
    """Minimise ``mean loss + 0.5 sum penalty W^2`` with L-BFGS (the penalty has a tiny floor off the intercept).

    The minimisation runs on ``V = W T^-1`` (see :func:`_preconditioner`).
    """
    k, p = problem.n_outputs, problem.n_coef
    tiny = np.full(p, _TINY_RIDGE)
    if problem.intercept:
        tiny[-1] = 0.0
    T = _preconditioner(problem)
    apply = (lambda V: V * T) if T.ndim == 1 else (lambda V: V @ T)  # T is symmetric

    def fun(x):
        W = apply(x.reshape(k, p))
        value, grad = problem.mean_loss_and_gradient(W, slope)
        ridge_value, ridge_grad = problem.penalty_value_and_gradient(W)
        value += ridge_value + 0.5 * float((tiny * W * W).sum())
        return value, apply(grad + ridge_grad + tiny * W).ravel()

    result = optimize.minimize(fun, np.zeros(k * p), jac=True, method="L-BFGS-B",
                               options={"maxiter": max_iter, "gtol": 1e-8, "ftol": 1e-12})
    return apply(result.x.reshape(k, p))
