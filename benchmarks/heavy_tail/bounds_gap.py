"""Where the one-hot gap with declared bounds comes from (issue 26): counterfactual runs of both estimators.

The all-block one-hot tables (``sparse_onehot``: 10/50/200 Zipf levels; ``sparse_onehot4``: 8/30/100/300,
held out) at epsilon = 1 with the bounds a user would declare, each fit repeated with one source of error
removed or one variant of the method. The counterfactuals are *not private* (they replace released values
by exact ones after the release is made and accounted, so the plan and the ledger are unchanged): they
measure, never ship.

Variants (``--variants``, comma separated):

``base``        the library as it is;
``eps2``        epsilon = 2;
``nograd``      the solver's gradient releases without noise (clipped as usual);
``nogram``      the second-moment matrix exact (its noise level still sets the whitening's floors);
``gram_means``  only the column means of the second-moment matrix exact;
``steps=T``     ``max_iter=T``;
``block_clip=RULE`` (regressor) each block's part of a row's gradient clipped to its own threshold
                ``C_b = C sqrt(share_b)`` (the shares' sum is 1, so the release's sensitivity stays ``2 C``),
                shares ``equal``, by block ``width`` or ``sqrtwidth`` (the intercept a block of width 1).

Regressor: R^2 over Ridge(alpha=1)'s, n in ``--sizes``; classifier: ROC AUC (n = 8000, 15% positives).
Results: printed, one line per variant (median and range over the splits); see results/bounds_gap.md.

Usage::

    nice -n 10 python benchmarks/heavy_tail/bounds_gap.py --estimator regressor --splits 10 \\
        --variants base,nograd,nogram,eps2
    nice -n 10 python benchmarks/heavy_tail/bounds_gap.py --estimator classifier --splits 5 --variants base,gram_means
"""

import argparse
import math
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.metrics import roc_auc_score

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "tests"))
import real_tables  # noqa: E402

import skdp.linear_model._standardise as standardise  # noqa: E402
import skdp.solvers.heavy_tail.clipped_gd as heavy_tail_gd  # noqa: E402
import skdp.solvers.interpolation.clipped_gd as interpolation_gd  # noqa: E402
from skdp import BudgetAccountant, DPHeavyTailRegressor, DPInterpolatingClassifier  # noqa: E402
from skdp.solvers.problem import GLMProblem  # noqa: E402


def _table(name, n, seed):
    return real_tables.TABLES[name](n, seed) if name in real_tables.TABLES else getattr(real_tables, name)(n, seed)


def _exact_gram(part):
    """The released second moments replaced by exact ones (all, or only the column means)."""
    original = standardise.release_second_moment

    def release(gram_sum, n, bound, noise_std, random_state=None):
        noisy, event = original(gram_sum, n, bound, noise_std, random_state=random_state)
        exact, _ = original(gram_sum, n, bound, 0.0)
        if part == "means":
            d = noisy.shape[0] - 1
            noisy[:d, d] = noisy[d, :d] = exact[:d, d]
            noisy[d, d] = exact[d, d]
            return noisy, event
        return exact, event

    standardise.release_second_moment = release


def _noise_free_gradients():
    original_reg = heavy_tail_gd.noisy_clipped_gradient
    heavy_tail_gd.noisy_clipped_gradient = lambda problem, w, C, sigma, rng, rows=None: original_reg(
        problem, w, C, 0.0, rng, rows)
    original_clf = interpolation_gd.release_vector

    def release(value, sensitivity, budget, rng):
        _, event = original_clf(value, sensitivity, budget, rng)
        return np.asarray(value, dtype=float), event

    interpolation_gd.release_vector = release


