"""Where the two-class log loss goes: a decomposition of the private calibration.

The default ``DPInterpolatingClassifier`` on the binary tasks of ``drop_in.py``
(the tests' real tables at n = 8000 with 15% positives, breast cancer), with its
calibration replaced, one variant at a time, by:

* ``before``: the estimator until the noise-weighted equations: a ridge towards
  the prior of 1e-3 per row, and the pooled counts clipped at 0 before the
  unweighted Platt equations;
* ``clipped``: the same with the ridge at :data:`PLATT_RIDGE_CELLS` of one
  cell's noise (the weighted fit's start and fallback);
* ``weighted``: the default (the counts as released, noise-weighted equations);
* ``no noise``: the default's histogram (same bins, same clip, same score scale)
  released without noise: what the binning alone costs;
* ``exact``: Platt scaling on the training rows' scores themselves (no histogram,
  no noise): the best a map fitted on the training rows can do;
* ``test Platt``: the best Platt map of the default's decision values *on the
  test rows*: a measuring stick of the ranking, not a procedure.

Everything else (the solver's model, the prior, the check) is the same fit:
every variant releases the same event, and the model before calibration is the
same in every variant (the calibration comes after the solver). Numbers are the
median over seeds of the test log loss over ``LogisticRegression()``'s on the
same split.

Usage: python benchmarks/classification/calibration.py [--seeds 10] [--epsilons 0.5,1,2,4]
Writes results/calibration.md.
"""

import argparse
import math
import sys
import warnings
from pathlib import Path

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import log_loss, roc_auc_score

import skdp.linear_model._calibration as calibration_module
import skdp.linear_model._interpolating as interpolating_module
from skdp import BudgetAccountant, DPInterpolatingClassifier

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from drop_in import TASKS, best_calibrated_log_loss  # noqa: E402

OUT = HERE / "results" / "calibration.md"
BINARY = ("real_counts", "real_rare_binary", "real_onehot50", "real_lognormal", "real_offsets",
          "real_mixed_scales", "real_sparse_onehot", "breast_cancer")
VARIANTS = ("before", "clipped", "weighted", "no noise", "exact")
ORIGINAL = {"private_calibration": interpolating_module.private_calibration,
            "weighted": calibration_module._weighted_platt_equations,
            "equations": calibration_module._platt_equations,
            "bins": calibration_module.histogram_bins}


def _restore():
    interpolating_module.private_calibration = ORIGINAL["private_calibration"]
    calibration_module._weighted_platt_equations = ORIGINAL["weighted"]
    calibration_module._platt_equations = ORIGINAL["equations"]
    calibration_module.histogram_bins = ORIGINAL["bins"]


def _with_budget(level_of, quantile_epsilon_of):
    """private_calibration run at another budget; the event is the default's (the plan's check holds)."""
    original = ORIGINAL["private_calibration"]

    def calibrate(scores, labels, prior, budget, quantile_epsilon, rng, **kwargs):
        calibration_module.histogram_bins = lambda n, _: ORIGINAL["bins"](n, budget)
        try:
            result, _ = original(scores, labels, prior, (budget[0], level_of(budget)),
                                 quantile_epsilon_of(quantile_epsilon), np.random.default_rng(0), **kwargs)
        finally:
            calibration_module.histogram_bins = ORIGINAL["bins"]
        return result, original(scores, labels, prior, budget, quantile_epsilon, rng, **kwargs)[1]

    return calibrate


def use(variant):
    """Install one calibration variant (see the module docstring)."""
    _restore()
    if variant in ("before", "clipped"):
        calibration_module._weighted_platt_equations = lambda *args: None
    if variant == "before":
        def fixed_ridge(centres, positives, totals, ridge, penalty, anchor, max_iter=100):
            return ORIGINAL["equations"](centres, positives, totals, 1e-3, penalty, anchor, max_iter)
        calibration_module._platt_equations = fixed_ridge
    elif variant == "no noise":
        interpolating_module.private_calibration = _with_budget(lambda budget: 1e9, lambda eps: eps)
    elif variant == "exact":
        interpolating_module.private_calibration = _with_budget(lambda budget: math.inf, lambda eps: math.inf)


def run(tasks, epsilons, seeds):
    rows = []
    for task in tasks:
        for seed in range(seeds):
            Xtr, ytr, Xte, yte = TASKS[task](seed)
            reference = log_loss(yte, LogisticRegression(max_iter=10000).fit(Xtr, ytr).predict_proba(Xte))
            for eps in epsilons:
                for variant in VARIANTS:
                    use(variant)
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        model = DPInterpolatingClassifier(epsilon=eps, classes=[0, 1], accountant=BudgetAccountant(),
                                                          random_state=seed).fit(Xtr, ytr)
                    _restore()
                    scores = model.decision_function(Xte)
                    rows.append({"task": task, "epsilon": eps, "seed": seed, "variant": variant,
                                 "ratio": log_loss(yte, model.predict_proba(Xte)) / reference,
                                 "platt": best_calibrated_log_loss(scores, yte, 2) / reference,
                                 "auc": roc_auc_score(yte, scores)})
            print(task, seed, flush=True)
    return rows


def markdown(rows, seeds):
    import pandas as pd
    table = pd.DataFrame(rows)
    ratio = table.pivot_table(index=["task", "epsilon"], columns="variant", values="ratio", aggfunc="median")
    platt = table[table.variant == "weighted"].groupby(["task", "epsilon"]).platt.median()
    lines = ["# Where the two-class log loss goes: the private calibration", "",
             f"Median over {seeds} splits of the test log loss over `LogisticRegression()`'s, default",
             "`DPInterpolatingClassifier(epsilon=...)` with its calibration replaced by each variant (the",
             "model before calibration and the released event are the same in every column). Generated by",
             "`calibration.py`; the variants are described in its docstring.", "",
             "| task | epsilon | before | clipped | weighted (default) | no noise | exact | test Platt |",
             "|---|---|---|---|---|---|---|---|"]
    for (task, eps), row in ratio.iterrows():
        lines.append(f"| {task} | {eps:g} | {row['before']:.3f} | {row['clipped']:.3f} | {row['weighted']:.3f} "
                     f"| {row['no noise']:.3f} | {row['exact']:.3f} | {platt[(task, eps)]:.3f} |")
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--epsilons", default="0.5,1,2,4")
    parser.add_argument("--tasks", default=",".join(BINARY))
    args = parser.parse_args()
    rows = run(args.tasks.split(","), [float(e) for e in args.epsilons.split(",")], args.seeds)
    OUT.write_text(markdown(rows, args.seeds))
    print(OUT.read_text())


if __name__ == "__main__":
    main()
