"""Sparse (Lasso / ElasticNet) benchmark of DPHeavyTailRegressor.

Task (``tasks.sparse``): d = 200 Gaussian features, 10 non-zero coefficients,
Student-t(2.5) noise, n_train in {2000, 20000}, 5000 clean test rows. Models
with ``alpha = 0.05`` and ``l1_ratio`` in {1 (Lasso), 0.5 (ElasticNet)}:
the default algorithm ("auto"), each algorithm with proximal steps, and
scikit-learn's Lasso / ElasticNet (non-private) with the same objective.
Reported: test MSE / Bayes error, F1 of the recovered support (non-zero
coefficients), number of non-zeros, fit time.

Usage::

    python benchmarks/heavy_tail/sparse.py --seeds 10     # results/sparse_raw.csv, then
    python benchmarks/heavy_tail/sparse.py --summarize    # results/sparse.md
"""

import argparse
import csv
import os
import sys
import time
import warnings
from collections import defaultdict
from pathlib import Path

import numpy as np
from sklearn.linear_model import ElasticNet, Lasso

sys.path.insert(0, str(Path(__file__).parent))
from _runner import append_results, finished  # noqa: E402
from tasks import sparse  # noqa: E402

from skdp import BudgetAccountant, DPHeavyTailRegressor  # noqa: E402

RESULTS = Path(__file__).parent / "results"
FIELDS = ["n", "l1_ratio", "epsilon", "seed", "method", "mse", "bayes", "f1", "nnz", "fit_time"]
METHODS = ["auto", "clipped_gd", "proximal_sgd"]
EPSILONS = [0.5, 1.0, 2.0, 5.0]
ALPHA = 0.05


def f1_support(coef, true):
    found, real = coef != 0, true != 0
    tp = int(np.sum(found & real))
    if tp == 0:
        return 0.0
    precision, recall = tp / found.sum(), tp / real.sum()
    return float(2 * precision * recall / (precision + recall))


def run_cell(cell):
    n, seed, methods = cell
    data = sparse(n, seed)
    rows = []

    def record(method, l1_ratio, eps, model, elapsed):
        mse = float(np.mean((data["y_test"] - model.predict(data["X_test"])) ** 2))
        rows.append(dict(n=n, l1_ratio=l1_ratio, epsilon=eps, seed=seed, method=method, mse=mse,
                         bayes=data["bayes"], f1=f1_support(model.coef_, data["coef"]),
                         nnz=int(np.sum(model.coef_ != 0)), fit_time=elapsed))

    for l1_ratio in (1.0, 0.5):
        if set(methods) == set(METHODS):
            reference = Lasso(alpha=ALPHA) if l1_ratio == 1.0 else ElasticNet(alpha=ALPHA, l1_ratio=l1_ratio)
            t0 = time.perf_counter()
            reference.fit(data["X"], data["y"])
            record("sklearn_lasso" if l1_ratio == 1.0 else "sklearn_elasticnet", l1_ratio, "", reference,
                   time.perf_counter() - t0)
        for eps in EPSILONS:
            for method in methods:
                # Each fit gets a ledger of its own (fits run in worker processes).
                model = DPHeavyTailRegressor(epsilon=eps, alpha=ALPHA, l1_ratio=l1_ratio, algorithm=method,
                                             random_state=10_000 * seed + 7, accountant=BudgetAccountant())
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    t0 = time.perf_counter()
                    model.fit(data["X"], data["y"])
                record(method, l1_ratio, eps, model, time.perf_counter() - t0)
    return rows


def run(args):
    out = RESULTS / "sparse_raw.csv"
    methods = METHODS if args.methods == "all" else args.methods.split(",")
    done = finished(out, lambda r: (int(r["n"]), int(r["seed"]), r["method"]))
    todo = [(n, s, methods) for s in range(args.seeds) for n in (20000, 2000) if (n, s, methods[-1]) not in done]
    append_results(out, FIELDS, run_cell, todo, args.workers, lambda r: f"n={r['n']} seed={r['seed']}")


def summarize():
    last = {}  # a rerun of some methods replaces their earlier rows
    with (RESULTS / "sparse_raw.csv").open() as f:
        for r in csv.DictReader(f):
            last[(r["n"], r["l1_ratio"], r["epsilon"], r["method"], r["seed"])] = r
    groups = defaultdict(list)
    for r in last.values():
        groups[(int(r["n"]), float(r["l1_ratio"]), r["epsilon"], r["method"])].append(r)
    seeds = len({r["seed"] for rows in groups.values() for r in rows})
    lines = ["# Sparse benchmark (d = 200, 10 non-zero coefficients, Student-t(2.5) noise, alpha = 0.05)", "",
             f"Median [IQR] over {seeds} seeds. MSE is test MSE / Bayes error; F1 of the non-zero support.", ""]
    for n in sorted({k[0] for k in groups}):
        for l1_ratio in (1.0, 0.5):
            ref = "sklearn_lasso" if l1_ratio == 1.0 else "sklearn_elasticnet"
            lines += [f"## n = {n}, l1_ratio = {l1_ratio:g}", "",
                      "| method | epsilon | MSE / Bayes | F1 | non-zeros | fit time (s) |", "|---|---|---|---|---|---|"]
            keys = [(n, l1_ratio, "", ref)] + [(n, l1_ratio, str(e), m) for e in EPSILONS for m in METHODS]
            for key in keys:
                rows = groups.get(key)
                if not rows:
                    continue
                mse = np.array([float(r["mse"]) / float(r["bayes"]) for r in rows])
                f1 = np.array([float(r["f1"]) for r in rows])
                nnz = np.array([float(r["nnz"]) for r in rows])
                t = np.array([float(r["fit_time"]) for r in rows])

                def fmt(v, digits=3):
                    q1, med, q3 = np.quantile(v, [0.25, 0.5, 0.75])
                    return f"{med:.{digits}f} [{q1:.{digits}f}, {q3:.{digits}f}]"

                lines.append(f"| {key[3]} | {key[2] or 'non-private'} | {fmt(mse)} | {fmt(f1, 2)} | "
                             f"{np.median(nnz):.0f} | {np.median(t):.2f} |")
            lines.append("")
    text = "\n".join(lines)
    (RESULTS / "sparse.md").write_text(text)
    print(text)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--summarize", action="store_true")
    parser.add_argument("--methods", default="all", help="comma-separated subset (reruns append; the summary "
                        "keeps the last row of each fit)")
    args = parser.parse_args()
    if args.summarize:
        summarize()
    else:
        run(args)


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()
