"""Tree aggregation in Fenwick layout: layer counting, noise variance, sensitivity."""

import numpy as np
import pytest

from skdp.accounting import GaussianRelease, Repeated
from skdp.mechanisms import TreeAggregator, tree_depth, tree_nodes


@pytest.mark.parametrize("T", list(range(1, 70)) + [127, 128, 129, 1000])
def test_layer_count_is_exact(T):
    """No leaf is covered by more released nodes than bit_length(T), and some leaf is."""
    released = set()
    for t in range(1, T + 1):
        nodes = tree_nodes(t)
        # The nodes of one release partition 1..t.
        covered = sorted(i for a, b in nodes for i in range(a, b + 1))
        assert covered == list(range(1, t + 1))
        assert len(nodes) == bin(t).count("1")
        released.update(nodes)
    cover = [sum(a <= leaf <= b for a, b in released) for leaf in range(1, T + 1)]
    assert max(cover) == tree_depth(T)


def test_fenwick_examples_and_exact_depth_at_small_T():
    assert tree_nodes(7) == [(1, 4), (5, 6), (7, 7)]
    assert tree_nodes(8) == [(1, 8)]
    # The published 2 ln T (Zhang, Tran and Cutkosky, 2024, Algorithm 5) under-counts at T = 1, 2, 4.
    assert [tree_depth(T) for T in (1, 2, 4)] == [1, 2, 3]


def test_noise_free_prefix_sums_are_exact():
    rng = np.random.default_rng(0)
    values = rng.normal(size=(50, 3))
    tree = TreeAggregator(50, 3, noise_std=0.0)
    out = np.array([tree.append(v) for v in values])
    np.testing.assert_allclose(out, np.cumsum(values, axis=0))


def test_noise_variance_is_popcount_times_sigma_squared():
    T, d, sigma = 40, 40_000, 0.5
    tree = TreeAggregator(T, d, noise_std=sigma, random_state=1)
    for t in range(1, T + 1):
        noise = tree.append(np.zeros(d))
        expected = bin(t).count("1") * sigma**2
        # Sample variance of 4e4 draws: relative standard error ~ sqrt(2/4e4) = 0.007.
        assert noise.var() == pytest.approx(expected, rel=0.04)


def test_live_noise_storage_is_logarithmic():
    tree = TreeAggregator(1000, 2, noise_std=1.0, random_state=0)
    for _ in range(1000):
        tree.append(np.zeros(2))
        assert len(tree._noise) <= tree.depth + 1
    with pytest.raises(RuntimeError):
        tree.append(np.zeros(2))


def test_coupled_neighbouring_streams_and_event():
    """Changing one leaf changes later releases by exactly that leaf's change."""
    T, d, sens = 20, 3, 0.7
    rng = np.random.default_rng(2)
    leaves = rng.normal(size=(T, d)) * 0.1
    changed = leaves.copy()
    changed[6] += np.array([sens, 0.0, 0.0])
    a = TreeAggregator(T, d, noise_std=1.0, random_state=5)
    b = TreeAggregator(T, d, noise_std=1.0, random_state=5)
    out_a = np.array([a.append(v) for v in leaves])
    out_b = np.array([b.append(v) for v in changed])
    diffs = np.linalg.norm(out_a - out_b, axis=1)
    np.testing.assert_allclose(diffs[:6], 0.0, atol=1e-12)
    np.testing.assert_allclose(diffs[6:], sens, rtol=1e-12)
    assert a.privacy_event(sens) == Repeated(GaussianRelease(sens, 1.0), tree_depth(T))


def test_bad_inputs():
    with pytest.raises(ValueError):
        tree_depth(0)
    with pytest.raises(ValueError):
        TreeAggregator(4, 2, noise_std=-1.0)
    with pytest.raises(ValueError):
        TreeAggregator(4, 2, noise_std=1.0).append(np.zeros(3))


def test_released_nodes_are_recorded_with_their_exact_values():
    from skdp.mechanisms._audit import record_releases

    values = np.arange(1.0, 8.0)[:, None] * np.ones((7, 2))
    tree = TreeAggregator(7, 2, noise_std=0.5, random_state=0, leaf_sensitivity=0.3)
    with record_releases() as log:
        for v in values:
            tree.append(v)
    assert len(log) == 7 and all(r.event == GaussianRelease(0.3, 0.5) for r in log)
    # The node ending at t covers leaves t - lowbit(t) + 1 .. t: node 4 is 1 + 2 + 3 + 4, node 6 is 5 + 6.
    np.testing.assert_allclose([r.value[0] for r in log], [1, 3, 3, 10, 5, 11, 7])
