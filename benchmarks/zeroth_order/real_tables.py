"""The default DPZerothOrderRegressor on the awkward table shapes of ``tests/real_tables.py``.

For every table (one-hot blocks, binary flags, counts, integer codes, skewed amounts, offsets,
mixed scales, constant columns, a sparse one-hot matrix, ``ColumnTransformer`` pipelines): the test
absolute loss of the default relative to ``QuantileRegressor(alpha=0, solver="highs")`` on the same
features, at epsilon = inf (n = 3000) and at epsilon = 1 (n = 10000), and at epsilon = 1 the same
ratio for ``DPHeavyTailRegressor(loss="absolute")`` (the first-order private method on the same loss).
Rows go to ``results/real_tables_raw.csv`` (resumable); BLAS on one thread.

Usage::

    nice -n 10 python benchmarks/zeroth_order/real_tables.py --seeds 1
"""

import argparse
import math
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from sklearn.linear_model import QuantileRegressor
from threadpoolctl import threadpool_limits

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE.parents[1] / "tests"))
sys.path.append(str(HERE.parent / "heavy_tail"))  # the shared resumable runner
import real_tables as rt  # noqa: E402
from _runner import append_results, finished  # noqa: E402

from skdp import BudgetAccountant, DPHeavyTailRegressor, DPZerothOrderRegressor  # noqa: E402

OUT = HERE / "results" / "real_tables_raw.csv"
FIELDS = ["table", "n", "seed", "epsilon", "method", "test_loss", "fit_time"]
CELLS = [(math.inf, 3000), (1.0, 10_000)]


def run_cell(cell):
    name, seed, eps, n = cell
    data = rt.TABLES[name](n, seed)
    methods = {"QuantileRegressor": lambda: QuantileRegressor(alpha=0.0, solver="highs"),
               "default": lambda: DPZerothOrderRegressor(epsilon=eps, random_state=seed,
                                                         accountant=BudgetAccountant())}
    if math.isfinite(eps):
        methods["heavy_tail"] = lambda: DPHeavyTailRegressor(epsilon=eps, loss="absolute", random_state=seed,
                                                             accountant=BudgetAccountant())
    rows = []
    with threadpool_limits(limits=1), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for method, make in methods.items():
            start = time.perf_counter()
            _, prediction = rt.fit_predict(data, make())
            elapsed = time.perf_counter() - start
            loss = float(np.mean(np.abs(data["y_test"] - prediction)))
            rows.append(dict(table=name, n=n, seed=seed, epsilon=eps, method=method, test_loss=loss,
                             fit_time=elapsed))
    return rows


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, default=1)
    args = parser.parse_args()
    done = finished(OUT, lambda r: (r["table"], int(r["seed"]), float(r["epsilon"])))
    todo = [(name, seed, eps, n) for eps, n in CELLS for seed in range(args.seeds) for name in rt.TABLES
            if (name, seed, eps) not in done]
    append_results(OUT, FIELDS, run_cell, todo, workers=1,
                   describe=lambda r: f"{r['table']} epsilon={r['epsilon']} n={r['n']}")


if __name__ == "__main__":
    main()
