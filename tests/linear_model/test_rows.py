"""Fits on Dask collections (skdp.linear_model._rows): the same model and event, refusals before spend.

A ``distributed.LocalCluster`` (two in-process workers, no memory limit) is
started by the shared fixture (tests/dask_cluster.py). The solvers run a few steps (``max_iter``):
equivalence holds for any schedule, and every step is one pass whose latency on
the scheduler, not its work, is what these small tables cost.
"""

import numpy as np
import pytest

from dask_cluster import RTOL, assert_same_event, client, da  # noqa: F401 (client: the fixture)
from skdp import BudgetAccountant, DPHeavyTailRegressor, DPInterpolatingClassifier  # noqa: E402
from skdp.accounting import DetachedAccountantError  # noqa: E402
from skdp.linear_model import _rows  # noqa: E402
from skdp.mechanisms._audit import record_releases  # noqa: E402
from skdp.solvers.heavy_tail.clipped_gd import ClippedGD  # noqa: E402


def _tables():
    rng = np.random.default_rng(1)
    X1 = rng.normal(size=(3000, 4)) * [1.0, 2.0, 0.5, 1.0] + [0.0, 1.0, 0.0, -2.0]
    y1 = X1 @ [1.0, 0.5, -2.0, 0.3] + 1.0 + rng.standard_t(3, size=3000)
    X2 = np.column_stack([rng.random(2000) < 0.2, rng.poisson(1.0, 2000), rng.normal(size=2000)])
    X2 = X2.astype(np.float32)
    y2 = X2.astype(float) @ [2.0, -1.0, 0.5] + rng.normal(size=2000)
    return {"gaussian": (X1, y1, 700), "mixed_float32": (X2, y2, 512)}


CONFIGS = {
    "public_clip_ridge": dict(scaling="none", algorithm=ClippedGD(clip=1.0, n_steps=12), alpha=0.1),
    "absolute_loss": dict(scaling="none", loss="absolute", max_iter=12),
    # Private clip thresholds (two quantiles of the gradient norms) and the Huber threshold (a third).
    "private_clips_huber": dict(scaling="none", loss="huber", max_iter=12),
}


def _fit(X, y, **params):
    accountant = BudgetAccountant()
    model = DPHeavyTailRegressor(accountant=accountant, **{"epsilon": 1.0, "random_state": 7, **params}).fit(X, y)
    return model, accountant


def _classify(X, y, **params):
    accountant = BudgetAccountant()
    params = {"epsilon": 1.0, "random_state": 7, "classes": [0, 1], **params}
    return DPInterpolatingClassifier(accountant=accountant, **params).fit(X, y), accountant


@pytest.mark.parametrize("table, config", [
    ("gaussian", "public_clip_ridge"), ("mixed_float32", "public_clip_ridge"), ("gaussian", "absolute_loss"),
    ("mixed_float32", "private_clips_huber"), ("gaussian", "private_clips_huber")])
def test_dask_fit_releases_the_in_memory_model_and_event(client, table, config):
    X, y, chunk = _tables()[table]
    memory, ledger = _fit(X, y, **CONFIGS[config])
    dask_model, dask_ledger = _fit(da.from_array(X, chunks=(chunk, 2)), da.from_array(y, chunks=chunk),
                                   **CONFIGS[config])
    np.testing.assert_allclose(dask_model.coef_, memory.coef_, rtol=RTOL, atol=0)
    assert dask_model.coef_.dtype == memory.coef_.dtype == X.dtype
    assert abs(dask_model.intercept_ - memory.intercept_) <= RTOL * max(1.0, abs(memory.intercept_))
    # The same privacy event (every release with its sensitivity and noise) and the same charge.
    assert_same_event(dask_model.privacy_event_, memory.privacy_event_)
    assert_same_event(dask_ledger.events, ledger.events)
    assert dask_ledger.spent.epsilon == pytest.approx(ledger.spent.epsilon, rel=RTOL)
    assert dask_ledger.spent.delta == ledger.spent.delta
    assert dask_model.fit_check_["noise_std"] == memory.fit_check_["noise_std"]
    assert dask_model.fit_check_["improvement"] == pytest.approx(memory.fit_check_["improvement"], rel=RTOL)
    np.testing.assert_allclose(dask_model.schedule_["clip_thresholds"], memory.schedule_["clip_thresholds"],
                               rtol=RTOL)
    if "huber_delta" in memory.schedule_:
        assert dask_model.schedule_["huber_delta"] == pytest.approx(memory.schedule_["huber_delta"], rel=RTOL)
    assert dask_model.n_features_in_ == X.shape[1]


