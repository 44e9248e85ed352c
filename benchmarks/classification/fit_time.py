"""Fit time of DPInterpolatingClassifier's default against LogisticRegression() at n = 100000, d = 50.

The table is raw (columns with log-normal scales and offsets); both models see the same data. Each
fit is timed three times and the median is reported, with the share of the private fit spent in
standardisation (the private column statistics and second moments) and in the solver.

Usage: python benchmarks/classification/fit_time.py [--threads 1]
``--threads`` sets the BLAS threads of both (OpenBLAS slows down by an order of magnitude when its
threads compete with another busy process on a two-core machine).
"""

import argparse
import os
import sys

parser = argparse.ArgumentParser()
parser.add_argument("--threads", type=int, default=None)
args = parser.parse_args()
if args.threads:
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(args.threads)

import time  # noqa: E402
import warnings  # noqa: E402

import numpy as np  # noqa: E402
from sklearn.linear_model import LogisticRegression  # noqa: E402

from skdp import BudgetAccountant, DPInterpolatingClassifier  # noqa: E402
from skdp.linear_model import _standardise  # noqa: E402
from skdp.solvers.interpolation import clipped_gd  # noqa: E402


def table(n=100_000, d=50, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * rng.lognormal(0.0, 1.0, size=d) + rng.normal(0.0, 3.0, size=d)
    w = rng.normal(size=d)
    z = (X - X.mean(0)) / X.std(0) @ w / np.linalg.norm(w)
    y = (z + 0.3 * rng.normal(size=n) > 0).astype(int)
    return X, y


def timed(make, X, y, repeats=3):
    seconds, model = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        model = make().fit(X, y)
        seconds.append(time.perf_counter() - start)
    return float(np.median(seconds)), model


def main():
    X, y = table()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # lbfgs stops at max_iter=100 on these raw columns
        lr_seconds, lr = timed(LogisticRegression, X, y)
    parts = {"standardise": 0.0, "solver": 0.0}

    def clock(name, fn):
        def wrapper(*a, **k):
            start = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                parts[name] += time.perf_counter() - start
        return wrapper

    _standardise.PrivateStandardiser.fit = clock("standardise", _standardise.PrivateStandardiser.fit)
    clipped_gd.ClippedGD.run = clock("solver", clipped_gd.ClippedGD.run)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        dp_seconds, dp = timed(lambda: DPInterpolatingClassifier(epsilon=1.0, classes=[0, 1],
                                                                  accountant=BudgetAccountant()), X, y)
    print(f"n = {X.shape[0]}, d = {X.shape[1]}, BLAS threads: {os.environ.get('OPENBLAS_NUM_THREADS', 'default')}")
    print(f"LogisticRegression()                 {lr_seconds:6.2f} s   train accuracy {lr.score(X, y):.3f}   "
          f"(lbfgs iterations {int(lr.n_iter_[0])} of {lr.max_iter})")
    print(f"DPInterpolatingClassifier(epsilon=1) {dp_seconds:6.2f} s   train accuracy {dp.score(X, y):.3f}   "
          f"(ratio {dp_seconds / lr_seconds:.2f}; per fit: standardisation {parts['standardise'] / 3:.2f} s, "
          f"solver {parts['solver'] / 3:.2f} s; scaling {dp.scaling_['mode']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
