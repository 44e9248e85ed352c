"""Where the noise-floor method's gap to the oracle strength comes from, on the Lasso task (same noise stream).

Per seed of ``lasso`` (d = 200, 10 non-zero coefficients; or ``--problem``, in the Lasso form
``DPHeavyTailRegressor(l1_ratio=1)``) at ``--n`` rows and ``--epsilon``, every fit
through ``DPRegularizationTuner`` with ``random_state = 1000 * seed + 17`` (one noise stream, as in
``sweep.py --same-stream``):

* ``default``: ``method="default"`` (the estimator's one fit at the whole budget);
* ``oracle``: the best on test rows of ``method="default"`` at every alpha of the Lasso grid;
* for each share of the draw (``FLOOR_SCORE_SHARE``, the library's 0.05 and others): ``method="noise_floor"``,
  and from the same run its two candidates, the fitted model (at 1 - share of the zero-concentrated budget)
  and its hard threshold at the noise floor, each scored on the test rows and on the training rows;
* ``threshold of the default``: the hard threshold applied to the default's own fit (a choice that would
  cost no budget, if a rule on released values alone could make it).

Reported, as ``sweep.py`` does: ``closed`` = median over seeds of the gain over the default / median over
seeds of the oracle's gain. The decomposition: the draw as run; a perfect chooser between the same two
candidates (the better on test rows, at no cost: an upper bound on any rule for choosing between them);
the same with the fit at the whole budget (the share's cost removed); the training-row optimism of the
fitted model against the thresholded one (test gain minus training gain, in MSE), against
``2 sigma^2 k / n`` (``k`` coefficients zeroed, ``sigma^2`` the task's noise variance: the optimism of a
least-squares fit of ``k`` more columns).

Usage::

    nice -n 10 python benchmarks/tuning/floor_decomposition.py [--problem lasso] [--seeds 20] [--n 2000]
        [--epsilon 1] [--shares 0.05 0.02 0.1]

Writes ``results/floor_decomposition.md`` (``lasso``) or ``results/floor_decomposition_<problem>.md``.
"""

import argparse
import os
import sys
import warnings

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import skdp.model_selection._tuner as tuner_module  # noqa: E402
from skdp.linear_model import DPHeavyTailRegressor  # noqa: E402
from skdp.model_selection import DPRegularizationTuner  # noqa: E402
from skdp.model_selection._noise_floor import threshold_at_noise_floor  # noqa: E402

from default_vs_tuned import LASSO_GRID, data_for, fit_on_own_ledger, lasso  # noqa: E402

RESULTS = os.path.join(HERE, "results")


def out_path(problem):
    return os.path.join(RESULTS, "floor_decomposition.md" if problem == "lasso" else
                        f"floor_decomposition_{problem}.md")


def mse_of(model, coef, intercept, X, y):
    """Mean squared error of the pipeline ``model`` with its final estimator's coefficients replaced."""
    est = model[-1] if not hasattr(model[-1], "best_estimator_") else model[-1].best_estimator_
    kept = est.coef_, est.intercept_
    est.coef_, est.intercept_ = coef, intercept
    try:
        return float(np.mean((y - model.predict(X)) ** 2))
    finally:
        est.coef_, est.intercept_ = kept


