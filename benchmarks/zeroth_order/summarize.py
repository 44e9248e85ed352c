"""Tables (medians and interquartile ranges over seeds) and plots of the zeroth-order benchmark.

Reads ``results/raw.csv`` (``run.py``), ``results/reference_raw.csv`` (``reference.py``),
``results/fit_time_raw.csv`` (``fit_time.py``) and ``results/real_tables_raw.csv``
(``real_tables.py``); writes ``results/summary.md``, the plots in ``results/plots`` and the
excerpt the documentation includes (``docs/zeroth_order_results.inc``). Every cell says how many
seeds it has.

Usage::

    python benchmarks/zeroth_order/summarize.py
"""

import csv
import math
from collections import defaultdict
from pathlib import Path

import numpy as np

HERE = Path(__file__).parent
RESULTS = HERE / "results"
DOCS = HERE.parents[1] / "docs" / "zeroth_order_results.inc"
EPSILONS = [0.5, 1.0, 2.0, 5.0, math.inf]


def _read(name):
    path = RESULTS / name
    if not path.exists():
        return []
    with path.open() as f:
        return list(csv.DictReader(f))


def _num(value):
    return float(value) if value not in ("", None) else float("nan")


def _eps_label(eps):
    return "inf" if math.isinf(eps) else f"{eps:g}"


def _cell(values, fmt="{:.4g}"):
    values = [v for v in values if not math.isnan(v)]
    if not values:
        return "—"
    q1, med, q3 = np.percentile(values, [25, 50, 75])
    return f"{fmt.format(med)} [{fmt.format(q1)}, {fmt.format(q3)}] ({len(values)})"


def _median(values):
    values = [v for v in values if not math.isnan(v)]
    return float(np.median(values)) if values else float("nan")


def _group(rows, key, value):
    out = defaultdict(list)
    for r in rows:
        out[key(r)].append(_num(r[value]))
    return out


def problem_table(rows, problem, n, methods, value, title, fmt="{:.4g}", reference=None):
    sub = [r for r in rows if r["problem"] == problem and int(r["n"]) == n]
    groups = _group(sub, lambda r: (r["method"], float(r["epsilon"])), value)
    times = _group(sub, lambda r: r["method"], "fit_time")
    lines = [f"### {title}", "", "| method | " + " | ".join(f"epsilon = {_eps_label(e)}" for e in EPSILONS)
             + " | fit time (s) |", "|---" * (len(EPSILONS) + 2) + "|"]
    for method in methods:
        if not any(groups.get((method, e)) for e in EPSILONS):
            continue
        cells = [_cell(groups.get((method, e), []), fmt) for e in EPSILONS]
        lines.append(f"| {method} | " + " | ".join(cells) + f" | {_cell(times.get(method, []), '{:.3g}')} |")
    if reference:
        lines.append(reference)
    return "\n".join(lines) + "\n"


def _reference_row(ref, n, value, label):
    vals = [_num(r[value]) for r in ref if int(r["n"]) == n and r["method"] == label]
    times = [_num(r["fit_time"]) for r in ref if int(r["n"]) == n and r["method"] == label]
    if not vals:
        return None
    return (f"| {label} (non-private) | " + " | ".join([_cell(vals)] + [""] * (len(EPSILONS) - 1))
            + f" | {_cell(times, '{:.3g}')} |")


def plots(rows, ref):
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:  # pragma: no cover - matplotlib is in the bench extra
        return []
    out = []
    (RESULTS / "plots").mkdir(parents=True, exist_ok=True)
    finite = [e for e in EPSILONS if math.isfinite(e)]

    def curve(ax, sub, method, value, label=None):
        groups = _group(sub, lambda r: (r["method"], float(r["epsilon"])), value)
        meds = [_median(groups.get((method, e), [])) for e in finite]
        if not all(math.isnan(m) for m in meds):
            ax.plot(finite, meds, marker="o", label=label or method)
        inf = _median(groups.get((method, math.inf), []))
        return inf

    for problem, value, methods, ylabel, logy in [
            ("cauchy_lad", "param_error", ["auto", "heavy_tail", "variance_reduced", "vr_theory", "naive_theory"],
             "parameter error", True),
            ("contaminated", "param_error", ["tukey", "cauchy", "absolute", "heavy_tail_huber"], "parameter error",
             True),
            ("friedman", "r2", ["mlp", "linear_absolute", "heavy_tail", "heavy_tail_huber"], "test R^2", False)]:
        ns = sorted({int(r["n"]) for r in rows if r["problem"] == problem})
        if not ns:
            continue
        fig, axes = plt.subplots(1, len(ns), figsize=(5 * len(ns), 4), squeeze=False)
        for ax, n in zip(axes[0], ns):
            sub = [r for r in rows if r["problem"] == problem and int(r["n"]) == n]
            for method in methods:
                curve(ax, sub, method, value)
            if problem == "cauchy_lad":
                vals = [_num(r["param_error"]) for r in ref if int(r["n"]) == n]
                if vals:
                    ax.axhline(_median(vals), color="k", ls="--", label="QuantileRegressor")
            if problem == "friedman":
                for method, style in (("MLPRegressor", ":"), ("LinearRegression", "--")):
                    vals = [_num(r["r2"]) for r in sub if r["method"] == method]
                    if vals:
                        ax.axhline(_median(vals), color="k", ls=style, label=method)
            if problem == "contaminated":
                vals = [_num(r["param_error"]) for r in sub if r["method"] == "HuberRegressor"]
                if vals:
                    ax.axhline(_median(vals), color="k", ls="--", label="HuberRegressor")
            ax.set_xscale("log")
            if logy:
                ax.set_yscale("log")
            ax.set_xlabel("epsilon")
            ax.set_ylabel(ylabel)
            ax.set_title(f"{problem}, n = {n}")
            ax.legend(fontsize=7)
        fig.tight_layout()
        path = RESULTS / "plots" / f"{problem}.png"
        fig.savefig(path, dpi=100)
        plt.close(fig)
        out.append(path)
    return out


