"""Private regression from loss values only: a black-box model and loss, and a median regression.

``DPZerothOrderRegressor`` never differentiates anything: it evaluates the loss at
randomly perturbed parameters, clips every row's finite differences to a public
Lipschitz bound and adds Gaussian noise. So a model and a loss given as plain Python
functions are fitted privately, and the guarantee holds whatever they compute per
row (here: a saturating dose-response curve with an asymmetric loss that is not
differentiable at 0).
"""

import numpy as np

from skdp import BudgetAccountant, DPZerothOrderRegressor

rng = np.random.default_rng(0)
n = 5_000
dose = rng.uniform(0, 10, size=(n, 1))
response = 3.0 * dose[:, 0] / (2.0 + dose[:, 0]) + rng.standard_t(3, size=n) * 0.3


def saturating(params, X):
    """``a (x / (b + x) - 1/2) + c`` of the dose; params has shape (k, 3), X (n, 1): returns (n, k).

    The model sees standardised doses (about -1.7 to 1.7, shifted here to be positive) and predicts
    standardised responses; at params = 0 it predicts the centre of y.
    """
    a, b, c = params[:, 0], np.exp(params[:, 1]), params[:, 2]
    x = X[:, :1] + 2.0
    return a * (x / (b + x) - 0.5) + c


def asymmetric(prediction, y):
    """Over-prediction costs twice as much as under-prediction (a 1/3-quantile loss), element-wise."""
    r = prediction - y
    return np.where(r > 0, 2.0 * r, -r)


with BudgetAccountant(epsilon=2.0, delta=1e-6) as budget:
    model = DPZerothOrderRegressor(epsilon=1.0, delta=1e-7, model=saturating, n_params=3, loss=asymmetric,
                                   lipschitz=4.0, random_state=0)
    model.fit(dose, response)
    below = float(np.mean(response < model.predict(dose)))
    print(f"black-box model: {model.n_function_evals_:.2g} loss evaluations, "
          f"share of responses below the fit {below:.2f} (target 1/3)")

    median = DPZerothOrderRegressor(epsilon=1.0, delta=1e-7, random_state=0)  # linear model, absolute loss
    X = rng.normal(size=(4 * n, 3))
    y = X @ [1.0, -2.0, 0.5] + 1.0 + rng.standard_cauchy(4 * n)  # Cauchy noise: least squares fails here
    median.fit(X, y)
    print("median regression coefficients:", np.round(median.coef_, 2), "intercept", round(median.intercept_, 2))
    print("total spent:", budget.spent)