def noise_floor_run(data, rs, epsilon, share):
    """``method="noise_floor"`` at a draw share; its result and both candidates' test and training MSE."""
    seen = {}
    original_threshold, original_share = tuner_module.threshold_at_noise_floor, tuner_module.FLOOR_SCORE_SHARE

    def recording(coef, intercept, scaling, noise_sd):
        found = original_threshold(coef, intercept, scaling, noise_sd)
        seen.update(fitted=(np.array(coef, copy=True), intercept), found=found)
        return found

    tuner_module.threshold_at_noise_floor, tuner_module.FLOOR_SCORE_SHARE = recording, share
    try:
        tuner = DPRegularizationTuner(DPHeavyTailRegressor(l1_ratio=1.0), method="noise_floor", epsilon=epsilon)
        model, _, spent = fit_on_own_ledger(tuner, data, rs)
    finally:
        tuner_module.threshold_at_noise_floor, tuner_module.FLOOR_SCORE_SHARE = original_threshold, original_share
    found = seen["found"]
    out = {"chosen": float(np.mean((data["y_test"] - model.predict(data["X_test"])) ** 2)),
           "thresholded": model[-1].noise_floor_ is not None, "spent": spent, "zeroed": found.n_zeroed}
    for name, (coef, intercept) in (("fit", seen["fitted"]), ("thr", (found.coef, found.intercept))):
        out[f"{name}_test"] = mse_of(model, coef, intercept, data["X_test"], data["y_test"])
        out[f"{name}_train"] = mse_of(model, coef, intercept, data["X"], data["y"])
    return out


def default_fit(data, rs, epsilon, alpha=None):
    estimator = DPHeavyTailRegressor(l1_ratio=1.0) if alpha is None else DPHeavyTailRegressor(l1_ratio=1.0,
                                                                                              alpha=alpha)
    model, _, _ = fit_on_own_ledger(DPRegularizationTuner(estimator, method="default", epsilon=epsilon), data, rs)
    return model


def run(problem, seeds, n, epsilon, shares):
    per_seed = []
    for seed in range(seeds):
        data = lasso(n, seed) if problem == "lasso" else data_for(problem, n, seed)
        rs = 1000 * seed + 17
        default = default_fit(data, rs, epsilon)

        def test(model, data=data):
            return float(np.mean((data["y_test"] - model.predict(data["X_test"])) ** 2))

        row = {"default": test(default)}
        row["oracle"] = min([row["default"]] + [test(default_fit(data, rs, epsilon, a)) for a in LASSO_GRID if a])
        est = default[-1].best_estimator_
        found = threshold_at_noise_floor(est.coef_, est.intercept_, est.scaling_,
                                         getattr(est, "schedule_", {}).get("averaged_noise_sd"))
        row["default_thr"] = mse_of(default, found.coef, found.intercept, data["X_test"], data["y_test"])
        design = np.c_[np.asarray(data["X_test"], dtype=float), np.ones(len(data["y_test"]))]
        noise_var = float(np.var(data["y_test"] - design @ np.linalg.lstsq(design, data["y_test"], rcond=None)[0]))
        row["theory_optimism"] = 2.0 * noise_var * found.n_zeroed / n
        for share in shares:
            row[share] = noise_floor_run(data, rs, epsilon, share)
        per_seed.append(row)
        print(seed, {k: (round(v, 3) if isinstance(v, float) else v) for k, v in row.items()
                     if not isinstance(k, float)}, flush=True)
    return per_seed


