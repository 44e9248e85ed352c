"""The tuning benchmark over epsilon and seeds: default, oracle strength, the tuner's "auto", non-private CV.

For every problem of ``default_vs_tuned.py`` (plus the wide table at n = 5000), epsilon in
{0.5, 1, 2, 5} and up to 10 seeds:

* ``default``: the estimator's private default at the cell's epsilon;
* ``oracle``: the best on test rows of the estimator at every strength of the problem's grid, each
  fit at the cell's whole epsilon (a measuring stick, not a procedure; the candidate at the default's
  own strength is the ``default`` fit itself: same data, same ``random_state``, same noise);
* ``auto``: ``DPRegularizationTuner(estimator, epsilon=...)`` with its defaults (``method="auto"``, no
  grid: ``"path"`` on the Lasso form from epsilon * n >= 10000, else the default's one fit from the
  tuner's own noise stream);
* ``cv``: non-private ``RidgeCV`` / ``LassoCV`` / ``LogisticRegressionCV`` (once per seed: it does not
  depend on epsilon).

``select`` and ``split`` (which divert budget from the final fit) are measured at epsilon 1 by
``default_vs_tuned.py``; ``path.py`` has the path's own study. Cells run epsilon 1 first, cheap cells
first, and the raw CSV is appended after every cell, so a stopped run keeps what it measured and
``--summarize`` reports the seeds each cell has. Two runs can share the machine on disjoint cells by
writing ``results/sweep_raw.csv`` and ``results/sweep_raw_2.csv`` (``--raw``; the summary reads both).

Usage::

    nice -n 10 python benchmarks/tuning/sweep.py [--seeds 10] [--epsilons 1 0.5 2 5] [--problems ...]
        [--max-n 5000] [--min-n 20000]
    python benchmarks/tuning/sweep.py --summarize      # results/sweep.md and results/sweep_*.png
"""

import argparse
import csv
import os
import sys
import time
import warnings

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from skdp.model_selection import DPRegularizationTuner  # noqa: E402

from default_vs_tuned import (KIND, better, cv_estimator, data_for, fit_on_own_ledger, grid_of,  # noqa: E402
                              private_estimator, scores)

RAW = os.path.join(HERE, "results", "sweep_raw.csv")
SUMMARY = os.path.join(HERE, "results", "sweep.md")
SAME_STREAM_RAW = os.path.join(HERE, "results", "sweep_same_stream_raw.csv")
SAME_STREAM_SUMMARY = os.path.join(HERE, "results", "sweep_same_stream.md")
FIELDS = ["problem", "n", "epsilon", "seed", "method", "score", "score2", "alpha", "epsilon_spent", "seconds"]
EPSILONS = (1.0, 0.5, 2.0, 5.0)
# Cheap cells first: a run stopped early still covers every problem at the first epsilons.
CELLS = [("diabetes", 331), ("breast_cancer", 427), ("highdim", 2000), ("lasso", 2000), ("toeplitz", 2000),
         ("ct_binary", 2000), ("ct_scale", 2000), ("ct_scale", 5000), ("lasso", 20000), ("toeplitz", 20000),
         ("ct_scale", 20000)]
METHODS = ("default", "oracle", "auto", "cv")


def default_alpha_of(kind, n):
    if kind == "logistic":
        return lambda m: m.alpha if m.alpha is not None else 1.0 / (m.C * n)
    return lambda m: m.alpha


def run_cell(problem, n, epsilon, seed, with_cv, same_stream=False):
    kind = KIND[problem]
    data = data_for(problem, n, seed)
    rs = 1000 * seed + 17
    rows = []

    def private(alpha=None):
        """The private estimator at the cell's epsilon; with ``same_stream``, fitted by the tuner's "default"
        method, so that its noise comes from the stream the tuner's own final fit draws from."""
        estimator = private_estimator(kind, alpha)
        if not same_stream:
            return estimator.set_params(epsilon=epsilon), default_alpha_of(kind, n) if alpha is None else \
                (lambda m: m.alpha)
        return DPRegularizationTuner(estimator, method="default", epsilon=epsilon), lambda m: m.alpha_

    def add(method, estimator, alpha_of):
        model, seconds, spent = fit_on_own_ledger(estimator, data, rs)
        s1, s2 = scores(kind, data, model)
        rows.append({"problem": problem, "n": n, "epsilon": epsilon, "seed": seed, "method": method,
                     "score": s1, "score2": s2, "alpha": alpha_of(model[-1]), "epsilon_spent": round(spent, 9),
                     "seconds": round(seconds, 3)})
        return rows[-1]

    default = add("default", *private())
    best = default
    for alpha in grid_of(kind):
        if alpha == default["alpha"]:  # the default's own fit: same data, random_state and noise
            continue
        row = add("_candidate", *private(alpha))
        rows.pop()
        if better(kind, row["score"], best["score"]):
            best = row
    rows.append(dict(best, method="oracle"))
    add("auto", DPRegularizationTuner(private_estimator(kind), epsilon=epsilon), lambda m: m.alpha_)
    if with_cv:
        add("cv", *cv_estimator(kind, n))
    return rows


