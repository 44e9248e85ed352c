"""Benchmark of DPRegularizationTuner: does private tuning recover the oracle strength's accuracy?

Problems (generated or bundled, no downloads):

1. ``ct_scale``: the wide real-like table of ``tests/real_tables.py`` (a pandas frame of 5 numeric
   columns and categoricals with 5, 50 and 200 Zipf levels through ColumnTransformer(StandardScaler,
   OneHotEncoder), dense: d = 260), n in {2000, 5000, 20000}, 10,000 test rows;
2. ``toeplitz``: ridge regression, d = 200, features N(0, Sigma) with Sigma_ij = 0.9^|i - j|, dense
   N(0, 1/d) coefficients, noise so that the Bayes R^2 is 0.8, n in {2000, 20000}, 10,000 test rows;
3. ``diabetes``: scikit-learn's diabetes (442 rows, 10 columns), a random 75/25 split per seed.

Methods, at epsilon in {0.5, 1, 2, 5} (delta "auto"), one fit each per seed:

* ``default``: ``DPHeavyTailRegressor(epsilon)`` (the private default: clipped_gd, alpha = 0);
* ``ss_default``: ``DPHeavyTailRegressor(algorithm="sufficient_statistics")`` at alpha = 0 (only
  its privacy ridge);
* ``tuned``: ``DPRegularizationTuner(epsilon)`` (method "auto" = "select" on the released
  sufficient statistics, the default grid);
* ``split``: ``DPRegularizationTuner(method="split")`` over the oracle's 8 alphas (candidates on
  half of the rows sharing the budget, report-noisy-min on the other half);
* ``oracle``: the sufficient-statistics estimator at every second alpha of the grid (0, 1e-4, 1e-3,
  ..., 1000), the best test R^2 (chosen on test data: an upper bound, not a procedure);
* ``ridgecv``: non-private ``RidgeCV`` (13 alphas from 1e-3 to 1e3 in its summed-loss units).

Usage::

    nice -n 10 python benchmarks/tuning/run.py [--seeds 3] [--problems toeplitz diabetes ct_scale]
    python benchmarks/tuning/run.py --summarize        # results/summary.md from results/raw.csv

Rows are appended to ``results/raw.csv``; finished (problem, n, epsilon, seed) cells are skipped when
a run is resumed. Every private fit charges a ledger of its own.
"""

import argparse
import csv
import os
import sys
import time
import warnings

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests"))

from sklearn.datasets import load_diabetes  # noqa: E402
from sklearn.linear_model import RidgeCV  # noqa: E402
from sklearn.metrics import r2_score  # noqa: E402
from sklearn.pipeline import make_pipeline  # noqa: E402

from skdp import BudgetAccountant, DPHeavyTailRegressor  # noqa: E402
from skdp.model_selection import DEFAULT_ALPHAS, DPRegularizationTuner  # noqa: E402

from real_tables import TABLES  # noqa: E402

RAW = os.path.join(HERE, "results", "raw.csv")
FIELDS = ["problem", "n", "epsilon", "seed", "method", "r2", "alpha", "seconds"]
EPSILONS = (0.5, 1.0, 2.0, 5.0)
SIZES = {"ct_scale": (2000, 5000, 20000), "toeplitz": (2000, 20000), "diabetes": (331,)}
# The order of the run: small cells first, so that a run cut short still covers every problem.
ORDER = [("ct_scale", 2000), ("toeplitz", 2000), ("diabetes", 331), ("ct_scale", 5000), ("toeplitz", 20000),
         ("ct_scale", 20000)]
ORACLE_ALPHAS = DEFAULT_ALPHAS[::2]


def toeplitz(n, seed, d=200, rho=0.9, r2=0.8, n_test=10_000):
    rng = np.random.default_rng([seed, 200])
    idx = np.arange(d)
    L = np.linalg.cholesky(rho ** np.abs(idx[:, None] - idx[None, :]))
    beta = rng.normal(size=d) / np.sqrt(d)
    X = rng.normal(size=(n + n_test, d)) @ L.T
    signal = X @ beta
    y = signal + rng.normal(size=n + n_test) * np.sqrt(np.var(signal) * (1 - r2) / r2)
    return dict(X=X[:n], y=y[:n], X_test=X[n:], y_test=y[n:], wrap=None)


def diabetes(n, seed):
    X, y = load_diabetes(return_X_y=True)
    order = np.random.default_rng([seed, 442]).permutation(len(y))
    train, test = order[:n], order[n:]
    return dict(X=X[train], y=y[train], X_test=X[test], y_test=y[test], wrap=None)


def problem_data(problem, n, seed):
    if problem == "ct_scale":
        return TABLES["ct_scale"](n, seed)
    return toeplitz(n, seed) if problem == "toeplitz" else diabetes(n, seed)


def evaluate(data, estimator):
    wrap = data["wrap"]
    model = wrap(estimator, dense=True) if wrap is not None else make_pipeline(estimator)
    start = time.perf_counter()
    model.fit(data["X"], data["y"])
    seconds = time.perf_counter() - start
    return r2_score(data["y_test"], model.predict(data["X_test"])), model[-1], seconds


