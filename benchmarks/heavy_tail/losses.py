"""Non-smooth losses on the contaminated task: which algorithm "auto" should use.

The contaminated task of ``tasks.py`` (d = 20, Student-t(2.5) noise, 1% of the
training rows with features x100), n_train in {2000, 20000}, fitted with the
absolute loss and the 0.8-quantile loss by every algorithm that accepts a
non-smooth loss. Metric: mean test pinball loss divided by that of the true
conditional quantile (1 is the Bayes risk). scikit-learn's QuantileRegressor
(non-private, HiGHS) is the reference.

Usage::

    python benchmarks/heavy_tail/losses.py --seeds 5    # results/losses_raw.csv
    python benchmarks/heavy_tail/losses.py --summarize  # results/losses.md
"""

import argparse
import csv
import os
import sys
import time
import warnings
from collections import defaultdict
from pathlib import Path

import numpy as np
from scipy import stats
from sklearn.linear_model import QuantileRegressor

sys.path.insert(0, str(Path(__file__).parent))
from _runner import append_results, finished  # noqa: E402
from tasks import contaminated  # noqa: E402

from skdp import BudgetAccountant, DPHeavyTailRegressor  # noqa: E402

RESULTS = Path(__file__).parent / "results"
FIELDS = ["n", "quantile", "epsilon", "seed", "method", "risk", "bayes_risk", "fit_time"]
METHODS = ["auto", "clipped_gd", "localized", "known_lipschitz", "localized_subgradient"]
EPSILONS = [0.5, 1.0, 2.0]
QUANTILES = [0.5, 0.8]


def pinball(residual, tau):
    return float(np.mean(np.maximum(tau * residual, (tau - 1.0) * residual)))


def run_cell(cell):
    n, seed, methods = cell
    data = contaminated(n, seed)
    rows = []
    for tau in QUANTILES:
        shift = stats.t(2.5).ppf(tau)  # the true conditional quantile is X w + shift
        bayes = pinball(data["y_test"] - data["X_test"] @ data["coef"] - shift, tau)
        loss = dict(loss="absolute") if tau == 0.5 else dict(loss="quantile", quantile=tau)

        def record(method, eps, model, elapsed):
            risk = pinball(data["y_test"] - model.predict(data["X_test"]), tau)
            rows.append(dict(n=n, quantile=tau, epsilon=eps, seed=seed, method=method, risk=risk,
                             bayes_risk=bayes, fit_time=elapsed))

        if n <= 2000 and set(methods) == set(METHODS):  # HiGHS takes minutes at n = 20000
            t0 = time.perf_counter()
            ref = QuantileRegressor(quantile=tau, alpha=0.0, solver="highs").fit(data["X"], data["y"])
            record("sklearn_quantile", "", ref, time.perf_counter() - t0)
        for eps in EPSILONS:
            for method in methods:
                # Each fit gets a ledger of its own (fits run in worker processes).
                kwargs = dict(loss, epsilon=eps, random_state=10_000 * seed + 7, accountant=BudgetAccountant())
                if method != "auto":
                    kwargs["algorithm"] = method
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    t0 = time.perf_counter()
                    model = DPHeavyTailRegressor(**kwargs).fit(data["X"], data["y"])
                record(method, eps, model, time.perf_counter() - t0)
    return rows


def run(args):
    out = RESULTS / "losses_raw.csv"
    methods = METHODS if args.methods == "all" else args.methods.split(",")
    done = finished(out, lambda r: (int(r["n"]), int(r["seed"]), r["method"]))
    todo = [(n, s, methods) for s in range(args.seeds) for n in (2000, 20000) if (n, s, methods[-1]) not in done]
    append_results(out, FIELDS, run_cell, todo, args.workers, lambda r: f"n={r['n']} seed={r['seed']}")


def summarize():
    last = {}  # a rerun of some methods replaces their earlier rows
    with (RESULTS / "losses_raw.csv").open() as f:
        for r in csv.DictReader(f):
            last[(r["n"], r["quantile"], r["epsilon"], r["method"], r["seed"])] = r
    groups = defaultdict(list)
    for r in last.values():
        groups[(int(r["n"]), float(r["quantile"]), r["epsilon"], r["method"])].append(r)
    seeds = len({r["seed"] for rows in groups.values() for r in rows})
    lines = ["# Non-smooth losses on the contaminated task (d = 20)", "",
             f"Test pinball loss / Bayes pinball loss, median [IQR] over {seeds} seeds; fit time in seconds.", ""]
    for n in sorted({k[0] for k in groups}):
        for tau in QUANTILES:
            name = "absolute loss" if tau == 0.5 else f"quantile loss, level {tau:g}"
            lines += [f"## n = {n}, {name}", "", "| method | " + " | ".join(f"epsilon = {e:g}" for e in EPSILONS)
                      + " | fit time |", "|---" * (len(EPSILONS) + 2) + "|"]
            ref = groups.get((n, tau, "", "sklearn_quantile"))
            if ref:
                v = np.median([float(r["risk"]) / float(r["bayes_risk"]) for r in ref])
                lines.append(f"| sklearn QuantileRegressor (non-private) | {v:.3f} |" + " |" * len(EPSILONS))
            for m in METHODS:
                cells, times = [], []
                for e in EPSILONS:
                    rows = groups.get((n, tau, str(e), m), [])
                    v = np.array([float(r["risk"]) / float(r["bayes_risk"]) for r in rows])
                    times += [float(r["fit_time"]) for r in rows]
                    q1, med, q3 = np.quantile(v, [0.25, 0.5, 0.75]) if v.size else (np.nan,) * 3
                    cells.append(f"{med:.3f} [{q1:.3f}, {q3:.3f}]")
                lines.append(f"| {m} | " + " | ".join(cells) + f" | {np.median(times):.2f} |")
            lines.append("")
    text = "\n".join(lines)
    (RESULTS / "losses.md").write_text(text)
    print(text)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--summarize", action="store_true")
    parser.add_argument("--methods", default="all", help="comma-separated subset (reruns append; the summary "
                        "keeps the last row of each fit)")
    args = parser.parse_args()
    if args.summarize:
        summarize()
    else:
        run(args)


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()
