"""Awkward tables for private linear regression, generated (no downloads).

The shapes scikit-learn users feed to a regressor, each with a target linear in its
features: dummy-coded categoricals, rare binary columns, counts, integer codes, skewed
amounts, columns with huge offsets, mixed scales, constant columns, a large target
offset, a sparse one-hot matrix, and a pandas frame through the standard
``ColumnTransformer`` + ``OneHotEncoder`` recipe. Used by
``tests/linear_model/test_real_tables.py`` and ``benchmarks/heavy_tail/real_tables.py``
(the generators follow the research note on issue 11; same draws for the same seed).

Every generator is ``(n, seed) -> dict`` with

* ``X``, ``y``: ``n`` training rows (``X`` a float ndarray, a scipy CSR matrix, or a
  pandas DataFrame for the ``ct_*`` tables);
* ``X_test``, ``y_test``: ``N_TEST`` test rows from the same distribution;
* ``wrap``: ``None``, or ``wrap(estimator, dense=False) -> Pipeline`` (the ``ct_*``
  tables) to apply to every estimator, private or not; ``dense=True`` makes the
  encoder's output dense (by default it is OneHotEncoder's sparse output);
* ``bayes``: the test MSE of the true model.

Targets have Gaussian, Student-t(5) or skewed noise, scaled so that the Bayes R^2 is
0.85 (0.88 for ``rare_binary``); categorical level frequencies are Zipf-skewed.

``TABLES`` maps the name of each table to its generator; what each one exercises:

=================  =========================================================================
onehot2            5 N(0, 1) columns + full dummy coding of a 2-level categorical (80/20)
onehot4, onehot50  ... of a 4- or 50-level categorical (Zipf frequencies)
onehot200          ... of a 200-level categorical: most levels have a few dozen rows
rare_binary        a 0/1 column with 5% ones (coefficient 3) among 5 N(0, 1) columns
counts             Poisson(3), Poisson(0.3) (mostly zero), negative binomial counts; t(5) noise
int_codes          integer codes: age 18..90, rating 1..5, a 0..999 code, a year 1990..2020
lognormal          skewed positive amounts (1000 x log-normal) and skewed (gamma) noise
offsets            columns 1e4 + N(0, 1) and 1e6 + N(0, 1), both informative
mixed_scales       N(0, s^2) columns with s from 1e-3 to 1e4 (effects of similar size)
constant           a constant column (7.0) and an all-zero column
y_offset           the target offset by 1e6
sparse_onehot      a scipy CSR matrix: OneHotEncoder of 10-, 50- and 200-level categoricals
ct_scale           a DataFrame through ColumnTransformer(StandardScaler, OneHotEncoder)
ct_passthrough     the same with the numeric columns passed through unscaled
=================  =========================================================================

:func:`user_bounds` gives, for every table, the bounds a user would declare: the categories
(one-hot blocks of ``(0, 1)`` columns) and round public ranges of the numeric columns
(``USER_BOUNDS``), not the data's minima and maxima.

Also: :func:`informative_heavy_tail` (the benchmark's second synthetic task: the
heavy tails carry the signal), :func:`zero_inflated` (an open risk of the note, not
in ``TABLES``), and :class:`ExactLeastSquares`, the least-squares reference on
standardised features (scikit-learn's ``LinearRegression`` is numerically off on
``mixed_scales``, and uses an iterative solver on sparse input).
"""

import numpy as np
import scipy.linalg
import scipy.sparse as sp
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.utils.validation import check_is_fitted, validate_data

__all__ = ["TABLES", "N_TEST", "USER_BOUNDS", "user_bounds", "informative_heavy_tail", "zero_inflated", "sparse_onehot4", "ExactLeastSquares",
           "exact_least_squares", "fit_predict", "holdout_mse", "holdout_r2"]

N_TEST = 10_000


# -- helpers ---------------------------------------------------------------------------------
def _zipf_probs(levels, rng, a=1.1):
    """Zipf(a) level frequencies in a random order."""
    p = 1.0 / np.arange(1, levels + 1) ** a
    return (p / p.sum())[rng.permutation(levels)]


def _onehot(codes, levels):
    out = np.zeros((codes.size, levels))
    out[np.arange(codes.size), codes] = 1.0
    return out