def run_cell(problem, n, eps, seed):
    data = problem_data(problem, n, seed)
    rows = []

    def add(method, estimator, alpha_of=lambda m: getattr(m, "alpha", float("nan"))):
        r2, fitted, seconds = evaluate(data, estimator)
        rows.append(dict(problem=problem, n=n, epsilon=eps, seed=seed, method=method, r2=r2,
                         alpha=alpha_of(fitted), seconds=round(seconds, 3)))
        return r2

    rs = 1000 * seed + 17
    add("default", DPHeavyTailRegressor(epsilon=eps, accountant=BudgetAccountant(), random_state=rs))
    add("ss_default", DPHeavyTailRegressor(epsilon=eps, algorithm="sufficient_statistics",
                                           accountant=BudgetAccountant(), random_state=rs))
    add("tuned", DPRegularizationTuner(epsilon=eps, accountant=BudgetAccountant(), random_state=rs),
        alpha_of=lambda m: m.alpha_)
    add("split", DPRegularizationTuner(alphas=ORACLE_ALPHAS, epsilon=eps, method="split",
                                       accountant=BudgetAccountant(), random_state=rs),
        alpha_of=lambda m: m.alpha_)
    best = None
    for a in ORACLE_ALPHAS:
        r2, fitted, seconds = evaluate(data, DPHeavyTailRegressor(
            epsilon=eps, algorithm="sufficient_statistics", alpha=a, accountant=BudgetAccountant(),
            random_state=rs))
        if best is None or r2 > best[0]:
            best = (r2, a, seconds)
    rows.append(dict(problem=problem, n=n, epsilon=eps, seed=seed, method="oracle", r2=best[0], alpha=best[1],
                     seconds=round(best[2], 3)))
    add("ridgecv", RidgeCV(alphas=np.logspace(-3, 3, 13)), alpha_of=lambda m: m.alpha_ / n)
    return rows


def done_cells():
    if not os.path.exists(RAW):
        return set()
    with open(RAW) as f:
        return {(r["problem"], int(r["n"]), float(r["epsilon"]), int(r["seed"])) for r in csv.DictReader(f)
                if r["method"] == "ridgecv"}


def main(seeds, problems):
    os.makedirs(os.path.dirname(RAW), exist_ok=True)
    warnings.simplefilter("ignore")
    done = done_cells()
    new_file = not os.path.exists(RAW)
    with open(RAW, "a", newline="") as f:
        writer = csv.DictWriter(f, FIELDS)
        if new_file:
            writer.writeheader()
        for problem, n in ORDER:
            if problem not in problems:
                continue
            for seed in range(seeds):
                for eps in EPSILONS:
                    if (problem, n, eps, seed) in done:
                        continue
                    start = time.perf_counter()
                    rows = run_cell(problem, n, eps, seed)
                    writer.writerows(rows)
                    f.flush()
                    print(problem, n, eps, seed, {r["method"]: round(r["r2"], 3) for r in rows},
                          f"{time.perf_counter() - start:.0f}s", flush=True)


def summarize():
    import pandas as pd

    raw = pd.read_csv(RAW)
    med = raw.groupby(["problem", "n", "epsilon", "method"])["r2"].median().unstack("method")
    seeds = raw[raw.method == "ridgecv"].groupby(["problem", "n", "epsilon"]).size().rename("seeds")
    med = med.join(seeds)
    gap = med["oracle"] - med["default"]
    med["closed_vs_default"] = np.where(gap > 0.01, (med["tuned"] - med["default"]) / gap, np.nan)
    gap_ss = med["oracle"] - med["ss_default"]
    med["closed_vs_ss_default"] = np.where(gap_ss > 0.01, (med["tuned"] - med["ss_default"]) / gap_ss, np.nan)
    tuned = raw[raw.method == "tuned"].groupby(["problem", "n", "epsilon"])
    alpha = tuned["alpha"].median().rename("tuned_alpha")
    med = med.join(alpha)
    cols = ["seeds", "default", "ss_default", "tuned", "split", "oracle", "ridgecv", "closed_vs_default",
            "closed_vs_ss_default", "tuned_alpha"]
    table = med[cols].reset_index()
    lines = ["# Tuning benchmark: median test R^2 over seeds", "",
             "Generated by `python benchmarks/tuning/run.py --summarize` from `results/raw.csv`. "
             "`closed_*`: (tuned - baseline) / (oracle - baseline), shown where the oracle beats the "
             "baseline by more than 0.01.", "",
             "| " + " | ".join(table.columns) + " |", "|" + "---|" * len(table.columns)]
    for _, row in table.iterrows():
        cells = []
        for c in table.columns:
            v = row[c]
            if isinstance(v, float):
                cells.append("" if np.isnan(v) else (f"{v:.3g}" if c == "tuned_alpha" else f"{v:.3f}"))
            else:
                cells.append(str(v))
        lines.append("| " + " | ".join(cells) + " |")
    with open(os.path.join(HERE, "results", "summary.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--problems", nargs="+", default=["toeplitz", "diabetes", "ct_scale"])
    parser.add_argument("--summarize", action="store_true")
    args = parser.parse_args()
    if args.summarize:
        summarize()
    else:
        main(args.seeds, args.problems)
