"""An out-of-core fit: a Parquet table larger than any worker's memory limit, read by Dask once per pass.

The table of ``equivalence.py`` (20 columns on scales 1e-2 to 1e3, a fixed linear
signal, Student-t(3) noise; its generator is imported, not copied) is written as
float32 Parquet, one file of ``--chunk-rows`` rows (one row group) per chunk, each
chunk drawn from its own seed so that the whole table is never in memory. A
``distributed.LocalCluster`` of ``--workers`` worker processes (one thread each,
``--memory-limit`` each, below the table's size) then fits the default
``DPHeavyTailRegressor(epsilon=1, random_state=0)`` on
``dask.dataframe.read_parquet`` of the directory (not persisted: every pass reads
the files again).

Before anything is generated the size is checked with the library's own rule
(the fit refuses, before any spend, a plan whose private quantiles would gather
more than ``MAX_GATHERED_VALUES`` values to the driver): a dry fit on a lazy
array of zeros of the same shape runs the real validation and planning and is
stopped where the accepted fit would first read values (the finite check). The
sizes on both sides of the limit, and the issue's 5e7 rows, are checked the same
way and reported.

Recorded: the wall time of the fit; the passes it made (every chunked reduction
counted, plus the finite check) against the public count of ``docs/dask.rst``
(``T + 37``, one more for a dataframe's partition lengths) and the time per pass;
each worker's peak resident memory (``psutil`` RSS of the worker process, read by
``client.run`` from a driver thread every second during the fit) against its
limit; the test MSE on 10^5 fresh rows of the same generator against that of the
non-private least-squares fit of the same rows (normal equations accumulated on
the driver chunk by chunk while the table is written, in float64 from the float32
values written). With ``--daskml`` also ``dask_ml.linear_model.LinearRegression``
(default solver) on the same dataframe's arrays: wall time and test MSE.

Time per pass against dask-ml's per iteration: every pass of the private fit is
timed (each ``ChunkedRows.map``), and the median of its ``T`` gradient passes
is recorded besides the mean over all passes. dask-ml's default solver is
dask-glm's ADMM: one iteration is one ``dask.compute`` of a local L-BFGS fit
on every chunk (a full pass over the rows, the Parquet files read again, as
nothing is persisted), so its iterations are counted and timed by wrapping
that ``compute`` (``dask_glm.algorithms.da``); the pass that learns the
partitions' lengths is timed apart. The machine's 1-minute load average is
sampled every second during each (the machine is shared: two cores).

Usage::

    nice -n 10 python benchmarks/scale/out_of_core.py --rows 3300000 --workers 2 --memory-limit-mb 1200

(``--workers 1`` for the same fit on one worker). A limit of 600 MB per worker failed on this
table while the quantile passes brought every value of the 20 columns (about 1 GB at this size)
to the driver through the workers; since the default budget's quantiles on more than 2^20 + 2
rows are drawn from counts, it completes (results/out_of_core.md).

Appends a row to ``results/out_of_core.csv`` and writes ``results/out_of_core.md`` (the table and
the checks; the hand-written notes from its "## Notes on these runs" on are kept).
"""

import argparse
import os
import sys
import tempfile
import threading
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from equivalence import D, append_row, passes, table  # noqa: E402  (the same generator and public pass count)

RESULTS = Path(__file__).resolve().parent / "results"
FIELDS = ["rows", "workers", "memory_limit_mb", "partitions", "table_mb", "parquet_mb", "fit_completed", "fit_s",
          "steps", "public_passes", "measured_passes", "per_pass_s", "peak_rss_mb", "restarts", "paused_s", "private_mse",
          "ols_mse", "mse_ratio", "daskml_s", "daskml_mse", "gradient_pass_s", "fit_load", "daskml_iterations",
          "daskml_iteration_s", "daskml_lengths_s", "daskml_load", "worker_profile"]
NAMES = [f"x{j:02d}" for j in range(D)]


class _Accepted(Exception):
    """Raised by the dry run where an accepted fit would first read the rows."""


