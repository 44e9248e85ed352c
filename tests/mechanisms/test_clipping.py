"""Vectorised per-row clipping and its sensitivity."""

import math
import tracemalloc

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from skdp.losses import SquaredLoss
from skdp.mechanisms import (
    clip_factors,
    clip_rows,
    clipped_derivatives,
    clipped_linear_gradient_sum,
    clipped_sum,
    row_norms,
)
from skdp.solvers import GLMProblem


def test_clip_rows_bounds_norms_and_keeps_small_rows():
    rng = np.random.default_rng(0)
    X = rng.standard_t(df=1.5, size=(500, 4)) * 10
    C = 2.0
    Xc = clip_rows(X, C)
    assert row_norms(Xc).max() <= C * (1 + 1e-12)
    small = row_norms(X) <= C
    np.testing.assert_array_equal(Xc[small], X[small])
    # Directions are preserved.
    big = ~small
    np.testing.assert_allclose(Xc[big] / row_norms(Xc[big])[:, None], X[big] / row_norms(X[big])[:, None])


def test_zero_rows_and_zero_threshold():
    assert clip_factors(np.array([0.0]), 1.0).tolist() == [1.0]
    assert np.all(clip_rows(np.ones((3, 2)), 0.0) == 0)
    with pytest.raises(ValueError):
        clip_factors(np.ones(2), -1.0)


def test_linear_gradient_sum_matches_the_naive_loop():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(300, 5)) * rng.lognormal(size=(300, 1))
    dl = rng.standard_t(df=2, size=300)
    naive = np.zeros(5)
    for x, d in zip(X, dl):
        g = d * x
        n = np.linalg.norm(g)
        naive += g * min(1.0, 0.7 / n) if n > 0 else g
    np.testing.assert_allclose(clipped_linear_gradient_sum(X, dl, 0.7), naive, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(clipped_sum(dl[:, None] * X, 0.7), naive, rtol=1e-12, atol=1e-12)


finite = st.floats(-1e8, 1e8, allow_nan=False, allow_infinity=False)


@settings(max_examples=60, deadline=None)
@given(arrays(float, (30, 3), elements=finite), arrays(float, 30, elements=finite),
       arrays(float, 3, elements=finite), finite, st.integers(0, 29), st.floats(0.01, 10.0))
def test_replacing_one_row_moves_the_clipped_sum_by_at_most_2C(X, dl, new_row, new_dl, i, C):
    X2, dl2 = X.copy(), dl.copy()
    X2[i], dl2[i] = new_row, new_dl
    diff = clipped_linear_gradient_sum(X, dl, C) - clipped_linear_gradient_sum(X2, dl2, C)
    assert np.linalg.norm(diff) <= 2 * C * (1 + 1e-9)


def test_no_n_by_d_temporary():
    n, d = 200_000, 20
    X = np.random.default_rng(2).normal(size=(n, d))
    dl = np.ones(n)
    norms = row_norms(X)
    tracemalloc.start()
    clipped_linear_gradient_sum(X, dl, 1.0, norms=norms)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    # X is 32 MB; a handful of length-n vectors is ~1.6 MB each.
    assert peak < X.nbytes / 4


def test_non_finite_rows_are_clipped_to_finite_ones():
    X = np.random.default_rng(1).normal(size=(5, 2))
    X[2] = [np.inf, 0.0]
    X[4] = [np.nan, 1.0]
    assert np.all(np.isfinite(clip_rows(X, 1.0)))
    assert np.all(np.isfinite(clipped_sum(X, 1.0)))
    assert math.isfinite(float(np.linalg.norm(clipped_sum(X, 1.0))))


def test_clipped_derivatives_are_finite_and_clipped_for_any_input():
    d = np.array([2.0, -np.inf, np.nan, np.inf, 1e300, 3.0])
    norms = np.array([5.0, 2.0, 1.0, 0.0, 1e300, np.inf])
    out = clipped_derivatives(d, norms, 1.0)
    assert np.isfinite(out).all()
    assert out.tolist()[:4] == [0.2, -0.5, 0.0, 0.0]
    assert out[4] == pytest.approx(1e-300) and out[5] == 0.0
    with np.errstate(over="ignore", invalid="ignore"):
        assert (np.abs(out) * np.nan_to_num(norms, posinf=0.0) <= 1.0 + 1e-12).all()


def test_an_overflowing_row_cannot_poison_the_clipped_gradient_sum():
    # One row whose derivative overflows at a large iterate: its clipped gradient is sign * clip / norm,
    # and the other rows' sum is unchanged (inf * 0 would make the whole sum NaN).
    n = 50
    X, y = np.ones((n, 2)), np.zeros(n)
    X_big = X.copy()
    X_big[0] = [1e200, 1.0]
    w = np.array([1e150, 0.0])
    sums = [GLMProblem(A, y, SquaredLoss(), np.zeros(2), radius=math.inf, row_bound=1.0,
                       rows_clipped=False).clipped_gradient_sum(w, 1.0) for A in (X, X_big)]
    assert np.isfinite(sums[1]).all()
    assert np.linalg.norm(sums[0] - sums[1]) <= 2.0 + 1e-9
