"""DPZerothOrderRegressor on Dask collections (skdp.zeroth_order._chunked): the in-memory fit, refusals.

The linear model with a built-in loss and the practical "naive" schedule on a
table split into uneven chunks releases the in-memory model, standardisation,
schedule, fit check and privacy event (equal up to the order of summation);
every other configuration refuses before any chunk is computed and before
anything is spent. Few steps (``max_iter``): every step is one pass, whose
latency on the scheduler is what these small tables cost.
"""

import numpy as np
import pytest

from dask_cluster import RTOL, assert_same_event, client, da  # noqa: F401 (client: the fixture)
from skdp import BudgetAccountant, DPZerothOrderRegressor
from skdp.linear_model import _rows
from skdp.losses import HuberLoss
from skdp.mechanisms._audit import record_releases
from skdp.solvers.zeroth_order import Naive, VarianceReduced

UNEVEN = (1, 2, 997, 1500, 500)  # chunks of unequal sizes, tiny ones first


def _table(n=3000):
    rng = np.random.default_rng(1)
    X = rng.normal(size=(n, 4)) * [1.0, 2.0, 0.5, 1.0] + [0.0, 1.0, 0.0, -2.0]
    y = X @ [1.0, 0.5, -2.0, 0.3] + 1.0 + rng.standard_t(3, size=n)
    return X, y


def _dask(X, y, chunks=UNEVEN):
    return da.from_array(X, chunks=(chunks, X.shape[1])), da.from_array(y, chunks=(chunks,))


def _fit(X, y, **params):
    accountant = BudgetAccountant()
    params = {"epsilon": 1.0, "random_state": 7, "max_iter": 8, **params}
    return DPZerothOrderRegressor(accountant=accountant, **params).fit(X, y), accountant


def assert_same_fit(ours, theirs):
    """The same model, standardisation, schedule, fit check and privacy event and charge."""
    (model, ledger), (memory, memory_ledger) = ours, theirs
    np.testing.assert_allclose(model.coef_, memory.coef_, rtol=RTOL, atol=0)
    assert model.intercept_ == pytest.approx(memory.intercept_, rel=RTOL, abs=0)
    np.testing.assert_allclose(model.params_, memory.params_, rtol=RTOL, atol=0)
    assert model.scaling_["mode"] == memory.scaling_["mode"]
    for key, value in memory.scaling_.items():
        if key != "mode":
            np.testing.assert_allclose(model.scaling_[key], value, rtol=RTOL, atol=1e-300)
    assert model.schedule_.keys() == memory.schedule_.keys()
    for key, value in memory.schedule_.items():
        if isinstance(value, float):
            assert model.schedule_[key] == pytest.approx(value, rel=RTOL)
        elif key != "loss":  # the loss's repr holds the released residual scale (compared above)
            assert model.schedule_[key] == value
    assert model.n_function_evals_ == memory.n_function_evals_ and model.n_iter_ == memory.n_iter_
    assert model.lipschitz_ == pytest.approx(memory.lipschitz_, rel=RTOL)
    assert model.fit_check_["noise_std"] == memory.fit_check_["noise_std"]
    assert model.fit_check_["improvement"] == pytest.approx(memory.fit_check_["improvement"], rel=RTOL)
    assert_same_event(model.privacy_event_, memory.privacy_event_)
    assert len(ledger.events) == len(memory_ledger.events) == 1
    assert_same_event(ledger.events, memory_ledger.events)
    assert ledger.spent.epsilon == pytest.approx(memory_ledger.spent.epsilon, rel=RTOL)
    assert ledger.spent.delta == memory_ledger.spent.delta


