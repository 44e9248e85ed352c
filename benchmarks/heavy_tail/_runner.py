"""Resumable benchmark runs: cells run in worker processes, their rows appended to a CSV as they finish."""

import csv
from concurrent.futures import ProcessPoolExecutor

__all__ = ["finished", "append_results"]


def finished(out, key):
    """The set of ``key(row)`` over the rows already in the CSV ``out`` (empty when it does not exist)."""
    if not out.exists():
        return set()
    with out.open() as f:
        return {key(row) for row in csv.DictReader(f)}


def append_results(out, fields, run_cell, todo, workers, describe):
    """Run ``run_cell`` on every cell of ``todo`` in ``workers`` processes and append its rows to ``out``.

    Rows are flushed cell by cell (in the order of ``todo``), so an interrupted
    run keeps every finished cell and a resumed run can skip them
    (:func:`finished`). ``describe(first_row)`` labels the progress lines.
    """
    out.parent.mkdir(parents=True, exist_ok=True)
    new_file = not out.exists()
    with out.open("a", newline="") as f, ProcessPoolExecutor(max_workers=workers) as pool:
        writer = csv.DictWriter(f, fieldnames=fields)
        if new_file:
            writer.writeheader()
        for i, rows in enumerate(pool.map(run_cell, todo, chunksize=1)):
            writer.writerows(rows)
            f.flush()
            print(f"[{i + 1}/{len(todo)}] {describe(rows[0])}", flush=True)
