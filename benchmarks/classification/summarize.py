"""Median test accuracy per task and method (columns: epsilon, delta) from results/raw.csv.

Usage: python benchmarks/classification/summarize.py [raw.csv] [--plots DIR]

``--plots`` also writes, into DIR, one figure per main task (median accuracy against epsilon for
every method, the non-private references as dashed lines) and one of the size grid of the default
(accuracy against n for each d, epsilon and share of flipped labels). Plotting needs matplotlib (the ``bench`` extra).
"""

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).parent
REFERENCES = ("LogisticRegression", "LinearSVC")


def load(raw):
    df = pd.read_csv(raw)
    df["budget"] = df.apply(lambda r: f"eps={r.epsilon:g}" + (" pure" if r.delta == 0 and r.epsilon != float("inf")
                                                               else ""), axis=1)
    return df


def plots(df, outdir):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    outdir.mkdir(parents=True, exist_ok=True)
    main = df[~df.task.str.startswith("grid_")]
    for task, rows in main.groupby("task"):
        fig, ax = plt.subplots(figsize=(6.5, 4.2))
        for method, mrows in rows.groupby("method"):
            if method in REFERENCES:
                ax.axhline(mrows.accuracy.median(), ls="--", lw=1, label=method, color="grey" if
                           method == "LinearSVC" else "black")
                continue
            gaussian = mrows[mrows.delta > 0].groupby("epsilon").accuracy.median()
            ax.plot(gaussian.index, gaussian.values, marker="o", lw=2.5 if method == "auto" else 1,
                    label=method, zorder=3 if method == "auto" else 2)
        ax.set_xscale("log")
        ax.set_xlabel("epsilon (delta = 1e-5)")
        ax.set_ylabel("median test accuracy")
        ax.set_title(f"{task} ({rows.seed.nunique()} seeds)")
        ax.legend(fontsize=7, ncol=2)
        fig.tight_layout()
        fig.savefig(outdir / f"{task}.png", dpi=110)
        plt.close(fig)
    grid = df[df.task.str.startswith("grid_") & (df.method == "auto")].copy()
    if grid.empty:
        return
    grid["n"] = grid.task.str.extract(r"_n(\d+)_").astype(int)
    grid["d"] = grid.task.str.extract(r"_d(\d+)$").astype(int)
    grid["flip"] = grid.task.str.extract(r"_flip(\d+)_")[0].astype(float).fillna(0).astype(int)
    epsilons = sorted(grid.epsilon.unique())
    flips = sorted(grid.flip.unique())
    fig, axes = plt.subplots(len(flips), len(epsilons), figsize=(3.2 * len(epsilons), 2.8 * len(flips)),
                             sharey=True, squeeze=False)
    for row, flip in zip(axes, flips):
        for ax, eps in zip(row, epsilons):
            for d, rows in grid[(grid.epsilon == eps) & (grid.flip == flip)].groupby("d"):
                med = rows.groupby("n").accuracy.median()
                ax.plot(med.index, med.values, marker="o", label=f"d = {d}")
            ax.set_xscale("log")
            ax.set_title(f"{flip}% flipped, epsilon = {eps:g}", fontsize=9)
            ax.axhline(1.0 - flip / 100, ls="--", lw=0.8, color="grey")
        row[0].set_ylabel("median test accuracy")
        row[0].legend(fontsize=7)
    for ax in axes[-1]:
        ax.set_xlabel("n")
    fig.suptitle("default (auto); dashed: the accuracy of the true direction", fontsize=10)
    fig.tight_layout()
    fig.savefig(outdir / "grid.png", dpi=100)
    plt.close(fig)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("raw", nargs="?", default=str(HERE / "results" / "raw.csv"))
    parser.add_argument("--plots", default=None, help="directory for the figures")
    args = parser.parse_args()
    df = load(args.raw)
    table = df.pivot_table(index=["task", "method"], columns="budget", values="accuracy", aggfunc="median")
    seeds = df.groupby("task").seed.nunique()
    print(table.round(3).to_string())
    print()
    print("Seeds per task:", seeds.to_dict())
    if args.plots:
        plots(df, Path(args.plots))


if __name__ == "__main__":
    main()
