"""Test configuration shared by the test-suite and the doctests.

scikit-learn's ``check_array_api_input`` runs only when scipy's array-API
support is switched on, and the switch must be set before scipy is imported;
setting it here makes that check run instead of being skipped.
"""

import os

os.environ.setdefault("SCIPY_ARRAY_API", "1")
