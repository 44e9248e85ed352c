"""Recording what the noise mechanisms release, for tests and audits of the solvers.

Inside ``with record_releases() as log:`` every call of
:func:`~skdp.mechanisms.gaussian_mechanism` and
:func:`~skdp.mechanisms.laplace_mechanism` appends a :class:`Release` with the
exact value *before* the noise and the event it was charged. A coupled run of a
solver on neighbouring datasets with shared randomness then shows, release by
release, whether each exact value moved by more than its stated sensitivity.
The log holds private values: it is for tests, never for output.
"""

import contextvars
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

__all__ = ["Release", "record_releases"]

_LOGS = contextvars.ContextVar("skdp_release_logs", default=())


@dataclass(frozen=True)
class Release:
    """One noisy release: the mechanism's name, the exact value before noise, and its event."""

    mechanism: str
    value: np.ndarray
    event: object

    @property
    def sensitivity(self):
        return self.event.sensitivity


@contextmanager
def record_releases():
    """Collect every Gaussian and Laplace release made in this context, in order."""
    log = []
    token = _LOGS.set(_LOGS.get() + (log,))
    try:
        yield log
    finally:
        _LOGS.reset(token)


def notify(mechanism, value, event):
    """Called by the mechanisms: append the release to every active log."""
    logs = _LOGS.get()
    if logs:
        record = Release(mechanism, np.array(value, dtype=float, copy=True), event)
        for log in logs:
            log.append(record)