def test_every_release_of_a_dask_fit_is_the_in_memory_release(client):
    # Release by release: the same mechanism, the same event (sensitivity and noise), and the exact
    # value before the noise equal up to summation order; so the noise, drawn on the driver from the
    # same stream, is the same draw.
    X, y, chunk = _tables()["gaussian"]
    with record_releases() as memory_log:
        _fit(X, y, **CONFIGS["public_clip_ridge"])
    with record_releases() as dask_log:
        _fit(da.from_array(X, chunks=(chunk, 4)), da.from_array(y, chunks=chunk),
             **CONFIGS["public_clip_ridge"])
    assert len(dask_log) == len(memory_log) == 12 + 2  # curvature, 12 steps, fit check
    for ours, theirs in zip(dask_log, memory_log):
        assert ours.mechanism == theirs.mechanism
        assert_same_event(ours.event, theirs.event)
        np.testing.assert_allclose(ours.value, theirs.value, rtol=RTOL, atol=1e-14)


def test_a_default_fit_through_the_count_only_quantile_sampler_is_the_in_memory_fit(client, monkeypatch):
    # The sampler runs on more than 2^20 + 2 rows; lowered here to every quantile of 3000 rows. It
    # releases every quantile from counts (nothing gathered) and the same draw as in memory: the same model.
    from skdp.mechanisms import _quantile_sampler

    monkeypatch.setattr(_quantile_sampler, "_SAMPLER_ABOVE", 1000)
    columns = []
    original = _quantile_sampler.sample_quantiles

    def counted(*args, **kwargs):
        columns.append(args[2])
        return original(*args, **kwargs)

    def no_gather(*args, **kwargs):
        raise AssertionError("a quantile gathered values")

    monkeypatch.setattr(_quantile_sampler, "sample_quantiles", counted)
    monkeypatch.setattr(_rows.ChunkedValues, "gather", no_gather)
    X, y, _ = _tables()["gaussian"]
    memory, ledger = _fit(X, y, max_iter=8)
    in_memory = list(columns)
    chunks = (500, 1200, 700, 600)
    dask_model, dask_ledger = _fit(da.from_array(X, chunks=(chunks, 2)), da.from_array(y, chunks=(chunks,)),
                                   max_iter=8)
    assert len(in_memory) >= 5 and columns == in_memory + in_memory  # every quantile, both fits
    np.testing.assert_allclose(dask_model.coef_, memory.coef_, rtol=RTOL, atol=0)
    assert abs(dask_model.intercept_ - memory.intercept_) <= RTOL * max(1.0, abs(memory.intercept_))
    assert_same_event(dask_model.privacy_event_, memory.privacy_event_)
    assert_same_event(dask_ledger.events, ledger.events)


def test_in_memory_fits_never_reach_the_chunked_rows(monkeypatch):
    def fail(*args, **kwargs):
        raise AssertionError("an in-memory fit used the chunked rows")

    monkeypatch.setattr(_rows.ChunkedRows, "sum", fail)
    X, y, _ = _tables()["gaussian"]
    for params in CONFIGS.values():
        _fit(X, y, **params)
    _fit(X, y)  # the default path


def test_a_fit_from_read_parquet_with_a_one_column_target(client, tmp_path):
    # dask fuses the partitions of a one-column selection of read_parquet: the target's partition
    # lengths must be those of the optimised collection, or to_dask_array(lengths=True) fails.
    dd = pytest.importorskip("dask.dataframe", reason="dask.dataframe is not installed")
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow", reason="pyarrow (for Parquet) is not installed")
    X, y, _ = _tables()["gaussian"]
    frame = pd.DataFrame(np.column_stack([X, y]), columns=["a", "b", "c", "d", "y"])
    for i, start in enumerate(range(0, len(frame), 750)):
        frame.iloc[start:start + 750].to_parquet(tmp_path / f"part{i}.parquet")
    table = dd.read_parquet(str(tmp_path))
    dask_model, _ = _fit(table[["a", "b", "c", "d"]], table["y"], **CONFIGS["absolute_loss"])
    memory, _ = _fit(frame[["a", "b", "c", "d"]], frame["y"], **CONFIGS["absolute_loss"])
    np.testing.assert_allclose(dask_model.coef_, memory.coef_, rtol=RTOL, atol=0)
    assert_same_event(dask_model.privacy_event_, memory.privacy_event_)


def test_dask_dataframe_input_keeps_feature_names(client):
    dd = pytest.importorskip("dask.dataframe", reason="dask.dataframe is not installed")
    pd = pytest.importorskip("pandas")
    X, y, _ = _tables()["gaussian"]
    frame = pd.DataFrame(X, columns=["a", "b", "c", "d"])
    memory, _ = _fit(frame, y, **CONFIGS["absolute_loss"])
    ddf = dd.from_pandas(frame, npartitions=3)
    dask_model, _ = _fit(ddf, dd.from_pandas(pd.Series(y), npartitions=3), **CONFIGS["absolute_loss"])
    np.testing.assert_allclose(dask_model.coef_, memory.coef_, rtol=RTOL, atol=0)
    assert list(dask_model.feature_names_in_) == ["a", "b", "c", "d"]
    assert_same_event(dask_model.privacy_event_, memory.privacy_event_)
    predictions = dask_model.predict(ddf)
    assert isinstance(predictions, da.Array)
    np.testing.assert_allclose(predictions.compute(), memory.predict(frame), rtol=1e-9, atol=1e-9)


