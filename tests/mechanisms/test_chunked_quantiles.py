"""The quantile on chunked values releases the in-memory draw (skdp.mechanisms._chunked_quantiles).

The chunked values here are numpy blocks (no cluster needed): the mechanism sees
only per-chunk counts and gathered values, exactly as on Dask.
"""

import numpy as np
import pytest

from skdp.mechanisms import _chunked_quantiles, private_quantile
from skdp.mechanisms.scaling import SCALE_PRIOR


class BlockValues:
    """Per-record values split into row blocks, with the interface of chunked values."""

    chunked = True

    def __init__(self, values, n_blocks):
        values = np.asarray(values, dtype=float)
        self.one_column = values.ndim == 1
        self.blocks = np.array_split(values.reshape(values.shape[0], -1), n_blocks)
        self.n_rows, self.n_columns = values.shape[0], values.reshape(values.shape[0], -1).shape[1]
        self.passes = 0

    def gather(self, func, *args):
        self.passes += 1
        starts = np.cumsum([0] + [b.shape[0] for b in self.blocks[:-1]])
        return [func(block, int(r0), *args) for block, r0 in zip(self.blocks, starts)]

    def sum(self, func, *args):
        return np.sum(self.gather(func, *args), axis=0)


def _both(values, n_blocks=5, seed=3, **kwargs):
    g1, g2 = np.random.default_rng(seed), np.random.default_rng(seed)
    memory = private_quantile(values, random_state=g1, **kwargs)
    chunked = private_quantile(BlockValues(values, n_blocks), random_state=g2, **kwargs)
    # The generator is left where the in-memory draw leaves it: what follows draws the same noise.
    assert g1.random() == g2.random()
    return memory, chunked


def _table():
    rng = np.random.default_rng(0)
    x = np.column_stack([rng.standard_t(2, 5000), np.exp(rng.normal(size=5000)),
                         np.where(rng.random(5000) < 0.9, 0.0, rng.exponential(3.0, 5000)),
                         np.full(5000, 2.0)])
    return x


@pytest.mark.parametrize("kwargs", [
    dict(quantile=0.5, epsilon=1.0, bounds=(-50.0, 50.0)),
    dict(quantile=0.3, epsilon=0.05, bounds=(-50.0, 50.0), jitter=0.01),
    dict(quantile=0.5, epsilon=0.5, bounds=(1e-6, 1e6), scale="log", jitter=0.05),
    dict(quantile=0.5, epsilon=0.2, bounds=(1e-15, 1e15), scale="log", nonzero=True, prior=SCALE_PRIOR),
    dict(quantile=0.9, epsilon=2e-4, bounds=(-50.0, 50.0)),  # the window spans every row
    dict(quantile=0.5, epsilon=np.inf, bounds=(-50.0, 50.0)),
    dict(quantile=0.25, epsilon=np.inf, bounds=(1e-15, 1e15), scale="log", nonzero=True, prior=SCALE_PRIOR),
])
def test_chunked_quantiles_are_the_in_memory_draw(kwargs):
    x = np.abs(_table()) if kwargs.get("scale") == "log" else _table()
    memory, chunked = _both(x, **kwargs)
    np.testing.assert_allclose(chunked[0], memory[0], rtol=1e-12, atol=0)
    assert chunked[1] == memory[1]
    one_memory, one_chunked = _both(x[:, 1], **kwargs)
    assert isinstance(one_chunked[0], float)
    assert one_chunked[0] == pytest.approx(one_memory[0], rel=1e-12)


def test_many_seeds_and_block_counts_give_the_same_draw():
    x = _table()[:, :2]
    for seed in range(20):
        memory, chunked = _both(x, n_blocks=1 + seed % 7, seed=seed, quantile=0.5, epsilon=0.1,
                                bounds=(-50.0, 50.0), jitter=0.05)
        np.testing.assert_allclose(chunked[0], memory[0], rtol=1e-12, atol=0)


def test_narrow_windows_and_crowded_bins_keep_the_draw(monkeypatch):
    # A window of a few ranks leaves weight in the tails: the selection is kept only when no value of the
    # tails could change it, else every value is gathered; crowded bins are split by more counting passes.
    monkeypatch.setattr(_chunked_quantiles, "_WINDOW_NATS", 0.05)
    monkeypatch.setattr(_chunked_quantiles, "_MAX_DISTINCT", 50)
    x = _table()[:, :2]
    passes = []
    for seed in range(10):
        g1, g2 = np.random.default_rng(seed), np.random.default_rng(seed)
        memory = private_quantile(x, 0.5, 0.5, (-50.0, 50.0), jitter=0.05, random_state=g1)
        values = BlockValues(x, 4)
        chunked = private_quantile(values, 0.5, 0.5, (-50.0, 50.0), jitter=0.05, random_state=g2)
        np.testing.assert_allclose(chunked[0], memory[0], rtol=1e-12, atol=0)
        passes.append(values.passes)
    assert max(passes) > 3  # refinement passes (and retries with every value) did run


def test_ties_at_the_ends_of_the_range_are_counted_not_gathered():
    # A million identical values gather as one value with its count.
    x = np.concatenate([np.zeros(1_000_000), np.linspace(1.0, 2.0, 1000)])
    memory, chunked = _both(x, n_blocks=8, quantile=0.9995, epsilon=1.0, bounds=(0.0, 10.0))
    assert chunked[0] == pytest.approx(memory[0], rel=1e-12)


@pytest.mark.parametrize("epsilon", [np.inf, 2.0])
def test_ties_a_few_ulps_below_a_bin_end_are_gathered_with_their_bin(epsilon):
    # -2.2e-17 divided into the bins of [-1, 1] rounds to the bin that starts at 0.0: binned by division it
    # was counted there but left out of the range gathered for that bin, and the exact median of a column
    # whose middle ranks are that tie came out as another value.
    rng = np.random.default_rng(0)
    x = rng.uniform(-0.9, 0.9, 3000)
    x[1000:2000] = -2.2095647744404893e-17
    memory, chunked = _both(x, n_blocks=4, quantile=0.5, epsilon=epsilon, bounds=(-1.0, 1.0))
    assert chunked[0] == pytest.approx(memory[0], rel=1e-12, abs=0)
    if np.isinf(epsilon):
        assert memory[0] == -2.2095647744404893e-17
