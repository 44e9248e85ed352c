"""``python -m skdp demo``: a guided tour of what skdp computes.

Each section is a function that writes to a stream; estimator sections are added
here as the estimators land.
"""


import numpy as np

from .accounting import (
    BudgetAccountant,
    ExponentialMechanismRelease,
    GaussianRelease,
    LaplaceRelease,
    PoissonSampled,
    Repeated,
    Sequential,
    ZCDPRelease,
    calibrate_gaussian,
    zcdp_to_dp,
)
from .mechanisms import SparseVector, TreeAggregator, private_quantile


def _row(out, name, event, deltas):
    values = "  ".join(f"{event.epsilon(d):>9.4f}" for d in deltas)
    out.write(f"  {name:<62s}{values}\n")


def accounting_section(out):
    deltas = (1e-5, 1e-6)
    out.write("Privacy accounting of example mechanisms (replace-one neighbours)\n")
    header = "  ".join(f"{'eps@' + format(d, '.0e'):>9s}" for d in deltas)
    out.write(f"  {'mechanism':<62s}{header}\n")
    n, clip = 10_000, 1.0
    steps = 100
    std = calibrate_gaussian(2 * clip / n, epsilon=1.0, delta=1e-5, count=steps)
    rows = [
        ("one Gaussian release, sensitivity 1, noise std 1", GaussianRelease(1.0, 1.0)),
        (f"{steps} full-batch clipped-gradient steps (n={n}, std {std:.1e})",
         Repeated(GaussianRelease(2 * clip / n, std), steps)),
        ("0.5-zCDP (RDP conversion)", ZCDPRelease(0.5)),
        ("1000 Poisson-sampled Gaussian steps, q=0.01, std 1.1",
         Repeated(PoissonSampled(GaussianRelease(1.0, 1.1), 0.01), 1000)),
        ("4 Laplace releases of epsilon 0.25 each", Repeated(LaplaceRelease(1.0, 4.0), 4)),
        ("20 private quantiles at epsilon 0.1 (exponential mech.)",
         Repeated(ExponentialMechanismRelease(0.1), 20)),
        ("Laplace (b=1) then 10 Gaussians (std 2)",
         Sequential([LaplaceRelease(1.0, 1.0), Repeated(GaussianRelease(1.0, 2.0), 10)])),
    ]
    for name, event in rows:
        _row(out, name, event, deltas)
    out.write("\n")


def budget_section(out):
    out.write("A shared budget: ten fits of 0.05-zCDP compose as events\n")
    acc = BudgetAccountant(delta=1e-6)
    for _ in range(10):
        acc.spend(ZCDPRelease(0.05))
    summed = 10 * zcdp_to_dp(0.05, 1e-6)
    out.write(f"  composed: epsilon={acc.spent.epsilon:.3f} at delta=1e-6; "
              f"summing per-fit epsilons would claim {summed:.3f}\n\n")


def mechanisms_section(out):
    rng = np.random.default_rng(0)
    out.write("Mechanisms (each returns its output and its privacy event)\n")
    norms = rng.pareto(1.5, size=5000) + 0.01
    q, event = private_quantile(norms, 0.9, epsilon=0.2, bounds=(1e-6, 1e6), scale="log",
                                random_state=rng)
    out.write(f"  private 0.9-quantile of 5000 Pareto(1.5) norms: {q:.3f} "
              f"(exact {np.quantile(norms, 0.9):.3f}); epsilon={event.epsilon(0.0):.2f}\n")
    svt = SparseVector.calibrated(0.0, sensitivity=1.0, epsilon=1.0, delta=1e-6, max_above=5,
                                  max_queries=1000, random_state=rng)
    ev = svt.privacy_event(delta=1e-6)
    out.write(f"  sparse vector, 5 'above' answers in 1000 queries: noise scale {svt.scale:.2f}, "
              f"bound {svt.bound:.1f}\n    -> ({ev.epsilon0:.3f}, {ev.delta0:.1e})-DP\n")
    tree = TreeAggregator(1000, 1, noise_std=10.0)
    out.write(f"  tree aggregation of 1000 steps: a record is in at most {tree.depth} released nodes\n"
              f"    -> epsilon={tree.privacy_event(1.0).epsilon(1e-5):.2f} at delta=1e-5 with node "
              f"noise std 10 per unit of sensitivity\n\n")