def _never_computed(block):
    raise AssertionError("a chunk of rows was computed")


def test_predict_on_dask_input_is_lazy(client):
    X, y, _ = _tables()["gaussian"]
    model, _ = _fit(X, y, **CONFIGS["absolute_loss"])
    poisoned = da.from_array(X, chunks=(1000, 4)).map_blocks(_never_computed, dtype=X.dtype,
                                                             meta=np.empty((0, 0), dtype=X.dtype))
    lazy = model.predict(poisoned)  # builds the graph only: no chunk is computed
    assert isinstance(lazy, da.Array) and lazy.shape == (X.shape[0],) and lazy.dtype == X.dtype
    assert lazy.chunks == ((1000, 1000, 1000),)
    predictions = model.predict(da.from_array(X, chunks=(1000, 4)))
    np.testing.assert_allclose(predictions.compute(), model.predict(X), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("params, match", [
    (dict(algorithm="localized"), "algorithm='localized'"),  # the default scaling with a solver not built
    (dict(scaling="none", loss="absolute", algorithm="localized"), "algorithm='localized'"),
    (dict(scaling="none", loss="absolute", bounds=(0.0, 1.0)), "Declared bounds"),
    ({"bounds": (-10.0, 10.0)}, "Declared bounds"),  # the default scaling with declared bounds
    ({"y_bounds": (-10.0, 10.0)}, "Declared bounds"),
])
def test_unsupported_configurations_refuse_before_any_spend(client, params, match):
    X, y, _ = _tables()["gaussian"]
    accountant = BudgetAccountant(epsilon=10.0, delta=1e-3)
    model = DPHeavyTailRegressor(random_state=0, accountant=accountant, **params)
    poisoned = da.from_array(X, chunks=(1000, 4)).map_blocks(_never_computed, dtype=X.dtype,
                                                             meta=np.empty((0, 0), dtype=X.dtype))
    with pytest.raises(ValueError, match=match) as info:
        model.fit(poisoned, da.from_array(y, chunks=1000))
    assert "Nothing was spent" in str(info.value)  # refused from public inputs: no value of the rows was read
    assert accountant.events == ()
    assert not hasattr(model, "coef_")


def test_other_estimators_and_bad_values_refuse_before_any_spend(client):
    X, y, _ = _tables()["gaussian"]
    accountant = BudgetAccountant(epsilon=10.0, delta=1e-3)
    # The classifier needs the public classes on Dask input (reading them from y would release them).
    with pytest.raises(ValueError, match="pass classes="):
        DPInterpolatingClassifier(accountant=accountant).fit(da.from_array(X, chunks=1000),
                                                             da.from_array(y > 0, chunks=1000))
    # The zeroth-order regressor's network and the tuner refuse too, before computing any chunk (the
    # tuner's input validation would otherwise bring every row to this process). The zeroth-order
    # regressor's supported configurations: tests/zeroth_order/test_dask.py.
    from skdp import DPZerothOrderRegressor
    from skdp.model_selection import DPRegularizationTuner

    poisoned = da.from_array(X, chunks=(1000, 4)).map_blocks(_never_computed, dtype=X.dtype,
                                                             meta=np.empty((0, 0), dtype=X.dtype))
    with pytest.raises(ValueError, match="model='mlp' is not supported on Dask input"):
        DPZerothOrderRegressor(model="mlp", accountant=accountant).fit(poisoned, da.from_array(y, chunks=1000))
    with pytest.raises(ValueError, match="DPRegularizationTuner does not accept Dask input"):
        DPRegularizationTuner(DPHeavyTailRegressor(), accountant=accountant).fit(poisoned,
                                                                               da.from_array(y, chunks=1000))
    bad = X.copy()
    bad[2500, 1] = np.nan
    with pytest.raises(ValueError, match="NaN or infinity"):
        DPHeavyTailRegressor(accountant=accountant, **CONFIGS["absolute_loss"]).fit(
            da.from_array(bad, chunks=1000), da.from_array(y, chunks=1000))
    assert accountant.events == ()


def test_a_plan_whose_quantiles_would_gather_too_many_values_refuses_before_any_spend(client, monkeypatch):
    # The default scaling's quantiles (epsilon about 120 / n each) gather whole columns: beyond the
    # public limit the fit would fail on the driver after the reservation, so it refuses from the plan.
    from skdp.linear_model import _rows
    from skdp.mechanisms._chunked_quantiles import gathered_per_column

    X, y, _ = _tables()["gaussian"]
    n, d = X.shape
    monkeypatch.setattr(_rows, "MAX_GATHERED_VALUES", d * n - 1)
    accountant = BudgetAccountant(epsilon=10.0, delta=1e-3)
    poisoned = da.from_array(X, chunks=(1000, d)).map_blocks(_never_computed, dtype=X.dtype,
                                                             meta=np.empty((0, 0), dtype=X.dtype))
    with pytest.raises(ValueError, match="values to the driver in one pass") as info:
        DPHeavyTailRegressor(epsilon=1.0, random_state=0, accountant=accountant).fit(
            poisoned, da.from_array(y, chunks=1000))
    assert "Nothing was spent" in str(info.value) and accountant.events == ()
    assert gathered_per_column(n, 120.0 / n) == n
    assert gathered_per_column(10**8, 1.0) == 2**20 + 2  # a narrow window still gathers whole bins
    # A configuration without column statistics gathers one column: under the same limit it fits.
    DPHeavyTailRegressor(epsilon=1.0, random_state=0, accountant=accountant, scaling="none",
                         max_iter=5).fit(da.from_array(X, chunks=(1000, d)), da.from_array(y, chunks=1000))
    assert len(accountant.events) == 1


def test_a_fit_inside_a_dask_worker_charges_the_users_ledger_or_refuses(client):
    X, y, _ = _tables()["gaussian"]
    implicit = BudgetAccountant.default()
    # No accountant, no block: the worker has no ledger the user sees; it refuses before spending.
    orphan = DPHeavyTailRegressor(random_state=0, **CONFIGS["absolute_loss"])
    with pytest.raises(DetachedAccountantError, match="Dask worker"):
        client.submit(orphan.fit, X, y, pure=False).result()
    assert implicit.events == ()
    # An explicit accountant made by the client is charged by the worker's fit.
    accountant = BudgetAccountant(epsilon=10.0, delta=1e-3)
    model = DPHeavyTailRegressor(random_state=0, accountant=accountant, **CONFIGS["absolute_loss"])
    fitted = client.submit(model.fit, X, y, pure=False).result()
    assert len(accountant.events) == 1
    assert accountant.events[0] == fitted.privacy_event_


def test_empty_and_one_row_chunks_fit_as_the_rows_do(client):
    # A filtered dataframe can leave empty partitions, depending on the values: they are dropped
    # before any spend, so no chunk function meets one after the reservation.
    X, y, _ = _tables()["gaussian"]
    chunks = (1, 0, 1499, 0, 1, 1499)
    memory, _ = _fit(X, y, **CONFIGS["private_clips_huber"])
    dask_model, ledger = _fit(da.from_array(X, chunks=(chunks, 4)), da.from_array(y, chunks=(chunks,)),
                              **CONFIGS["private_clips_huber"])
    np.testing.assert_allclose(dask_model.coef_, memory.coef_, rtol=RTOL, atol=0)
    assert ledger.spent.epsilon == pytest.approx(1.0, rel=1e-9)
    empty = da.from_array(X[:0], chunks=((0,), 4))
    accountant = BudgetAccountant()
    with pytest.raises(ValueError, match="0 sample"):
        DPHeavyTailRegressor(scaling="none", accountant=accountant).fit(empty, da.from_array(y[:0], chunks=((0,),)))
    assert len(accountant.events) == 0


@pytest.mark.parametrize("config", ["private_clips_huber", "default_scaling", "classifier"])
def test_the_fits_generator_never_reaches_the_workers(client, monkeypatch, config):
    # Only the quantile jitter's generator state (seeded from the fit's through SHA-256) may travel with
    # the tasks: the fit's own generator draws every noise of the fit, and its state would let anyone
    # who sees the task graph replay that noise.
    from skdp.mechanisms import quantiles, scaling

    fit_states, jitter_states, sent = [], [], []
    original_jitter = quantiles.jitter_generator

    def recording_jitter(rng):
        fit_states.append(rng.bit_generator.state)
        generator = original_jitter(rng)
        jitter_states.append(generator.bit_generator.state)
        fit_states.append(rng.bit_generator.state)
        return generator

    monkeypatch.setattr(quantiles, "jitter_generator", recording_jitter)
    monkeypatch.setattr(scaling, "jitter_generator", recording_jitter)  # the column statistics' jitter
    for name in ("map", "sum", "gather"):
        if hasattr(_rows.ChunkedRows, name):
            original = getattr(_rows.ChunkedRows, name)

            def spy(self, func, *args, _original=original, **kwargs):
                sent.extend(args)
                return _original(self, func, *args, **kwargs)

            monkeypatch.setattr(_rows.ChunkedRows, name, spy)
    X, y, chunk = _tables()["gaussian"]
    if config == "classifier":  # the default classifier: counts, scaling, solver, calibration, fit check
        _classify(da.from_array(X, chunks=(chunk, 4)), da.from_array((y > 1.0).astype(int), chunks=chunk),
                  max_iter=5)
    else:
        params = CONFIGS[config] if config in CONFIGS else dict(loss="huber", max_iter=12)
        _fit(da.from_array(X, chunks=(chunk, 4)), da.from_array(y, chunks=chunk), **params)

    def states_in(value):
        if isinstance(value, dict) and "bit_generator" in value:
            yield value
        elif isinstance(value, np.random.Generator | np.random.BitGenerator):
            yield value.bit_generator.state if isinstance(value, np.random.Generator) else value.state
        elif isinstance(value, (tuple, list)):
            for item in value:
                yield from states_in(item)

    shipped = [state for arg in sent for state in states_in(arg)]
    assert jitter_states and shipped, "the fit released no jittered quantile"
    assert all(state in jitter_states for state in shipped)
    assert not any(state in fit_states for state in shipped)


# -- the default standardisation on Dask (scaling="auto" and the modes it degrades to) -----------
def _mixed_table(n=3000):
    """A 0/1 column, a heavy-tailed column, an offset column and a Gaussian one."""
    rng = np.random.default_rng(2)
    X = np.column_stack([rng.random(n) < 0.3, rng.standard_t(2, n) * 50.0, 1e6 + rng.normal(size=n),
                         rng.normal(size=n)])
    y = X @ [1.0, 0.02, 0.5, -1.0] - 5e5 + rng.standard_t(3, n)
    return X, y


UNEVEN = (1, 2, 997, 1500, 500)  # chunks of unequal sizes, tiny ones first


def _dask(X, y, chunks=UNEVEN):
    return da.from_array(X, chunks=(chunks, X.shape[1])), da.from_array(y, chunks=(chunks,))


def assert_same_fit(ours, theirs):
    """The same model, the same standardisation and the same privacy event and charge."""
    (model, ledger), (memory, memory_ledger) = ours, theirs
    np.testing.assert_allclose(model.coef_, memory.coef_, rtol=RTOL, atol=0)
    assert model.intercept_ == pytest.approx(memory.intercept_, rel=RTOL, abs=0)
    assert model.scaling_.keys() == memory.scaling_.keys()
    for key, value in memory.scaling_.items():
        if key == "mode":
            assert model.scaling_[key] == value
        else:
            np.testing.assert_allclose(model.scaling_[key], value, rtol=RTOL, atol=1e-300)
    assert_same_event(model.privacy_event_, memory.privacy_event_)
    assert len(ledger.events) == len(memory_ledger.events) == 1
    assert_same_event(ledger.events, memory_ledger.events)
    assert ledger.spent.epsilon == pytest.approx(memory_ledger.spent.epsilon, rel=RTOL)
    assert ledger.spent.delta == memory_ledger.spent.delta


def test_the_default_fit_on_dask_is_the_in_memory_fit_release_by_release(client, monkeypatch):
    # DPHeavyTailRegressor(epsilon=1.0) with every default: the whitened standardisation ("columns": four
    # quantiles per column and for y, the magnitude check, the row-norm median, the Gram release, the
    # whitened row-norm median), then clipped descent on the whole whitened rows.
    X, y = _mixed_table()
    with record_releases() as memory_log:
        memory = _fit(X, y)
    passes = []
    original = _rows.ChunkedRows.map
    monkeypatch.setattr(_rows.ChunkedRows, "map",
                        lambda self, *a, **k: passes.append(1) or original(self, *a, **k))
    with record_releases() as dask_log:
        ours = _fit(*_dask(X, y))
    assert memory[0].scaling_["mode"] == "columns"
    assert_same_fit(ours, memory)
    # Every Gaussian release (magnitude counts, second moments, curvature, each step, the fit check): the
    # same event, and the value before the noise equal up to summation order.
    assert len(dask_log) == len(memory_log) == 1 + 1 + 1 + 100 + 1
    for mine, theirs in zip(dask_log, memory_log):
        assert mine.mechanism == theirs.mechanism
        assert_same_event(mine.event, theirs.event)
        np.testing.assert_allclose(mine.value, theirs.value, rtol=1e-9, atol=1e-12)
    # The passes docs/dask.rst counts: 2 per quantile (10 in the standardisation, 2 clip thresholds), the
    # magnitude check, the Gram matrix, the curvature, T = 100 steps and the fit check (and the finite
    # check before the reservation, not made through ChunkedRows.map).
    assert len(passes) == 2 * 12 + 1 + 1 + 1 + 100 + 1


@pytest.mark.parametrize("params, mode", [
    (dict(scaling="robust"), "robust"),
    (dict(scaling="target", loss="huber"), "target"),
    (dict(epsilon=0.3), "pooled"),  # scaling="auto" on a smaller budget
    (dict(epsilon=0.05), "minimal"),  # and on a starved one
    (dict(scaling="scale", fit_intercept=False), "scale"),  # the one-quantile column statistics
])
def test_the_modes_the_default_degrades_to_fit_as_in_memory(client, params, mode):
    X, y = _mixed_table()
    params = {"max_iter": 12, **params}
    memory = _fit(X, y, **params)
    assert memory[0].scaling_["mode"] == mode
    assert_same_fit(_fit(*_dask(X, y), **params), memory)


def test_a_dask_dataframe_with_uneven_partitions_fits_as_in_memory(client):
    dd = pytest.importorskip("dask.dataframe", reason="dask.dataframe is not installed")
    pd = pytest.importorskip("pandas")
    X, y = _mixed_table()
    frame = pd.DataFrame(X, columns=["binary", "heavy", "offset", "normal"])
    memory = _fit(frame, y, max_iter=12)
    divisions = (0, 1, 3, 1000, 2500, 2999)
    ddf = dd.from_pandas(frame, npartitions=1).repartition(divisions=divisions)
    target = dd.from_pandas(pd.Series(y), npartitions=1).repartition(divisions=divisions)
    ours = _fit(ddf, target, max_iter=12)
    assert_same_fit(ours, memory)
    assert list(ours[0].feature_names_in_) == list(frame.columns)


@pytest.mark.filterwarnings("ignore::skdp.accounting.PrivacyLeakWarning")  # epsilon = inf says it is not private
@pytest.mark.parametrize("epsilon", [1.0, np.inf])
def test_constant_columns_tied_chunks_and_extreme_values_fit_as_in_memory(client, epsilon):
    # Nothing may raise after the reservation: a constant column, chunks whose rows are all equal, values
    # near the largest floats. Each is mapped by the in-memory per-record rules, chunk by chunk. At
    # epsilon = inf the exact quantiles and the largest whitened row norm (a maximum over chunks) are used.
    X, y = _mixed_table()
    X = np.column_stack([X, np.full(X.shape[0], 3.0)])
    X[1000:2000] = X[1000]  # the 1500-row chunk starts with 1000 equal rows
    if np.isfinite(epsilon):
        # (Without noise nothing is clipped: sums of such values overflow and cancel in an order-dependent
        # way, so the exact fit is compared on the other rows only.)
        X[5, 1], X[7, 1], y[11] = 1e300, -1e308, 1e300
    params = dict(max_iter=12, epsilon=epsilon)
    memory = _fit(X, y, **params)
    assert_same_fit(_fit(*_dask(X, y), **params), memory)


def test_a_large_table_releases_its_column_halves_from_two_threads_as_in_memory(client):
    # From n d = 4e5 the column statistics release two halves of the columns, each with its own generator
    # (a public rule of the in-memory code): on Dask each half's passes run from its own driver thread.
    X, y = _mixed_table(100_000)
    memory = _fit(X, y, max_iter=5)
    assert_same_fit(_fit(*_dask(X, y, chunks=(1, 49_999, 30_000, 20_000)), max_iter=5), memory)



def _error_state(X, y):
    with np.errstate():  # the state the chunk function runs under
        return dict(np.geterr())


def test_chunk_functions_run_under_ieee_rules_whatever_the_workers_numpy_settings(client):
    # The driver runs a fit under np.errstate(all="ignore") (overflow and invalid values are mapped by
    # per-record rules); a worker whose numpy settings raise must not turn one record's overflow into an
    # exception after the reservation, so every chunk function runs under the same rules.
    X, y = _mixed_table()
    rows = _rows.ChunkedRows(*_dask(X, y))
    states = rows.map(_error_state)
    assert len(states) == len(UNEVEN)
    assert all(state == {"divide": "ignore", "over": "ignore", "under": "ignore", "invalid": "ignore"}
               for state in states)


# -- the classifier on Dask (DPInterpolatingClassifier's default path) ----------------------------
def _labelled_table(n_classes, n=3000):
    """The mixed table's columns with labels of a noisy linear model (class 2 of three is rarer)."""
    X, _ = _mixed_table(n)
    rng = np.random.default_rng(4)
    Z = (X - X.mean(axis=0)) / X.std(axis=0)
    if n_classes == 2:
        return X, (Z @ [1.0, 0.5, -1.0, 0.8] + rng.logistic(size=n) > 0.5).astype(int)
    scores = Z @ np.array([[1.0, 0.5, -1.0, 0.8], [-1.0, 0.3, 1.0, 0.0], [0.0, -0.8, 0.0, -1.0]]).T
    return X, np.argmax(scores + rng.gumbel(size=scores.shape) + [0.0, 0.0, -1.0], axis=1)


# The calibration and the fit check read the scores X @ coef + intercept in the original units, where the
# table's 1e6-offset column cancels six digits: the solver's coefficients, equal to 1e-15 relative (summation
# order), give scores equal to about 1e-10 relative, and the released score scale and the calibrated model
# follow (measured: at most 1.3e-10). On tables without such an offset the fits agree to 1e-14.
CLASSIFIER_RTOL = 1e-9


def assert_same_classifier(ours, theirs):
    """The same model, calibration, fit check, standardisation and privacy event and charge."""
    (model, ledger), (memory, memory_ledger) = ours, theirs
    np.testing.assert_allclose(model.coef_, memory.coef_, rtol=CLASSIFIER_RTOL, atol=1e-300)
    np.testing.assert_allclose(model.intercept_, memory.intercept_, rtol=CLASSIFIER_RTOL, atol=1e-300)
    np.testing.assert_allclose(model.class_prior_, memory.class_prior_, rtol=RTOL)
    for attribute in ("calibration_", "fit_check_"):
        ours_, theirs_ = getattr(model, attribute), getattr(memory, attribute)
        assert ours_.keys() == theirs_.keys()
        for key, value in theirs_.items():
            assert ours_[key] == pytest.approx(value, rel=CLASSIFIER_RTOL, abs=1e-300)
    assert model.scaling_["mode"] == memory.scaling_["mode"]
    assert_same_event(model.privacy_event_, memory.privacy_event_)
    assert len(ledger.events) == len(memory_ledger.events) == 1
    assert_same_event(ledger.events, memory_ledger.events)
    assert ledger.spent.epsilon == pytest.approx(memory_ledger.spent.epsilon, rel=RTOL)
    assert ledger.spent.delta == memory_ledger.spent.delta
    np.testing.assert_array_equal(model.classes_, memory.classes_)


def test_the_default_binary_classifier_on_dask_is_the_in_memory_fit(client, monkeypatch):
    # Every default (logistic loss, clipped descent, scaling="auto" -> "columns"), class_weight="balanced":
    # class counts, the standardisation, the row mean, the curvature, T steps, the score scale, the
    # Platt histogram and the fit check, each from per-chunk sums; every noise drawn on the driver.
    X, y = _labelled_table(2)
    params = dict(class_weight="balanced", max_iter=10)
    with record_releases() as memory_log:
        memory = _classify(X, y, **params)
    passes = []
    original = _rows.ChunkedRows.map
    monkeypatch.setattr(_rows.ChunkedRows, "map",
                        lambda self, *a, **k: passes.append(1) or original(self, *a, **k))
    with record_releases() as dask_log:
        ours = _classify(*_dask(X, y), **params)
    assert memory[0].scaling_["mode"] == "columns" and memory[0].calibration_["bins"] > 0
    assert not memory[0].fit_check_["fallback"]
    assert_same_classifier(ours, memory)
    assert len(dask_log) == len(memory_log)
    for mine, theirs in zip(dask_log, memory_log):
        assert mine.mechanism == theirs.mechanism
        assert_same_event(mine.event, theirs.event)
        np.testing.assert_allclose(mine.value, theirs.value, rtol=1e-9, atol=1e-12)
    # The passes docs/dask.rst counts: the class counts, 2 per quantile (4 column quantiles and the two
    # row-norm medians; the score scale), the magnitude check, the Gram matrix, the row mean, the
    # curvature, T steps, the histogram and the fit check.
    assert len(passes) == 1 + 2 * 6 + 1 + 1 + 1 + 1 + 10 + 2 + 1 + 1
    # Predictions on Dask input are lazy dask arrays, equal to the model's in-memory predictions.
    poisoned = da.from_array(X, chunks=(1000, 4)).map_blocks(_never_computed, dtype=X.dtype,
                                                             meta=np.empty((0, 0), dtype=X.dtype))
    model = ours[0]
    for method in ("predict", "predict_proba", "predict_log_proba", "decision_function"):
        lazy = getattr(model, method)(poisoned)  # builds the graph only: no chunk is computed
        assert isinstance(lazy, da.Array)
        np.testing.assert_allclose(getattr(model, method)(da.from_array(X, chunks=(1000, 4))).compute(),
                                   getattr(model, method)(X), rtol=1e-12, atol=1e-12)
    assert model.predict_proba(poisoned).shape == (X.shape[0], 2)
    assert np.mean(model.predict(X) == memory[0].predict(X)) > 0.999


def test_a_three_class_classifier_on_a_dask_dataframe_is_the_in_memory_fit(client):
    # The softmax loss, the temperature bisection (one pass per step), labels of a dataframe column, and
    # a class absent from the data among the public classes (its released count is floored).
    dd = pytest.importorskip("dask.dataframe", reason="dask.dataframe is not installed")
    pd = pytest.importorskip("pandas")
    X, y = _labelled_table(3)
    labels = np.array([10, 20, 30])[y]
    frame = pd.DataFrame(X, columns=["binary", "heavy", "offset", "normal"])
    params = dict(classes=[10, 20, 30, 40], max_iter=8)
    memory = _classify(frame, labels, **params)
    divisions = (0, 1, 3, 1000, 2500, 2999)
    ddf = dd.from_pandas(frame, npartitions=1).repartition(divisions=divisions)
    target = dd.from_pandas(pd.Series(labels), npartitions=1).repartition(divisions=divisions)
    ours = _classify(ddf, target, **params)
    assert memory[0].coef_.shape == (4, 4) and memory[0].calibration_["bins"] == 0
    assert_same_classifier(ours, memory)
    proba = ours[0].predict_proba(ddf)
    assert isinstance(proba, da.Array)
    # The same model on the same rows; a one-row chunk's product differs from the whole table's in the last
    # digits, which the 1e6-offset column scales up to ~1e-10 relative.
    np.testing.assert_allclose(proba.compute(), ours[0].predict_proba(frame), rtol=1e-9, atol=1e-12)


def test_chunks_of_one_class_and_one_row_fit_as_in_memory(client):
    # Every chunk holds one class only (sorted labels), a chunk holds one row, partitions are empty.
    X, y = _labelled_table(2)
    order = np.argsort(y, kind="stable")
    X, y = X[order], y[order]
    chunks = (1, 0, int(np.sum(y == 0)) - 1, int(np.sum(y == 1)), 0)
    params = dict(class_weight={0: 1.0, 1: 2.0}, max_iter=6)
    assert_same_classifier(_classify(*_dask(X, y, chunks), **params), _classify(X, y, **params))


@pytest.mark.filterwarnings("ignore::skdp.accounting.PrivacyLeakWarning")  # epsilon = inf says it is not private
@pytest.mark.parametrize("params, match", [
    (dict(classes=None), "pass classes="),
    (dict(algorithm="epoch_growth"), "algorithm='epoch_growth'"),
    (dict(algorithm="interpolation", loss="squared_hinge"), "algorithm='interpolation'"),
    (dict(bounds=(-10.0, 10.0)), "Declared bounds"),
    (dict(delta=0.0), "delta > 0"),
    (dict(epsilon=np.inf), "finite epsilon"),
])
def test_unsupported_classifier_configurations_refuse_before_any_spend(client, params, match):
    X, y = _labelled_table(2)
    accountant = BudgetAccountant(epsilon=10.0, delta=1e-3)
    model = DPInterpolatingClassifier(**{"random_state": 0, "accountant": accountant, "classes": [0, 1], **params})
    poisoned = da.from_array(X, chunks=(1000, 4)).map_blocks(_never_computed, dtype=X.dtype,
                                                             meta=np.empty((0, 0), dtype=X.dtype))
    with pytest.raises(ValueError, match=match) as info:
        model.fit(poisoned, da.from_array(y, chunks=1000))
    assert "Nothing was spent" in str(info.value)
    assert "DPInterpolatingClassifier with algorithm='auto'" in str(info.value) or params.get("classes", 1) is None
    assert accountant.events == ()
    assert not hasattr(model, "coef_")


def test_labels_outside_the_public_classes_refuse_before_any_spend(client):
    X, y = _labelled_table(2)
    y = y.copy()
    y[2900] = 7
    accountant = BudgetAccountant(epsilon=10.0, delta=1e-3)
    with pytest.raises(ValueError, match="not in classes"):
        DPInterpolatingClassifier(classes=[0, 1], accountant=accountant).fit(*_dask(X, y))
    names = np.array(["a", "b"], dtype=object)[np.clip(y, 0, 1)]
    names[5] = None  # not comparable with the classes' strings
    with pytest.raises(ValueError, match="cannot be compared with classes") as info:
        DPInterpolatingClassifier(classes=["a", "b"], accountant=accountant).fit(
            da.from_array(X, chunks=(1000, X.shape[1])), da.from_array(names, chunks=1000))
    assert "Nothing was spent" in str(info.value)
    assert accountant.events == ()


def test_a_label_that_turns_unknown_after_the_check_is_left_out_not_raised(monkeypatch):
    # The check pass is the only guard against labels outside `classes`; a source whose later passes differ
    # (a table changed between passes) must not make a release raise after the reservation: such a label is
    # read as the first public class (a per-record map), and the fit completes with its one charge.
    import warnings

    import dask

    from skdp.linear_model import _rows

    checked = {"done": False}
    check = _rows.ChunkedRows.check_finite

    def check_then_flag(self):
        check(self)
        checked["done"] = True

    monkeypatch.setattr(_rows.ChunkedRows, "check_finite", check_then_flag)

    def flaky(block):
        out = np.array(block, copy=True)
        if checked["done"] and out.size:
            out[0] = 9  # not a public class, in every pass after the check
        return out

    X, y = _labelled_table(3)
    Xd, yd = _dask(X, y)
    accountant = BudgetAccountant(epsilon=10.0, delta=1e-3)
    with dask.config.set(scheduler="synchronous"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = DPInterpolatingClassifier(classes=[0, 1, 2], class_weight="balanced", accountant=accountant,
                                          random_state=0).fit(Xd, yd.map_blocks(flaky, dtype=yd.dtype))
    assert len(accountant.events) == 1 and np.all(np.isfinite(model.coef_))
