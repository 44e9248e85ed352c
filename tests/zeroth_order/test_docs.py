"""The README's zeroth-order example says what it prints."""

import re
import warnings
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_readme_zeroth_order_example():
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S)
    code = next(block for block in blocks if "DPZerothOrderRegressor" in block)
    namespace = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        exec(compile(code, "README.md", "exec"), namespace)  # noqa: S102
    tukey = namespace["tukey"]
    # The comment under the example: about [1, -2, 0.5] and 0.
    np.testing.assert_allclose(tukey.coef_, [1.0, -2.0, 0.5], atol=0.05)
    assert abs(tukey.intercept_) < 0.1
    assert tukey.privacy_spent_.epsilon == pytest.approx(1.0, rel=1e-6)
