"""Tables, acceptance checks and plots from ``results/raw.csv`` (see ``run.py``)."""

import argparse
import csv
import math
from collections import defaultdict
from pathlib import Path

import numpy as np

HERE = Path(__file__).parent
ORDER = ["auto", "clipped_gd", "localized", "known_lipschitz", "svt_sgd", "one_pass_glm", "localized_subgradient",
         "accelerated", "averaged_sgd", "proximal_sgd", "baseline_dpgd", "baseline_ssp", "sklearn_ols",
         "sklearn_huber"]


def load(paths, max_seeds=None):
    """Rows of the raw CSV files, each fit once (a resumed run may repeat a cell).

    ``max_seeds`` keeps the first seeds of every contaminated setting, so that
    all settings of a size report the same seeds.
    """
    rows = []
    seen = set()
    for path in paths:
        if not Path(path).exists():
            continue
        with open(path) as f:
            rows += _parse(csv.DictReader(f), seen, max_seeds)
    return rows


def _parse(reader, seen, max_seeds):
    rows = []
    for row in reader:
        key = (row["task"], row["n"], row["y_scale"], row["epsilon"], row["seed"], row["method"])
        if key in seen:
            continue
        seen.add(key)
        if max_seeds is not None and row["task"] == "contaminated" and int(row["seed"]) >= max_seeds:
            continue
        if row["mse"] == "":
            continue
        row["n"], row["seed"] = int(row["n"]), int(row["seed"])
        row["y_scale"] = float(row["y_scale"])
        row["epsilon"] = float(row["epsilon"]) if row["epsilon"] else None
        row["mse"] = float(row["mse"])
        row["bayes"] = float(row["bayes"]) if row["bayes"] else None
        row["coef_error"] = float(row["coef_error"]) if row["coef_error"] else None
        row["fit_time"] = float(row["fit_time"])
        rows.append(row)
    return rows


def metric(row):
    """MSE relative to the Bayes error (contaminated) or the MSE itself (diabetes)."""
    return row["mse"] / row["bayes"] if row["bayes"] else row["mse"]


def cells(rows):
    groups = defaultdict(list)
    for row in rows:
        groups[(row["task"], row["n"], row["y_scale"], row["epsilon"], row["method"])].append(row)
    return groups


def fmt(values):
    q1, med, q3 = np.quantile(values, [0.25, 0.5, 0.75])
    digits = 3 if med < 10 else 1
    return f"{med:.{digits}f} [{q1:.{digits}f}, {q3:.{digits}f}]"


def tables(rows):
    groups = cells(rows)
    settings = sorted({(r["task"], r["n"], r["y_scale"]) for r in rows}, key=lambda s: (s[0] != "contaminated", s))
    epsilons = sorted({r["epsilon"] for r in rows if r["epsilon"] is not None})
    out = []
    for task, n, y_scale in settings:
        label = "diabetes (test MSE)" if task == "diabetes" else (
            f"contaminated, n={n}, y x {y_scale:g} (test MSE / Bayes error)")
        n_seeds = len({r["seed"] for r in rows if (r["task"], r["n"], r["y_scale"]) == (task, n, y_scale)})
        out.append(f"### {label}, {n_seeds} seeds\n")
        out.append("| method | " + " | ".join(f"eps={e:g}" for e in epsilons) + " |")
        out.append("|---|" + "---|" * len(epsilons))
        for method in ORDER:
            cellrow = []
            for e in epsilons:
                key = (task, n, y_scale, None if method.startswith("sklearn") else e, method)
                vals = [metric(r) for r in groups.get(key, [])]
                cellrow.append(fmt(vals) if vals else "-")
            if any(c != "-" for c in cellrow):
                if method.startswith("sklearn"):
                    cellrow = [cellrow[0]] + ["(same)"] * (len(cellrow) - 1)
                out.append(f"| {method} | " + " | ".join(cellrow) + " |")
        if task == "contaminated":
            out.append("")
            out.append("Coefficient error ||coef - w|| / ||w||, median:")
            out.append("")
            out.append("| method | " + " | ".join(f"eps={e:g}" for e in epsilons) + " |")
            out.append("|---|" + "---|" * len(epsilons))
            for method in ORDER:
                vals_row = []
                for e in epsilons:
                    key = (task, n, y_scale, None if method.startswith("sklearn") else e, method)
                    vals = [r["coef_error"] for r in groups.get(key, []) if r["coef_error"] is not None]
                    vals_row.append(f"{np.median(vals) / (math.sqrt(20) * y_scale):.3f}" if vals else "-")
                if any(v != "-" for v in vals_row):
                    out.append(f"| {method} | " + " | ".join(vals_row) + " |")
        out.append("")
    return "\n".join(out)


