"""Benchmark at epsilon 1: is the tuner ever worse than the private default, and does the oracle beat it?

For every problem, 5 seeds (more with ``--seeds``), epsilon 1 total, delta "auto":

* ``default``: the estimator's private default (``DPHeavyTailRegressor()``: clipped_gd, alpha = 0;
  ``DPHeavyTailRegressor(l1_ratio=1)`` for the Lasso task; ``DPInterpolatingClassifier()``: C = 1);
* ``oracle``: the same estimator at the grid's strength with the best test score (chosen on test
  rows: a measuring stick, not a procedure);
* ``tuned``: ``DPRegularizationTuner(estimator)`` with its defaults (``method="auto"``, no grid);
* ``select``: ``DPRegularizationTuner(estimator, alphas=grid, method="select")`` (candidates on the
  training half, one vector release of validation scores, refit on all rows);
* ``split``: ``DPRegularizationTuner(estimator, alphas=grid, method="split")``;
* ``bilevel`` (ridge problems only): ``DPRegularizationTuner(estimator, alphas=grid, method="bilevel")``
  (the box is the grid's positive range; its own measurements: ``bilevel.py``, ``results/bilevel.md``);
* ``cv``: non-private ``RidgeCV`` / ``LassoCV`` / ``LogisticRegressionCV`` (after ``StandardScaler``).

Problems: the wide table ``ct_scale`` (d = 260) at n 2000 and 20000, the correlated ridge task
``toeplitz`` (d = 200) at n 2000 and 20000, diabetes (331 training rows), the Lasso task (d = 200,
10 non-zero coefficients, n 2000 and 20000), and three logistic tasks: breast cancer (427 training
rows), a high-dimensional synthetic task (``make_classification``: d = 200, 20 informative, n 2000)
and the wide table with its target cut at the median (``ct_binary``, n 2000).

Scores: test R^2 for regression (and, for the Lasso task, test MSE and the F1 of the support of the
coefficients in the standardised features against the true support); test ROC AUC and accuracy for
classification (the oracle chooses by AUC).

Usage::

    nice -n 10 python benchmarks/tuning/default_vs_tuned.py [--seeds 5] [--problems ...] [--raw CSV]
    python benchmarks/tuning/default_vs_tuned.py --summarize   # results/default_vs_tuned.md

Two runs can share the machine on disjoint problems by writing ``results/default_vs_tuned_raw.csv``
and ``results/default_vs_tuned_raw_2.csv`` (the summary reads both).
"""

import argparse
import csv
import os
import sys
import time
import warnings

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests"))

from sklearn.datasets import load_breast_cancer, make_classification  # noqa: E402
from sklearn.linear_model import LassoCV, LogisticRegressionCV, RidgeCV  # noqa: E402
from sklearn.metrics import accuracy_score, f1_score, mean_squared_error, r2_score, roc_auc_score  # noqa: E402
from sklearn.pipeline import make_pipeline  # noqa: E402
from sklearn.preprocessing import StandardScaler  # noqa: E402

from skdp import BudgetAccountant, DPHeavyTailRegressor, DPInterpolatingClassifier  # noqa: E402
from skdp.model_selection import DPRegularizationTuner  # noqa: E402

from run import problem_data  # noqa: E402
from real_tables import TABLES  # noqa: E402

RAW = os.path.join(HERE, "results", "default_vs_tuned_raw.csv")
SUMMARY = os.path.join(HERE, "results", "default_vs_tuned.md")
FIELDS = ["problem", "n", "seed", "method", "score", "score2", "alpha", "epsilon_spent", "seconds"]
EPSILON = 1.0
RIDGE_GRID = (0.0, 1e-3, 1e-2, 0.1, 1.0)
LASSO_GRID = (0.0, 1e-3, 1e-2, 3e-2, 0.1)
LOGISTIC_GRID = (1e-4, 1e-3, 1e-2, 0.1, 1.0)
CELLS = [("diabetes", 331), ("breast_cancer", 427), ("highdim", 2000), ("ct_binary", 2000),
         ("lasso", 2000), ("ct_scale", 2000), ("toeplitz", 2000), ("lasso", 20000), ("toeplitz", 20000),
         ("ct_scale", 20000)]