def _noise(signal, r2, rng, kind="normal"):
    """Noise of variance ``var(signal) (1 - r2) / r2``, so the Bayes R^2 is ``r2``."""
    sd = np.sqrt(np.var(signal) * (1 - r2) / r2)
    m = signal.size
    if kind == "normal":
        e = rng.normal(size=m)
    elif kind == "t5":  # unit variance
        e = rng.standard_t(5, size=m) / np.sqrt(5 / 3)
    elif kind == "skewed":  # centred unit-variance gamma(2), skewness 1.4
        e = (rng.gamma(2.0, size=m) - 2.0) / np.sqrt(2.0)
    else:
        raise ValueError(kind)
    return sd * e


def _split(rng, build, n, r2=0.85, noise="normal"):
    """Draw ``n + N_TEST`` rows with ``build(rng, m) -> (X, signal)`` and add noise."""
    X, signal = build(rng, n + N_TEST)
    e = _noise(signal, r2, rng, noise)
    y = signal + e
    return dict(X=X[:n], y=y[:n], X_test=X[n:], y_test=y[n:], wrap=None, bayes=float(np.mean(e[n:] ** 2)))


# -- tables ----------------------------------------------------------------------------------
def _onehot_table(levels):
    def gen(n, seed):
        rng = np.random.default_rng([seed, levels])
        probs = np.array([0.8, 0.2]) if levels == 2 else _zipf_probs(levels, rng)
        beta = rng.normal(size=5)
        effects = rng.normal(size=levels)

        def build(rng, m):
            num = rng.normal(size=(m, 5))
            codes = rng.choice(levels, size=m, p=probs)
            return np.hstack([num, _onehot(codes, levels)]), num @ beta + effects[codes]

        return _split(rng, build, n)

    gen.__name__ = gen.__qualname__ = f"onehot{levels}"
    gen.__doc__ = f"5 N(0, 1) columns and full dummy coding of a {levels}-level categorical."
    return gen


def rare_binary(n, seed):
    """5 N(0, 1) columns and one 0/1 column with 5% ones (coefficient 3)."""
    rng = np.random.default_rng([seed, 11])
    beta = np.append(rng.normal(size=5), 3.0)

    def build(rng, m):
        X = np.column_stack([rng.normal(size=(m, 5)), rng.random(m) < 0.05]).astype(float)
        return X, X @ beta

    return _split(rng, build, n, r2=0.88)


def counts(n, seed):
    """Poisson(3), Poisson(0.3), negative binomial (mean 5, size 1) counts and 3 N(0, 1); t(5) noise."""
    rng = np.random.default_rng([seed, 12])
    beta = rng.normal(size=6) * np.array([0.5, 2.0, 0.2, 1.0, 1.0, 1.0])

    def build(rng, m):
        X = np.column_stack([rng.poisson(3.0, m), rng.poisson(0.3, m), rng.negative_binomial(1, 1 / 6, m),
                             rng.normal(size=(m, 3))]).astype(float)
        return X, X @ beta

    return _split(rng, build, n, noise="t5")


def int_codes(n, seed):
    """Integer codes: age 18..90, rating 1..5, a code 0..999, a year 1990..2020; and 2 N(0, 1)."""
    rng = np.random.default_rng([seed, 13])
    beta = rng.normal(size=6) * np.array([0.05, 0.5, 0.002, 0.1, 1.0, 1.0])

    def build(rng, m):
        X = np.column_stack([rng.integers(18, 91, m), rng.integers(1, 6, m), rng.integers(0, 1000, m),
                             rng.integers(1990, 2021, m), rng.normal(size=(m, 2))]).astype(float)
        return X, X @ beta

    return _split(rng, build, n)


def lognormal(n, seed):
    """Skewed positive amounts (3 columns of 1000 x log-normal(0, 1)) and 2 N(0, 1); skewed noise."""
    rng = np.random.default_rng([seed, 14])
    beta = rng.normal(size=5) * np.array([1e-3, 1e-3, 1e-3, 1.0, 1.0])

    def build(rng, m):
        X = np.column_stack([1000 * rng.lognormal(0, 1, (m, 3)), rng.normal(size=(m, 2))])
        return X, X @ beta

    return _split(rng, build, n, noise="skewed")


def offsets(n, seed):
    """Columns 1e4 + N(0, 1) and 1e6 + N(0, 1) (both informative) among 3 N(0, 1)."""
    rng = np.random.default_rng([seed, 15])
    beta = rng.normal(size=5)

    def build(rng, m):
        Z = rng.normal(size=(m, 5))
        return Z + np.array([1e4, 1e6, 0.0, 0.0, 0.0]), Z @ beta

    return _split(rng, build, n)


