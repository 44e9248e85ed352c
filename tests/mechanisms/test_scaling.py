"""Private column statistics, the pooled scale, the magnitude check and tied values.

What each column type gets (the rule the standardiser relies on), sparse input
giving the dense answer, the planned events, and the sensitivity of the
magnitude check's counts on neighbouring datasets.
"""

import math

import numpy as np
import pytest
import scipy.sparse as sp

from skdp.mechanisms import (
    SCALE_PRIOR,
    column_statistics_event,
    magnitude_check_sensitivity,
    private_column_statistics,
    private_magnitude_check,
    private_pooled_scale,
    private_quantile,
)
from privacy_harness import record_releases

N = 10_000


def _columns(rng, n=N):
    """One column of every awkward type, with the centre and scale each should get (approximately)."""
    onehot_rare = (rng.random(n) < 0.001).astype(float)
    return {
        "offset 1e6": (1e6 + rng.normal(size=n), 1e6, 1.0 / 1.4826),
        "offset 1e4 spread 30": (1e4 + 30 * rng.normal(size=n), 1e4, 30 / 1.4826),
        "rare binary": ((rng.random(n) < 0.05).astype(float), 0.0, 1.0),
        "rare one-hot level": (onehot_rare, 0.0, 1.0),
        "constant": (np.full(n, 7.0), 7.0, None),
        "counts, mostly zero": (rng.poisson(0.3, n).astype(float), 0.0, 1.0),
        "amounts": (1000 * rng.lognormal(0, 1, n), 1000.0, None),
        "tiny scale": (1e-7 * rng.normal(size=n), 0.0, 1e-7 / 1.4826),
    }


@pytest.mark.parametrize("stages", [4, 2])
def test_every_column_type_gets_a_centre_and_a_scale_that_keep_it_bounded_and_alive(stages):
    rng = np.random.default_rng(0)
    cols = _columns(rng)
    X = np.column_stack([c[0] for c in cols.values()])
    centre, scale, event = private_column_statistics(X, 0.05, stages=stages, random_state=1)
    assert event == column_statistics_event(X.shape[1], 0.05, stages)
    assert np.all(np.isfinite(centre)) and np.all(scale > 0)
    z = (X - centre) / scale
    for j, (name, (x, c, s)) in enumerate(cols.items()):
        # Never collapsed: the bulk of every column stays within a few units...
        assert np.median(np.abs(z[:, j])) <= 3.0, name
        # ... and with four stages a column that varies is never flattened to nothing (two stages
        # compress an offset column to 2e-3 of its offset, never blow it up: the second moments
        # released next restore its spread).
        if stages == 4 and np.ptp(x) > 0:
            assert np.abs(z[:, j]).max() >= 0.3, name
        if stages == 4 and s is not None:
            assert scale[j] == pytest.approx(s, rel=0.5), name
            assert abs(centre[j] - c) <= 0.2 * max(s, abs(c) * 1e-3), name
    # The constant column stays within |z| <= 1 (its scale is floored, never 0).
    assert np.abs(z[:, 4]).max() <= 1.0


def test_scales_only_leaves_centres_at_zero():
    rng = np.random.default_rng(1)
    X = np.column_stack([rng.normal(size=N) * 5, (rng.random(N) < 0.1).astype(float)])
    centre, scale, event = private_column_statistics(X, 0.05, stages=1, random_state=0)
    assert np.all(centre == 0.0) and event == column_statistics_event(2, 0.05, 1)
    assert scale[0] == pytest.approx(5 * 0.674, rel=0.2) and 0.5 <= scale[1] <= 2.0


def test_sparse_input_gives_the_dense_answer():
    rng = np.random.default_rng(2)
    dense = np.column_stack([np.eye(20)[rng.integers(20, size=3000)], rng.poisson(0.5, (3000, 3))])
    a = private_column_statistics(dense, 0.1, random_state=5)
    b = private_column_statistics(sp.csr_matrix(dense), 0.1, random_state=5)
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])


def test_at_infinite_epsilon_the_statistics_are_exact():
    rng = np.random.default_rng(3)
    x = 1e4 + rng.normal(size=(5001, 1))
    centre, scale, _ = private_column_statistics(x, math.inf)
    assert centre[0] == pytest.approx(np.median(x), abs=1e-9)
    # The median absolute deviation (values within a rounding-level tie of the centre left out).
    assert scale[0] == pytest.approx(np.median(np.abs(x - np.median(x))), rel=0.02)


