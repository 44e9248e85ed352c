"""DPInterpolatingClassifier as a drop-in for LogisticRegression: accuracy, log loss and ROC AUC.

Every task is fitted by the default estimator (``DPInterpolatingClassifier(epsilon=...,
classes=...)`` and nothing else, as a user swapping ``LogisticRegression()`` writes it)
and by ``LogisticRegression(max_iter=10000)`` on the same raw features. Per fit it
records test accuracy, log loss, ROC AUC (binary: of the decision function; more
classes: one-vs-rest macro AUC of the probabilities), the log loss that the fit's
own decision values allow at best (a Platt or temperature fit *on the test rows*:
a measuring stick for the calibration, not a procedure), whether the private fit
check fell back to the prior, and the test share of the majority class.

Tasks: the small tables of scikit-learn (iris, wine, breast cancer; 75/25 stratified
splits), the tests' real tables at n = 8000 made binary by thresholding the target
at its 85th percentile (``tests/real_tables.py``), digits, and the separable and
label-flipped synthetic tasks of ``run.py``.

The script runs against whatever ``skdp`` is importable, so the same command gives
the "before" rows on an older checkout (``--label before`` with ``PYTHONPATH`` set to
it): only parameters that every version has are passed.

Usage: python benchmarks/classification/drop_in.py [--seeds 10] [--label after] [--tasks ...]
Resumable: cells already in the CSV are skipped. Summarise with
``python benchmarks/classification/drop_in.py --summary``.
"""

import argparse
import importlib.util
import sys
import warnings
from pathlib import Path

import numpy as np
from scipy import optimize, special
from sklearn.datasets import load_breast_cancer, load_digits, load_iris, load_wine
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import log_loss, roc_auc_score
from sklearn.model_selection import train_test_split

HERE = Path(__file__).resolve().parent
sys.path.append(str(HERE.parent / "heavy_tail"))
from _runner import append_results, finished  # noqa: E402
from run import TASKS as SYNTHETIC  # noqa: E402


def _tests_real_tables():
    """The tests' table generators (``tests/real_tables.py``; heavy_tail has a module of the same name)."""
    spec = importlib.util.spec_from_file_location("tests_real_tables", HERE.parent.parent / "tests" / "real_tables.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module

FIELDS = ("task", "label", "method", "epsilon", "seed", "accuracy", "log_loss", "roc_auc", "platt_log_loss",
          "fallback", "majority")
EPSILONS = (0.5, 1.0, 2.0, 4.0, float("inf"))
OUT = HERE / "results" / "drop_in.csv"


def _split(loader):
    def gen(seed):
        X, y = loader(return_X_y=True)
        Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.25, stratify=y, random_state=seed)
        return Xtr, ytr, Xte, yte
    return gen


def _real_table(name, n=8000, rate=0.15):
    def gen(seed):
        table = _tests_real_tables().TABLES[name](n, seed)
        threshold = np.quantile(table["y"], 1.0 - rate)
        return (table["X"], (table["y"] > threshold).astype(int), table["X_test"],
                (table["y_test"] > threshold).astype(int))
    return gen


SMALL = {"iris": _split(load_iris), "wine": _split(load_wine), "breast_cancer": _split(load_breast_cancer)}
REAL = {f"real_{name}": _real_table(name)
        for name in ("rare_binary", "counts", "lognormal", "offsets", "mixed_scales", "onehot50", "sparse_onehot")}
OTHER = {"digits": _split(load_digits), **{name: SYNTHETIC[name] for name in
                                            ("sep_n1000_d100", "flip5_n1000_d100", "flip20_n5000_d20")}}
TASKS = {**SMALL, **REAL, **OTHER}


def best_calibrated_log_loss(scores, y, n_classes):
    """The smallest test log loss of ``softmax(a * scores + b)`` (Platt for two classes, temperature otherwise)."""
    S = np.asarray(scores, dtype=float)
    if S.ndim == 1:
        S = np.column_stack([np.zeros_like(S), S])
        def unpack(t):
            return t[0], np.array([0.0, t[1]])
        start = np.array([1.0, 0.0])
    else:
        S = S - S.mean(axis=1, keepdims=True)
        def unpack(t):
            return t[0], 0.0
        start = np.array([1.0])
    S = S / max(float(np.median(np.abs(S))), 1e-300)

    def loss(t):
        a, b = unpack(t)
        return -special.log_softmax(a * S + b, axis=1)[np.arange(len(y)), y].mean()

    return float(optimize.minimize(loss, start, method="Nelder-Mead", options={"xatol": 1e-6, "fatol": 1e-9}).fun)


