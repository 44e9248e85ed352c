"""Non-private QuantileRegressor(alpha=0, solver="highs") on the median-regression task (resumable).

HiGHS takes minutes per fit at n = 100000 on this machine, and its result does
not depend on skdp: it runs once per (n, seed), one fit at a time, BLAS on one
thread. Rows go to ``results/reference_raw.csv`` (parameter error, test pinball
loss, fit time).

Usage::

    nice -n 10 python benchmarks/zeroth_order/reference.py --seeds 10 --n 2000 20000 100000
"""

import argparse
import sys
import time
import warnings
from pathlib import Path

from sklearn.linear_model import QuantileRegressor
from threadpoolctl import threadpool_limits

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
sys.path.append(str(HERE.parent / "heavy_tail"))  # the shared resumable runner
from _runner import append_results, finished  # noqa: E402
from tasks import cauchy_lad, parameter_error, pinball  # noqa: E402

OUT = HERE / "results" / "reference_raw.csv"
FIELDS = ["task", "n", "seed", "method", "param_error", "test_loss", "fit_time"]


def run_cell(cell):
    n, seed = cell
    data = cauchy_lad(n, seed)
    with threadpool_limits(limits=1), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        start = time.perf_counter()
        model = QuantileRegressor(alpha=0.0, solver="highs").fit(data["X"], data["y"])
        elapsed = time.perf_counter() - start
    return [dict(task="cauchy_lad", n=n, seed=seed, method="QuantileRegressor",
                 param_error=parameter_error(data, model.coef_, model.intercept_),
                 test_loss=pinball(data["y_test"], model.predict(data["X_test"])), fit_time=elapsed)]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--n", type=int, nargs="+", default=[2000, 20000, 100000])
    args = parser.parse_args()
    done = finished(OUT, lambda r: (int(r["n"]), int(r["seed"])))
    todo = [(n, s) for n in args.n for s in range(args.seeds) if (n, s) not in done]
    append_results(OUT, FIELDS, run_cell, todo, workers=1, describe=lambda r: f"n={r['n']} seed={r['seed']}")


if __name__ == "__main__":
    main()
