"""A default fit on ordinary data warns about nothing but the documented label set.

Defaults must not trigger the library's own warnings on the tables users have: no
PrivacyLeakWarning about delta (delta="auto" is below 1 / n at every size), no
LowBudgetWarning where the budget is ample, no warning from numpy or scikit-learn.
The one documented warning is the classifier's PrivacyLeakWarning when ``classes``
is not given (the label set is then read from the data and released).

Below about 1,000 rows at epsilon = 1 the budget is starved and LowBudgetWarning is
the intended message (see docs/heavy_tail.rst, "When the budget is too small"); the
tables here start at 3,000 rows.
"""

import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

from skdp import DPHeavyTailRegressor, DPInterpolatingClassifier, DPZerothOrderRegressor, PrivacyLeakWarning

sys.path.insert(0, str(Path(__file__).resolve().parent))
import real_tables  # noqa: E402

ESTIMATORS = {
    "DPHeavyTailRegressor": lambda: DPHeavyTailRegressor(),
    "DPInterpolatingClassifier": lambda: DPInterpolatingClassifier(classes=[0, 1]),
    "DPZerothOrderRegressor": lambda: DPZerothOrderRegressor(),
}
CASES = [(3_000, "onehot4"), (3_000, "counts"), (3_000, "offsets"), (3_000, "lognormal"),
         (100_000, "mixed_scales")]


def _fit_recording(estimator, table, classify):
    y = table["y"]
    if classify:
        y = (y > np.median(y)).astype(int)
    model = table["wrap"](estimator) if table["wrap"] is not None else estimator
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.fit(table["X"], y)
    return [f"{w.category.__name__}: {w.message}" for w in caught]


@pytest.mark.parametrize("n, name", CASES, ids=[f"{name}-{n}" for n, name in CASES])
@pytest.mark.parametrize("kind", sorted(ESTIMATORS))
def test_a_default_fit_on_an_ordinary_table_does_not_warn(kind, n, name):
    table = real_tables.TABLES[name](n, 0)
    caught = _fit_recording(ESTIMATORS[kind](), table, kind == "DPInterpolatingClassifier")
    assert caught == []


def test_the_label_set_warning_is_the_only_one_without_classes():
    table = real_tables.TABLES["counts"](3_000, 0)
    caught = _fit_recording(DPInterpolatingClassifier(), table, classify=True)
    assert len(caught) == 1 and caught[0].startswith(PrivacyLeakWarning.__name__) and "classes=" in caught[0]