def accepted(n_rows):
    """Whether the library accepts the default Dask fit of ``n_rows x D`` (its own check; nothing is spent).

    Returns ``(True, "")`` or ``(False, message)``.
    """
    import dask.array as da

    from skdp import BudgetAccountant, DPHeavyTailRegressor
    from skdp.linear_model import _rows

    original = _rows.ChunkedRows.check_finite

    def stop(self):
        raise _Accepted

    _rows.ChunkedRows.check_finite = stop
    try:
        X = da.zeros((n_rows, D), chunks=(max(n_rows // 10, 1), D))
        y = da.zeros(n_rows, chunks=max(n_rows // 10, 1))
        DPHeavyTailRegressor(epsilon=1.0, random_state=0, accountant=BudgetAccountant()).fit(X, y)
    except _Accepted:
        return True, ""
    except ValueError as error:
        return False, str(error)
    finally:
        _rows.ChunkedRows.check_finite = original
    raise AssertionError("the dry run reached the end of a fit")


def write_table(directory, n_rows, chunk_rows):
    """Write the table as float32 Parquet, one file per chunk; returns the normal equations of ``[X, 1]``.

    Chunk ``k`` is ``table(rows, seed=1000 + k)``: only one chunk is in memory at a time.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    gram = np.zeros((D + 1, D + 1))
    moment = np.zeros(D + 1)
    for k, start in enumerate(range(0, n_rows, chunk_rows)):
        X, y = table(min(chunk_rows, n_rows - start), 1000 + k)
        X, y = X.astype(np.float32), y.astype(np.float32)
        columns = {name: X[:, j] for j, name in enumerate(NAMES)}
        columns["y"] = y
        pq.write_table(pa.table(columns), os.path.join(directory, f"part-{k:05d}.parquet"),
                       row_group_size=chunk_rows)
        design = np.hstack([X.astype(np.float64), np.ones((X.shape[0], 1))])
        gram += design.T @ design
        moment += design.T @ y.astype(np.float64)
    return gram, moment


class MemorySampler:
    """Each worker's peak RSS (psutil, in the worker process), read with ``client.run`` every ``period`` s."""

    def __init__(self, client, period=1.0, counted=()):
        self.client, self.period, self.counted = client, period, counted
        self.peaks, self.seen, self.paused, self.current = {}, set(), 0, {}
        self.loads = []  # the machine's 1-minute load average, every period
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    @staticmethod
    def _rss(dask_worker):
        import psutil

        return psutil.Process().memory_info().rss, "paused" in str(dask_worker.status)

    def _run(self):
        start = time.perf_counter()
        while not self._stop.is_set():
            try:
                for address, (rss, paused) in self.client.run(self._rss).items():
                    self.seen.add(address)
                    self.peaks[address] = max(self.peaks.get(address, 0), rss)
                    self.current[address] = rss
                    self.paused += paused  # seconds a worker spent paused (its memory above 80% of the limit)
            except Exception:  # a worker being restarted: the next sample sees its successor
                pass
            self.loads.append(os.getloadavg()[0])
            if int(time.perf_counter() - start) % 30 == 0:  # progress, to stop a stalled run by hand
                print(f"{time.perf_counter() - start:.0f} s: {len(self.counted)} passes, peak RSS (MB) "
                      f"{[round(v / 1e6) for v in self.peaks.values()]} (now {[round(v / 1e6) for v in self.current.values()]}), "
                      f"paused samples {self.paused}", flush=True)
            self._stop.wait(self.period)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()

    def load(self):
        """The 1-minute load average while sampled: ``"mean (min-max)"``."""
        if not self.loads:
            return ""
        return f"{np.mean(self.loads):.1f} ({min(self.loads):.1f}-{max(self.loads):.1f})"


def timed_passes():
    """Time every chunked reduction of a fit (each ``ChunkedRows.map``): ``(records, restore)``.

    ``records`` gets ``(chunk function's name, seconds)`` per pass.
    """
    from skdp.linear_model import _rows

    records = []
    original = _rows.ChunkedRows.map

    def timing(self, func, *args, **kwargs):
        start = time.perf_counter()
        try:
            return original(self, func, *args, **kwargs)
        finally:
            records.append((getattr(func, "__name__", repr(func)), time.perf_counter() - start))

    _rows.ChunkedRows.map = timing
    return records, lambda: setattr(_rows.ChunkedRows, "map", original)


class _TimedCompute:
    """``dask.array`` for ``dask_glm.algorithms``, with its ``compute`` timed: one ADMM iteration each."""

    def __init__(self):
        import dask.array

        self._da, self.seconds = dask.array, []

    def __getattr__(self, name):
        return getattr(self._da, name)

    def compute(self, *args, **kwargs):
        start = time.perf_counter()
        try:
            return self._da.compute(*args, **kwargs)
        finally:
            self.seconds.append(time.perf_counter() - start)


def daskml_linear_regression(client, X, y, X_test, y_test):
    """dask-ml's ``LinearRegression`` (default solver, ADMM) on the dataframe's arrays, its iterations timed."""
    import dask_glm.algorithms as algorithms
    from dask_ml.linear_model import LinearRegression

    if LinearRegression().solver != "admm":  # the timing below wraps ADMM's compute
        raise SystemExit("dask-ml's default solver is no longer ADMM: the iteration timing needs updating")
    timed = _TimedCompute()
    with MemorySampler(client) as sampler:
        start = time.perf_counter()
        # dask fuses a one-column selection's partitions: optimised first, as skdp does for its input.
        Xa = X.optimize().to_dask_array(lengths=True)
        ya = y.optimize().to_dask_array(lengths=True).rechunk((Xa.chunks[0],))
        lengths_s = time.perf_counter() - start
        algorithms.da = timed
        try:
            baseline = LinearRegression().fit(Xa, ya)
        finally:
            algorithms.da = timed._da
        total = time.perf_counter() - start
    mse = float(np.mean((y_test - np.asarray(baseline.predict(X_test))) ** 2))
    return {"daskml_s": total, "daskml_mse": mse, "daskml_iterations": len(timed.seconds),
            "daskml_iteration_s": float(np.median(timed.seconds)), "daskml_lengths_s": lengths_s,
            "daskml_load": sampler.load()}


def run(args):
    import dask
    import dask.dataframe as dd
    from distributed import Client, LocalCluster

    from skdp import DPHeavyTailRegressor

    n = args.rows
    ok, message = accepted(n)
    if not ok:
        raise SystemExit(f"refused at {n:,} rows: {message}")
    X_test, y_test = table(100_000, 1)
    limit = int(args.memory_limit_mb * 1e6)
    with tempfile.TemporaryDirectory(dir=args.tmp) as directory:
        start = time.perf_counter()
        gram, moment = write_table(directory, n, args.chunk_rows)
        print(f"wrote the table in {time.perf_counter() - start:.0f} s", flush=True)
        ols = np.linalg.solve(gram, moment)
        ols_mse = float(np.mean((y_test - X_test @ ols[:-1] - ols[-1]) ** 2))
        parquet_mb = sum(f.stat().st_size for f in Path(directory).iterdir()) / 1e6
        # distributed's statistical profiler keeps the call trees of the last 1000 one-second cycles in
        # every worker (``profile_history``, ``distributed.admin.low-level-log-length``): tens of MB that
        # grow through the first ~17 minutes of a busy worker, the creep that paused the 600 MB workers
        # of the longer runs (results/out_of_core.md). Off unless --worker-profile (forwarded to the
        # workers by their nannies).
        profile = {"distributed.worker.profile.enabled": bool(args.worker_profile)}
        with dask.config.set(profile), LocalCluster(n_workers=args.workers, threads_per_worker=1, memory_limit=limit,
                                                    dashboard_address=None) as cluster, Client(cluster) as client:
            seen = set(client.run(lambda: dask.config.get("distributed.worker.profile.enabled")).values())
            if seen != {bool(args.worker_profile)}:
                raise SystemExit(f"the workers' profiler setting is {seen}, not {bool(args.worker_profile)}")
            frame = dd.read_parquet(directory)
            # The target as users select it: the library optimises a dataframe collection before it
            # learns its partitions' lengths (dask fuses the partitions of a one-column projection).
            X, y = frame[NAMES], frame["y"]
            model, fit_s, error = None, float("nan"), ""
            counted, restore = timed_passes()
            with MemorySampler(client, counted=counted) as sampler, warnings.catch_warnings():
                warnings.simplefilter("ignore")
                start = time.perf_counter()
                try:
                    model = DPHeavyTailRegressor(epsilon=1.0, random_state=0).fit(X, y)
                    fit_s = time.perf_counter() - start
                except Exception as exc:  # reported, not hidden
                    error = f"{type(exc).__name__}: {exc}"
                finally:
                    restore()
            daskml = {"daskml_s": float("nan"), "daskml_mse": float("nan"), "daskml_iterations": "",
                      "daskml_iteration_s": float("nan"), "daskml_lengths_s": float("nan"), "daskml_load": ""}
            if args.daskml and model is not None:
                daskml = daskml_linear_regression(client, X, y, X_test, y_test)
            partitions = frame.npartitions
    if model is None:
        raise SystemExit(f"the fit failed: {error}")
    steps = int(model.n_iter_)
    public = passes(n, steps) + 1  # + the partition lengths of a dataframe
    measured = len(counted) + 1 + 1  # + the finite check + the partition lengths
    gradient_pass_s = float(np.median([seconds for name, seconds in counted if name == "_gradient_chunk"]))
    private_mse = float(np.mean((y_test - model.predict(X_test)) ** 2))
    return {"rows": n, "workers": args.workers, "memory_limit_mb": args.memory_limit_mb, "partitions": partitions,
            "table_mb": n * (D + 1) * 4 / 1e6, "parquet_mb": parquet_mb, "fit_completed": True, "fit_s": fit_s,
            "steps": steps, "public_passes": public, "measured_passes": measured, "per_pass_s": fit_s / measured,
            "peak_rss_mb": " / ".join(f"{v / 1e6:.0f}" for v in sampler.peaks.values()),
            "restarts": len(sampler.seen) - args.workers, "paused_s": sampler.paused, "private_mse": private_mse, "ols_mse": ols_mse,
            "mse_ratio": private_mse / ols_mse, "gradient_pass_s": gradient_pass_s, "fit_load": sampler.load(),
            "worker_profile": "on" if args.worker_profile else "off", **daskml}


def widen_csv(raw, fields):
    """Rewrite ``raw`` with the header ``fields`` when it has fewer columns (older rows: the new ones empty)."""
    import csv

    if not raw.exists():
        return
    with raw.open() as f:
        reader = csv.DictReader(f)
        if list(reader.fieldnames or []) == list(fields):
            return
        rows = list(reader)
    with raw.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields, restval="")
        writer.writeheader()
        writer.writerows(rows)


def per_pass_markdown(rows):
    """The private fit's time per pass against dask-ml's per iteration, for the rows that timed both."""
    timed = [r for r in rows if r.get("daskml_iterations") and r.get("gradient_pass_s")]
    if not timed:
        return []
    lines = ["", "## Time per pass against dask-ml's time per iteration", "",
             "Same cluster and table in one run of `out_of_core.py --daskml`, one after the other. A pass of the "
             "private fit: one `ChunkedRows.map` (`s / pass`: its fit's mean over every pass; gradient pass: the median "
             "of the `T` steps' passes, each a full read of the Parquet files). dask-ml: `LinearRegression()` "
             "(ADMM), an iteration is one Dask computation of a local L-BFGS fit on every chunk, also a full read of "
             "the files; its partition-lengths pass (also a full read) is not an iteration. Load: the machine's "
             "1-minute load average during each, sampled every second, mean (min-max), on two cores.", "",
             "| rows | limit / worker (MB) | private s / pass | private gradient pass (s) | load (private) "
             "| dask-ml iterations | dask-ml s / iteration | dask-ml lengths pass (s) | dask-ml total (s) "
             "| load (dask-ml) | gradient pass / dask-ml iteration | s / pass / dask-ml iteration |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in timed:
        iteration = float(r["daskml_iteration_s"])
        lines.append(
            f"| {int(r['rows']):,} | {float(r['memory_limit_mb']):.0f} | {float(r['per_pass_s']):.2f} "
            f"| {float(r['gradient_pass_s']):.2f} | {r['fit_load']} | {r['daskml_iterations']} | {iteration:.2f} "
            f"| {float(r['daskml_lengths_s']):.2f} | {float(r['daskml_s']):.1f} | {r['daskml_load']} "
            f"| {float(r['gradient_pass_s']) / iteration:.2f} | {float(r['per_pass_s']) / iteration:.2f} |")
    return lines


def markdown(rows, checks):
    lines = ["# An out-of-core fit on Dask", "",
             "Default `DPHeavyTailRegressor(epsilon=1, random_state=0)` on `dask.dataframe.read_parquet` of a",
             "float32 Parquet table (20 columns of the `equivalence.py` generator + the target, one file and row",
             "group per chunk, written chunk by chunk), not persisted: every pass reads the files again. A",
             "`distributed.LocalCluster` of 1-thread worker processes, each with the memory limit shown, on a",
             "two-core machine shared with other work. `passes`: made by the fit (every chunked reduction, the",
             "finite check and the dataframe's partition lengths) and the public count of `docs/dask.rst`;",
             "`s / pass`: wall time over the passes made. Peak RSS: each worker process's resident memory",
             "(psutil, sampled every second during the fit by `client.run` from a driver thread), in MB.",
             "Test MSE on 10^5 fresh rows of the generator over that of non-private least squares on the same",
             "rows (normal equations accumulated while the table was written). Generated by `out_of_core.py`.", "",
             "| rows | workers | limit / worker (MB) | table (MB, float32) | Parquet (MB) | partitions | fit (s) "
             "| passes (public) | s / pass | peak RSS per worker (MB) | worker restarts | worker-seconds paused | test MSE / OLS's "
             "| dask-ml (s) | dask-ml test MSE / OLS's |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        daskml = float(r["daskml_s"])
        daskml_ratio = float(r["daskml_mse"]) / float(r["ols_mse"])
        lines.append(
            f"| {int(r['rows']):,} | {r['workers']} | {float(r['memory_limit_mb']):.0f} | {float(r['table_mb']):.0f} "
            f"| {float(r['parquet_mb']):.0f} | {r['partitions']} | {float(r['fit_s']):.0f} "
            f"| {r['measured_passes']} ({r['public_passes']}) | {float(r['per_pass_s']):.2f} | {r['peak_rss_mb']} "
            f"| {r['restarts']} | {r['paused_s']} | {float(r['mse_ratio']):.6f} "
            f"| {'-' if daskml != daskml else f'{daskml:.0f}'} "
            f"| {'-' if daskml != daskml else f'{daskml_ratio:.6f}'} |")
    lines += ["", "The library's own check (a dry fit of the shape, stopped before any value is read):", ""]
    lines += [f"* {n:,} rows x {D} columns: " + ("accepted" if ok else f"refused: {message}")
              for n, ok, message in checks]
    lines += per_pass_markdown(rows)
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=3_300_000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--memory-limit-mb", type=float, default=1200.0)
    parser.add_argument("--chunk-rows", type=int, default=50_000)
    parser.add_argument("--daskml", action="store_true")
    parser.add_argument("--worker-profile", action="store_true",
                        help="keep distributed's statistical profiler on in the workers (its default)")
    parser.add_argument("--tmp", default=None, help="where the temporary Parquet directory is made")
    args = parser.parse_args()

    from skdp.linear_model._rows import MAX_GATHERED_VALUES

    largest = MAX_GATHERED_VALUES // D
    checks = [(m, *accepted(m)) for m in (largest, largest + 1, 50_000_000)]
    for check in checks:
        print(check, flush=True)
    row = run(args)
    print(row, flush=True)
    RESULTS.mkdir(exist_ok=True)
    widen_csv(RESULTS / "out_of_core.csv", FIELDS)
    every = append_row(RESULTS / "out_of_core.csv", FIELDS, row)
    page = RESULTS / "out_of_core.md"
    notes = page.read_text() if page.exists() else ""
    notes = notes[notes.index("## Notes on these runs"):] if "## Notes on these runs" in notes else ""
    page.write_text(markdown(every, checks) + ("\n" + notes if notes else ""))


if __name__ == "__main__":
    main()