@pytest.mark.parametrize("loss, residual_median", [("absolute", False), ("huber", True), ("pinball", False)])
def test_the_default_linear_fit_on_dask_is_the_in_memory_fit_release_by_release(client, monkeypatch, loss,
                                                                                residual_median):
    # The default standardisation ("columns": four quantiles per column and for y, the magnitude check,
    # the row-norm median, the Gram release, the whitened row-norm median), T clipped zeroth-order steps
    # (with huber's automatic constant: an absolute-loss warm-up, then a private residual median), the
    # fit check.
    X, y = _table()
    params = {"loss": loss} if loss != "pinball" else {"loss": loss, "quantile": 0.3}
    with record_releases() as memory_log:
        memory = _fit(X, y, **params)
    passes = []
    original = _rows.ChunkedRows.map
    monkeypatch.setattr(_rows.ChunkedRows, "map", lambda self, *a, **k: passes.append(1) or original(self, *a, **k))
    with record_releases() as dask_log:
        ours = _fit(*_dask(X, y), **params)
    assert memory[0].scaling_["mode"] == "columns"
    assert ("residual_scale" in memory[0].schedule_) == residual_median
    assert_same_fit(ours, memory)
    # Every Gaussian release (magnitude counts, second moments, each step, the fit check): the same event,
    # and the value before the noise equal up to summation order, so the same noise draw.
    assert len(dask_log) == len(memory_log) == 1 + 1 + 8 + 1
    for mine, theirs in zip(dask_log, memory_log):
        assert mine.mechanism == theirs.mechanism
        assert_same_event(mine.event, theirs.event)
        np.testing.assert_allclose(mine.value, theirs.value, rtol=1e-9, atol=1e-12)
    # The passes docs/dask.rst counts: 2 per quantile (10 in the standardisation, 1 residual median), the
    # magnitude check, the Gram matrix, T = 8 steps, the fit check (the finite check is not made through map).
    assert len(passes) == 2 * (10 + residual_median) + 1 + 1 + 8 + 1


def test_a_dask_dataframe_fits_as_in_memory_and_predicts_lazily(client):
    dd = pytest.importorskip("dask.dataframe", reason="dask.dataframe is not installed")
    pd = pytest.importorskip("pandas")
    X, y = _table()
    frame = pd.DataFrame(X, columns=["a", "b", "c", "d"])
    params = dict(loss="tukey", scaling="none")
    memory = _fit(frame, y, **params)
    divisions = (0, 1, 3, 1000, 2500, 2999)
    ddf = dd.from_pandas(frame, npartitions=1).repartition(divisions=divisions)
    target = dd.from_pandas(pd.Series(y), npartitions=1).repartition(divisions=divisions)
    ours = _fit(ddf, target, **params)
    assert_same_fit(ours, memory)
    assert list(ours[0].feature_names_in_) == ["a", "b", "c", "d"]
    lazy = ours[0].predict(ddf)
    assert isinstance(lazy, da.Array)
    np.testing.assert_allclose(lazy.compute(), memory[0].predict(frame), rtol=1e-9, atol=1e-9)


def _never_computed(block):
    raise AssertionError("a chunk of rows was computed")


def _poisoned(X):
    return da.from_array(X, chunks=(1000, X.shape[1])).map_blocks(_never_computed, dtype=X.dtype,
                                                                  meta=np.empty((0, 0), dtype=X.dtype))


@pytest.mark.filterwarnings("ignore::skdp.accounting.LowBudgetWarning")  # 600 rows: the check may doubt the model
def test_predict_on_dask_input_is_lazy_for_every_model(client):
    X, y = _table(600)
    for params in (dict(scaling="none"), dict(model="mlp", hidden_units=3, scaling="none")):
        model, _ = _fit(X, y, **params)  # fitted in memory
        lazy = model.predict(_poisoned(X))  # builds the graph only: no chunk is computed
        assert isinstance(lazy, da.Array) and lazy.shape == (X.shape[0],) and lazy.chunks == ((600,),)
        np.testing.assert_allclose(model.predict(da.from_array(X, chunks=(250, 4))).compute(), model.predict(X),
                                   rtol=1e-12, atol=1e-12)


class _OwnLoss(HuberLoss):
    """A user's loss class (not one of the library's)."""


