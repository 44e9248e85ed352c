"""Make the test-only helpers (``toy_estimator``) importable from the tests."""

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