def done_cells(raw):
    if not os.path.exists(raw):
        return set()
    with open(raw) as f:
        return {(r["problem"], int(r["n"]), float(r["epsilon"]), int(r["seed"]))
                for r in csv.DictReader(f) if r["method"] == "auto"}


def main(seeds, epsilons, problems, raw, max_n=None, min_n=0, same_stream=False):
    os.makedirs(os.path.dirname(raw), exist_ok=True)
    warnings.simplefilter("ignore")
    done = done_cells(raw)
    cv_done = {(p, n, s) for p, n, _, s in done}
    new_file = not os.path.exists(raw)
    with open(raw, "a", newline="") as f:
        writer = csv.DictWriter(f, FIELDS)
        if new_file:
            writer.writeheader()
        for epsilon in epsilons:
            for seed in range(seeds):
                for problem, n in CELLS:
                    skip = problem not in problems or not min_n <= n <= (max_n or n)
                    if skip or (problem, n, epsilon, seed) in done:
                        continue
                    start = time.perf_counter()
                    rows = run_cell(problem, n, epsilon, seed, with_cv=(problem, n, seed) not in cv_done,
                                    same_stream=same_stream)
                    cv_done.add((problem, n, seed))
                    writer.writerows(rows)
                    f.flush()
                    print(problem, n, epsilon, seed, {r["method"]: round(r["score"], 3) for r in rows},
                          f"{time.perf_counter() - start:.0f}s", flush=True)


def _quartiles(values):
    q = np.quantile(values, [0.25, 0.5, 0.75])
    return f"{q[1]:.3f} [{q[0]:.3f}, {q[2]:.3f}]"


