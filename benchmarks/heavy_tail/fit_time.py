"""Fit time of the default DPHeavyTailRegressor against scikit-learn at n = 100000, d = 20.

Runs each fit ``--repeats`` times on the contaminated task (one process, one
fit at a time) and reports the minimum and the median wall time, written to
``results/fit_time.md``.

Usage::

    python benchmarks/heavy_tail/fit_time.py
"""

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from sklearn.linear_model import HuberRegressor, LinearRegression

sys.path.insert(0, str(Path(__file__).parent))
from tasks import contaminated  # noqa: E402

from skdp import DPHeavyTailRegressor  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--n", type=int, default=100000)
    args = parser.parse_args()
    data = contaminated(args.n, 0, y_scale=1000.0)
    makers = {
        "DPHeavyTailRegressor(epsilon=1)": lambda s: DPHeavyTailRegressor(epsilon=1.0, delta=1e-6, random_state=s),
        "HuberRegressor()": lambda s: HuberRegressor(),
        "LinearRegression()": lambda s: LinearRegression(),
    }
    lines = [f"# Fit time at n = {args.n}, d = 20 (seconds, {args.repeats} repeats, one fit at a time)", "",
             "| estimator | min | median |", "|---|---|---|"]
    for name, make in makers.items():
        times = []
        for s in range(args.repeats):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                t0 = time.perf_counter()
                make(s).fit(data["X"], data["y"])
                times.append(time.perf_counter() - t0)
        lines.append(f"| {name} | {min(times):.3f} | {np.median(times):.3f} |")
    text = "\n".join(lines) + "\n"
    (Path(__file__).parent / "results" / "fit_time.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
