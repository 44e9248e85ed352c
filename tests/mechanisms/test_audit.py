"""record_releases: every Gaussian and Laplace release, in order, with its exact value before the noise."""

import numpy as np

from skdp.accounting import GaussianRelease, LaplaceRelease
from skdp.mechanisms import gaussian_mechanism, laplace_mechanism
from skdp.mechanisms._audit import Release, record_releases


def test_releases_are_logged_in_order_with_the_value_before_the_noise():
    value = np.array([1.0, -2.0, 3.0])
    with record_releases() as log:
        noisy, g_event = gaussian_mechanism(value, 0.5, 2.0, random_state=0)
        scalar, l_event = laplace_mechanism(4.0, 1.0, 3.0, random_state=1)
    assert [r.mechanism for r in log] == ["gaussian", "laplace"]
    np.testing.assert_array_equal(log[0].value, value)
    assert not np.array_equal(noisy, value)  # the noise was added to the output, not to the log
    assert float(log[1].value) == 4.0 and scalar != 4.0
    assert log[0].event == g_event == GaussianRelease(0.5, 2.0)
    assert log[1].event == l_event == LaplaceRelease(1.0, 3.0)
    assert log[0].sensitivity == 0.5 and log[1].sensitivity == 1.0
    assert all(isinstance(r, Release) for r in log)


def test_the_log_keeps_a_copy_and_stops_at_the_end_of_the_block():
    value = np.array([1.0, 2.0])
    with record_releases() as log:
        gaussian_mechanism(value, 1.0, 1.0, random_state=0)
    value[0] = 99.0  # a caller reusing its buffer does not rewrite the log
    gaussian_mechanism(value, 1.0, 1.0, random_state=0)  # outside every block: not logged
    assert len(log) == 1
    np.testing.assert_array_equal(log[0].value, [1.0, 2.0])


def test_nested_blocks_both_see_the_inner_releases():
    with record_releases() as outer:
        gaussian_mechanism(1.0, 1.0, 1.0, random_state=0)
        with record_releases() as inner:
            laplace_mechanism(2.0, 1.0, 1.0, random_state=0)
        gaussian_mechanism(3.0, 1.0, 1.0, random_state=0)
    assert [float(r.value) for r in outer] == [1.0, 2.0, 3.0]
    assert [float(r.value) for r in inner] == [2.0]