@pytest.mark.parametrize("params, match", [
    (dict(loss=lambda prediction, y: np.abs(prediction - y)), "callable loss"),
    (dict(model="mlp"), "model='mlp'"),
    (dict(model=lambda P, X: X @ P[:, :4].T, n_params=4), "callable model"),
    (dict(algorithm="variance_reduced"), "algorithm='variance_reduced'"),
    (dict(schedule="theory"), "schedule='theory'"),
    (dict(directions="iid"), "directions='iid'"),
    (dict(algorithm=VarianceReduced()), "algorithm='variance_reduced'"),
    (dict(algorithm=Naive(directions="iid")), "directions='iid'"),
    (dict(algorithm=Naive(schedule="theory")), "schedule='theory'"),
    (dict(algorithm=Naive(warm_loss=_OwnLoss())), "not one of the library's losses"),
    (dict(bounds=(-10.0, 10.0)), "Declared bounds"),
    # Frames other than every axis are raw outputs of the noise generator: they stay on the driver.
    (dict(directions="orth"), "every coordinate axis"),
    (dict(directions="coordinates", n_directions=2), "every coordinate axis"),
    (dict(algorithm=Naive(directions="orth", n_directions=3)), "every coordinate axis"),
])
def test_unsupported_configurations_refuse_before_any_spend(client, params, match):
    X, y = _table()
    accountant = BudgetAccountant(epsilon=10.0, delta=1e-3)
    model = DPZerothOrderRegressor(random_state=0, accountant=accountant, **params)
    with pytest.raises(ValueError, match=match) as info:
        model.fit(_poisoned(X), da.from_array(y, chunks=1000))
    assert "Nothing was spent" in str(info.value)  # refused from public inputs: no value of the rows was read
    assert accountant.events == ()
    assert not hasattr(model, "params_")


def test_only_released_values_and_public_randomness_reach_the_workers(client, monkeypatch):
    # The fit's generator draws every noise; neither it nor its state may travel with the tasks. What
    # travels from it: the quantiles' jitter generators (seeded through SHA-256) and each step's frame.
    from skdp.solvers.zeroth_order import directions

    frames, sent = [], []
    original_draw = directions.draw_directions

    def recording_draw(*args, **kwargs):
        frames.append(original_draw(*args, **kwargs))
        return frames[-1]

    monkeypatch.setattr("skdp.solvers.zeroth_order.naive.draw_directions", recording_draw)
    original = _rows.ChunkedRows.map

    def spy(self, func, *args, **kwargs):
        sent.append(args)
        return original(self, func, *args, **kwargs)

    monkeypatch.setattr(_rows.ChunkedRows, "map", spy)
    X, y = _table()
    _fit(*_dask(X, y), loss="huber", max_iter=4)

    def generators_in(value):
        if isinstance(value, (np.random.Generator, np.random.BitGenerator)):
            yield value
        elif isinstance(value, (tuple, list)):
            for item in value:
                yield from generators_in(item)

    assert not any(True for args in sent for _ in generators_in(args))
    shipped = [arg for args in sent for arg in args if isinstance(arg, directions.DirectionDraw)]
    assert len(shipped) == len(frames) == 4 and all(a is b for a, b in zip(shipped, frames))
    # The default frame is every coordinate axis: the identity, which carries nothing of the generator.
    assert all(np.array_equal(frame.directions, np.eye(5)) for frame in frames)