KIND = {"diabetes": "ridge", "ct_scale": "ridge", "toeplitz": "ridge", "lasso": "lasso",
        "breast_cancer": "logistic", "highdim": "logistic", "ct_binary": "logistic"}


def lasso(n, seed, d=200, k=10, r2=0.8, n_test=10_000):
    rng = np.random.default_rng([seed, 10, 200])
    beta = np.zeros(d)
    support = rng.choice(d, size=k, replace=False)
    beta[support] = rng.choice([-1.0, 1.0], size=k) * rng.uniform(0.5, 1.5, size=k)
    X = rng.normal(size=(n + n_test, d))
    signal = X @ beta
    y = signal + rng.normal(size=n + n_test) * np.sqrt(np.var(signal) * (1 - r2) / r2)
    return dict(X=X[:n], y=y[:n], X_test=X[n:], y_test=y[n:], wrap=None, support=beta != 0)


def breast_cancer(n, seed):
    X, y = load_breast_cancer(return_X_y=True)
    order = np.random.default_rng([seed, 569]).permutation(len(y))
    train, test = order[:n], order[n:]
    return dict(X=X[train], y=y[train], X_test=X[test], y_test=y[test], wrap=None)


def highdim(n, seed, n_test=10_000):
    X, y = make_classification(n + n_test, 200, n_informative=20, n_redundant=0, flip_y=0.05,
                               random_state=seed)
    return dict(X=X[:n], y=y[:n], X_test=X[n:], y_test=y[n:], wrap=None)


def ct_binary(n, seed):
    data = TABLES["ct_scale"](n, seed)
    cut = np.median(np.r_[data["y"], data["y_test"]])  # the task's definition (synthetic rows)
    data["y"], data["y_test"] = (data["y"] > cut).astype(int), (data["y_test"] > cut).astype(int)
    return data


def data_for(problem, n, seed):
    makers = {"lasso": lasso, "breast_cancer": breast_cancer, "highdim": highdim, "ct_binary": ct_binary}
    return makers[problem](n, seed) if problem in makers else problem_data(problem, n, seed)


def private_estimator(kind, alpha=None):
    if kind == "logistic":
        return DPInterpolatingClassifier(classes=[0, 1]) if alpha is None else \
            DPInterpolatingClassifier(classes=[0, 1], alpha=alpha)
    base = DPHeavyTailRegressor(l1_ratio=1.0) if kind == "lasso" else DPHeavyTailRegressor()
    return base if alpha is None else base.set_params(alpha=alpha)


def grid_of(kind):
    return {"ridge": RIDGE_GRID, "lasso": LASSO_GRID, "logistic": LOGISTIC_GRID}[kind]


def scores(kind, data, model):
    """(primary, secondary): R^2 and MSE (Lasso: MSE and support F1), or AUC and accuracy."""
    X_test, y_test = data["X_test"], data["y_test"]
    if kind == "logistic":
        p = model.predict_proba(X_test)[:, 1]
        return roc_auc_score(y_test, p), accuracy_score(y_test, p > 0.5)
    pred = model.predict(X_test)
    if kind == "lasso":
        final = model[-1][-1] if hasattr(model[-1], "steps") else model[-1]  # cv: scaler + LassoCV
        coef = np.ravel(final.coef_)
        return mean_squared_error(y_test, pred), f1_score(data["support"], coef != 0, zero_division=0.0)
    return r2_score(y_test, pred), mean_squared_error(y_test, pred)


def better(kind, a, b):
    """Is primary score a better than b? (Lasso: lower MSE.)"""
    return a < b if kind == "lasso" else a > b


def fit_on_own_ledger(estimator, data, rs):
    """Fit in the problem's pipeline, a private estimator on a fresh ledger with ``random_state=rs``.

    Returns ``(model, seconds, epsilon spent)``; a non-private estimator is fitted as it is (0 spent).
    """
    acc = BudgetAccountant()
    if hasattr(estimator, "accountant"):
        estimator.set_params(accountant=acc, random_state=rs)
    wrap = data["wrap"]
    model = wrap(estimator, dense=True) if wrap is not None else make_pipeline(estimator)
    start = time.perf_counter()
    model.fit(data["X"], data["y"])
    return model, time.perf_counter() - start, acc.spent.epsilon


