"""PrivateStandardiser and Scaling: what standardisation plans is what it releases, and the maps are exact."""

import math

import numpy as np
import pytest

from skdp.accounting import ExponentialMechanismRelease, Repeated, Sequential
from skdp.linear_model import PrivateStandardiser, Scaling
from skdp.linear_model import _standardise
from skdp.mechanisms import robust_scaling_event
from skdp.linear_model._standardise import COEF_RADIUS, MODES, WHITENED_MODES
from privacy_harness import assert_event_as_planned


def _data(n=3000, d=4, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_t(3, size=(n, d)) * [1.0, 10.0, 1e3, 0.01][:d] + [5.0, -2.0, 1e4, 0.0][:d]
    y = 100.0 * (X[:, 0] + rng.standard_t(2.5, size=n)) + 7.0
    return X, y


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("epsilon", [0.5, math.inf])
def test_the_released_event_is_the_planned_one(mode, fit_intercept, epsilon):
    X, y = _data()
    whitened = mode in WHITENED_MODES
    # The whitened modes also spend a share of the fit's Gaussian budget mu (their second moments).
    mu = 1.0 if (whitened and math.isfinite(epsilon)) else math.inf
    standardiser = PrivateStandardiser(mode, epsilon, fit_intercept, mu=mu, bound_multiplier=1.0,
                                       magnitude_check=whitened)
    planned = standardiser.planned_event(X.shape[1])
    scaling, released = standardiser.fit(X, y, np.random.default_rng(1))
    assert_event_as_planned(released, planned, deltas=(0.0, 1e-6))
    # The planned count of quantiles is the public rule the budget plan sizes its epsilon with.
    count = PrivateStandardiser.n_quantiles(mode, X.shape[1], fit_intercept)
    if whitened and math.isfinite(epsilon):
        quantiles = [e for e in _flatten(planned) if isinstance(e, ExponentialMechanismRelease)]
        assert len(quantiles) == count and all(e.epsilon0 == epsilon for e in quantiles)
    elif math.isfinite(epsilon):
        assert planned.epsilon(0.0) == pytest.approx(count * epsilon)  # pure DP: epsilons add
    else:
        assert planned.epsilon(1e-6) == (math.inf if count else 0.0)
    assert scaling.mode == mode and scaling.fit_intercept == fit_intercept
    assert scaling.quantile_epsilon == epsilon


def _flatten(event):
    """The elementary releases of an event (Repeated counted once per repetition)."""
    if isinstance(event, Sequential):
        return [e for part in event.events for e in _flatten(part)]
    if isinstance(event, Repeated):
        return _flatten(event.event) * event.count
    return [event]


def test_what_each_mode_releases():
    X, y = _data()
    d = X.shape[1]
    scales = {}
    for mode in MODES:
        scaling, _ = PrivateStandardiser(mode, math.inf, True).fit(X, y, np.random.default_rng(0))
        scales[mode] = scaling
    robust = scales["robust"]
    assert np.all(np.abs(robust.feature_center - np.median(X, axis=0)) <= 0.05 * robust.feature_scale)
    assert robust.row_bound == math.sqrt(d) + 3 and robust.unit == 1.0
    pooled = scales["pooled"]
    assert np.all(pooled.feature_scale == pooled.feature_scale[0]) and np.all(pooled.feature_center == 0.0)
    assert pooled.unit == pytest.approx(pooled.row_bound / 2 / math.sqrt(d))  # bound = twice the median norm
    target = scales["target"]
    np.testing.assert_array_equal(target.feature_scale, np.ones(d))
    assert abs(target.target_center - np.median(y)) <= 0.05 * target.target_scale
    minimal = scales["minimal"]
    assert minimal.row_bound == math.sqrt(d) + 3
    assert abs(minimal.target_center - np.median(y)) <= 0.05 * minimal.target_scale  # a coarse centre of y
    none = scales["none"]
    np.testing.assert_array_equal(none.feature_scale, np.ones(d))
    assert (none.target_center, none.target_scale, none.row_bound) == (0.0, 1.0, math.sqrt(d) + 3)


@pytest.mark.parametrize("fit_intercept", [True, False])
def test_transform_and_unscale_are_inverse_maps(fit_intercept):
    rng = np.random.default_rng(2)
    d = 3
    # Without an intercept nothing is centred (the standardiser releases no centre then).
    cx = np.array([1.0, -2.0, 300.0]) if fit_intercept else np.zeros(d)
    cy = 7.0 if fit_intercept else 0.0
    scaling = Scaling("robust", cx, np.array([0.5, 4.0, 100.0]), cy, 20.0, row_bound=math.sqrt(d) + 3,
                      unit=1.3, fit_intercept=fit_intercept, quantile_epsilon=1.0)
    X = cx + scaling.feature_scale * rng.normal(size=(50, d)) * 0.5  # rows inside the bound: not clipped
    Xs = scaling.transform(X)
    assert Xs.shape == (50, d + int(fit_intercept))
    if fit_intercept:
        np.testing.assert_array_equal(Xs[:, -1], 1.3)  # the intercept column has the typical coordinate size
    w = rng.normal(size=Xs.shape[1])
    coef, intercept = scaling.unscale(w)
    # A prediction in solver units, mapped back to the units of y, is the prediction of (coef, intercept).
    np.testing.assert_allclose(X @ coef + intercept, cy + scaling.target_scale * (Xs @ w), rtol=1e-10,
                               atol=1e-8)
    assert intercept == 0.0 or fit_intercept
    y = rng.normal(size=50)
    np.testing.assert_allclose(scaling.transform_target(y), (y - cy) / 20.0)
    assert scaling.radius == COEF_RADIUS / 1.3
    expected_bound = math.hypot(scaling.row_bound, 1.3) if fit_intercept else scaling.row_bound
    assert scaling.coef_row_bound == expected_bound
    assert np.all(np.linalg.norm(scaling.transform(X * 1e6), axis=1) <= scaling.coef_row_bound * (1 + 1e-12))


@pytest.mark.parametrize("mode", MODES)
def test_without_an_intercept_nothing_is_centred(mode):
    X, y = _data()
    scaling, _ = PrivateStandardiser(mode, 0.5, fit_intercept=False).fit(X, y, np.random.default_rng(0))
    np.testing.assert_array_equal(scaling.feature_center, np.zeros(X.shape[1]))
    assert scaling.target_center == 0.0


def test_a_release_above_the_plan_is_refused(monkeypatch):
    X, y = _data()
    real = _standardise.private_robust_scaling

    def dearer(Z, epsilon, **kwargs):
        centre, scale, _ = real(Z, epsilon, **kwargs)
        columns = 1 if np.ndim(Z) == 1 else Z.shape[1]
        return centre, scale, robust_scaling_event(columns, 2 * epsilon, kwargs.get("center", True))

    monkeypatch.setattr(_standardise, "private_robust_scaling", dearer)
    with pytest.raises(RuntimeError, match="'features' scaling step released more than it planned"):
        PrivateStandardiser("robust", 0.5).fit(X, y, np.random.default_rng(0))
    real_quantile = _standardise.private_quantile

    def dearer_quantile(values, level, epsilon, bounds, **kwargs):
        value, _ = real_quantile(values, level, epsilon, bounds, **kwargs)
        return value, ExponentialMechanismRelease(3 * epsilon)

    monkeypatch.setattr(_standardise, "private_robust_scaling", real)
    monkeypatch.setattr(_standardise, "private_quantile", dearer_quantile)
    with pytest.raises(RuntimeError, match="'row_bound' scaling step released more than it planned"):
        PrivateStandardiser("pooled", 0.5).fit(X, y, np.random.default_rng(0))


def test_an_unknown_mode_is_refused():
    with pytest.raises(ValueError, match="Unknown scaling mode"):
        PrivateStandardiser("median", 1.0)


def test_features_are_the_rows_without_the_intercept_column():
    rng = np.random.default_rng(5)
    X = rng.normal(size=(3000, 3)) * [1.0, 100.0, 0.01] + [5.0, -3.0, 0.0]
    y = X @ [1.0, 0.01, 10.0] + rng.normal(size=3000)
    scaling, _ = PrivateStandardiser("columns", 1.0, mu=1.0).fit(X, y, np.random.default_rng(0))
    rows = scaling.rows(X, clip=False)
    np.testing.assert_allclose(scaling.features(X), rows[:, :3])
    np.testing.assert_allclose(rows[:, 3], scaling.intercept_value)
    clipped = scaling.features(X, clip=True)
    assert np.linalg.norm(clipped, axis=1).max() <= scaling.row_bound * (1 + 1e-12)


def test_identified_directions_drop_an_exact_collinearity_only_without_noise():
    """Dummy coding plus an intercept: one degenerate direction, removed exactly at epsilon = inf."""
    rng = np.random.default_rng(6)
    codes = rng.integers(0, 3, size=4000)
    X = np.column_stack([np.eye(3)[codes], rng.normal(size=4000)])
    y = X @ [1.0, 2.0, 3.0, 0.5] + rng.normal(size=4000)
    exact, _ = PrivateStandardiser("columns", math.inf).fit(X, y, np.random.default_rng(0))
    P = exact.whitening_identified
    np.testing.assert_allclose(P @ P, P, atol=1e-10)  # a projector
    assert round(float(np.trace(P))) == 3  # four columns, one exact collinearity among the dummies
    # The solver coordinates of the collinear direction vanish; predictions on the rows do not change.
    rows = exact.rows(X, clip=False)
    w = rng.normal(size=5)
    projected = exact.identified_coef(w)
    np.testing.assert_allclose(rows @ projected, rows @ w, atol=1e-6 * np.abs(rows @ w).max())
    # With noise, a small but real direction (a level with 1% of the rows, no collinearity) stays: the floor
    # at the noise level bounds the amplification instead. (At this budget it stays in about three draws
    # of the noise in four, 32 and 28 of 40 seeds with the jitter drawn from the fit's generator or from
    # its SHA-256 child: the seed fixes one such draw.)
    rare = np.column_stack([(rng.random(4000) < 0.01).astype(float), rng.normal(size=(4000, 2))])
    noisy, _ = PrivateStandardiser("columns", 1.0, mu=0.5).fit(rare, rare @ [3.0, 1.0, 1.0], np.random.default_rng(2))
    assert round(float(np.trace(noisy.whitening_identified))) == 3


def _rows_out_of_place(scaling, X, clip):
    """The solver rows as the out-of-place expressions of the maps' definition (the reference)."""
    import scipy.sparse as sp

    from skdp.mechanisms import clip_rows

    X = X.toarray() if sp.issparse(X) else np.asarray(X, dtype=float)
    if not scaling.whitened:
        Z = (X - scaling.feature_center) / scaling.feature_scale
    else:
        X = np.clip(X, -_standardise._MAGNITUDE_LIMIT, _standardise._MAGNITUDE_LIMIT)
        Z = np.clip((X - scaling.feature_center) / scaling.feature_scale, -_standardise._Z_LIMIT,
                    _standardise._Z_LIMIT)
        Z = (Z - scaling.whitening_mean) @ scaling.whitening_matrix
    if clip:
        Z = clip_rows(Z, scaling.row_bound)
    if scaling.fit_intercept:
        Z = np.hstack([Z, np.full((Z.shape[0], 1), scaling.intercept_value)])
    return Z


@pytest.mark.parametrize("whitened", [False, True])
@pytest.mark.parametrize("layout", ["C float64", "F float32", "strided float64", "int64", "sparse float32"])
def test_rows_formed_in_place_are_the_out_of_place_rows_bit_for_bit(whitened, layout):
    """The in-place steps (one copy of X) give the out-of-place expressions' values bit for bit, in either order.

    The chunked passes form every chunk's rows in every pass (``order="F"``); the
    in-memory fit forms them once (``order="C"``): the same values in both, and
    the same as before the steps were made in place (whose layout the whitening
    product also keeps), so the released models do not change.
    """
    import scipy.sparse as sp

    rng = np.random.default_rng(3)
    n, d = 301, 4
    base = rng.standard_t(3, size=(n, d)) * np.array([0.01, 1.0, 30.0, 1e3])
    base[5] = [1e20, -1e20, 0.0, 1.0]  # beyond the magnitude limit: clipped in the whitened modes
    base[6, 1] = np.nan  # a non-finite row: zeroed by the row clip
    X = {"C float64": np.ascontiguousarray(base), "F float32": np.asfortranarray(base, dtype=np.float32),
         "strided float64": np.hstack([base, base])[:, ::2], "int64": np.clip(np.nan_to_num(base), -1e18, 1e18).astype(np.int64),
         "sparse float32": sp.csr_matrix(np.nan_to_num(base).astype(np.float32))}[layout]
    before = X.copy()
    matrix = rng.normal(size=(d, d)) if whitened else None
    for fit_intercept in (True, False):
        scaling = Scaling("whitened" if whitened else "robust", rng.normal(size=d), rng.uniform(0.5, 3.0, size=d),
                          0.5, 2.0, row_bound=2.5, unit=1.3, fit_intercept=fit_intercept, quantile_epsilon=1.0,
                          whitening_mean=rng.normal(size=d) if whitened else None, whitening_matrix=matrix)
        for clip in (True, False):
            with np.errstate(all="ignore"):
                expected = _rows_out_of_place(scaling, X, clip)
                as_c, as_f = scaling.rows(X, clip=clip), scaling.rows(X, clip=clip, order="F")
            assert as_f.flags.f_contiguous and as_f.dtype == np.float64
            np.testing.assert_array_equal(as_c, expected, strict=True)
            np.testing.assert_array_equal(as_f, expected, strict=True)
            assert as_c.flags.c_contiguous == expected.flags.c_contiguous  # the layout the solvers saw
    # X itself is never written to.
    if sp.issparse(X):
        assert (X != before).nnz == 0
    else:
        np.testing.assert_array_equal(X, before, strict=True)
