"""Benchmark of the practical schedules (issue 12): every algorithm on the contaminated task.

Cells: n in {2000, 20000, 100000}, epsilon in {0.5, 1, 2} (delta = 1e-5, or 1e-6 at
n = 100000), y as generated (the estimator is scale-equivariant), seeds 0..S-1.
Methods: "auto" and every algorithm of DPHeavyTailRegressor except "svt_sgd"
(disabled). Results go to ``results/schedules_raw.csv`` (resumable);
``--summary`` writes ``results/schedules.md``. The ``warned`` column records the
public fit-time warning (``LowBudgetWarning``, "predicted to be poor"); it depends
on (n, epsilon, algorithm) only.

Usage::

    python benchmarks/heavy_tail/schedules.py --seeds 10 --large-seeds 10
    python benchmarks/heavy_tail/schedules.py --summary
    # a sanity check: one seed, one size, one budget, every method, to a scratch file
    python benchmarks/heavy_tail/schedules.py --seeds 1 --sizes 20000 --epsilons 1 --out /tmp/sanity.csv
"""

import argparse
import os
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from _runner import append_results, finished  # noqa: E402
from tasks import contaminated  # noqa: E402

from skdp import BudgetAccountant, DPHeavyTailRegressor  # noqa: E402

RESULTS = Path(__file__).parent / "results"
FIELDS = ["n", "epsilon", "seed", "method", "ratio", "coef_norm_ratio", "fit_time", "warned"]
METHODS = ["auto", "clipped_gd", "localized", "known_lipschitz", "one_pass_glm", "localized_subgradient",
           "accelerated", "averaged_sgd", "proximal_sgd"]
EPSILONS = [0.5, 1.0, 2.0]
SIZES = [2000, 20000, 100000]
LARGE = 100000


def run_cell(cell):
    n, seed, epsilons, methods = cell
    data = contaminated(n, seed)
    delta = 1e-6 if n >= LARGE else 1e-5
    rows = []
    for eps in epsilons:
        for method in methods:
            # Fits run in worker processes: each gets a ledger of its own, created where it
            # runs (a fit without one would refuse rather than charge a ledger nobody sees).
            params = dict(epsilon=eps, delta=delta, random_state=10_000 * seed + 7,
                          accountant=BudgetAccountant())
            if method != "auto":
                params["algorithm"] = method
            model = DPHeavyTailRegressor(**params)
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                t0 = time.perf_counter()
                model.fit(data["X"], data["y"])
                elapsed = time.perf_counter() - t0
            warned = ";".join(sorted({type(w.message).__name__ for w in caught
                                      if "predicted to be poor" in str(w.message)}))
            mse = float(np.mean((data["y_test"] - model.predict(data["X_test"])) ** 2))
            coef_norm = float(np.linalg.norm(model.coef_) / np.linalg.norm(data["coef"]))
            rows.append(dict(n=n, epsilon=eps, seed=seed, method=method, ratio=mse / data["bayes"],
                             coef_norm_ratio=coef_norm, fit_time=elapsed, warned=warned))
    return rows


def summary(path, out):
    import pandas as pd

    df = pd.read_csv(path)
    epsilons = sorted(df.epsilon.unique())
    lines = ["# Practical schedules on the contaminated task (issue 12)", "",
             "Test MSE / Bayes error, median [IQR] over seeds; d = 20, Student-t(2.5) noise, 1% leverage "
             "outliers; delta = 1e-5 (1e-6 at n = 100000). W: the fit warns (LowBudgetWarning) that the "
             "algorithm is predicted to be poor here.", ""]
    for n in sorted(df.n.unique()):
        sub = df[df.n == n]
        seeds = sub.seed.nunique()
        lines += [f"## n = {n} ({seeds} seeds)", "",
                  "| method | " + " | ".join(f"eps={e:g}" for e in epsilons) + " | median fit time (s) |",
                  "|---|" + "---|" * (len(epsilons) + 1)]
        for method in METHODS:
            cells = []
            for e in epsilons:
                cell = sub[(sub.method == method) & (sub.epsilon == e)]
                if cell.empty:
                    cells.append("")
                    continue
                q1, q2, q3 = np.percentile(cell.ratio, [25, 50, 75])
                mark = " W" if cell.warned.fillna("").astype(str).str.len().max() > 0 else ""
                cells.append(f"{q2:.3f} [{q1:.3f}, {q3:.3f}]{mark}")
            t = sub[sub.method == method].fit_time
            if not t.empty:
                lines.append(f"| {method} | " + " | ".join(cells) + f" | {t.median():.2f} |")
        lines.append("")
    Path(out).write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, default=10, help="seeds per cell at n < 100000")
    parser.add_argument("--large-seeds", type=int, default=10, help="seeds per cell at n = 100000")
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)))
    parser.add_argument("--epsilons", default=",".join(map(str, EPSILONS)))
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--out", default=str(RESULTS / "schedules_raw.csv"))
    parser.add_argument("--summary", action="store_true")
    parser.add_argument("--methods", default=",".join(METHODS))
    args = parser.parse_args()
    if args.summary:
        summary(args.out, RESULTS / "schedules.md")
        return
    methods = args.methods.split(",")
    epsilons = [float(e) for e in args.epsilons.split(",")]
    cells = []
    for n in (int(s) for s in args.sizes.split(",")):
        seeds = args.large_seeds if n >= LARGE else args.seeds
        cells += [(n, s, epsilons, methods) for s in range(seeds)]
    out = Path(args.out)
    done = finished(out, lambda r: (int(r["n"]), int(r["seed"])))
    todo = [c for c in cells if (c[0], c[1]) not in done]
    append_results(out, FIELDS, run_cell, todo, args.workers, lambda r: f"n={r['n']} seed={r['seed']}")


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()