def run_cell(cell):
    task, label, method, eps, seed = cell
    import skdp
    from skdp import BudgetAccountant, DPInterpolatingClassifier
    Xtr, ytr, Xte, yte = TASKS[task](seed)
    classes = np.unique(np.concatenate([ytr, yte]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if method == "LogisticRegression":
            model = LogisticRegression(max_iter=10000).fit(Xtr, ytr)
            fallback = False
        else:
            model = DPInterpolatingClassifier(epsilon=eps, classes=classes, accountant=BudgetAccountant(),
                                              random_state=seed).fit(Xtr, ytr)
            fallback = bool(getattr(model, "fit_check_", {}).get("fallback", False))
        proba = np.clip(model.predict_proba(Xte), 1e-300, 1.0)
        scores = model.decision_function(Xte)
    labels = np.searchsorted(classes, yte)
    auc = (roc_auc_score(labels, scores) if len(classes) == 2
           else roc_auc_score(labels, proba, multi_class="ovr", labels=np.arange(len(classes))))
    del skdp
    return [{"task": task, "label": label, "method": method, "epsilon": eps, "seed": seed,
             "accuracy": float(np.mean(model.predict(Xte) == yte)),
             "log_loss": float(log_loss(labels, proba, labels=np.arange(len(classes)))), "roc_auc": float(auc),
             "platt_log_loss": best_calibrated_log_loss(scores, labels, len(classes)), "fallback": fallback,
             "majority": float(np.bincount(labels).max() / len(labels))}]


def summary(path=OUT):
    import pandas as pd
    frame = pd.read_csv(path)
    frame["epsilon"] = frame["epsilon"].astype(float)
    lr = frame[frame.method == "LogisticRegression"].groupby(["task"])[["accuracy", "log_loss", "roc_auc"]].median()
    dp = frame[frame.method == "default"]
    table = dp.groupby(["task", "epsilon", "label"]).agg(
        accuracy=("accuracy", "median"), log_loss=("log_loss", "median"), roc_auc=("roc_auc", "median"),
        platt=("platt_log_loss", "median"), fallback=("fallback", "mean"), majority=("majority", "median"),
        fits=("seed", "count"))
    table = table.join(lr.add_prefix("LR_"), on="task")
    table["ll_vs_LR"] = table["log_loss"] / table["LR_log_loss"]
    table["ll_vs_platt"] = table["log_loss"] / table["platt"]
    with pd.option_context("display.width", 250, "display.max_rows", 500, "display.float_format", "{:.3f}".format):
        print(table.to_string())
    return table


def markdown(table, path):
    """The before/after table as Markdown (medians over seeds)."""
    wide = table.reset_index().pivot_table(index=["task", "epsilon"], columns="label",
                                           values=["accuracy", "ll_vs_LR", "roc_auc", "fallback"])
    lines = ["# DPInterpolatingClassifier as a drop-in for LogisticRegression", "",
             "Median over seeds (10 for iris, wine and breast cancer, 3 for the others) of the default",
             "`DPInterpolatingClassifier(epsilon=...)` on 75/25 stratified splits; `before` is the estimator",
             "before the drop-in work (squared hinge, modified-Huber probabilities), `after` the drop-in work's.",
             "`log loss / LR` is the test log loss over `LogisticRegression()`'s; `fallback` the share of fits",
             "whose private check returned the prior. Generated by `drop_in.py --summary --markdown`.", "",
             "The two-class log loss of the current calibration (the histogram's counts as released, "
             "noise-weighted", "Platt equations) is in `calibration.md` (10 splits, with a decomposition); the "
             "`logistic` columns here", "are the calibration before it. `logistic` is the current default's loss: "
             "`loss=\"auto\"` trains the logistic loss for two classes",
             "too (`after` trained the squared hinge there; more classes were already the softmax).", "",
             "| task | epsilon | accuracy before | accuracy after | accuracy logistic | AUC before | AUC after "
             "| AUC logistic | log loss / LR before | log loss / LR after | log loss / LR logistic "
             "| fallback logistic | majority | LR accuracy |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    base = table.reset_index().groupby(["task"])[["majority", "LR_accuracy"]].median()
    now = "logistic_auto"
    for (task, eps), row in wide.iterrows():
        lines.append(f"| {task} | {eps:g} | {row[('accuracy', 'before')]:.3f} | {row[('accuracy', 'after')]:.3f} "
                     f"| {row[('accuracy', now)]:.3f} "
                     f"| {row[('roc_auc', 'before')]:.3f} | {row[('roc_auc', 'after')]:.3f} "
                     f"| {row[('roc_auc', now)]:.3f} "
                     f"| {row[('ll_vs_LR', 'before')]:.2f} | {row[('ll_vs_LR', 'after')]:.2f} "
                     f"| {row[('ll_vs_LR', now)]:.2f} "
                     f"| {row[('fallback', now)]:.2f} | {base.loc[task, 'majority']:.3f} "
                     f"| {base.loc[task, 'LR_accuracy']:.3f} |")
    Path(path).write_text("\n".join(lines) + "\n")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--label", default="after")
    parser.add_argument("--tasks", default=",".join(TASKS))
    parser.add_argument("--epsilons", default=",".join(str(e) for e in EPSILONS))
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--out", default=str(OUT))
    parser.add_argument("--summary", action="store_true")
    parser.add_argument("--markdown", default=None, help="with --summary: also write the table to this file")
    args = parser.parse_args()
    out = Path(args.out)
    if args.summary:
        table = summary(out)
        if args.markdown:
            markdown(table, args.markdown)
        return
    done = finished(out, lambda r: (r["task"], r["label"], r["method"], float(r["epsilon"]), int(r["seed"])))
    tasks = [t for t in args.tasks.split(",") if t]
    epsilons = [float(e) for e in args.epsilons.split(",")]
    todo = []
    for task in tasks:
        seeds = args.seeds if task in SMALL else max(1, args.seeds // 3)
        for seed in range(seeds):
            if args.label == "after" and (task, "reference", "LogisticRegression", float("inf"), seed) not in done:
                todo.append((task, "reference", "LogisticRegression", float("inf"), seed))
            for eps in epsilons:
                if (task, args.label, "default", eps, seed) not in done:
                    todo.append((task, args.label, "default", eps, seed))
    append_results(out, FIELDS, run_cell, todo, args.workers,
                   lambda r: f"{r['task']} {r['label']} {r['method']} eps={r['epsilon']} seed={r['seed']}")


if __name__ == "__main__":
    main()
