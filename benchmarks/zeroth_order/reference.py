"""Non-private QuantileRegressor(alpha=0) on the median-regression task (resumable).

Its result does not depend on skdp: it runs once per (n, seed, solver), one fit
at a time, BLAS on one thread. Rows go to ``results/reference_raw.csv``
(parameter error, test pinball loss, fit time). ``solver="highs"`` (HiGHS's
dual simplex) is the issue's comparator for time; it took 65-125 s per fit at
n = 20000 here and about half an hour at n = 100000, so at n = 100000 the
parameter error of the reference comes from ``"highs-ipm"`` (interior point),
which returns the same LAD solution (identical parameter errors on every cell
where both ran) ten times faster.

Usage::

    nice -n 10 python benchmarks/zeroth_order/reference.py --seeds 10 --n 2000 20000 100000
    nice -n 10 python benchmarks/zeroth_order/reference.py --seeds 10 --n 100000 --solver highs-ipm
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
    n, seed, solver = cell
    data = cauchy_lad(n, seed)
    with threadpool_limits(limits=1), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        start = time.perf_counter()
        model = QuantileRegressor(alpha=0.0, solver=solver).fit(data["X"], data["y"])
        elapsed = time.perf_counter() - start
    method = "QuantileRegressor" if solver == "highs" else f"QuantileRegressor({solver})"
    return [dict(task="cauchy_lad", n=n, seed=seed, method=method,
                 param_error=parameter_error(data, model.coef_, model.intercept_),
                 test_loss=pinball(data["y_test"], model.predict(data["X_test"])), fit_time=elapsed)]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--n", type=int, nargs="+", default=[2000, 20000, 100000])
    parser.add_argument("--solver", default="highs", choices=["highs", "highs-ipm", "highs-ds"])
    args = parser.parse_args()
    method = "QuantileRegressor" if args.solver == "highs" else f"QuantileRegressor({args.solver})"
    done = finished(OUT, lambda r: (int(r["n"]), int(r["seed"]), r["method"]))
    todo = [(n, s, args.solver) for n in args.n for s in range(args.seeds) if (n, s, method) not in done]
    append_results(OUT, FIELDS, run_cell, todo, workers=1, describe=lambda r: f"n={r['n']} seed={r['seed']}")


if __name__ == "__main__":
    main()