def mixed_scales(n, seed):
    """Six N(0, s^2) columns, s in {1e-3, 1e-2, 1, 1e2, 1e3, 1e4}, effects of similar size."""
    rng = np.random.default_rng([seed, 16])
    scales = np.array([1e-3, 1e-2, 1.0, 1e2, 1e3, 1e4])
    beta = rng.normal(size=6) / scales

    def build(rng, m):
        X = rng.normal(size=(m, 6)) * scales
        return X, X @ beta

    return _split(rng, build, n)


def constant(n, seed):
    """5 N(0, 1) columns, a constant column (7.0) and an all-zero column."""
    rng = np.random.default_rng([seed, 17])
    beta = rng.normal(size=5)

    def build(rng, m):
        Z = rng.normal(size=(m, 5))
        return np.column_stack([Z, np.full(m, 7.0), np.zeros(m)]), Z @ beta

    return _split(rng, build, n)


def y_offset(n, seed):
    """5 N(0, 1) columns, the target offset by 1e6."""
    rng = np.random.default_rng([seed, 18])
    beta = rng.normal(size=5)

    def build(rng, m):
        X = rng.normal(size=(m, 5))
        return X, 1e6 + X @ beta

    return _split(rng, build, n)


def _sparse_onehot(n, seed, levels, stream):
    from sklearn.preprocessing import OneHotEncoder

    rng = np.random.default_rng([seed, stream])
    probs = [_zipf_probs(L, rng) for L in levels]
    effects = [rng.normal(size=L) for L in levels]
    m = n + N_TEST
    codes = np.column_stack([rng.choice(L, size=m, p=p) for L, p in zip(levels, probs)])
    signal = sum(eff[codes[:, j]] for j, eff in enumerate(effects))
    e = _noise(signal, 0.85, rng)
    y = signal + e
    encoder = OneHotEncoder(handle_unknown="ignore").fit(codes[:n])
    X = encoder.transform(codes).tocsr()
    return dict(X=X[:n], y=y[:n], X_test=X[n:], y_test=y[n:], wrap=None, bayes=float(np.mean(e[n:] ** 2)),
                block_sizes=[len(c) for c in encoder.categories_])


def sparse_onehot(n, seed):
    """A scipy CSR matrix: OneHotEncoder of three categoricals (10, 50, 200 Zipf levels), no numerics."""
    return _sparse_onehot(n, seed, (10, 50, 200), 20)


def sparse_onehot4(n, seed):
    """Like ``sparse_onehot`` with four categoricals (8, 30, 100, 300 Zipf levels): a held-out check of
    rules chosen on ``sparse_onehot`` (outside ``TABLES``)."""
    return _sparse_onehot(n, seed, (8, 30, 100, 300), 21)


_CT_NUMERIC = ["x1", "x2", "amount", "count", "age"]


def _column_transformer_table(num):
    """A pandas frame: 2 N(0, 1), amounts (1000 x log-normal), counts, ages; categoricals with 5, 50 and
    200 Zipf levels (strings); through ColumnTransformer([("num", StandardScaler() or "passthrough"),
    ("cat", OneHotEncoder(handle_unknown="ignore"))]) in a Pipeline."""
    levels = (5, 50, 200)

    def gen(n, seed):
        import pandas as pd

        rng = np.random.default_rng([seed, 19, 0 if num == "scale" else 1])
        probs = [_zipf_probs(L, rng) for L in levels]
        beta = rng.normal(size=5) * np.array([1.0, 1.0, 1e-3, 0.5, 0.02])
        effects = [rng.normal(size=L) for L in levels]
        m = n + N_TEST
        frame = pd.DataFrame({"x1": rng.normal(size=m), "x2": rng.normal(size=m),
                              "amount": 1000 * rng.lognormal(0, 1, m),
                              "count": rng.poisson(2.0, m).astype(float),
                              "age": rng.integers(18, 91, m).astype(float)})
        cat_columns = []
        for j, (L, p) in enumerate(zip(levels, probs)):
            codes = rng.choice(L, size=m, p=p)
            frame[f"c{j}"] = np.array([f"L{k}" for k in range(L)])[codes]
            cat_columns.append((f"c{j}", codes))
        signal = frame[_CT_NUMERIC].to_numpy() @ beta
        for eff, (_, codes) in zip(effects, cat_columns):
            signal = signal + eff[codes]
        e = _noise(signal, 0.85, rng)
        y = signal + e
        cats = [name for name, _ in cat_columns]

        def wrap(estimator, dense=False):
            from sklearn.compose import ColumnTransformer
            from sklearn.pipeline import make_pipeline
            from sklearn.preprocessing import OneHotEncoder, StandardScaler

            encoder = OneHotEncoder(handle_unknown="ignore", sparse_output=not dense)
            numeric = StandardScaler() if num == "scale" else "passthrough"
            ct = ColumnTransformer([("num", numeric, _CT_NUMERIC), ("cat", encoder, cats)])
            return make_pipeline(ct, estimator)

        return dict(X=frame.iloc[:n], y=y[:n], X_test=frame.iloc[n:], y_test=y[n:], wrap=wrap,
                    bayes=float(np.mean(e[n:] ** 2)))

    gen.__name__ = gen.__qualname__ = f"ct_{num}"
    gen.__doc__ = _column_transformer_table.__doc__
    return gen


