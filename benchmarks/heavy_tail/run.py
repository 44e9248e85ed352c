"""Heavy-tail benchmark of DPHeavyTailRegressor (the methods of papers 000 and 001).

Tasks (``tasks.py``): the contaminated task (d = 20, Student-t(2.5) noise, 1% leverage outliers) with
n_train in {2000, 20000, 100000}, y as generated or multiplied by 1000, and
scikit-learn's diabetes data. Privacy budgets epsilon in {0.1, 0.5, 1, 2, 5}
(delta = 1e-5, or 1e-6 for n = 100000), 20 seeds. Methods: the default
estimator ("auto"), every algorithm of DPHeavyTailRegressor, the two private
baselines of ``baselines.py``, and scikit-learn's LinearRegression and
HuberRegressor (non-private).

Usage::

    python benchmarks/heavy_tail/run.py            # the full grid (several hours on 2 cores)
    python benchmarks/heavy_tail/run.py --seeds 10 --large-seeds 3 \
        --large-methods auto,clipped_gd,baseline_dpgd,baseline_ssp     # every algorithm (~1.5 hours)
    python benchmarks/heavy_tail/run.py --seeds 10 --large-seeds 3 --diabetes-seeds 10 \
        --methods auto,baseline_dpgd,baseline_ssp --large-methods auto,baseline_dpgd,baseline_ssp
                                                   # the default and the baselines (the committed results;
                                                   # every algorithm: schedules.py)
    python benchmarks/heavy_tail/run.py --quick    # 3 seeds, n <= 20000
    python benchmarks/heavy_tail/summarize.py      # tables and plots from results/raw.csv

Results are appended to ``results/raw.csv`` (one row per fit); finished rows
are skipped when the run is resumed.
"""

import argparse
import os
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from sklearn.linear_model import HuberRegressor, LinearRegression

sys.path.insert(0, str(Path(__file__).parent))
from baselines import SSP, TextbookDPGD  # noqa: E402
from _runner import append_results, finished  # noqa: E402
from tasks import contaminated, diabetes  # noqa: E402

from skdp import BudgetAccountant, DPHeavyTailRegressor  # noqa: E402

RESULTS = Path(__file__).parent / "results"
FIELDS = ["task", "n", "y_scale", "epsilon", "seed", "method", "mse", "bayes", "coef_error", "fit_time",
          "scaling_mode"]
ALGORITHMS = ["clipped_gd", "localized", "known_lipschitz", "one_pass_glm", "localized_subgradient",
              "accelerated", "averaged_sgd", "proximal_sgd"]


def make_private(method, epsilon, delta, seed):
    # Fits run in worker processes: each gets a ledger of its own, created where it runs
    # (a fit without one would refuse rather than charge a ledger nobody sees).
    common = dict(epsilon=epsilon, delta=delta, random_state=seed, accountant=BudgetAccountant())
    if method == "auto":
        return DPHeavyTailRegressor(**common)
    if method == "baseline_dpgd":
        return DPHeavyTailRegressor(algorithm=TextbookDPGD(), **common)
    if method == "baseline_ssp":
        return DPHeavyTailRegressor(algorithm=SSP(), **common)
    return DPHeavyTailRegressor(algorithm=method, **common)


def load(task, n, y_scale, seed):
    if task == "diabetes":
        return diabetes(seed)
    return contaminated(n, seed, y_scale=y_scale)


def run_cell(cell):
    task, n, y_scale, seed, epsilons, methods = cell
    data = load(task, n, y_scale, seed)
    rows = []

    def record(method, eps, model, elapsed):
        pred = model.predict(data["X_test"])
        mse = float(np.mean((data["y_test"] - pred) ** 2))
        coef_err = (float(np.linalg.norm(model.coef_ - data["coef"])) if data["coef"] is not None else "")
        mode = getattr(model, "scaling_", {}).get("mode", "")
        rows.append(dict(task=task, n=n, y_scale=y_scale, epsilon=eps, seed=seed, method=method, mse=mse,
                         bayes=data["bayes"] if data["bayes"] is not None else "", coef_error=coef_err,
                         fit_time=elapsed, scaling_mode=mode))

    for name, cls in [("sklearn_ols", LinearRegression), ("sklearn_huber", HuberRegressor)]:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            t0 = time.perf_counter()
            model = cls().fit(data["X"], data["y"])
            record(name, "", model, time.perf_counter() - t0)
    delta = 1e-6 if n and n >= 100000 else 1e-5
    for eps in epsilons:
        for method in methods:
            t0 = time.perf_counter()
            try:
                model = make_private(method, eps, delta, 10_000 * seed + 7).fit(data["X"], data["y"])
            except ValueError as err:  # a solver refusing (documented), recorded as missing
                rows.append(dict(task=task, n=n, y_scale=y_scale, epsilon=eps, seed=seed, method=method,
                                 mse="", bayes="", coef_error="", fit_time="", scaling_mode=f"refused: {err}"[:80]))
                continue
            record(method, eps, model, time.perf_counter() - t0)
    return rows


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--out", default=str(RESULTS / "raw.csv"))
    parser.add_argument("--seeds", type=int, default=20, help="seeds per contaminated cell, n <= 20000")
    parser.add_argument("--large-seeds", type=int, default=20, help="seeds per cell at n = 100000")
    parser.add_argument("--only-large", action="store_true", help="run only the n = 100000 cells")
    parser.add_argument("--diabetes-seeds", type=int, default=20)
    parser.add_argument("--methods", default="all",
                        help="comma-separated methods at n <= 20000 and on diabetes (default: all)")
    parser.add_argument("--large-methods", default="all",
                        help="comma-separated methods at n = 100000 (the one-pass and localized solvers "
                             "take minutes per fit there)")
    args = parser.parse_args()
    seeds = range(3) if args.quick else range(args.seeds)
    large_seeds = range(0) if args.quick else range(args.large_seeds)
    sizes = [2000, 20000]
    epsilons = [0.1, 0.5, 1.0, 2.0, 5.0]
    all_methods = ["auto"] + ALGORITHMS + ["baseline_dpgd", "baseline_ssp"]
    methods = all_methods if args.methods == "all" else args.methods.split(",")
    cells = [("diabetes", 0, 1.0, s, epsilons, methods) for s in range(3 if args.quick else args.diabetes_seeds)]
    for n in sizes:
        for y_scale in (1.0, 1000.0):
            cells += [("contaminated", n, y_scale, s, epsilons, methods) for s in seeds]
    if args.only_large:
        cells = []
    large_methods = all_methods if args.large_methods == "all" else args.large_methods.split(",")
    for y_scale in (1.0, 1000.0):
        cells += [("contaminated", 100000, y_scale, s, epsilons, large_methods) for s in large_seeds]
    out = Path(args.out)
    done = finished(out, lambda r: (r["task"], int(r["n"]), float(r["y_scale"]), int(r["seed"])))
    todo = [c for c in cells if (c[0], c[1], c[2], c[3]) not in done]
    # The n = 100000 cells (minutes each: the one-pass solvers step through the rows
    # in Python) come last and seed by seed, so an interrupted run still has
    # complete seeds for every cell; a resumed run continues where it stopped.
    todo.sort(key=lambda c: (c[1] >= 100000, c[3] if c[1] >= 100000 else 0, -c[1]))
    append_results(out, FIELDS, run_cell, todo, args.workers,
                   lambda r: f"{r['task']} n={r['n']} y_scale={r['y_scale']} seed={r['seed']}")


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()