def test_the_prior_decides_where_data_cannot_and_keeps_the_mechanism_epsilon_dp():
    """A fixed base measure: output frequencies on neighbours stay within e^eps (plus sampling error)."""
    eps, draws = 1.0, 20_000
    x = np.zeros(40)
    x[:3] = [3.0, 5.0, 40.0]  # three nonzero values: too few for the data to decide at this epsilon
    x2 = x.copy()
    x2[2] = 1e9
    bins = [1e-15, 0.5, 2.0, 10.0, 1e15]

    def freq(values, seed):
        # One column per draw: the columns are released independently.
        out, _ = private_quantile(np.tile(values[:, None], (1, draws)), 0.5, eps, (1e-15, 1e15), scale="log",
                                  nonzero=True, prior=SCALE_PRIOR, random_state=seed)
        return np.histogram(out, bins=bins)[0] / draws

    p, q = freq(x, 0), freq(x2, 1)
    se = np.sqrt((p + q) / draws)
    assert np.all(p <= math.e * q + 4 * se * (1 + math.e)) and np.all(q <= math.e * p + 4 * se * (1 + math.e))
    assert p[1] > 0.3  # the prior's piece [0.5, 2] holds much of the mass


def test_tied_values_need_jitter():
    """All-equal values leave zero-length intervals: without jitter the estimate is drawn from the range."""
    values = np.full(2000, math.sqrt(3.0))  # the row norms of a table of three one-hot blocks
    rng = np.random.default_rng(0)
    plain = [private_quantile(values, 0.5, 0.05, (1e-6, 1e12), scale="log", random_state=rng)[0]
             for _ in range(50)]
    jittered = [private_quantile(values, 0.5, 0.05, (1e-6, 1e12), scale="log", jitter=0.05, random_state=rng)[0]
                for _ in range(50)]
    assert np.mean([abs(math.log(v / math.sqrt(3.0))) > 1 for v in plain]) > 0.5
    assert all(abs(math.log(v / math.sqrt(3.0))) <= 0.06 for v in jittered)


def test_the_pooled_scale_is_one_value_per_row_and_does_not_collapse_on_one_hot_rows():
    rng = np.random.default_rng(4)
    X = np.hstack([rng.normal(size=(4000, 3)), np.eye(200)[rng.integers(200, size=4000)]])
    s, event = private_pooled_scale(X, 0.05, random_state=0)
    assert 0.7 < s < 1.3 and event.epsilon(0.0) == 0.05
    s_sparse, _ = private_pooled_scale(sp.csr_matrix(X), 0.05, random_state=0)
    assert s_sparse == s
    X[:1000] = 0.0  # all-zero rows contribute nothing
    assert 0.7 < private_pooled_scale(X, 0.05, random_state=0)[0] < 1.3


def test_the_magnitude_check_finds_a_zero_inflated_column_of_large_amounts():
    rng = np.random.default_rng(5)
    amounts = np.where(rng.random(N) < 0.1, 1000 * rng.lognormal(0, 0.5, N), 0.0)
    X = np.column_stack([rng.normal(size=N), amounts])
    # Released scales of 1 for both (what a starved quantile of the amounts gives): half the
    # amounts exceed 10^3, so that column's scale is 10^3 too small.
    off, event = private_magnitude_check(X, np.zeros(2), np.ones(2), noise_std=5.0, random_state=0)
    assert off.tolist() == [0, 3]
    assert event.sensitivity == magnitude_check_sensitivity(2) == 2 * math.sqrt(2)


@pytest.mark.parametrize("seed", range(3))
def test_the_magnitude_counts_move_by_at_most_their_sensitivity_on_neighbours(seed):
    rng = np.random.default_rng(seed)
    X = rng.standard_t(1, size=(500, 3)) * [1, 100, 1e4]
    X2 = X.copy()
    X2[rng.integers(500)] = [1e300, -1e300, 0.0][seed], 1e9, -1e9
    values = []
    for A in (X, X2):
        with record_releases() as log:
            private_magnitude_check(A, np.zeros(3), np.ones(3), noise_std=1.0, random_state=0)
        values.append(log[0].value)
    assert np.linalg.norm(values[0] - values[1]) <= magnitude_check_sensitivity(3) + 1e-12
    assert np.linalg.norm(values[0] - values[1]) > 0


