"""Random-number handling: every mechanism draws from a ``numpy.random.Generator``.

numpy's floating-point samplers are not hardened against the side channels of
Mironov (2012, "On significance of the least significant bits for differential
privacy"); skdp's guarantees are those of the idealised continuous mechanisms.
"""

import numbers

import numpy as np

__all__ = ["check_generator"]


def check_generator(random_state=None):
    """Turn a ``random_state`` argument into a ``numpy.random.Generator``.

    Parameters
    ----------
    random_state : None, int, numpy.random.Generator or numpy.random.RandomState
        ``None`` seeds a fresh generator from operating-system entropy (the
        right choice for a real private release); an int gives a reproducible
        stream (for tests and benchmarks); a Generator is used as is; a
        RandomState seeds a new Generator from four of its draws.

    Returns
    -------
    numpy.random.Generator

    Examples
    --------
    >>> from skdp.mechanisms import check_generator
    >>> rng = check_generator(0)
    >>> float(rng.standard_normal()) == float(check_generator(0).standard_normal())
    True
    """
    if random_state is None:
        return np.random.default_rng()
    if isinstance(random_state, np.random.Generator):
        return random_state
    if isinstance(random_state, numbers.Integral) and not isinstance(random_state, bool):
        return np.random.default_rng(int(random_state))
    if isinstance(random_state, np.random.RandomState):
        return np.random.default_rng(random_state.randint(0, 2**32, size=4, dtype=np.uint64))
    raise ValueError(
        "random_state must be None, an int, a numpy Generator or a numpy RandomState; "
        f"got {random_state!r}."
    )
