"""Inner fits inside a meta-estimator's private run are recorded, not charged (skdp._base.nested_fits)."""

import numpy as np
import pytest

from skdp import BudgetAccountant
from skdp._base import nested_fits
from toy_estimator import ToyDPRidge


def test_inner_fits_charge_nothing_and_their_events_are_recorded():
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(300, 3)), rng.normal(size=300)
    own = BudgetAccountant()
    with nested_fits(np.random.default_rng(1)) as run:
        a = ToyDPRidge(epsilon=0.5, accountant=own).fit(X, y)
        b = ToyDPRidge(epsilon=0.25, accountant=own).fit(X, y)
    assert len(own.events) == 0  # the meta-estimator charges its own reservation instead
    assert run.events == [a.privacy_event_, b.privacy_event_]
    assert a.privacy_spent_.epsilon == pytest.approx(0.5, rel=1e-6)


def test_inner_fits_draw_independent_noise_from_the_run():
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(300, 3)), rng.normal(size=300)
    with nested_fits(np.random.default_rng(1)):
        first = ToyDPRidge(epsilon=0.5, random_state=0).fit(X, y).coef_
        second = ToyDPRidge(epsilon=0.5, random_state=0).fit(X, y).coef_
    # The inner random_state is ignored: every fit draws from a generator spawned from the run's.
    assert not np.allclose(first, second)


def test_outside_the_block_fits_charge_their_accountant_again():
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(300, 3)), rng.normal(size=300)
    with nested_fits(np.random.default_rng(1)):
        pass
    acc = BudgetAccountant()
    ToyDPRidge(epsilon=0.5, accountant=acc).fit(X, y)
    assert len(acc.events) == 1