def checks(rows):
    groups = cells(rows)
    lines = ["## Acceptance checks", ""]
    head = [metric(r) for r in groups.get(("contaminated", 2000, 1000.0, 1.0, "auto"), [])]
    if head:
        lines.append(f"- default, epsilon=1, n=2000, y x 1000: median test MSE / Bayes = {np.median(head):.4f} "
                     f"({'within' if np.median(head) <= 1.05 else 'NOT within'} 5%).")
    worse = []
    total = 0
    for key, vals in groups.items():
        task, n, y_scale, eps, method = key
        if method != "auto":
            continue
        base = groups.get((task, n, y_scale, eps, "baseline_dpgd"))
        if not base:
            continue
        total += 1
        a, b = np.median([metric(r) for r in vals]), np.median([metric(r) for r in base])
        if a > b:
            worse.append(f"{task} n={n} y x {y_scale:g} eps={eps:g}: auto {a:.4g} vs dpgd {b:.4g} "
                         f"(+{100 * (a / b - 1):.2g}%)")
    lines.append(f"- default vs clipped-DP-GD baseline: at least as accurate in {total - len(worse)} of {total} "
                 "cells" + (": worse in " + "; ".join(worse) if worse else "."))
    best = []
    for key, vals in groups.items():
        task, n, y_scale, eps, method = key
        if method != "auto" or eps is None:
            continue
        meds = {m: np.median([metric(r) for r in groups[(task, n, y_scale, eps, m)]])
                for m in ORDER if (task, n, y_scale, eps, m) in groups and not m.startswith("sklearn")}
        winner = min(meds, key=meds.get)
        best.append(f"{task} n={n} y x {y_scale:g} eps={eps:g}: best {winner} ({meds[winner]:.4g}), "
                    f"auto {meds['auto']:.4g}")
    lines.append("")
    lines.append("Best private method per cell (median):")
    lines.append("")
    lines += [f"- {b}" for b in sorted(best)]
    lines.append("")
    return "\n".join(lines)


def times(rows):
    lines = ["## Fit time (median seconds over seeds and budgets, fits run two at a time)", ""]
    groups = defaultdict(list)
    for r in rows:
        if r["task"] == "contaminated":
            groups[(r["n"], r["method"])].append(r["fit_time"])
    sizes = sorted({n for n, _ in groups})
    lines.append("| method | " + " | ".join(f"n={n}" for n in sizes) + " |")
    lines.append("|---|" + "---|" * len(sizes))
    for m in ORDER:
        vals = [f"{np.median(groups[(n, m)]):.3f}" if (n, m) in groups else "-" for n in sizes]
        lines.append(f"| {m} | " + " | ".join(vals) + " |")
    lines.append("")
    return "\n".join(lines)


def plots(rows, outdir):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups = cells(rows)
    settings = sorted({(r["task"], r["n"], r["y_scale"]) for r in rows})
    epsilons = sorted({r["epsilon"] for r in rows if r["epsilon"] is not None})
    for task, n, y_scale in settings:
        fig, ax = plt.subplots(figsize=(6.5, 4.2))
        for method in ORDER:
            if method.startswith("sklearn"):
                vals = [metric(r) for r in groups.get((task, n, y_scale, None, method), [])]
                if vals:
                    ax.axhline(np.median(vals), ls="--", lw=1, label=method)
                continue
            med = [np.median([metric(r) for r in groups[(task, n, y_scale, e, method)]])
                   if (task, n, y_scale, e, method) in groups else np.nan for e in epsilons]
            ax.plot(epsilons, med, marker="o", lw=2 if method == "auto" else 1, label=method)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("epsilon")
        ax.set_ylabel("test MSE" if task == "diabetes" else "test MSE / Bayes error")
        ax.set_title(task if task == "diabetes" else f"contaminated, n={n}, y x {y_scale:g}")
        ax.legend(fontsize=7, ncol=2)
        fig.tight_layout()
        name = "diabetes.png" if task == "diabetes" else f"contaminated_n{n}_y{int(y_scale)}.png"
        fig.savefig(outdir / name, dpi=110)
        plt.close(fig)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--raw", nargs="+", default=[str(HERE / "results" / "raw.csv"),
                                                     str(HERE / "results" / "raw_large.csv")])
    parser.add_argument("--max-seeds", type=int, default=10)
    parser.add_argument("--no-plots", action="store_true")
    args = parser.parse_args()
    rows = load(args.raw, args.max_seeds)
    text = "# Heavy-tail benchmark results\n\nMedian [IQR] over seeds.\n\n" + checks(rows) + "\n" + tables(rows) \
        + "\n" + times(rows)
    (HERE / "results" / "summary.md").write_text(text)
    if not args.no_plots:
        plots(rows, HERE / "results")
    print(text)


if __name__ == "__main__":
    main()
