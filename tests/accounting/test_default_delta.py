"""The public rule behind ``delta="auto"``."""

import numpy as np
import pytest

from skdp.accounting import default_delta


def test_the_rule_keeps_1e_5_up_to_ten_thousand_rows_then_stays_ten_times_below_one_over_n():
    for n in (2, 100, 426, 2000, 9999, 10_000):
        assert default_delta(n) == 1e-5
    for n in (10_001, 20_000, 100_000, 200_000, 10**7):
        assert default_delta(n) == pytest.approx(1.0 / (10 * n), rel=1e-15)
    assert default_delta(100_000) == 1e-6 and default_delta(10**7) == 1e-8


def test_the_rule_is_below_one_over_n_on_every_size_from_100_to_ten_million_rows():
    sizes = np.unique(np.logspace(2, 7, 400).astype(np.int64))
    products = np.array([default_delta(int(n)) * int(n) for n in sizes])
    assert products.max() <= 0.1 * (1 + 1e-12)  # the warning fires at delta * n >= 1
    deltas = [default_delta(int(n)) for n in sizes]
    assert all(a >= b for a, b in zip(deltas, deltas[1:]))  # more rows never get a larger delta


@pytest.mark.parametrize("bad", [0, -5, 1.5, True, "100", None])
def test_the_number_of_rows_must_be_a_positive_integer(bad):
    with pytest.raises(ValueError, match="n_samples"):
        default_delta(bad)