def heavy_tail_section(out):
    """DPHeavyTailRegressor on raw data with leverage outliers and heavy-tailed noise."""
    import time
    import warnings

    from sklearn.linear_model import HuberRegressor, LinearRegression

    from .linear_model import DPHeavyTailRegressor

    rng = np.random.default_rng(0)
    n, d = 2000, 20
    w = rng.normal(size=d)
    X = rng.normal(size=(n, d))
    y = X @ w + rng.standard_t(2.5, size=n)
    X[rng.choice(n, n // 100, replace=False)] *= 100.0  # 1% leverage outliers, after y is formed
    X_test = rng.normal(size=(5000, d))
    y_test = X_test @ w + rng.standard_t(2.5, size=5000)
    y, y_test = 1000.0 * y, 1000.0 * y_test  # raw units: nothing is standardised by hand
    bayes = np.mean((y_test - 1000.0 * X_test @ w) ** 2)
    out.write("DPHeavyTailRegressor on raw data: n=2000, d=20, Student-t(2.5) noise, 1% of rows x100,\n"
              "y in units of 1000; test MSE relative to the Bayes error\n")
    rows = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, model in [("LinearRegression (not private)", LinearRegression()),
                            ("HuberRegressor (not private)", HuberRegressor()),
                            ("DPHeavyTailRegressor(epsilon=1)", DPHeavyTailRegressor(epsilon=1.0, random_state=0))]:
            t0 = time.perf_counter()
            model.fit(X, y)
            rows.append((name, np.mean((y_test - model.predict(X_test)) ** 2) / bayes, time.perf_counter() - t0))
    for name, ratio, seconds in rows:
        out.write(f"  {name:<36s} MSE/Bayes = {ratio:8.3f}   fit {seconds:5.2f} s\n")
    spent = model.privacy_spent_
    out.write(f"  spent (epsilon, delta) = ({spent.epsilon:.4f}, {spent.delta:g}); algorithm "
              f"{model.algorithm_}, scaling {model.scaling_['mode']}\n\n")


def classifier_section(out):
    """DPInterpolatingClassifier on two raw scikit-learn tables, against LogisticRegression."""
    import time
    import warnings

    from sklearn.datasets import load_breast_cancer, load_digits
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import train_test_split
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    from .linear_model import DPInterpolatingClassifier

    out.write("DPInterpolatingClassifier on raw data (75/25 stratified split, seed 0); test accuracy\n")
    for title, loader in [("breast cancer (n=426, d=30, 2 classes)", load_breast_cancer),
                          ("digits (n=1347, d=64, 10 classes)", load_digits)]:
        X, y = loader(return_X_y=True)
        X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.25, stratify=y, random_state=0)
        out.write(f"  {title}\n")
        models = [("StandardScaler + LogisticRegression (not private)",
                   make_pipeline(StandardScaler(), LogisticRegression(max_iter=5000)))]
        models += [(f"DPInterpolatingClassifier(epsilon={eps:g})",
                    DPInterpolatingClassifier(epsilon=eps, classes=np.unique(y), accountant=BudgetAccountant(),
                                              random_state=0)) for eps in (1.0, 4.0)]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for name, model in models:
                t0 = time.perf_counter()
                model.fit(X_train, y_train)
                seconds = time.perf_counter() - t0
                out.write(f"    {name:<52s} accuracy = {model.score(X_test, y_test):.3f}   fit {seconds:5.2f} s\n")
        spent = model.privacy_spent_
        out.write(f"    spent (epsilon, delta) = ({spent.epsilon:.4f}, {spent.delta:g}); algorithm "
                  f"{model.algorithm_}, multi_class {model.multi_class_}, scaling {model.scaling_['mode']}\n")
    out.write("\n")


def zeroth_order_section(out):
    """DPZerothOrderRegressor: median regression with Cauchy noise, and Tukey's loss under contamination."""
    import time
    import warnings

    from sklearn.linear_model import LinearRegression, QuantileRegressor

    from .zeroth_order import DPZerothOrderRegressor

    rng = np.random.default_rng(0)
    n, d = 3000, 5
    w = rng.normal(size=d)
    X = rng.normal(size=(n, d))
    y = X @ w + rng.standard_cauchy(n)
    out.write("DPZerothOrderRegressor (loss values only): n=3000, d=5, Cauchy noise; coefficient error\n")
    rows = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, model in [("LinearRegression (not private)", LinearRegression()),
                            ("QuantileRegressor (not private)", QuantileRegressor(alpha=0.0, solver="highs")),
                            ("DPZerothOrderRegressor(epsilon=1)",
                             DPZerothOrderRegressor(epsilon=1.0, accountant=BudgetAccountant(),
                                                    random_state=0))]:
            t0 = time.perf_counter()
            model.fit(X, y)
            rows.append((name, np.linalg.norm(model.coef_ - w), time.perf_counter() - t0))
        for name, error, seconds in rows:
            out.write(f"  {name:<36s} error = {error:8.3f}   fit {seconds:5.2f} s\n")
        spent = model.privacy_spent_
        out.write(f"  spent (epsilon, delta) = ({spent.epsilon:.4f}, {spent.delta:g}); algorithm "
                  f"{model.algorithm_}, {model.n_function_evals_:.3g} loss evaluations\n")
        y_bad = y.copy()
        y_bad[: n // 5] += 10.0 + 10.0 * np.abs(rng.standard_cauchy(n // 5))  # 20% of labels pushed up
        for loss in ("absolute", "tukey"):
            model = DPZerothOrderRegressor(epsilon=1.0, loss=loss, accountant=BudgetAccountant(),
                                           random_state=0)
            model.fit(X, y_bad)
            out.write(f"  20% of labels shifted up, loss={loss!r:<10s} intercept = {model.intercept_:6.3f} "
                      "(true 0)\n")
    out.write("\n")


SECTIONS = [accounting_section, budget_section, mechanisms_section, heavy_tail_section, classifier_section,
            zeroth_order_section]


def run_demo(out):
    """Write every demo section to ``out``."""
    from . import __version__

    out.write(f"skdp {__version__}: differentially private scikit-learn estimators\n\n")
    for section in SECTIONS:
        section(out)
    out.write("All numbers are computed from the events; nothing above is hard-coded.\n")
    return 0


__all__ = ["run_demo", "SECTIONS"]