TABLES = {
    "onehot2": _onehot_table(2),
    "onehot4": _onehot_table(4),
    "onehot50": _onehot_table(50),
    "onehot200": _onehot_table(200),
    "rare_binary": rare_binary,
    "counts": counts,
    "int_codes": int_codes,
    "lognormal": lognormal,
    "offsets": offsets,
    "mixed_scales": mixed_scales,
    "constant": constant,
    "y_offset": y_offset,
    "sparse_onehot": sparse_onehot,
    "ct_scale": _column_transformer_table("scale"),
    "ct_passthrough": _column_transformer_table("passthrough"),
}


# -- tasks outside TABLES --------------------------------------------------------------------
def informative_heavy_tail(n, seed, *, n_test=N_TEST):
    """Informative heavy tails, no corrupted rows: 4 log-normal(0, 1.5) and 3 Pareto(2.5) columns (most
    values small, long tails on the same line) and 3 N(0, 1) columns; ``y = X w + t(3)`` noise, w ~ N(0, I),
    no intercept. OLS is the right answer (its test R^2 is about 0.99); clipping the tail rows biases it."""
    rng = np.random.default_rng([seed, 30])
    w = rng.normal(size=10)
    m = n + n_test
    X = np.column_stack([rng.lognormal(0, 1.5, (m, 4)), rng.pareto(2.5, (m, 3)), rng.normal(size=(m, 3))])
    e = rng.standard_t(3, size=m)
    y = X @ w + e
    return dict(X=X[:n], y=y[:n], X_test=X[n:], y_test=y[n:], wrap=None, bayes=float(np.mean(e[n:] ** 2)),
                coef=w)


def zero_inflated(n, seed):
    """5 N(0, 1) columns and a zero-inflated amount (5% of rows 1000 x log-normal(0, 1), else 0: a "capital
    gain" column, coefficient 1e-3). An open risk of the research note, kept out of ``TABLES``."""
    rng = np.random.default_rng([seed, 99])
    beta = np.append(rng.normal(size=5), 1e-3)

    def build(rng, m):
        X = np.column_stack([rng.normal(size=(m, 5)), (rng.random(m) < 0.05) * 1000 * rng.lognormal(0, 1, m)])
        return X, X @ beta

    return _split(rng, build, n)


# -- references ------------------------------------------------------------------------------
class ExactLeastSquares(RegressorMixin, BaseEstimator):
    """Least squares with an intercept, solved exactly on standardised columns.

    Columns are centred and divided by their standard deviation (constant columns get
    coefficient 0), then ``scipy.linalg.lstsq`` gives the minimum-norm solution in
    those units (singular values below 1e-10 of the largest count as zero: dummy
    coding with an intercept is exactly collinear). Unlike ``LinearRegression`` on
    raw columns it does not truncate a column whose scale is 1e-7 of another's
    (``mixed_scales``), and unlike ``LinearRegression`` on sparse input it is not an
    iterative solver. Dense arithmetic: for test-sized tables only.
    """

    def fit(self, X, y):
        X, y = validate_data(self, X, y, accept_sparse=["csr", "csc"], y_numeric=True)
        X = X.toarray() if sp.issparse(X) else np.asarray(X, dtype=float)
        mean, sd = X.mean(axis=0), X.std(axis=0)
        keep = sd > 1e-12 * np.maximum(1.0, np.abs(mean))
        Z = (X[:, keep] - mean[keep]) / sd[keep]
        y_mean = float(np.mean(y))
        # SVD, singular values below 1e-10 of the largest treated as zero: full dummy coding plus an
        # intercept is exactly collinear, and a rounding-level singular value left in would put a 1e12
        # coefficient along that direction (catastrophic on test rows with a level unseen in training)
        beta = scipy.linalg.lstsq(Z, y - y_mean, cond=1e-10)[0]
        self.coef_ = np.zeros(X.shape[1])
        self.coef_[keep] = beta / sd[keep]
        self.intercept_ = y_mean - float(mean @ self.coef_)
        return self

    def predict(self, X):
        check_is_fitted(self)
        X = validate_data(self, X, accept_sparse=["csr", "csc"], reset=False)
        return np.asarray(X @ self.coef_).ravel() + self.intercept_


