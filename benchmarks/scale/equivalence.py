"""Fits on Dask collections against the same fits in memory and against dask-ml.

For each size ``n`` (rows of a synthetic table with 20 columns of mixed scales and
heavy-tailed noise, chunks of ``n / 10`` rows) on a ``distributed.LocalCluster`` of
``--workers`` worker processes:

* the default ``DPHeavyTailRegressor(epsilon=1, random_state=0)`` fitted in memory and
  on the dask array (fresh ledgers): the largest relative difference of the
  coefficients, whether the two ledgers hold the same events (the same mechanisms
  in order, their numbers equal to 1e-12: the summation order moves the last digits
  of released scales), and the wall time of each;
* ``dask_ml.linear_model.LinearRegression`` (the non-private distributed baseline,
  default solver) on the same dask arrays: wall time and test MSE; and its time per
  iteration (its gradient-descent solver for 20 iterations, each a gradient pass and
  the passes of a line search);
* the private model's test MSE over dask-ml's (10^5 test rows drawn from the same
  distribution, in memory).

The pass count of a default fit is public (``T + 29`` on tables with fewer than
400,000 values and up to 64 columns, ``T + 37`` beyond; ``docs/dask.rst``): the time
per pass is the Dask fit's time over it.

Needs the ``dask`` extra and ``dask-ml`` (``pip install dask-ml``; a benchmark-only
dependency). Usage::

    nice -n 10 python benchmarks/scale/equivalence.py --sizes 1000000 --workers 2

Writes ``results/equivalence.md`` (and appends raw rows to ``results/equivalence.csv``); with
``--estimator classifier`` the same comparison for ``DPInterpolatingClassifier`` (the target
thresholded at its 85th percentile) against ``dask_ml.linear_model.LogisticRegression``, in
``results/equivalence_classifier.md``; with ``--estimator zeroth_order`` the default
``DPZerothOrderRegressor`` (linear model) in memory and on Dask (no dask-ml counterpart of its
absolute loss: its test error is compared with the training median's), in
``results/equivalence_zeroth_order.md``.
"""

import argparse
import csv
import math
import time
import warnings
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
FIELDS = ["n", "workers", "chunks", "coef_rel_diff", "events_equal", "steps", "passes", "memory_s", "dask_s",
          "per_pass_s", "daskml_s", "daskml_iteration_s", "private_mse", "daskml_mse", "mse_ratio"]
GD_ITERATIONS = 20
D = 20


def table(n, seed):
    """20 columns on scales 1e-2 to 1e3 (fixed offsets), a fixed linear signal, Student-t(3) noise."""
    fixed = np.random.default_rng(12345)
    scales = np.logspace(-2, 3, D)
    offsets, coef = fixed.normal(size=D) * scales, fixed.normal(size=D) / scales
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, D)) * scales + offsets
    y = X @ coef + 2.0 + rng.standard_t(3, size=n)
    return X, y


def scattered(client, X, y, chunk):
    """The rows as dask collections whose chunks already sit on the workers (not embedded in the graph)."""
    import dask.array as da

    starts = range(0, X.shape[0], chunk)
    x_parts = client.scatter([X[s:s + chunk] for s in starts])
    y_parts = client.scatter([y[s:s + chunk] for s in starts])
    Xd = da.concatenate([da.from_delayed(f, shape=(min(chunk, X.shape[0] - s), D), dtype=X.dtype)
                         for f, s in zip(x_parts, starts)])
    yd = da.concatenate([da.from_delayed(f, shape=(min(chunk, X.shape[0] - s),), dtype=y.dtype)
                         for f, s in zip(y_parts, starts)])
    return Xd, yd


def same_events(first, second, rtol=1e-12):
    """Whether two ledgers hold the same events: the same mechanisms in order, numbers equal to ``rtol``."""
    import dataclasses

    def flat(event):
        if dataclasses.is_dataclass(event):
            out = [type(event).__name__]
            for field in dataclasses.fields(event):
                out += flat(getattr(event, field.name))
            return out
        if isinstance(event, (tuple, list)):
            return [item for element in event for item in flat(element)]
        return [event]

    a, b = flat(tuple(first.events)), flat(tuple(second.events))
    return len(a) == len(b) and all(
        x == y if not isinstance(x, float) else math.isclose(x, y, rel_tol=rtol) for x, y in zip(a, b))


