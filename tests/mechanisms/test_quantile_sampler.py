"""The quantile drawn by rejection from counts (skdp.mechanisms._quantile_sampler).

The sampler runs by a public rule only on columns of more than 2^20 + 2 values;
these tests lower that threshold (a module constant) to run it on small columns.
"""

import warnings

import numpy as np
import pytest
from scipy import stats

from skdp import BudgetAccountant, DPHeavyTailRegressor
from skdp.mechanisms import _quantile_sampler, private_quantile
from skdp.mechanisms._chunked_quantiles import gathered_per_column
from skdp.mechanisms._quantile_sampler import ChunkedCounts, SortedColumns, sample_quantiles, uses_sampler
from skdp.mechanisms.scaling import SCALE_PRIOR

from privacy_harness import assert_same_mechanisms, neighbours, record_releases


class BlockValues:
    """Per-record values in uneven row blocks, with the interface of chunked values; counts each kind of pass."""

    chunked = True

    def __init__(self, values, sizes):
        values = np.asarray(values, dtype=float)
        self.one_column = values.ndim == 1
        values = values.reshape(values.shape[0], -1)
        self.blocks = np.split(values, np.cumsum(sizes)[:-1])
        self.n_rows, self.n_columns = values.shape
        self.sums = self.gathers = 0

    def _apply(self, func, args):
        starts = np.cumsum([0] + [b.shape[0] for b in self.blocks[:-1]])
        return [func(block, int(r0), *args) for block, r0 in zip(self.blocks, starts)]

    def sum(self, func, *args):
        self.sums += 1
        return np.sum(self._apply(func, args), axis=0)

    def gather(self, func, *args):
        self.gathers += 1
        return self._apply(func, args)


@pytest.fixture
def sampler_everywhere(monkeypatch):
    monkeypatch.setattr(_quantile_sampler, "_SAMPLER_ABOVE", -1)