def summarize(paths, summary=SUMMARY, title="", plots=True):
    import pandas as pd

    raw = pd.concat([pd.read_csv(p) for p in paths if os.path.exists(p)], ignore_index=True)
    cv = raw[raw.method == "cv"].groupby(["problem", "n"])["score"].median()
    lines = ["# Tuning over epsilon: default, oracle strength, auto (medians and IQRs over seeds)", "",
             title or ("Generated by `python benchmarks/tuning/sweep.py --summarize` from `results/sweep_raw.csv` "
                       "(and `sweep_raw_2.csv`, a second run on other cells)."),
             "Score: test R^2 (regression), test MSE (`lasso`: lower is better), test ROC AUC "
             "(classification); cells are `median [q25, q75]` over seeds. `gap`: median over seeds of the "
             "oracle's advantage over the default (positive: the oracle is better); `seed noise`: the IQR "
             "of the default's score over seeds; `auto gain`: median over seeds of auto's advantage over the "
             "default; `closed`: auto gain / gap where the oracle gains, starred (`*`) where the gap exceeds the "
             "seed noise; `wins`: seeds where "
             "auto beats the default. `cv`: the non-private CV estimator (median over seeds).", "",
             "| problem | n | epsilon | seeds | default | oracle | auto | cv | gap | seed noise | "
             "auto gain | closed | wins |", "|" + "---|" * 13]
    order = {cell: i for i, cell in enumerate(CELLS)}
    groups = sorted(raw[raw.method != "cv"].groupby(["problem", "n", "epsilon"]),
                    key=lambda item: (order.get(item[0][:2], 99), item[0][2]))
    for (problem, n, epsilon), g in groups:
        sign = -1.0 if KIND[problem] == "lasso" else 1.0
        wide = g.pivot_table(index="seed", columns="method", values="score").dropna()
        if not len(wide):
            continue
        gap = sign * (wide["oracle"] - wide["default"])
        gain = sign * (wide["auto"] - wide["default"])
        qd = wide["default"].quantile([0.25, 0.75]).to_numpy()
        noise = qd[1] - qd[0]
        # The ratio wherever the oracle gains; starred where its gap exceeds the seed noise (the cells
        # the 80% rule applies to).
        closed = (f"{gain.median() / gap.median():.2f}" + ("*" if gap.median() > noise else "")
                  if gap.median() > 0 else "-")
        cv_median = cv.get((problem, n), np.nan)
        lines.append(f"| {problem} | {n} | {epsilon:g} | {len(wide)} | {_quartiles(wide['default'])} | "
                     f"{_quartiles(wide['oracle'])} | {_quartiles(wide['auto'])} | {cv_median:.3f}"
                     f" | {gap.median():.3f} | {noise:.3f} | {gain.median():.3f} | {closed} | "
                     f"{int((gain > 0).sum())}/{len(wide)} |")
    secs = raw.groupby(["problem", "n", "method"])["seconds"].median().unstack("method")
    lines += ["", "Median fit seconds over epsilons and seeds (2 shared cores, `nice -n 10`; `oracle` is one "
              "fit at its strength).", "", "| problem | n | default | oracle | auto | cv |", "|" + "---|" * 6]
    for (problem, n), row in secs.iterrows():
        cells = " | ".join(f"{row.get(m, np.nan):.1f}" for m in METHODS)
        lines.append(f"| {problem} | {n} | {cells} |")
    spent = raw[raw.method.isin(["default", "auto"])]
    ratio = spent["epsilon_spent"] / spent["epsilon"]
    lines += ["", f"Every private fit charged its own ledger: epsilon spent / target from {ratio.min():.6f} "
              f"to {ratio.max():.6f}.", "",
              "Plots: `sweep_<problem>_<n>.png` (median and IQR against epsilon)."]
    with open(summary, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    if plots:
        plot(raw)


def plot(raw):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    private = raw[raw.method.isin(["default", "oracle", "auto"])]
    for (problem, n), g in private.groupby(["problem", "n"]):
        fig, ax = plt.subplots(figsize=(4.8, 3.4))
        for method, marker in (("default", "o"), ("oracle", "s"), ("auto", "^")):
            stats = g[g.method == method].groupby("epsilon")["score"].quantile([0.25, 0.5, 0.75]).unstack()
            if not len(stats):
                continue
            ax.plot(stats.index, stats[0.5], marker=marker, label=method)
            ax.fill_between(stats.index, stats[0.25], stats[0.75], alpha=0.15)
        cv = raw[(raw.method == "cv") & (raw.problem == problem) & (raw.n == n)]["score"]
        if len(cv):
            ax.axhline(cv.median(), color="grey", linestyle="--", label="non-private CV")
        ax.set_xscale("log")
        ax.set_xticks(sorted(EPSILONS), [f"{e:g}" for e in sorted(EPSILONS)])
        ax.minorticks_off()
        ax.set_xlabel("epsilon")
        ax.set_ylabel({"lasso": "test MSE", "logistic": "test AUC"}.get(KIND[problem], "test R^2"))
        ax.set_title(f"{problem}, n = {n}")
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(os.path.join(HERE, "results", f"sweep_{problem}_{n}.png"), dpi=90)
        plt.close(fig)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--epsilons", type=float, nargs="+", default=list(EPSILONS))
    parser.add_argument("--problems", nargs="+", default=sorted(KIND))
    parser.add_argument("--summarize", action="store_true")
    parser.add_argument("--max-n", type=int, default=None, help="skip the cells with more training rows")
    parser.add_argument("--min-n", type=int, default=0, help="skip the cells with fewer training rows")
    parser.add_argument("--raw", default=None)
    parser.add_argument("--same-stream", action="store_true",
                        help="fit the default and the oracle's candidates through the tuner's 'default' method: "
                             "the same noise stream as auto's final fit (paired comparisons); results in "
                             "results/sweep_same_stream_raw.csv and sweep_same_stream.md")
    args = parser.parse_args()
    raw = args.raw or (SAME_STREAM_RAW if args.same_stream else RAW)
    if args.summarize and args.same_stream:
        summarize([raw], SAME_STREAM_SUMMARY, plots=False, title=(
            "Generated by `python benchmarks/tuning/sweep.py --same-stream --summarize` from "
            "`results/sweep_same_stream_raw.csv`: the default and every oracle candidate are fitted through "
            "`DPRegularizationTuner(estimator, method=\"default\")` with the `random_state` auto gets, so the "
            "three draw their noise from one stream and the paired gains measure the method, not two noise "
            "draws (fits of the estimator itself draw from another stream: same distribution, other values)."))
    elif args.summarize:
        summarize([RAW, RAW.replace(".csv", "_2.csv")])
    else:
        main(args.seeds, args.epsilons, args.problems, raw, args.max_n, args.min_n, args.same_stream)