def fit_both(make, X, y, Xd, yd):
    """``make(accountant)`` fitted in memory and on the dask arrays, each on a fresh ledger, timed.

    Returns ``(in_memory, memory_ledger, memory_s, on_dask, dask_ledger, dask_s)``.
    """
    from skdp import BudgetAccountant

    out = []
    for rows, labels in ((X, y), (Xd, yd)):
        ledger = BudgetAccountant()
        start = time.perf_counter()
        model = make(ledger).fit(rows, labels)
        out += [model, ledger, time.perf_counter() - start]
    return tuple(out)


def passes(n, steps):
    """The usual pass count of a default fit (docs/dask.rst).

    Above ``2^20 + 2`` rows the default budget's quantiles are drawn from
    counts: a data-dependent number of passes, about 2.4 per quantile on
    average instead of 2 (about 6 more in a fit).
    """
    return steps + (29 if n * D < 400_000 else 37)


def run_size(n, workers, client):
    from dask_ml.linear_model import LinearRegression

    from skdp import DPHeavyTailRegressor

    X, y = table(n, 0)
    X_test, y_test = table(100_000, 1)
    chunk = max(n // 10, 1)
    Xd, yd = scattered(client, X, y, chunk)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        in_memory, memory_ledger, memory_s, on_dask, dask_ledger, dask_s = fit_both(
            lambda ledger: DPHeavyTailRegressor(epsilon=1.0, random_state=0, accountant=ledger), X, y, Xd, yd)

        start = time.perf_counter()
        baseline = LinearRegression().fit(Xd, yd)
        daskml_s = time.perf_counter() - start

        # dask-ml's time per iteration: its gradient-descent solver for a fixed number of iterations
        # (each iteration is a gradient pass plus the passes of its line search).
        start = time.perf_counter()
        LinearRegression(solver="gradient_descent", max_iter=GD_ITERATIONS, tol=0.0).fit(Xd, yd)
        daskml_iteration_s = (time.perf_counter() - start) / GD_ITERATIONS

    scale = np.maximum(np.abs(in_memory.coef_), 1e-300)
    rel = float(np.max(np.abs(on_dask.coef_ - in_memory.coef_) / scale))
    steps = int(on_dask.n_iter_)
    total = passes(n, steps)
    private_mse = float(np.mean((y_test - in_memory.predict(X_test)) ** 2))
    daskml_mse = float(np.mean((y_test - np.asarray(baseline.predict(X_test))) ** 2))
    return {"n": n, "workers": workers, "chunks": math.ceil(n / chunk), "coef_rel_diff": rel,
            "events_equal": same_events(memory_ledger, dask_ledger), "steps": steps,
            "passes": total, "memory_s": memory_s, "dask_s": dask_s, "per_pass_s": dask_s / total,
            "daskml_s": daskml_s, "daskml_iteration_s": daskml_iteration_s, "private_mse": private_mse, "daskml_mse": daskml_mse,
            "mse_ratio": private_mse / daskml_mse}


CLASSIFIER_FIELDS = ["n", "workers", "chunks", "coef_rel_diff", "events_equal", "steps", "passes", "memory_s",
                     "dask_s", "per_pass_s", "daskml_s", "private_log_loss", "daskml_log_loss", "log_loss_ratio",
                     "private_accuracy", "daskml_accuracy"]


def classifier_passes(n, steps):
    """The public pass count of a default two-class fit (docs/dask.rst)."""
    return steps + (21 if n * D < 400_000 else 29)


def run_classifier(n, workers, client):
    """The same comparison for ``DPInterpolatingClassifier`` (labels: the target above its 85th percentile)."""
    from dask_ml.linear_model import LogisticRegression
    from sklearn.metrics import log_loss

    from skdp import DPInterpolatingClassifier

    X, target = table(n, 0)
    X_test, target_test = table(100_000, 1)
    threshold = np.quantile(target, 0.85)
    y, y_test = (target > threshold).astype(np.int64), (target_test > threshold).astype(np.int64)
    chunk = max(n // 10, 1)
    Xd, yd = scattered(client, X, y, chunk)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        in_memory, memory_ledger, memory_s, on_dask, dask_ledger, dask_s = fit_both(
            lambda ledger: DPInterpolatingClassifier(epsilon=1.0, classes=[0, 1], random_state=0, accountant=ledger),
            X, y, Xd, yd)

        start = time.perf_counter()
        baseline = LogisticRegression().fit(Xd, yd)
        daskml_s = time.perf_counter() - start

    scale = np.maximum(np.abs(in_memory.coef_), 1e-300)
    rel = float(np.max(np.abs(on_dask.coef_ - in_memory.coef_) / scale))
    steps = int(np.max(on_dask.n_iter_))
    total = classifier_passes(n, steps)
    private_proba = in_memory.predict_proba(X_test)[:, 1]
    daskml_proba = np.clip(np.asarray(baseline.predict_proba(X_test)), 1e-15, 1 - 1e-15)
    daskml_proba = daskml_proba[:, 1] if daskml_proba.ndim == 2 else daskml_proba
    private_ll, daskml_ll = log_loss(y_test, private_proba), log_loss(y_test, daskml_proba)
    return {"n": n, "workers": workers, "chunks": math.ceil(n / chunk), "coef_rel_diff": rel,
            "events_equal": same_events(memory_ledger, dask_ledger), "steps": steps, "passes": total,
            "memory_s": memory_s, "dask_s": dask_s, "per_pass_s": dask_s / total, "daskml_s": daskml_s,
            "private_log_loss": private_ll, "daskml_log_loss": daskml_ll, "log_loss_ratio": private_ll / daskml_ll,
            "private_accuracy": float(np.mean((private_proba > 0.5) == y_test)),
            "daskml_accuracy": float(np.mean((daskml_proba > 0.5) == y_test))}


ZO_FIELDS = ["n", "workers", "chunks", "coef_rel_diff", "events_equal", "steps", "passes", "measured_passes",
             "memory_s", "dask_s", "memory_per_pass_s", "per_pass_s", "private_mae", "median_mae"]


def zeroth_order_passes(n, steps):
    """The public pass count of a default linear zeroth-order fit, absolute loss (docs/dask.rst)."""
    return steps + (24 if n * D < 400_000 else 32)


def counted_passes():
    """Count the chunked reductions of a fit (every ``ChunkedRows.map``): ``(counter, restore)``."""
    from skdp.linear_model import _rows

    counted = []
    original = _rows.ChunkedRows.map

    def counting(self, *args, **kwargs):
        counted.append(1)
        return original(self, *args, **kwargs)

    _rows.ChunkedRows.map = counting
    return counted, lambda: setattr(_rows.ChunkedRows, "map", original)


def run_zeroth_order(n, workers, client):
    """The default ``DPZerothOrderRegressor`` (linear model, absolute loss) in memory and on Dask.

    Also counts the passes the Dask fit makes (every :meth:`ChunkedRows.map`, plus
    the finite check before the reservation) and reports the private model's test
    mean absolute error against predicting the training median.
    """
    from skdp import DPZerothOrderRegressor

    X, y = table(n, 0)
    X_test, y_test = table(100_000, 1)
    chunk = max(n // 10, 1)
    Xd, yd = scattered(client, X, y, chunk)
    counted, restore = counted_passes()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            in_memory, memory_ledger, memory_s, on_dask, dask_ledger, dask_s = fit_both(
                lambda ledger: DPZerothOrderRegressor(epsilon=1.0, random_state=0, accountant=ledger), X, y, Xd, yd)
    finally:
        restore()
    scale = np.maximum(np.abs(in_memory.coef_), 1e-300)
    rel = float(np.max(np.abs(on_dask.coef_ - in_memory.coef_) / scale))
    steps = int(on_dask.n_iter_)
    total = zeroth_order_passes(n, steps)
    return {"n": n, "workers": workers, "chunks": math.ceil(n / chunk), "coef_rel_diff": rel,
            "events_equal": same_events(memory_ledger, dask_ledger), "steps": steps, "passes": total,
            "measured_passes": len(counted) + 1, "memory_s": memory_s, "dask_s": dask_s,
            "memory_per_pass_s": memory_s / total, "per_pass_s": dask_s / total,
            "private_mae": float(np.mean(np.abs(y_test - in_memory.predict(X_test)))),
            "median_mae": float(np.mean(np.abs(y_test - np.median(y))))}


def zeroth_order_markdown(rows):
    lines = ["# The zeroth-order regressor on Dask against the same fit in memory", "",
             "Default `DPZerothOrderRegressor(epsilon=1, random_state=0)` (linear model, absolute loss, 50",
             "full-batch steps) on the table of `equivalence.py`, chunks of n/10 rows, a `distributed.LocalCluster`",
             "of worker processes on a two-core machine shared with other work. `passes`: the public pass count",
             "(docs/dask.rst), `measured`: the passes the Dask fit made (its reductions and the finite check);",
             "`s / pass`: wall time over the public count. Test MAE on 10^5 fresh rows, against the training",
             "median's. Generated by `equivalence.py --estimator zeroth_order`.", "",
             "| n | max rel. coef diff | events equal | passes (measured) | in memory (s) | Dask (s) "
             "| in memory s / pass | Dask s / pass | test MAE (median's) |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {int(r['n']):,} | {float(r['coef_rel_diff']):.1e} | {r['events_equal']} "
                     f"| {r['passes']} ({r['measured_passes']}) | {float(r['memory_s']):.1f} "
                     f"| {float(r['dask_s']):.1f} | {float(r['memory_per_pass_s']):.3f} "
                     f"| {float(r['per_pass_s']):.2f} | {float(r['private_mae']):.4g} ({float(r['median_mae']):.4g}) |")
    return "\n".join(lines) + "\n"


def classifier_markdown(rows):
    lines = ["# The classifier on Dask against the same fit in memory and against dask-ml", "",
             "Default `DPInterpolatingClassifier(epsilon=1, classes=[0, 1], random_state=0)` on the table of",
             "`equivalence.py` with the target thresholded at its 85th percentile (15% positives), chunks of",
             "n/10 rows, a `distributed.LocalCluster` of worker processes on a two-core machine; `dask-ml`:",
             "`dask_ml.linear_model.LogisticRegression()` (its default penalty) on the same dask arrays.",
             "Generated by `equivalence.py --estimator classifier`.", "",
             "| n | max rel. coef diff | events equal | in memory (s) | Dask (s) | passes | s / pass | dask-ml (s) "
             "| test log loss / dask-ml's | accuracy (dask-ml) |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {int(r['n']):,} | {float(r['coef_rel_diff']):.1e} | {r['events_equal']} "
                     f"| {float(r['memory_s']):.1f} | {float(r['dask_s']):.1f} | {r['passes']} "
                     f"| {float(r['per_pass_s']):.2f} | {float(r['daskml_s']):.1f} "
                     f"| {float(r['log_loss_ratio']):.4f} "
                     f"| {float(r['private_accuracy']):.4f} ({float(r['daskml_accuracy']):.4f}) |")
    return "\n".join(lines) + "\n"


def markdown(rows):
    lines = ["# Fits on Dask against the same fits in memory and against dask-ml", "",
             "Default `DPHeavyTailRegressor(epsilon=1, random_state=0)`, 20 columns on scales 1e-2 to 1e3,",
             "Student-t(3) noise, chunks of n/10 rows, `distributed.LocalCluster` of worker processes on a",
             "two-core machine. `passes`: the public pass count of the fit; `dask-ml`:",
             "`dask_ml.linear_model.LinearRegression()` on the same dask arrays. Generated by `equivalence.py`.",
             "",
             "| n | workers | max rel. coef diff | events equal | in memory (s) | Dask (s) | passes | s / pass "
             "| dask-ml (s) | dask-ml s / iteration | test MSE / dask-ml's |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {int(r['n']):,} | {r['workers']} | {float(r['coef_rel_diff']):.1e} | {r['events_equal']} "
                     f"| {float(r['memory_s']):.1f} | {float(r['dask_s']):.1f} | {r['passes']} "
                     f"| {float(r['per_pass_s']):.2f} | {float(r['daskml_s']):.1f} "
                     f"| {float(r['daskml_iteration_s']):.2f} | {float(r['mse_ratio']):.6f} |")
    return "\n".join(lines) + "\n"


def append_row(raw, fields, row):
    """Append one result row to the CSV ``raw`` (header first when new); return every row it holds."""
    new = not raw.exists()
    with raw.open("a", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        if new:
            writer.writeheader()
        writer.writerow(row)
    with raw.open() as f:
        return list(csv.DictReader(f))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="1000000")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--memory-limit", default="4GiB")
    parser.add_argument("--estimator", choices=tuple(RUNNERS), default="regressor")
    args = parser.parse_args()
    from distributed import Client, LocalCluster

    RESULTS.mkdir(exist_ok=True)
    stem, run, fields, render = RUNNERS[args.estimator]
    raw = RESULTS / f"{stem}.csv"
    with LocalCluster(n_workers=args.workers, threads_per_worker=1, memory_limit=args.memory_limit,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        for n in (int(s) for s in args.sizes.split(",")):
            row = run(n, args.workers, client)
            print(row, flush=True)
            every = append_row(raw, fields, row)
    (RESULTS / f"{stem}.md").write_text(render(every))


# --estimator: (results stem, runner, csv fields, markdown of every row)
RUNNERS = {"regressor": ("equivalence", run_size, FIELDS, markdown),
           "classifier": ("equivalence_classifier", run_classifier, CLASSIFIER_FIELDS, classifier_markdown),
           "zeroth_order": ("equivalence_zeroth_order", run_zeroth_order, ZO_FIELDS, zeroth_order_markdown)}


if __name__ == "__main__":
    main()
