"""Privacy-utility benchmark of DPZerothOrderRegressor (resumable; rows appended to results/raw.csv).

Problems (``tasks.py``):

1. ``cauchy_lad`` — median regression, d = 10, Cauchy noise: parameter error and test pinball loss of
   the default ("auto"), the practical "variance_reduced", the paper's schedules ("vr_theory",
   "naive_theory") and ``DPHeavyTailRegressor(loss="absolute")`` ("heavy_tail"). The non-private
   ``QuantileRegressor`` is in ``reference.py``.
2. ``contaminated`` — 20% of the labels shifted by +10, d = 10, n = 20000: the Tukey and Cauchy losses
   (and the absolute loss) against ``DPHeavyTailRegressor(loss="huber")`` and the non-private
   ``HuberRegressor``; epsilon = inf rows are the fits without privacy.
3. ``friedman`` — ``make_friedman1``: the "mlp" model against the private linear models
   (``DPZerothOrderRegressor`` linear with the absolute loss, ``DPHeavyTailRegressor`` squared and
   Huber) and the non-private ``MLPRegressor`` and ``LinearRegression``.

Every fit has its own BudgetAccountant and ``random_state = seed``; BLAS runs on one thread, one or
two fits at a time (``--workers``).

Usage::

    nice -n 10 python benchmarks/zeroth_order/run.py --problem cauchy_lad --n 2000 20000 --seeds 10
    nice -n 10 python benchmarks/zeroth_order/run.py --problem cauchy_lad --n 100000 --seeds 10 \\
        --methods auto heavy_tail
    python benchmarks/zeroth_order/summarize.py
"""

import argparse
import math
import sys
import time
import warnings
from pathlib import Path

from sklearn.linear_model import HuberRegressor, LinearRegression
from sklearn.neural_network import MLPRegressor
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from threadpoolctl import threadpool_limits

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
sys.path.append(str(HERE.parent / "heavy_tail"))  # the shared resumable runner
from _runner import append_results, finished  # noqa: E402
from tasks import cauchy_lad, contaminated, friedman, parameter_error, pinball, r2  # noqa: E402

from skdp import BudgetAccountant, DPHeavyTailRegressor, DPZerothOrderRegressor  # noqa: E402

OUT = HERE / "results" / "raw.csv"
FIELDS = ["problem", "n", "seed", "method", "epsilon", "param_error", "test_loss", "r2", "fit_time",
          "n_function_evals", "n_iter"]
EPSILONS = [0.5, 1.0, 2.0, 5.0, math.inf]
TASKS = {"cauchy_lad": cauchy_lad, "contaminated": contaminated, "friedman": friedman}


def _zo(**params):
    return lambda eps, seed: DPZerothOrderRegressor(epsilon=eps, random_state=seed, accountant=BudgetAccountant(),
                                                    **params)


def _ht(**params):
    return lambda eps, seed: DPHeavyTailRegressor(epsilon=eps, random_state=seed, accountant=BudgetAccountant(),
                                                  **params)


PRIVATE = {
    "cauchy_lad": {"auto": _zo(), "variance_reduced": _zo(algorithm="variance_reduced"),
                   "vr_theory": _zo(schedule="theory"), "naive_theory": _zo(schedule="theory", algorithm="naive"),
                   "heavy_tail": _ht(loss="absolute")},
    "contaminated": {"tukey": _zo(loss="tukey"), "cauchy": _zo(loss="cauchy"), "absolute": _zo(),
                     "heavy_tail_huber": _ht(loss="huber")},
    "friedman": {"mlp": _zo(model="mlp"), "linear_absolute": _zo(), "heavy_tail": _ht(),
                 "heavy_tail_huber": _ht(loss="huber")},
}
NON_PRIVATE = {
    "contaminated": {"HuberRegressor": lambda: make_pipeline(StandardScaler(), HuberRegressor(max_iter=1000))},
    "friedman": {"MLPRegressor": lambda: make_pipeline(StandardScaler(), MLPRegressor(random_state=0)),
                 "LinearRegression": LinearRegression},
}


def _row(problem, n, seed, method, eps, data, model, elapsed):
    prediction = model.predict(data["X_test"])
    row = dict(problem=problem, n=n, seed=seed, method=method, epsilon=eps, fit_time=elapsed,
               test_loss=pinball(data["y_test"], prediction), r2=r2(data["y_test"], prediction),
               param_error="", n_function_evals=getattr(model, "n_function_evals_", ""),
               n_iter=getattr(model, "n_iter_", ""))
    if data["coef"] is not None:
        final = model[-1] if hasattr(model, "steps") else model
        coef, intercept = final.coef_, final.intercept_
        if hasattr(model, "steps"):  # undo the StandardScaler of a non-private pipeline
            scaler = model[0]
            coef = coef / scaler.scale_
            intercept = intercept - float(coef @ scaler.mean_)
        row["param_error"] = parameter_error(data, coef, intercept)
    return row


def run_cell(cell):
    problem, n, seed, method, epsilons = cell
    data = TASKS[problem](n, seed)
    rows = []
    with threadpool_limits(limits=1), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for eps in epsilons:
            if method in PRIVATE[problem]:
                model = PRIVATE[problem][method](eps, seed)
            else:
                model = NON_PRIVATE[problem][method]()
            start = time.perf_counter()
            model.fit(data["X"], data["y"])
            rows.append(_row(problem, n, seed, method, eps, data, model, time.perf_counter() - start))
    return rows


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--problem", choices=sorted(TASKS), required=True)
    parser.add_argument("--n", type=int, nargs="+", required=True)
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--methods", nargs="+", default=None)
    parser.add_argument("--epsilons", type=float, nargs="+", default=EPSILONS)
    parser.add_argument("--workers", type=int, default=1)
    args = parser.parse_args()
    methods = args.methods or [*PRIVATE[args.problem], *NON_PRIVATE.get(args.problem, {})]
    done = finished(OUT, lambda r: (r["problem"], int(r["n"]), int(r["seed"]), r["method"], float(r["epsilon"])))
    todo = []
    for n in args.n:
        for seed in range(args.first_seed, args.first_seed + args.seeds):
            for method in methods:
                private = method in PRIVATE[args.problem]
                epsilons = args.epsilons if private else [math.inf]
                left = [e for e in epsilons if (args.problem, n, seed, method, float(e)) not in done]
                if left:
                    todo.append((args.problem, n, seed, method, left))
    append_results(OUT, FIELDS, run_cell, todo, workers=args.workers,
                   describe=lambda r: f"{r['problem']} n={r['n']} seed={r['seed']} {r['method']}")


if __name__ == "__main__":
    main()