def _uneven(n):
    sizes = [1, n // 3, 7, n // 5]
    return sizes + [n - sum(sizes)]


def test_the_rule_is_public_and_keeps_the_window_below_two_to_the_twenty():
    # Decided from n and epsilon only: the default scaling's budget (about 120 / n) on more than 2^20 + 2
    # rows, where the window would gather every value; a narrow window keeps the windowed selection.
    assert not uses_sampler(2**20 + 2, 120.0 / (2**20 + 2)) and uses_sampler(2**20 + 3, 120.0 / (2**20 + 3))
    assert not uses_sampler(10**8, 1e-3) and not uses_sampler(10**8, np.inf)
    assert gathered_per_column(10**7, 1.2e-5) == 0 and gathered_per_column(10**7, 1e-3) == 2**20 + 2


def _em_interval_probabilities(t, quantile, epsilon, lower_t, upper_t, n_absent, prior=None):
    """The exponential mechanism's probability of every interval between the sorted values (reference)."""
    edges = np.concatenate([[lower_t], np.sort(t), [upper_t]])
    n = t.size
    n_present = n - n_absent
    if prior is None:
        mass = np.diff(edges)
    else:
        mass = sum(w / (b - a) * np.clip(np.minimum(edges[1:], b) - np.maximum(edges[:-1], a), 0.0, None)
                   for a, b, w in prior)
    ranks = np.arange(n + 1.0)
    weight = mass * np.exp(-0.5 * epsilon * np.abs(np.maximum(ranks - n_absent, 0.0) - quantile * n_present))
    return edges, weight / weight.sum()


def _interval_p_value(t, released, quantile, epsilon, lower, upper, n_absent, prior):
    """Chi-square test of the drawn intervals against the mechanism's (cells of small mass merged)."""
    draws = released.size
    edges, p = _em_interval_probabilities(t, quantile, epsilon, lower, upper, n_absent, prior)
    cell = np.clip(np.searchsorted(edges, released, side="left") - 1, 0, t.size)
    observed, expected = np.bincount(cell, minlength=t.size + 1), p * draws
    # Consecutive cells merged into groups of about 40 expected draws or more.
    group = np.unique(np.minimum(np.cumsum(expected) // 40, draws // 40 - 1), return_inverse=True)[1]
    observed, expected = np.bincount(group, observed), np.bincount(group, expected)
    assert observed[expected == 0].sum() == 0  # nothing drawn where the mechanism puts no mass
    observed, expected = observed[expected > 0], expected[expected > 0]
    return stats.chisquare(observed, expected * observed.sum() / expected.sum()).pvalue


@pytest.mark.parametrize("variant", ["linear", "nonzero", "log", "prior"])
def test_the_sampler_draws_the_exponential_mechanisms_intervals(sampler_everywhere, variant):
    rng = np.random.default_rng(11)
    x = np.round(rng.standard_t(3, 30), 1)  # a few ties
    kwargs = dict(quantile=0.3, epsilon=0.4, bounds=(-10.0, 10.0))
    n_absent, prior_t = 0, None
    if variant == "nonzero":
        x[:8] = 0.0
        kwargs.update(nonzero=True)
        n_absent = int(np.sum(x == 0))
    if variant in ("log", "prior"):
        x = np.exp(x)
        kwargs.update(scale="log", bounds=(1e-3, 1e3))
    if variant == "prior":
        prior = [(1e-3, 0.5, 0.1), (0.5, 2.0, 0.6), (2.0, 1e3, 0.3)]
        kwargs.update(prior=prior)
        prior_t = [(np.log(a), np.log(b), w) for a, b, w in prior]
    draws = 1200
    # Every column an independent draw (each column has its own generators).
    estimate, _ = private_quantile(np.tile(x[:, None], (1, draws)), random_state=5, **kwargs)
    lower, upper = kwargs["bounds"]
    t = np.clip(np.where(x != 0, x, lower) if variant == "nonzero" else x, lower, upper)
    released = estimate
    if variant in ("log", "prior"):
        t, released, lower, upper = np.log(t), np.log(estimate), np.log(lower), np.log(upper)

    def p_value(epsilon):
        return _interval_p_value(t, released, kwargs["quantile"], epsilon, lower, upper, n_absent, prior_t)

    assert p_value(kwargs["epsilon"]) > 1e-3
    assert p_value(2 * kwargs["epsilon"]) < 1e-6  # the test sees an error of 2x in epsilon


def test_many_values_in_the_public_bin_of_the_target_get_the_mechanisms_intervals(sampler_everywhere):
    # 40 distinct values and a tie inside one initial public bin, the median's target (rank 20.5) in the
    # middle, at epsilon * (values per bin) >> 1: the distance is 20.5 at both ends of the bin and 0
    # inside it, so an envelope taken from the bin's ends alone would neither split the bin nor cover
    # its factor (the draw would be uniform on the range); the smallest distance inside it must be used.
    width = 20.0 / _quantile_sampler._BINS  # the initial bins of (-10, 10); 0 is an edge
    rng = np.random.default_rng(4)
    x = np.sort(rng.uniform(0.05, 0.95, 40)) * width
    x = np.r_[x, x[17]]  # a tie next to the target
    quantile, epsilon, draws = 0.5, 5.0, 600
    estimate, _ = private_quantile(np.tile(x[:, None], (1, draws)), quantile, epsilon, (-10.0, 10.0),
                                   random_state=6)
    assert _interval_p_value(x, estimate, quantile, epsilon, -10.0, 10.0, 0, None) > 1e-3
    assert _interval_p_value(x, estimate, quantile, 0.5 * epsilon, -10.0, 10.0, 0, None) < 1e-6


def test_the_release_follows_the_mechanisms_piecewise_linear_cdf(sampler_everywhere, monkeypatch):
    # Within an interval between sorted values the mechanism's density is flat, so its CDF is piecewise
    # linear. Coarse public bins (4, none split at this epsilon) put several values, with different
    # factors, in one bin: the points drawn inside a bin must follow the density, not sit at fixed places.
    monkeypatch.setattr(_quantile_sampler, "_BINS", 4)
    x = np.array([-3.0, -1.0, 0.0, 0.5, 1.7, 4.0])
    quantile, epsilon, draws = 0.5, 0.5, 2000
    estimate, _ = private_quantile(np.tile(x[:, None], (1, draws)), quantile, epsilon, (-5.0, 5.0),
                                   random_state=8)
    edges, p = _em_interval_probabilities(x, quantile, epsilon, -5.0, 5.0, 0)
    cdf = np.concatenate([[0.0], np.cumsum(p)])
    assert stats.kstest(estimate, lambda v: np.interp(v, edges, cdf)).pvalue > 1e-3
    # The test's power: it tells the release from the mechanism at 4 epsilon.
    wrong_edges, wrong_p = _em_interval_probabilities(x, quantile, 4 * epsilon, -5.0, 5.0, 0)
    wrong_cdf = np.concatenate([[0.0], np.cumsum(wrong_p)])
    assert stats.kstest(estimate, lambda v: np.interp(v, wrong_edges, wrong_cdf)).pvalue < 1e-6


def test_a_point_within_its_interval_follows_the_base_measure(sampler_everywhere):
    x = np.array([-3.0, -1.0, 0.0, 0.5, 4.0])
    estimate, _ = private_quantile(np.tile(x[:, None], (1, 2000)), 0.5, 0.5, (-5.0, 5.0), random_state=2)
    inside = (estimate > 0.5) & (estimate < 4.0)  # the interval (0.5, 4): uniform within it
    position = (estimate[inside] - 0.5) / 3.5
    assert inside.sum() > 150
    assert abs(position.mean() - 0.5) < 0.05 and abs(np.mean(position < 0.25) - 0.25) < 0.05


@pytest.mark.parametrize("kwargs", [
    dict(quantile=0.5, epsilon=0.05, bounds=(-50.0, 50.0)),
    dict(quantile=0.3, epsilon=0.01, bounds=(-50.0, 50.0), jitter=0.01),
    dict(quantile=0.5, epsilon=0.5, bounds=(1e-6, 1e6), scale="log", jitter=0.05),
    dict(quantile=0.5, epsilon=0.002, bounds=(1e-15, 1e15), scale="log", nonzero=True, prior=SCALE_PRIOR),
    dict(quantile=0.9, epsilon=2e-4, bounds=(-50.0, 50.0)),
])
@pytest.mark.parametrize("fallback", [False, True])
def test_chunked_and_in_memory_samplers_release_the_same_draw(sampler_everywhere, monkeypatch, kwargs, fallback):
    if fallback:  # no round: every column is drawn by the exact selection from all of its values
        monkeypatch.setattr(_quantile_sampler, "_MAX_ROUNDS", 0)
    rng = np.random.default_rng(0)
    x = np.column_stack([rng.standard_t(2, 3000), np.exp(rng.normal(size=3000)),
                         np.where(rng.random(3000) < 0.9, 0.0, rng.exponential(3.0, 3000)), np.full(3000, 2.0),
                         rng.poisson(1.0, 3000)])
    if kwargs.get("scale") == "log":
        x = np.abs(x)
    g1, g2 = np.random.default_rng(4), np.random.default_rng(4)
    memory, event = private_quantile(x, random_state=g1, **kwargs)
    values = BlockValues(x, _uneven(3000))
    chunked, chunked_event = private_quantile(values, random_state=g2, **kwargs)
    np.testing.assert_array_equal(chunked, memory)  # bit for bit: the counts are integers
    assert chunked_event == event
    assert g1.bit_generator.state == g2.bit_generator.state
    assert values.gathers == int(fallback)  # the sampler gathers nothing; the fallback, all in one pass
    one, _ = private_quantile(x[:, 1], random_state=np.random.default_rng(4), **kwargs)
    assert one == private_quantile(BlockValues(x[:, 1], [1000, 2000]), random_state=np.random.default_rng(4),
                                   **kwargs)[0]


def test_the_fits_stream_advances_by_the_same_draws_whatever_the_rejections():
    # Two columns whose draws take different numbers of proposals and passes: the fit's generator
    # is left in the same state (64 bytes drawn), so every later noise draw is the same.
    rng = np.random.default_rng(0)
    spec = (-50.0, 50.0, False, False, 0.0, None, False)
    traces, states = [], []
    for x in (rng.normal(size=(4000, 1)), np.round(rng.standard_t(1, size=(4000, 1)), 0)):
        g, trace = np.random.default_rng(9), {}
        sample_quantiles(SortedColumns(x, spec, -50.0, 50.0), 4000, 1, 0.5, 0.05, -50.0, 50.0, None, g,
                         trace=trace)
        traces.append(trace)
        states.append(g.bit_generator.state)
    assert states[0] == states[1]
    assert (traces[0]["proposals"][0], traces[0]["split_passes"]) != (traces[1]["proposals"][0],
                                                                      traces[1]["split_passes"])


def test_the_default_budget_accepts_in_a_round_or_two():
    # At the default scaling's quantile budget (epsilon = 120 / n) a column takes one counting pass, a
    # split pass or two and (almost always) one round of proposals.
    rng = np.random.default_rng(1)
    n = 20_000
    x = np.column_stack([rng.standard_t(2, n), np.exp(3 * rng.normal(size=n)), rng.poisson(0.3, n),
                         np.where(rng.random(n) < 0.5, 0.0, 1.0)])
    spec = (1e-15, 1e15, True, True, 0.0, None, False)
    trace = {}
    lower_t, upper_t = np.log(1e-15), np.log(1e15)
    sample_quantiles(SortedColumns(np.abs(x), spec, lower_t, upper_t), n, 4, 0.5, 120.0 / n, lower_t, upper_t,
                     None, np.random.default_rng(0), trace=trace)
    assert trace["fallback"] == [] and trace["rounds"] <= 2 and trace["split_passes"] <= 4


def test_neighbouring_fits_through_the_sampler_make_the_same_releases(monkeypatch):
    # Every quantile of the fit (column statistics, row-norm medians, clip thresholds) goes through the
    # sampler: coupled fits on neighbouring datasets release the same mechanisms at the same cost.
    monkeypatch.setattr(_quantile_sampler, "_SAMPLER_ABOVE", 100)
    calls = []
    original = _quantile_sampler.sample_quantiles

    def counted(*args, **kwargs):
        calls.append(args[2])
        return original(*args, **kwargs)

    monkeypatch.setattr(_quantile_sampler, "sample_quantiles", counted)
    X, y, X2, y2, _, _ = neighbours(n=2000, seed=3)
    logs, events = [], []
    for features, target in ((X, y), (X2, y2)):
        with record_releases() as log:
            model = DPHeavyTailRegressor(epsilon=1.0, random_state=0, max_iter=20,
                                         accountant=BudgetAccountant()).fit(features, target)
        logs.append(log)
        events.append(model.privacy_event_)
    assert calls and len(calls) % 2 == 0
    assert_same_mechanisms(*logs)
    # The same privacy event: the sensitivities scale with released thresholds, the cost does not.
    for delta in (1e-5, 1e-8):
        assert events[0].epsilon(delta) == pytest.approx(events[1].epsilon(delta), rel=1e-12)


class _RecordedPoints(SortedColumns):
    """In-memory counts that keep the points of every counting pass (as the workers would receive them)."""

    def __init__(self, *args):
        super().__init__(*args)
        self.sent = []

    def below(self, points, both, with_present):
        self.sent.append([np.array(p) for p in points])
        return super().below(points, both, with_present)


def test_each_rounds_proposals_are_sent_sorted():
    # The counts do not depend on the order of the points, and the order sent must not show which
    # proposals came before the accepted one: every pass's points go out sorted.
    rng = np.random.default_rng(3)
    x = np.column_stack([rng.normal(size=3000), rng.standard_t(1, 3000)])
    spec = (-50.0, 50.0, False, False, 0.0, None, False)
    counts, trace = _RecordedPoints(x, spec, -50.0, 50.0), {}
    sample_quantiles(counts, 3000, 2, 0.5, 0.05, -50.0, 50.0, None, np.random.default_rng(0), trace=trace)
    rounds = counts.sent[1 + trace["split_passes"]:]
    assert trace["rounds"] == len(rounds) >= 1 and trace["fallback"] == []
    assert all(p.size == 64 for p in rounds[0])
    assert all(np.all(np.diff(p) >= 0) for sent in counts.sent for p in sent)


def test_the_fallback_splits_off_values_an_ulp_outside_the_transformed_bounds(monkeypatch):
    # ``log`` of the bound (a scalar) and of a value clipped to it (in an array) may differ by an ulp:
    # simulated on the linear scale with a lower bound one ulp above the clipping bound. The exact
    # fallback must not form an interval of negative width with the bound (nan weights, a uniform
    # draw), and the in-memory and chunked draws stay bit-identical.
    monkeypatch.setattr(_quantile_sampler, "_MAX_ROUNDS", 0)
    lower, upper = -50.0, 50.0
    lower_t = np.nextafter(lower, 0.0)
    x = np.r_[np.full(10, -100.0), np.random.default_rng(0).normal(size=20)][:, None]  # 10 clipped to lower
    spec, k = (lower, upper, False, False, 0.0, None, False), 300
    x = np.tile(x, (1, k))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        memory, chunked = (sample_quantiles(counts, 30, k, 0.5, 2.0, lower_t, upper, None,
                                            np.random.default_rng(1))
                           for counts in (SortedColumns(x, spec, lower_t, upper),
                                          ChunkedCounts(BlockValues(x, [15, 15]), spec, lower_t, upper)))
    np.testing.assert_array_equal(memory, chunked)
    assert np.all((memory >= lower) & (memory <= upper))