def fit_predict(table, estimator, *, dense=False):
    """Fit ``estimator`` (in the table's pipeline, if it has one) on the training rows; predict the test rows.

    Returns ``(fitted, predictions)``; ``fitted`` is the pipeline for the ``ct_*`` tables.
    """
    model = table["wrap"](estimator, dense=dense) if table["wrap"] is not None else estimator
    model.fit(table["X"], table["y"])
    return model, np.asarray(model.predict(table["X_test"]), dtype=float)


def holdout_mse(table, predictions):
    """Test MSE (inf when a prediction is not finite)."""
    predictions = np.asarray(predictions, dtype=float)
    if not np.all(np.isfinite(predictions)):
        return float("inf")
    return float(np.mean((table["y_test"] - predictions) ** 2))


def holdout_r2(table, predictions):
    """Test R^2 (-inf when a prediction is not finite)."""
    return 1.0 - holdout_mse(table, predictions) / float(np.var(table["y_test"]))


def exact_least_squares(table):
    """Test MSE of exact least squares on standardised features (through the table's pipeline)."""
    return holdout_mse(table, fit_predict(table, ExactLeastSquares())[1])



# -- the bounds a user would declare -----------------------------------------------------------
_N01 = (-5.0, 5.0)  # a standardised measurement
USER_BOUNDS = {
    "rare_binary": [_N01] * 5 + [(0.0, 1.0)],
    "counts": [(0.0, 20.0), (0.0, 10.0), (0.0, 100.0)] + [_N01] * 3,
    "int_codes": [(0.0, 120.0), (1.0, 5.0), (0.0, 999.0), (1900.0, 2100.0)] + [_N01] * 2,
    "lognormal": [(0.0, 1e5)] * 3 + [_N01] * 2,
    "offsets": [(9900.0, 10100.0), (999_000.0, 1_001_000.0)] + [_N01] * 3,
    "mixed_scales": [(-5.0 * s, 5.0 * s) for s in (1e-3, 1e-2, 1.0, 1e2, 1e3, 1e4)],
    "constant": [_N01] * 5 + [(0.0, 10.0), (0.0, 1.0)],
    "y_offset": [_N01] * 5,
}
# Numeric inputs of the ct_* tables, by column name (bounds_for_column_transformer maps them).
CT_NUMERIC_BOUNDS = {"x1": _N01, "x2": _N01, "amount": (0.0, 1e5), "count": (0.0, 20.0), "age": (0.0, 120.0)}


def user_bounds(name, table):
    """The ``bounds=`` a user would declare for table ``name`` (its dict from ``TABLES[name]``).

    The ``ct_*`` tables: a function ``fitted ColumnTransformer -> FeatureBounds`` (the encoder's
    categories there are learned from the data, as the table's recipe does, so the helper warns).
    """
    from skdp.preprocessing import FeatureBounds, bounds_for_column_transformer

    if name.startswith("onehot"):
        levels = int(name[len("onehot"):])
        return FeatureBounds([-5.0] * 5 + [0.0] * levels, [5.0] * 5 + [1.0] * levels,
                             blocks=[range(5, 5 + levels)])
    if name in ("sparse_onehot", "sparse_onehot4"):
        sizes, blocks, start = table["block_sizes"], [], 0
        for size in sizes:
            blocks.append(range(start, start + size))
            start += size
        return FeatureBounds(np.zeros(start), np.ones(start), blocks=blocks)
    if name.startswith("ct_"):
        return lambda ct: bounds_for_column_transformer(ct, CT_NUMERIC_BOUNDS)
    pairs = USER_BOUNDS[name]
    return FeatureBounds([lo for lo, _ in pairs], [hi for _, hi in pairs])
