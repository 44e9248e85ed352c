"""Cost of DPZerothOrderRegressor: function evaluations and fit time against n and the number of parameters.

* ``n``: the default (linear, absolute loss, epsilon = 1) and ``DPHeavyTailRegressor(loss="absolute")``
  on the median-regression task (d = 10) at n in {2000, 20000, 100000};
* ``params``: at n = 20000, the linear model with d in {5, 20, 50, 100} features and the network
  (``model="mlp"``, 10 features) with 4 to 32 hidden units;
* the n = 100000, d = 10 comparison of the issue: ``--repeats`` fits each of the default and of
  ``DPHeavyTailRegressor(loss="absolute")``, one fit at a time; ``QuantileRegressor(solver="highs")``'s
  times are those of ``reference.py``.

BLAS runs on one thread; the machine is shared, so times are medians of repeats and ranges are shown.
Rows go to ``results/fit_time_raw.csv`` (resumable).

Usage::

    nice -n 10 python benchmarks/zeroth_order/fit_time.py --repeats 5
"""

import argparse
import sys
import time
import warnings
from pathlib import Path

from threadpoolctl import threadpool_limits

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
sys.path.append(str(HERE.parent / "heavy_tail"))  # the shared resumable runner
from _runner import append_results, finished  # noqa: E402
from tasks import cauchy_lad, friedman  # noqa: E402

from skdp import BudgetAccountant, DPHeavyTailRegressor, DPZerothOrderRegressor  # noqa: E402

OUT = HERE / "results" / "fit_time_raw.csv"
FIELDS = ["what", "method", "n", "size", "n_params", "repeat", "fit_time", "n_function_evals"]


LABELS = {"heavy_tail": "DPHeavyTailRegressor(absolute)"}


def run_cell(cell):
    what, method, n, size, repeat = cell
    if method == "mlp":
        data = friedman(n, repeat)
        estimator = DPZerothOrderRegressor(epsilon=1.0, model="mlp", hidden_units=size, random_state=repeat,
                                           accountant=BudgetAccountant())
    else:
        data = cauchy_lad(n, repeat, d=size)
        if method == "default":
            estimator = DPZerothOrderRegressor(epsilon=1.0, random_state=repeat, accountant=BudgetAccountant())
        else:
            estimator = DPHeavyTailRegressor(epsilon=1.0, loss="absolute", random_state=repeat,
                                             accountant=BudgetAccountant())
    with threadpool_limits(limits=1), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        start = time.perf_counter()
        estimator.fit(data["X"], data["y"])
        elapsed = time.perf_counter() - start
    n_params = estimator.params_.shape[0] if hasattr(estimator, "params_") else size + 1
    return [dict(what=what, method=LABELS.get(method, method), n=n, size=size,
                 n_params=n_params, repeat=repeat, fit_time=elapsed,
                 n_function_evals=getattr(estimator, "n_function_evals_", ""))]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    # The two estimators alternate, so that a change in the machine's load hits both alike.
    cells = [("n", method, n, 10, r) for n in (2000, 20000) for r in range(3) for method in ("default", "heavy_tail")]
    cells += [("n", method, 100000, 10, r) for r in range(args.repeats) for method in ("default", "heavy_tail")]
    cells += [("params", "default", 20000, d, 0) for d in (5, 20, 50, 100)]
    cells += [("params", "mlp", 20000, h, 0) for h in (4, 8, 16, 32)]
    done = finished(OUT, lambda r: (r["what"], r["method"], int(r["n"]), int(r["size"]), int(r["repeat"])))
    todo = [c for c in cells if (c[0], LABELS.get(c[1], c[1]), c[2], c[3], c[4]) not in done]
    append_results(OUT, FIELDS, run_cell, todo, workers=1,
                   describe=lambda r: f"{r['what']} {r['method']} n={r['n']} p={r['n_params']}")


if __name__ == "__main__":
    main()