def cv_estimator(kind, n):
    """The non-private CV estimator of the problem's kind, and its chosen strength in ``alpha``'s units."""
    if kind == "logistic":
        return (make_pipeline(StandardScaler(), LogisticRegressionCV(Cs=10, max_iter=2000)),
                lambda m: 1.0 / (m[-1].C_[0] * n))
    if kind == "lasso":
        return make_pipeline(StandardScaler(), LassoCV(alphas=30)), lambda m: m[-1].alpha_
    return make_pipeline(StandardScaler(), RidgeCV(alphas=np.logspace(-3, 3, 13))), lambda m: m[-1].alpha_ / n


def run_cell(problem, n, seed):
    kind = KIND[problem]
    data = data_for(problem, n, seed)
    rs = 1000 * seed + 17
    rows = []

    def add(method, estimator, alpha_of):
        model, seconds, spent = fit_on_own_ledger(estimator, data, rs)
        s1, s2 = scores(kind, data, model)
        rows.append(dict(problem=problem, n=n, seed=seed, method=method, score=s1, score2=s2,
                         alpha=alpha_of(model[-1]), epsilon_spent=round(spent, 9), seconds=round(seconds, 3)))
        return rows[-1]

    default_alpha = (lambda m: m.alpha if m.alpha is not None else 1.0 / (m.C * len(data["y"]))) \
        if kind == "logistic" else (lambda m: m.alpha)
    add("default", private_estimator(kind).set_params(epsilon=EPSILON), default_alpha)
    best = None
    for alpha in grid_of(kind):
        row = add("_candidate", private_estimator(kind, alpha).set_params(epsilon=EPSILON), lambda m: m.alpha)
        rows.pop()
        if best is None or better(kind, row["score"], best["score"]):
            best = row
    rows.append(dict(best, method="oracle"))
    tuned_alpha = lambda m: m.alpha_  # noqa: E731
    add("tuned", DPRegularizationTuner(private_estimator(kind), epsilon=EPSILON), tuned_alpha)
    add("select", DPRegularizationTuner(private_estimator(kind), alphas=grid_of(kind), method="select",
                                        epsilon=EPSILON), tuned_alpha)
    add("split", DPRegularizationTuner(private_estimator(kind), alphas=grid_of(kind), method="split",
                                       epsilon=EPSILON), tuned_alpha)
    if kind == "ridge":  # the bilevel method tunes the ridge form only
        add("bilevel", DPRegularizationTuner(private_estimator(kind), alphas=grid_of(kind), method="bilevel",
                                             epsilon=EPSILON), tuned_alpha)
    add("cv", *cv_estimator(kind, len(data["y"])))
    return rows


def done_cells(raw):
    if not os.path.exists(raw):
        return set()
    with open(raw) as f:
        return {(r["problem"], int(r["n"]), int(r["seed"])) for r in csv.DictReader(f) if r["method"] == "cv"}


def record(writer, f, rows, start, *label):
    """Append one cell's rows to the raw CSV (flushed: a run can be stopped) and print its scores."""
    writer.writerows(rows)
    f.flush()
    print(*label, {r["method"]: round(r["score"], 3) for r in rows}, f"{time.perf_counter() - start:.0f}s",
          flush=True)


def main(seeds, problems, raw):
    os.makedirs(os.path.dirname(raw), exist_ok=True)
    warnings.simplefilter("ignore")
    done = done_cells(raw)
    new_file = not os.path.exists(raw)
    with open(raw, "a", newline="") as f:
        writer = csv.DictWriter(f, FIELDS)
        if new_file:
            writer.writeheader()
        for seed in range(seeds):
            for problem, n in CELLS:
                if problem not in problems or (problem, n, seed) in done:
                    continue
                start = time.perf_counter()
                record(writer, f, run_cell(problem, n, seed), start, problem, n, seed)


