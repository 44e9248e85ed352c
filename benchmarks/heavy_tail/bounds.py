"""Declared bounds on the real tables: DPHeavyTailRegressor with and without ``bounds=`` (issue 26).

Every table of ``tests/real_tables.py`` at n in {10000, 20000}, epsilon = 1 (delta = 1e-5):
the default ``DPHeavyTailRegressor(epsilon=1)`` (``none``) and the same with the bounds a user
would declare (``declared``: ``real_tables.user_bounds``: the categories as one-hot blocks and
round public ranges of the numeric columns, not the data's minima and maxima; the ``ct_*``
tables through ``bounds_for_column_transformer``), against ``Ridge(alpha=1)`` on the same
features. Also recorded: the number of private quantiles each fit released (a public number), which
shows what the bounds saved.

One process, cells in order; rows appended to ``results/bounds_raw.csv`` (resumable).

Usage::

    nice -n 10 python benchmarks/heavy_tail/bounds.py --seeds 3 [--tables onehot200,sparse_onehot]
    python benchmarks/heavy_tail/bounds.py --summarize          # results/bounds.md, docs/bounds_results.inc
"""

import argparse
import csv
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from sklearn.linear_model import Ridge

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "tests"))
import real_tables  # noqa: E402

from skdp import BudgetAccountant, DPHeavyTailRegressor  # noqa: E402
from skdp.accounting import ExponentialMechanismRelease  # noqa: E402

RESULTS = HERE / "results"
OUT = RESULTS / "bounds_raw.csv"
DOCS = HERE.parents[1] / "docs" / "bounds_results.inc"
FIELDS = ["table", "n", "seed", "method", "r2", "mse", "quantiles", "eps_spent", "fit_time", "error"]
SIZES = [10000, 20000]
EPSILON, DELTA = 1.0, 1e-5


def _fit(table, name, method, seed):
    data = table
    if method == "ridge":
        estimator = Ridge(alpha=1.0)
    else:
        bounds = None
        if method == "declared":
            bounds = real_tables.user_bounds(name, data)
            if callable(bounds):  # a ColumnTransformer table: fit the transformer, then map the bounds
                ct = data["wrap"](Ridge()).steps[0][1].fit(data["X"])
                bounds = bounds(ct)
        estimator = DPHeavyTailRegressor(epsilon=EPSILON, delta=DELTA, bounds=bounds, random_state=10_000 * seed + 7,
                                         accountant=BudgetAccountant())
    t0 = time.perf_counter()
    model, pred = real_tables.fit_predict(data, estimator)
    row = dict(fit_time=time.perf_counter() - t0, r2=real_tables.holdout_r2(data, pred),
               mse=real_tables.holdout_mse(data, pred))
    if method != "ridge":
        dp = model.steps[-1][1] if hasattr(model, "steps") else model
        row.update(eps_spent=dp.privacy_spent_.epsilon, quantiles=dp.privacy_event_.releases(ExponentialMechanismRelease))
    return row


def run(args):
    tables = args.tables.split(",") if args.tables else list(real_tables.TABLES)
    sizes = [int(s) for s in args.sizes.split(",")]
    done = set()
    if OUT.exists():
        with OUT.open() as f:
            done = {(r["table"], int(r["n"]), int(r["seed"]), r["method"]) for r in csv.DictReader(f)}
    RESULTS.mkdir(exist_ok=True)
    new = not OUT.exists()
    with OUT.open("a", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=FIELDS)
        if new:
            writer.writeheader()
        for seed in range(args.seeds):
            for name in tables:
                for n in sizes:
                    data = None
                    for method in ("ridge", "none", "declared"):
                        if (name, n, seed, method) in done:
                            continue
                        data = data or real_tables.TABLES[name](n, seed)
                        row = dict(table=name, n=n, seed=seed, method=method, error="")
                        with warnings.catch_warnings():
                            warnings.simplefilter("ignore")
                            try:
                                row.update(_fit(data, name, method, seed))
                            except Exception as exc:  # recorded: a refusal is a result too
                                row["error"] = f"{type(exc).__name__}: {exc}"[:160].replace("\n", " ")
                        writer.writerow(row)
                        f.flush()
                        print(name, n, seed, method, row.get("r2"), row.get("quantiles", ""), row["error"],
                              flush=True)


def summarize(args):
    import pandas as pd

    frame = pd.read_csv(OUT)
    ridge = frame[frame.method == "ridge"].set_index(["table", "n", "seed"])["r2"]
    lines = ["# Declared bounds on the real tables (DPHeavyTailRegressor, epsilon = 1)", "",
             "Produced by `benchmarks/heavy_tail/bounds.py --summarize`. Median (min) over seeds of the test R^2 "
             "over Ridge(alpha=1)'s; `gap closed`: the share of the default's gap to Ridge that declared bounds "
             "close, (ratio_declared - ratio_none) / (1 - ratio_none), of the medians (`-` where the default is within 1% of Ridge or above it); `quantiles`: private "
             "quantiles released by the fit (median); delta = 1e-5; 10,000 test rows.", "",
             "| table | n | seeds | R2/Ridge, none | R2/Ridge, declared | gap closed | quantiles none -> declared |",
             "|---|---|---|---|---|---|---|"]
    for (table, n), cell in frame[frame.method != "ridge"].groupby(["table", "n"], sort=False):
        ratios = {}
        quantiles = {}
        for method in ("none", "declared"):
            part = cell[cell.method == method].set_index(["table", "n", "seed"])
            ratios[method] = (part["r2"] / ridge.reindex(part.index)).dropna()
            quantiles[method] = part["quantiles"].median()
        if ratios["none"].empty or ratios["declared"].empty:
            continue
        a, b = ratios["none"].median(), ratios["declared"].median()
        closed = (b - a) / (1.0 - a) if a < 0.99 else float("nan")  # no gap to close: "-"
        lines.append(f"| {table} | {n} | {len(ratios['declared'])} | {a:.3f} ({ratios['none'].min():.3f}) | "
                     f"{b:.3f} ({ratios['declared'].min():.3f}) | {'-' if closed != closed else f'{closed:+.2f}'} | "
                     f"{quantiles['none']:.0f} -> {quantiles['declared']:.0f} |")
    (RESULTS / "bounds.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    # The documentation's excerpt: this table and the classifier's (benchmarks/classification/bounds.py).
    classifier = HERE.parent / "classification" / "results" / "bounds.md"
    parts = ["The tables below are copied from ``benchmarks/heavy_tail/results/bounds.md`` and",
             "``benchmarks/classification/results/bounds.md`` (epsilon = 1, delta = 1e-5).", ""]
    for path in (RESULTS / "bounds.md", classifier):
        if path.exists():
            text = path.read_text().splitlines()
            parts += [f"**{text[0].lstrip('# ')}**", "", text[2], "", ".. code-block:: text", ""]
            parts += ["    " + line for line in text[4:] if line] + [""]
    DOCS.write_text("\n".join(parts))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--tables", default=None)
    parser.add_argument("--sizes", default="10000,20000")
    parser.add_argument("--summarize", action="store_true")
    args = parser.parse_args()
    summarize(args) if args.summarize else run(args)
