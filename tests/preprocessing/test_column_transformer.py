"""bounds_for_column_transformer: bounds and one-hot blocks of a fitted ColumnTransformer's output."""

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.compose import ColumnTransformer
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import FunctionTransformer, MinMaxScaler, OneHotEncoder, StandardScaler

from skdp import BudgetAccountant, DPHeavyTailRegressor, PrivacyLeakWarning
from skdp.preprocessing import FeatureBounds, bounds_for_column_transformer

pd = pytest.importorskip("pandas")

CITIES = ["a", "b", "c", "d"]
SIZES = ["s", "m", "l"]


def _frame(n=400, seed=0):
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"age": rng.integers(18, 95, n).astype(float), "income": rng.lognormal(10, 1, n),
                         "city": rng.choice(CITIES, n), "size": rng.choice(SIZES, n),
                         "noise": rng.normal(size=n)})


def _silently(function, *args):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)
        return function(*args)


@pytest.mark.parametrize("sparse_threshold", [0.0, 1.0])
def test_nested_transformers_with_drop_and_passthrough(sparse_threshold):
    frame = _frame()
    inner = ColumnTransformer([("size", OneHotEncoder(categories=[SIZES], drop="first"), ["size"]),
                               ("inc", "passthrough", ["income"])])
    ct = ColumnTransformer([("age", "passthrough", ["age"]),
                            ("city", OneHotEncoder(categories=[CITIES], handle_unknown="ignore"), ["city"]),
                            ("inner", inner, ["size", "income"]),
                            ("gone", "drop", ["noise"])], sparse_threshold=sparse_threshold).fit(frame)
    out = ct.transform(frame)
    assert sp.issparse(out) == (sparse_threshold == 1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # declared categories and no scaler: nothing leaks
        # (a sparse X needs intervals that contain 0: its implicit zeros are values too)
        fb = bounds_for_column_transformer(ct, {"age": (0, 100), "income": (0, 1e7)})
    # age | city a b c d | size m l | income
    assert fb.n_features == out.shape[1] == 8
    np.testing.assert_array_equal(fb.lower, [0, 0, 0, 0, 0, 0, 0, 0])
    np.testing.assert_array_equal(fb.upper, [100, 1, 1, 1, 1, 1, 1, 1e7])
    assert fb.blocks == ((1, 2, 3, 4), (5, 6))
    assert list(fb.feature_names) == list(ct.get_feature_names_out())
    # The estimator takes it and the fit spends its budget.
    model = make_pipeline(ct, DPHeavyTailRegressor(epsilon=1.0, bounds=fb, random_state=0,
                                                   accountant=BudgetAccountant()))
    model.fit(frame, frame["age"] * 0.1 + np.arange(len(frame)) % 3)
    assert model[-1].privacy_spent_.epsilon == pytest.approx(1.0, rel=1e-6)


def test_remainder_passthrough_and_undeclared_columns():
    frame = _frame()
    ct = ColumnTransformer([("city", OneHotEncoder(categories=[CITIES]), ["city"])],
                           remainder="passthrough").fit(frame[["city", "age", "noise"]])
    fb = bounds_for_column_transformer(ct, {"age": (0, 120)})
    # city a b c d | age | noise (undeclared)
    np.testing.assert_array_equal(fb.lower[:5], [0, 0, 0, 0, 0])
    assert fb.upper[4] == 120 and np.isnan(fb.lower[5]) and np.isnan(fb.upper[5])
    assert fb.blocks == ((0, 1, 2, 3),)


def test_scalers_map_the_bounds_and_warn():
    frame = _frame()
    ct = ColumnTransformer([("std", StandardScaler(), ["age"]), ("mm", make_pipeline(MinMaxScaler()), ["income"])])
    ct.fit(frame)
    with pytest.warns(PrivacyLeakWarning, match="was fitted on data") as caught:
        fb = bounds_for_column_transformer(ct, {"age": (0, 120), "income": (0, 1e7)})
    assert {str(w.message).split(" was")[0] for w in caught} == {"The StandardScaler 'std'",
                                                                 "The MinMaxScaler 'mm/minmaxscaler'"}
    std = ct.named_transformers_["std"]
    np.testing.assert_allclose(fb.lower[0], (0 - std.mean_[0]) / std.scale_[0])
    np.testing.assert_allclose(fb.upper[0], (120 - std.mean_[0]) / std.scale_[0])
    mm = ct.named_transformers_["mm"][-1]
    np.testing.assert_allclose([fb.lower[1], fb.upper[1]], [mm.min_[0], 1e7 * mm.scale_[0] + mm.min_[0]])
    # Every transformed training value lies inside the mapped bounds.
    out = ct.transform(frame)
    assert np.all(out >= fb.lower - 1e-12) and np.all(out <= fb.upper + 1e-12)


def test_learned_categories_warn_and_infrequent_levels_form_one_column():
    frame = _frame()
    frame.loc[:2, "city"] = "rare"
    encoder = OneHotEncoder(min_frequency=10, handle_unknown="infrequent_if_exist")
    ct = ColumnTransformer([("city", encoder, ["city"])]).fit(frame)
    with pytest.warns(PrivacyLeakWarning, match="categories='auto'"):
        fb = bounds_for_column_transformer(ct)
    assert fb.n_features == ct.transform(frame).shape[1] == 5  # a b c d + infrequent
    assert fb.blocks == ((0, 1, 2, 3, 4),)


def test_unknown_numeric_columns_are_refused_and_unsupported_transformers_leave_columns_undeclared():
    frame = _frame()
    ct = ColumnTransformer([("log", FunctionTransformer(np.log1p), ["income"]), ("age", "passthrough", ["age"])])
    ct.fit(frame)
    with pytest.raises(ValueError, match=r"'agge'.*input columns are \['age', 'income', 'city'"):
        bounds_for_column_transformer(ct, {"agge": (0, 1)})
    with pytest.warns(UserWarning, match="reach no output"):
        fb = bounds_for_column_transformer(ct, {"income": (0, 1e7), "age": (0, 120)})
    assert np.isnan(fb.lower[0]) and fb.lower[1] == 0 and fb.upper[1] == 120
    with pytest.raises(TypeError, match="fitted ColumnTransformer"):
        bounds_for_column_transformer(ColumnTransformer([("age", "passthrough", ["age"])]))


def test_array_input_by_position():
    X = np.column_stack([np.arange(20.0), np.arange(20) % 3])
    ct = ColumnTransformer([("num", "passthrough", [0]),
                            ("cat", OneHotEncoder(categories=[[0, 1, 2]]), [1])]).fit(X)
    fb = bounds_for_column_transformer(ct, {0: (0, 50)})
    assert isinstance(fb, FeatureBounds)
    np.testing.assert_array_equal(fb.upper, [50, 1, 1, 1])
    assert fb.blocks == ((1, 2, 3),)
