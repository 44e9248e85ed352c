"""Declared bounds on the real tables: DPInterpolatingClassifier with and without ``bounds=`` (issue 26).

The real-table tasks of ``drop_in.py`` (the tests' tables at n = 8000, the target thresholded at its
85th percentile), epsilon = 1: the default ``DPInterpolatingClassifier(epsilon=1, classes=[0, 1])``
(``none``) and the same with the bounds a user would declare (``declared``:
``real_tables.user_bounds``: the categories as one-hot blocks, round public ranges of the numeric
columns), against ``LogisticRegression(max_iter=10000)``; test ROC AUC and accuracy, and the number of
private quantiles each fit released.

One process; rows appended to ``results/bounds_raw.csv`` (resumable).

Usage::

    nice -n 10 python benchmarks/classification/bounds.py --seeds 3
    python benchmarks/classification/bounds.py --summarize          # results/bounds.md
"""

import argparse
import csv
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "tests"))
import real_tables  # noqa: E402

from skdp import BudgetAccountant, DPInterpolatingClassifier  # noqa: E402
from skdp.accounting import ExponentialMechanismRelease  # noqa: E402

RESULTS = HERE / "results"
OUT = RESULTS / "bounds_raw.csv"
FIELDS = ["table", "seed", "method", "auc", "accuracy", "quantiles", "eps_spent", "fit_time", "error"]
TABLES = ["rare_binary", "counts", "lognormal", "offsets", "mixed_scales", "onehot50", "sparse_onehot"]
N, RATE, EPSILON = 8000, 0.15, 1.0


def _fit(table, name, method, seed):
    threshold = np.quantile(table["y"], 1.0 - RATE)
    y, y_test = (table["y"] > threshold).astype(int), (table["y_test"] > threshold).astype(int)
    if method == "lr":
        model = LogisticRegression(max_iter=10000)
    else:
        bounds = real_tables.user_bounds(name, table) if method == "declared" else None
        model = DPInterpolatingClassifier(epsilon=EPSILON, classes=[0, 1], bounds=bounds, random_state=seed,
                                          accountant=BudgetAccountant())
    t0 = time.perf_counter()
    model.fit(table["X"], y)
    row = dict(fit_time=time.perf_counter() - t0, auc=roc_auc_score(y_test, model.decision_function(table["X_test"])),
               accuracy=float(np.mean(model.predict(table["X_test"]) == y_test)))
    if method != "lr":
        row.update(eps_spent=model.privacy_spent_.epsilon, quantiles=model.privacy_event_.releases(ExponentialMechanismRelease))
    return row


def run(args):
    tables = args.tables.split(",") if args.tables else TABLES
    done = set()
    if OUT.exists():
        with OUT.open() as f:
            done = {(r["table"], int(r["seed"]), r["method"]) for r in csv.DictReader(f)}
    RESULTS.mkdir(exist_ok=True)
    new = not OUT.exists()
    with OUT.open("a", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=FIELDS)
        if new:
            writer.writeheader()
        for seed in range(args.seeds):
            for name in tables:
                table = None
                for method in ("lr", "none", "declared"):
                    if (name, seed, method) in done:
                        continue
                    table = table or real_tables.TABLES[name](N, seed)
                    row = dict(table=name, seed=seed, method=method, error="")
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        try:
                            row.update(_fit(table, name, method, seed))
                        except Exception as exc:  # recorded: a refusal is a result too
                            row["error"] = f"{type(exc).__name__}: {exc}"[:160].replace("\n", " ")
                    writer.writerow(row)
                    f.flush()
                    print(name, seed, method, row.get("auc"), row.get("quantiles", ""), row["error"], flush=True)


def summarize(args):
    import pandas as pd

    frame = pd.read_csv(OUT)
    lines = ["# Declared bounds on the real tables (DPInterpolatingClassifier, epsilon = 1)", "",
             "Produced by `benchmarks/classification/bounds.py --summarize`. Median over seeds of the test ROC AUC "
             "(n = 8000, 15% positives); `gap closed`: the share of the default's AUC gap to LogisticRegression "
             "that declared bounds close (`-` where the default is within 0.005 of it or above it); `quantiles`: private quantiles released by the fit (median).", "",
             "| table | seeds | LogisticRegression | none | declared | gap closed | quantiles none -> declared |",
             "|---|---|---|---|---|---|---|"]
    for table, cell in frame.groupby("table", sort=False):
        med = cell.groupby("method")["auc"].median()
        if not {"lr", "none", "declared"} <= set(med.index):
            continue
        gap = med["lr"] - med["none"]
        closed = (med["declared"] - med["none"]) / gap if gap > 0.005 else float("nan")
        q = cell.groupby("method")["quantiles"].median()
        lines.append(f"| {table} | {cell.seed.nunique()} | {med['lr']:.3f} | {med['none']:.3f} | "
                     f"{med['declared']:.3f} | {'-' if closed != closed else f'{closed:+.2f}'} | {q['none']:.0f} -> "
                     f"{q['declared']:.0f} |")
    (RESULTS / "bounds.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--tables", default=None)
    parser.add_argument("--summarize", action="store_true")
    args = parser.parse_args()
    summarize(args) if args.summarize else run(args)