def main():
    rows = _read("raw.csv")
    ref = _read("reference_raw.csv")
    parts = ["# Zeroth-order regressor: benchmark results", "",
             "Median [interquartile range] (number of seeds) over seeds; every fit with its own ledger, "
             "delta = 1e-5, BLAS on one thread. Generated by `summarize.py` from the raw CSV files.", ""]
    doc = []
    lad_methods = ["auto", "heavy_tail", "variance_reduced", "vr_theory", "naive_theory"]
    for n in sorted({int(r["n"]) for r in rows if r["problem"] == "cauchy_lad"}):
        def references(value):
            found = [_reference_row(ref, n, value, label) for label in
                     ("QuantileRegressor", "QuantileRegressor(highs-ipm)")]
            return "\n".join(r for r in found if r) or None

        table = problem_table(rows, "cauchy_lad", n, lad_methods, "param_error",
                              f"1. Median regression (Cauchy noise, d = 10), n = {n}: parameter error",
                              reference=references("param_error"))
        parts.append(table)
        parts.append(problem_table(rows, "cauchy_lad", n, lad_methods, "test_loss",
                                   f"1. Median regression, n = {n}: test pinball loss (level 0.5)",
                                   reference=references("test_loss")))
        if n == 100000:
            doc.append(table)
    for n in sorted({int(r["n"]) for r in rows if r["problem"] == "contaminated"}):
        table = problem_table(rows, "contaminated", n, ["tukey", "cauchy", "absolute", "heavy_tail_huber",
                                                        "HuberRegressor"], "param_error",
                              f"2. Contaminated labels (20% shifted by +10), n = {n}: parameter error")
        parts.append(table)
        doc.append(table)
    for n in sorted({int(r["n"]) for r in rows if r["problem"] == "friedman"}):
        table = problem_table(rows, "friedman", n, ["mlp", "linear_absolute", "heavy_tail", "heavy_tail_huber",
                                                    "MLPRegressor", "LinearRegression"], "r2",
                              f"3. Friedman #1, n = {n}: test R^2", fmt="{:.3f}")
        parts.append(table)
        doc.append(table)
    timing = _read("fit_time_raw.csv")
    if timing:
        groups = _group(timing, lambda r: (r["what"], r["method"], int(r["n"]), int(r["n_params"])), "fit_time")
        evals = _group(timing, lambda r: (r["what"], r["method"], int(r["n"]), int(r["n_params"])),
                       "n_function_evals")
        lines = ["### 4. Cost: fit time and function evaluations", "",
                 "| what | method | n | parameters | fit time (s) | function evaluations |", "|---|---|---|---|---|---|"]
        for key in sorted(groups):
            e = _median(evals[key])
            lines.append(f"| {key[0]} | {key[1]} | {key[2]} | {key[3]} | {_cell(groups[key], '{:.3g}')} | "
                         f"{'—' if math.isnan(e) else f'{e:.3g}'} |")
        table = "\n".join(lines) + "\n"
        parts.append(table)
        doc.append(table)
    real = _read("real_tables_raw.csv")
    if real:
        groups = _group(real, lambda r: (r["table"], r["epsilon"], r["method"]), "test_loss")
        names = list(dict.fromkeys(r["table"] for r in real))
        lines = ["### Real-table shapes: test absolute loss relative to QuantileRegressor(highs)", "",
                 "Epsilon = inf at n = 3000, epsilon = 1 at n = 10000; one data seed per table.", "",
                 "| table | n (epsilon = 1) | epsilon = inf: default | epsilon = 1: default | "
                 "epsilon = 1: DPHeavyTailRegressor(absolute) | default / heavy tail |", "|---|---|---|---|---|---|"]
        for name in names:
            def ratio(eps, method, nname=name):
                ref_inf = _median(groups.get((nname, eps, "QuantileRegressor"), []))
                return _median(groups.get((nname, eps, method), [])) / ref_inf
            n1 = next((r["n"] for r in real if r["table"] == name and r["epsilon"] == "1.0"), "—")
            zo_inf, zo_1, ht_1 = ratio("inf", "default"), ratio("1.0", "default"), ratio("1.0", "heavy_tail")
            lines.append(f"| {name} | {n1} | {zo_inf:.4f} | {zo_1:.4f} | {ht_1:.4f} | {zo_1 / ht_1:.4f} |")
        table = "\n".join(lines) + "\n"
        parts.append(table)
        doc.append(table)
    images = plots(rows, ref)
    parts += ["## Plots", ""] + [f"![{p.stem}](plots/{p.name})" for p in images]
    (RESULTS / "summary.md").write_text("\n".join(parts) + "\n")
    DOCS.write_text(_rst(doc))


def _rst(tables):
    """The markdown tables as reStructuredText (grid-free "list-table"s would be longer: literal blocks)."""
    out = ["The tables below are copied from ``benchmarks/zeroth_order/results/summary.md``",
           "(median [interquartile range] (seeds)).", ""]
    for table in tables:
        lines = table.strip().splitlines()
        title = lines[0].lstrip("# ").strip()
        out += [f"**{title}**", "", ".. code-block:: text", ""]
        out += ["    " + line for line in lines[2:]]
        out.append("")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    main()
