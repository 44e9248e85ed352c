"""What the tests of fits on Dask collections share: the cluster fixture and the comparison of events.

Importing this module skips the importing test module cleanly when the 'dask'
extra is missing. Import ``client`` into a test module to use the fixture: a
``distributed.LocalCluster`` of two in-process workers, one per test module.
"""

import dataclasses

import pytest

da = pytest.importorskip("dask.array", reason="the 'dask' extra (dask[array,dataframe]) is not installed")
distributed = pytest.importorskip("distributed", reason="the 'dask' extra (distributed) is not installed")

# Equal up to the order of floating-point summation (partial sums per chunk, then added).
RTOL = 1e-10


@pytest.fixture(scope="module")
def client():
    # No memory limit: in-process workers measure the memory of the whole test process (every test it
    # has run, under pytest-xdist), and above 80% of a limit both workers pause and the fit waits forever.
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False, memory_limit=0,
                                  dashboard_address=None) as cluster, distributed.Client(cluster) as c:
        yield c


def assert_same_event(ours, theirs):
    """The same event: the same mechanisms in the same order, every number equal up to rounding.

    (A released clip threshold sets the sensitivity of the steps after it, and
    the threshold is the in-memory one up to the summation order of the sums
    it was computed from.)
    """
    assert type(ours) is type(theirs)
    if dataclasses.is_dataclass(ours):
        for field in dataclasses.fields(ours):
            assert_same_event(getattr(ours, field.name), getattr(theirs, field.name))
    elif isinstance(ours, (tuple, list)):
        assert len(ours) == len(theirs)
        for a, b in zip(ours, theirs):
            assert_same_event(a, b)
    elif isinstance(ours, float):
        assert ours == pytest.approx(theirs, rel=RTOL, abs=0)
    else:
        assert ours == theirs
