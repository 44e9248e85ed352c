"""Median test accuracy per task and method (columns: epsilon, delta) from results/raw.csv."""

import sys
from pathlib import Path

import pandas as pd

raw = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).parent / "results" / "raw.csv"
df = pd.read_csv(raw)
df["budget"] = df.apply(lambda r: f"eps={r.epsilon:g}" + (" pure" if r.delta == 0 and r.epsilon != float("inf")
                                                           else ""), axis=1)
table = df.pivot_table(index=["task", "method"], columns="budget", values="accuracy", aggfunc="median")
seeds = df.groupby("task").seed.nunique()
print(table.round(3).to_string())
print()
print("Seeds per task:", seeds.to_dict())