def summarize(paths):
    import pandas as pd

    raw = pd.concat([pd.read_csv(p) for p in paths if os.path.exists(p)], ignore_index=True)
    methods = ["default", "oracle", "tuned", "select", "split", "cv"]
    if "bilevel" in set(raw.method):  # rows written before the method existed have none
        methods.insert(5, "bilevel")
    lines = ["# Default, oracle and tuned at epsilon 1 (medians and IQRs over seeds)", "",
             "Generated by `python benchmarks/tuning/default_vs_tuned.py --summarize` from "
             "`results/default_vs_tuned_raw.csv`. Score: test R^2 (regression), test MSE (`lasso`: lower "
             "is better), test ROC AUC (classification); each cell is `median [q25, q75]`. "
             "`gap`: median over seeds of oracle - default (signed so that positive means the oracle is "
             "better) and its IQR; `seed noise`: the IQR of the default's score over seeds (tables and noise "
             "differ); `noise`: the median of |tuned - default| (`tuned` is the default model from another "
             "noise stream, so this is the run-to-run privacy noise on a fixed table). `oracle alphas`: the "
             "strengths the oracle chose (seed by seed).", ""]
    header = ["problem", "n", "seeds"] + methods + ["gap [IQR]", "seed noise", "noise", "oracle alphas"]
    lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for (problem, n), g in raw.groupby(["problem", "n"], sort=False):
        sign = -1.0 if KIND[problem] == "lasso" else 1.0
        wide = g.pivot_table(index="seed", columns="method", values="score")
        cells = [problem, str(n), str(len(wide))]
        for m in methods:
            if m not in wide:  # "bilevel" on the Lasso and logistic problems
                cells.append("n/a")
                continue
            q = wide[m].quantile([0.25, 0.5, 0.75]).to_numpy()
            cells.append(f"{q[1]:.3f} [{q[0]:.3f}, {q[2]:.3f}]")
        gap = sign * (wide["oracle"] - wide["default"])
        q = gap.quantile([0.25, 0.5, 0.75]).to_numpy()
        cells.append(f"{q[1]:.3f} [{q[0]:.3f}, {q[2]:.3f}]")
        qd = wide["default"].quantile([0.25, 0.75]).to_numpy()
        cells.append(f"{qd[1] - qd[0]:.3f}")
        alphas = g[g.method == "oracle"].sort_values("seed")["alpha"]
        cells.append(" ".join(f"{a:g}" for a in alphas))
        # "tuned" is the default model (method "auto" without a grid) drawn from another noise
        # stream: |tuned - default| measures the run-to-run noise of the default at a fixed table.
        lines.append("| " + " | ".join(cells[:-1] + [f"{(wide['tuned'] - wide['default']).abs().median():.3f}",
                                                      cells[-1]]) + " |")
    second = raw[raw.problem.isin(["lasso"])]
    if len(second):
        lines += ["", "Lasso task: support F1 (median [q25, q75]) of the coefficients' non-zeros against the "
                  "true support of 10 of 200.", "",
                  "| n | " + " | ".join(methods) + " |", "|" + "---|" * (len(methods) + 1)]
        for n, g in second.groupby("n"):
            wide = g.pivot_table(index="seed", columns="method", values="score2")
            cells = [str(n)]
            for m in methods:
                if m not in wide:
                    cells.append("n/a")
                    continue
                q = wide[m].quantile([0.25, 0.5, 0.75]).to_numpy()
                cells.append(f"{q[1]:.2f} [{q[0]:.2f}, {q[2]:.2f}]")
            lines.append("| " + " | ".join(cells) + " |")
    secs = raw.groupby(["problem", "n", "method"])["seconds"].median().unstack("method").reindex(columns=methods)
    lines += ["", "Median fit seconds (2 shared cores, `nice -n 10`; `oracle` is one fit at its strength).", "",
              "| problem | n | " + " | ".join(methods) + " |", "|" + "---|" * (len(methods) + 2)]
    for (problem, n), row in secs.iterrows():
        lines.append(f"| {problem} | {n} | " + " | ".join(f"{v:.1f}" for v in row) + " |")
    spent = raw[raw.method.isin(["default", "tuned", "select", "split", "bilevel"])]["epsilon_spent"]
    lines += ["", f"Every private fit charged its own ledger: epsilon spent from {spent.min():.6f} to "
              f"{spent.max():.6f} (target 1)."]
    with open(SUMMARY, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--problems", nargs="+", default=sorted(KIND))
    parser.add_argument("--summarize", action="store_true")
    parser.add_argument("--raw", default=RAW, help="the CSV to append to (one per concurrent run)")
    args = parser.parse_args()
    if args.summarize:
        summarize([RAW, RAW.replace(".csv", "_2.csv")])
    else:
        main(args.seeds, args.problems, args.raw)