def test_every_step_on_chunked_neighbours_moves_by_at_most_its_sensitivity(client):
    # One row replaced by an extreme finite one: every step's sum on the chunked rows moves by at most its
    # claimed sensitivity, and equals the in-memory sum of the same rows.
    from privacy_harness import CoupledZOProblem

    from skdp.linear_model._standardise import Scaling
    from skdp.losses import AbsoluteLoss, TukeyLoss
    from skdp.solvers import SolverBudget
    from skdp.solvers.zeroth_order import ZOProblem
    from skdp.zeroth_order._chunked import ChunkedZOProblem
    from skdp.zeroth_order._models import LinearModel

    X, y = _table(1200)
    X2, y2 = X.copy(), y.copy()
    # The replaced row is finite and opposite to the original (features 10 standard deviations away on the
    # other side, the label far on the other side), so its clipped differences are as large as they can be.
    X2[500] = X.mean(axis=0) - np.sign(X[500] - X.mean(axis=0)) * 10 * X.std(axis=0)
    y2[500] = np.median(y) - np.sign(y[500] - np.median(y)) * 1e6
    scaling = Scaling("none", X.mean(axis=0), X.std(axis=0), float(np.median(y)), 2.0, row_bound=4.0, unit=1.0,
                      fit_intercept=True, quantile_epsilon=1.0)
    chunks = (1, 499, 300, 400)
    args = (LinearModel(5), TukeyLoss(4.685), 3.0)
    chunked = [ChunkedZOProblem.on(_rows.ChunkedRows(*_dask(A, b, chunks)), scaling, *args, row_bound=4.0)
               for A, b in ((X, y), (X2, y2))]
    memory = [ZOProblem(scaling.rows(A), scaling.transform_target(b), *args, None, row_bound=4.0)
              for A, b in ((X, y), (X2, y2))]
    runs = []
    for pair in (chunked, memory):
        coupled = CoupledZOProblem(*pair)
        solver = Naive(n_steps=4, directions="orth", n_directions=3, warm_loss=AbsoluteLoss(), rescale_loss=True)
        spec = DPZerothOrderRegressor()._problem_spec(solver, 1200, 4, "none")
        runs.append((solver.run(spec, coupled, SolverBudget(1.0, quantile_epsilon=1.0), np.random.default_rng(3)),
                     coupled))
    (chunked_result, chunked_log), (memory_result, memory_log) = runs
    assert len(chunked_log.checks) == 4 and max(chunked_log.checks) <= 1.0 + 1e-9
    assert max(chunked_log.checks) > 0.5  # not vacuous: a sensitivity claimed twice too small would fail
    np.testing.assert_allclose(chunked_log.checks, memory_log.checks, rtol=1e-9, atol=1e-12)
    assert chunked_log.sensitivities == memory_log.sensitivities
    np.testing.assert_allclose(chunked_result.coef, memory_result.coef, rtol=RTOL, atol=1e-14)
    assert chunked_result.schedule["residual_scale"] == pytest.approx(memory_result.schedule["residual_scale"],
                                                                      rel=RTOL)


def test_the_gather_limit_applies_before_any_spend(client, monkeypatch):
    # The default scaling's quantiles gather whole columns at this budget: beyond the public limit the fit
    # would fail on the driver after the reservation, so it refuses from the plan (skdp.linear_model._rows).
    X, y = _table()
    monkeypatch.setattr(_rows, "MAX_GATHERED_VALUES", X.size - 1)
    accountant = BudgetAccountant(epsilon=10.0, delta=1e-3)
    with pytest.raises(ValueError, match="values to the driver in one pass") as info:
        DPZerothOrderRegressor(random_state=0, accountant=accountant).fit(_poisoned(X), da.from_array(y, chunks=1000))
    assert "Nothing was spent" in str(info.value) and accountant.events == ()


def test_the_planned_solver_is_checked_by_the_estimator_hook():
    # check_chunked_plan asks the estimator to check its planned solver (after the parameters were checked):
    # a configured solver outside the chunked configurations is refused there too.
    model = DPZerothOrderRegressor()
    model.n_features_in_ = 4
    for solver in (VarianceReduced(), Naive(schedule="theory"), Naive(directions="orth", n_directions=3),
                   Naive(directions="coordinates", n_directions=2)):
        with pytest.raises(ValueError, match="Nothing was spent"):
            model._check_chunked_solver(solver)
    model._check_chunked_solver(Naive(directions="coordinates", n_directions=5))  # every axis: accepted