def summarize(problem, per_seed, n, epsilon, shares):
    default = np.array([r["default"] for r in per_seed])
    gap = float(np.median(default - np.array([r["oracle"] for r in per_seed])))
    gap = gap if gap > 0 else float("nan")  # no oracle gain: nothing to close

    def line(name, values, note=""):
        gain = float(np.median(default - np.asarray(values)))
        wins = int(np.sum(default - np.asarray(values) > 0))
        return f"| {name} | {np.median(values):.3f} | {gain:+.3f} | {gain / gap:.2f} | {wins}/{len(values)} | {note} |"

    q = np.percentile(default, [25, 75])
    task = "Lasso task (d = 200, 10 non-zero)" if problem == "lasso" else f"`{problem}` task (the Lasso form)"
    lines = [f"# The noise-floor method on the {problem} task: where the gap to the oracle comes from", "",
             f"Generated by `python benchmarks/tuning/floor_decomposition.py --problem {problem} --seeds "
             f"{len(per_seed)} --n {n} --epsilon {epsilon:g} --shares {' '.join(f'{s:g}' for s in shares)}`. "
             f"{task}, n = {n}, epsilon = {epsilon:g}, {len(per_seed)} seeds, every fit on the tuner's noise "
             "stream. Test MSE medians; `gain`: median over seeds of the default's MSE minus the row's; "
             "`closed`: gain / the oracle's gain (as in `sweep_same_stream.md`); `wins`: seeds better than "
             "the default.", "",
             f"Default {np.median(default):.3f} (IQR {q[1] - q[0]:.3f}); oracle gain {gap:.3f}.", "",
             "| model | test MSE | gain | closed | wins | |", "|---|---|---|---|---|---|",
             line("default (whole budget, dense)", default),
             line("oracle strength (test rows)", [r["oracle"] for r in per_seed]),
             line("default's fit, hard-thresholded (no draw)", [r["default_thr"] for r in per_seed]),
             line("perfect chooser on the default's fit (free)",
                  [min(r["default"], r["default_thr"]) for r in per_seed], "upper bound: no budget for the choice")]
    for share in shares:
        runs = [r[share] for r in per_seed]
        tag = f"share {share:g}" + (" (the library's)" if share == tuner_module.FLOOR_SCORE_SHARE else "")
        lines += [line(f"noise_floor, {tag}: as drawn", [x["chosen"] for x in runs],
                       f"thresholded on {sum(x['thresholded'] for x in runs)} seeds"),
                  line(f"{tag}: its fitted model", [x["fit_test"] for x in runs], "the fit at 1 - share"),
                  line(f"{tag}: its thresholded model", [x["thr_test"] for x in runs]),
                  line(f"{tag}: perfect chooser", [min(x["fit_test"], x["thr_test"]) for x in runs],
                       "the better of the two on test rows")]
    runs = [r[shares[0]] for r in per_seed]
    optimism = [(x["fit_test"] - x["thr_test"]) - (x["fit_train"] - x["thr_train"]) for x in runs]
    theory = [r["theory_optimism"] for r in per_seed]
    oq = np.percentile(optimism, [25, 75])
    lines += ["", f"Training-row optimism of the fitted model against its threshold (share {shares[0]:g}; test gain "
              f"minus training gain of the thresholded model, MSE): median {np.median(optimism):.3f} "
              f"[{oq[0]:.3f}, {oq[1]:.3f}], against 2 sigma^2 k / n = {np.median(theory):.3f} (median; k the "
              "coefficients zeroed, sigma^2 the noise variance of the task's test rows around their least-squares "
              "fit). The draw scores the candidates on the training rows, so it sees the thresholded model's gain "
              "minus this optimism."]
    lines += ["", f"Per seed (test MSE; share {shares[0]:g} for the noise-floor columns; `zeroed`: coefficients "
              "below the floor; `training gain`: the thresholded model's gain on the training rows, what the draw "
              "scores):", "",
              "| seed | default | oracle | default thresholded | fitted | thresholded | drawn | zeroed "
              "| test gain | training gain |", "|---|---|---|---|---|---|---|---|---|---|"]
    for seed, (r, x) in enumerate(zip(per_seed, runs)):
        lines.append(f"| {seed} | {r['default']:.2f} | {r['oracle']:.2f} | {r['default_thr']:.2f} | {x['fit_test']:.2f} "
                     f"| {x['thr_test']:.2f} | {x['chosen']:.2f} | {x['zeroed']} | {x['fit_test'] - x['thr_test']:+.2f} "
                     f"| {x['fit_train'] - x['thr_train']:+.2f} |")
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--problem", default="lasso", help="lasso, or a problem of default_vs_tuned.data_for")
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--shares", type=float, nargs="+", default=[0.05, 0.02, 0.1])
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    per_seed = run(args.problem, args.seeds, args.n, args.epsilon, args.shares)
    text = summarize(args.problem, per_seed, args.n, args.epsilon, args.shares)
    print(text)
    with open(out_path(args.problem), "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()
