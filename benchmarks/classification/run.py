"""Benchmark of DPInterpolatingClassifier: test accuracy per task, algorithm, epsilon and seed.

Tasks: separable synthetic data with a margin (optionally with flipped labels),
scikit-learn's breast cancer and digits (75/25 stratified splits). Every
algorithm runs on raw data with private scaling; the references are
non-private LogisticRegression and LinearSVC on standardised data.

With ``--grid``, the default ("auto") and LogisticRegression also run on separable
data over n in {500, 1000, 2000, 5000, 20000} and d in {20, 100, 500}, and on the same
data with 5% and 20% of the labels flipped (tasks "grid_n*_d*", "grid_flip5_n*_d*",
"grid_flip20_n*_d*"), at every epsilon; ``--grid-filter`` keeps the grid tasks whose
name contains a string (to split the grid between processes).

Usage: python benchmarks/classification/run.py [--seeds 3] [--grid] [--out results/raw.csv]
Resumable: cells already in the CSV are skipped. Summarise with summarize.py.
"""

import argparse
import csv
import time
import warnings
from pathlib import Path

import numpy as np
from sklearn.datasets import load_breast_cancer, load_digits
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.svm import LinearSVC

from skdp import BudgetAccountant, DPInterpolatingClassifier

ALGORITHMS = ("auto", "clipped_gd", "epoch_growth", "interpolation", "adaptive", "kappa_growth")
EPSILONS = (0.1, 0.5, 1.0, 2.0, 5.0)
GRID_EPSILONS = EPSILONS
FIELDS = ("task", "method", "epsilon", "delta", "seed", "accuracy", "seconds")


def separable(n, d, seed, flip=0.0, gamma=0.1):
    """Gaussian rows kept when their margin to a random unit direction exceeds gamma; labels flipped w.p. flip."""
    rng = np.random.default_rng(1000 + seed)
    u = rng.normal(size=d)
    u /= np.linalg.norm(u)
    m = n + 2000
    X = np.empty((0, d))
    while X.shape[0] < m:
        Z = rng.normal(size=(4 * m, d)) / np.sqrt(d)
        X = np.vstack([X, Z[np.abs(Z @ u) >= gamma / np.sqrt(d) * 3]])
    X = X[:m]
    y = (X @ u > 0).astype(int)
    flips = rng.random(m) < flip
    y[flips] = 1 - y[flips]
    return X[:n], y[:n], X[n:], y[n:]


def real(loader, seed):
    X, y = loader(return_X_y=True)
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.25, stratify=y, random_state=seed)
    return Xtr, ytr, Xte, yte


TASKS = {
    "sep_n1000_d100": lambda s: separable(1000, 100, s),
    "sep_n5000_d100": lambda s: separable(5000, 100, s),
    "flip5_n1000_d100": lambda s: separable(1000, 100, s, flip=0.05),
    "flip20_n5000_d20": lambda s: separable(5000, 20, s, flip=0.2),
    "breast_cancer": lambda s: real(load_breast_cancer, s),
    "digits": lambda s: real(load_digits, s),
}
GRID_FLIPS = {"": 0.0, "flip5_": 0.05, "flip20_": 0.2}
GRID = {f"grid_{tag}n{n}_d{d}": (lambda s, n=n, d=d, flip=flip: separable(n, d, s, flip=flip))
        for tag, flip in GRID_FLIPS.items() for n in (500, 1000, 2000, 5000, 20000) for d in (20, 100, 500)}


def run_cell(task, method, eps, delta, seed):
    Xtr, ytr, Xte, yte = {**TASKS, **GRID}[task](seed)
    start = time.perf_counter()
    if method == "LogisticRegression":
        model = make_pipeline(StandardScaler(), LogisticRegression(max_iter=5000)).fit(Xtr, ytr)
    elif method == "LinearSVC":
        model = make_pipeline(StandardScaler(), LinearSVC()).fit(Xtr, ytr)
    else:
        model = DPInterpolatingClassifier(epsilon=eps, delta=delta, algorithm=method, classes=np.unique(ytr),
                                          accountant=BudgetAccountant(), random_state=seed).fit(Xtr, ytr)
    return model.score(Xte, yte), time.perf_counter() - start


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "raw.csv"))
    parser.add_argument("--tasks", default=",".join(TASKS))
    parser.add_argument("--grid", action="store_true")
    parser.add_argument("--grid-filter", default="", help="only grid tasks whose name contains this")
    parser.add_argument("--methods", default=",".join(ALGORITHMS),
                        help="DP methods of the main table (the references always run)")
    args = parser.parse_args()
    out = Path(args.out)
    done = set()
    if out.exists():
        with out.open() as f:
            done = {(r["task"], r["method"], r["epsilon"], r["delta"], r["seed"]) for r in csv.DictReader(f)}
    new = not out.exists()
    with out.open("a", newline="") as f:
        writer = csv.DictWriter(f, FIELDS)
        if new:
            writer.writeheader()
        methods = [m for m in args.methods.split(",") if m]
        tasks = [t for t in args.tasks.split(",") if t]
        cells = [(t, m, eps, 1e-5) for t in tasks for m in methods for eps in EPSILONS]
        cells += [(t, m, 1.0, 0.0) for t in tasks for m in ("auto", "clipped_gd", "epoch_growth")
                  if m in methods]
        cells += [(t, m, float("inf"), 0.0) for t in tasks for m in ("LogisticRegression", "LinearSVC")]
        if args.grid:
            grid = [t for t in GRID if args.grid_filter in t]
            cells += [(t, "auto", eps, 1e-5) for t in grid for eps in GRID_EPSILONS]
            cells += [(t, "LogisticRegression", float("inf"), 0.0) for t in grid]
        for task, method, eps, delta in cells:
            for seed in range(args.seeds):
                key = (task, method, str(eps), str(delta), str(seed))
                if key in done:
                    continue
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    acc, sec = run_cell(task, method, eps, delta, seed)
                writer.writerow(dict(zip(FIELDS, (task, method, eps, delta, seed, f"{acc:.4f}", f"{sec:.3f}"))))
                f.flush()


if __name__ == "__main__":
    main()