@pytest.mark.parametrize("stages", [4, 2, 1])
def test_large_tables_split_over_two_threads_keep_the_rule_and_are_reproducible(stages):
    """At 50000 x 16 values the two halves of the columns run in parallel."""
    rng = np.random.default_rng(2)
    cols = _columns(rng, n=50_000)
    X = np.column_stack([c[0] for c in cols.values()] * 2)
    first = private_column_statistics(X, 0.05, stages=stages, random_state=7)
    second = private_column_statistics(X, 0.05, stages=stages, random_state=7)
    np.testing.assert_array_equal(first[0], second[0])
    np.testing.assert_array_equal(first[1], second[1])
    centre, scale, event = first
    assert event == column_statistics_event(X.shape[1], 0.05, stages)
    z = (X - centre) / scale
    assert np.all(np.median(np.abs(z), axis=0) <= 3.0)
    if stages == 4:
        truth = [c for _, c, _ in cols.values()] * 2
        assert np.all(np.abs(centre - truth) <= 0.2 * scale + 1e-3 * np.abs(truth))


# -- the same statistics from row blocks (how chunked rows on a cluster are read) ---------------
class BlockColumns:
    """The columns of an array split into row blocks, with the interface of a chunked column source.

    The mechanisms see only per-block values (ranked by counts and a few gathered values)
    and per-block sums, as on Dask.
    """

    chunked_columns = True

    def __init__(self, X, n_blocks, index=slice(None)):
        self.X, self.n_blocks, self.index = X, n_blocks, index
        self.shape = (X.shape[0], np.arange(X.shape[1])[index].size)

    def _blocks(self):
        starts = np.linspace(0, self.X.shape[0], self.n_blocks + 1).astype(int)
        starts[1] = 1  # a block of one row
        return [(self.X[a:b][:, self.index], int(a)) for a, b in zip(starts[:-1], starts[1:])]

    def columns(self, index):
        return BlockColumns(self.X, self.n_blocks, np.arange(self.X.shape[1])[self.index][index])

    def values(self, n_columns, func, *args):
        return _BlockValues([(func(block, offset, *args), offset) for block, offset in self._blocks()],
                            self.shape[0], n_columns)

    def sum(self, func, *args):
        return np.sum([func(block, offset, *args) for block, offset in self._blocks()], axis=0)


class _BlockValues:
    chunked = True

    def __init__(self, parts, n_rows, n_columns):
        self.parts, self.n_rows, self.n_columns = parts, n_rows, n_columns
        self.one_column = n_columns == 1

    def gather(self, func, *args):
        return [func(values, offset, *args) for values, offset in self.parts]

    def sum(self, func, *args):
        return np.sum(self.gather(func, *args), axis=0)


def _mixed(n=3000):
    rng = np.random.default_rng(4)
    return np.column_stack([rng.random(n) < 0.3, rng.standard_t(2, n) * 50, 1e6 + rng.normal(size=n),
                            np.full(n, 7.0), np.where(rng.random(n) < 0.95, 0.0, 1e5 * rng.random(n))])


@pytest.mark.parametrize("release", ["statistics_4", "statistics_2", "statistics_1", "robust", "robust_no_centre",
                                     "pooled", "magnitude", "statistics_two_threads"])
def test_row_blocks_release_the_in_memory_statistics_and_leave_the_generator_in_step(release):
    # Each step is one chunk function of a block of rows (with the block's share of a public jitter stream)
    # and a combine: the same values, the same draws, and the generator left where the in-memory fit
    # leaves it, so that every later noise is the in-memory one.
    from skdp.mechanisms import private_robust_scaling

    X = _mixed(90_000 if release == "statistics_two_threads" else 3000)  # n d >= 4e5: two column halves
    calls = {
        "statistics_two_threads": lambda A, g: private_column_statistics(A, 0.5, stages=4, random_state=g)[:2],
        "statistics_4": lambda A, g: private_column_statistics(A, 0.5, stages=4, random_state=g)[:2],
        "statistics_2": lambda A, g: private_column_statistics(A, 0.5, stages=2, random_state=g)[:2],
        "statistics_1": lambda A, g: private_column_statistics(A, 0.5, stages=1, random_state=g)[:2],
        "robust": lambda A, g: private_robust_scaling(A, 0.5, random_state=g)[:2],
        "robust_no_centre": lambda A, g: private_robust_scaling(A, 0.5, center=False, random_state=g)[:2],
        "pooled": lambda A, g: (private_pooled_scale(A, 0.5, random_state=g)[0],),
        "magnitude": lambda A, g: (private_magnitude_check(A, np.zeros(5), np.ones(5), 30.0, random_state=g)[0],),
    }[release]
    g_memory, g_blocks = np.random.default_rng(1), np.random.default_rng(1)
    memory = calls(X, g_memory)
    blocks = calls(BlockColumns(X, 4), g_blocks)
    for ours, theirs in zip(blocks, memory):
        np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=0)
    assert g_memory.random() == g_blocks.random()