class _BlockClip:
    """Per-block clipping of the regressor's per-row gradients on rows ``[u, kappa]`` with a diagonal whitening."""

    def __init__(self, rule):
        self.rule, self.blocks, self.levels = rule, None, None
        self.original = GLMProblem.clipped_gradient_sum
        GLMProblem.clipped_gradient_sum = self._sum_of(self)

    def set_table(self, X, blocks):
        X = X.tocsr()
        self.blocks = [np.asarray(list(block)) for block in blocks]
        self.levels = []
        for cols in self.blocks:
            sub = X[:, cols]
            level = np.asarray(sub.argmax(axis=1)).ravel() + cols[0]
            level[np.asarray(sub.sum(axis=1)).ravel() == 0] = -1
            self.levels.append(level)
        widths = np.array([len(c) for c in self.blocks] + [1], dtype=float)
        weights = {"equal": np.ones_like(widths), "width": widths, "sqrtwidth": np.sqrt(widths)}[self.rule]
        self.shares = weights / weights.sum()

    @staticmethod
    def _sum_of(state):
        def clipped_sum(problem, w, clip, rows=None):
            D = problem.X
            A = getattr(D, "A", None)
            if (rows is not None or A is None or D.factors is not None or state.blocks is None
                    or (A.ndim == 2 and np.count_nonzero(A - np.diag(np.diag(A))))):
                return state.original(problem, w, clip, rows)
            A = np.diag(A) if A.ndim == 2 else A
            deriv = np.nan_to_num(problem.derivatives(w, rows))
            out = np.zeros(D.shape[1])
            for k, cols in enumerate(state.blocks):
                b, a = D.b[cols], A[cols]
                level = state.levels[k]
                j = np.where(level >= 0, level, cols[0])
                base = float(b @ b)
                # The block part of a row: a_j e_j - b (its level's entry minus the centring), or -b.
                norms = np.sqrt(np.maximum(np.where(level >= 0, base - D.b[j] ** 2 + (A[j] - D.b[j]) ** 2, base),
                                           0.0))
                v = deriv * np.minimum(1.0, clip * math.sqrt(state.shares[k]) / np.maximum(np.abs(deriv) * norms,
                                                                                            1e-300))
                out[cols] = a * np.asarray(D.X[:, cols].T @ v).ravel() - b * v.sum()
            if D.intercept_value is not None:
                kappa = abs(D.intercept_value)
                v = deriv * np.minimum(1.0, clip * math.sqrt(state.shares[-1]) / np.maximum(np.abs(deriv) * kappa,
                                                                                             1e-300))
                out[-1] = D.intercept_value * v.sum()
            return out

        return clipped_sum


def run(estimator, variant, table, n, splits):
    epsilon, params, block_clip = 1.0, {}, None
    if variant == "eps2":
        epsilon = 2.0
    elif variant == "nograd":
        _noise_free_gradients()
    elif variant == "nogram":
        _exact_gram("all")
    elif variant == "gram_means":
        _exact_gram("means")
    elif variant.startswith("steps="):
        params["max_iter"] = int(variant.split("=")[1])
    elif variant.startswith("block_clip="):
        block_clip = _BlockClip(variant.split("=")[1])
    elif variant != "base":
        raise ValueError(f"unknown variant {variant!r}")
    scores = []
    for seed in range(splits):
        data = _table(table, n if estimator == "regressor" else 8000, seed)
        bounds = real_tables.user_bounds("sparse_onehot", data)
        if block_clip is not None:
            block_clip.set_table(data["X"], bounds.blocks)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if estimator == "regressor":
                ridge = Ridge(alpha=1.0).fit(data["X"], data["y"])
                model = DPHeavyTailRegressor(epsilon=epsilon, delta=1e-5, bounds=bounds, random_state=10_000 * seed + 7,
                                             accountant=BudgetAccountant(), **params).fit(data["X"], data["y"])
                scores.append(real_tables.holdout_r2(data, model.predict(data["X_test"]))
                              / real_tables.holdout_r2(data, ridge.predict(data["X_test"])))
            else:
                threshold = np.quantile(data["y"], 0.85)
                y, y_test = (data["y"] > threshold).astype(int), (data["y_test"] > threshold).astype(int)
                model = DPInterpolatingClassifier(epsilon=epsilon, classes=[0, 1], bounds=bounds, random_state=seed,
                                                  accountant=BudgetAccountant(), **params).fit(data["X"], y)
                lr = LogisticRegression(max_iter=10000).fit(data["X"], y)
                scores.append((roc_auc_score(y_test, model.decision_function(data["X_test"])),
                               roc_auc_score(y_test, lr.decision_function(data["X_test"]))))
    return scores


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--estimator", choices=("regressor", "classifier"), default="regressor")
    parser.add_argument("--table", default="sparse_onehot")
    parser.add_argument("--sizes", default="10000")
    parser.add_argument("--splits", type=int, default=10)
    parser.add_argument("--variants", default="base")
    args = parser.parse_args()
    variants = args.variants.split(",")
    if len(variants) > 1:  # the counterfactuals patch the library: one process per variant
        for variant in variants:
            subprocess.run([sys.executable, __file__, "--estimator", args.estimator, "--table", args.table,
                            "--sizes", args.sizes, "--splits", str(args.splits), "--variants", variant], check=True)
        return
    for variant in variants:
        for n in [int(s) for s in args.sizes.split(",")]:
            scores = run(args.estimator, variant, args.table, n, args.splits)
            if args.estimator == "classifier":
                auc = np.array([s[0] for s in scores])
                lr = np.array([s[1] for s in scores])
                print(f"{args.table} classifier {variant}: AUC median {np.median(auc):.4f} "
                      f"[{auc.min():.3f}, {auc.max():.3f}] (LogisticRegression {np.median(lr):.4f}) "
                      f"{np.round(auc, 3).tolist()}", flush=True)
            else:
                r = np.array(scores)
                print(f"{args.table} n={n} regressor {variant}: R2/Ridge median {np.median(r):.3f} "
                      f"[{r.min():.3f}, {r.max():.3f}] {np.round(r, 3).tolist()}", flush=True)


if __name__ == "__main__":
    main()
