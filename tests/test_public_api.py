"""Public API surface and the rule of using public scikit-learn API only."""

import re
from pathlib import Path

import skdp
import skdp.accounting
import skdp.linear_model
import skdp.losses
import skdp.mechanisms
import skdp.solvers
import skdp.solvers.heavy_tail

ROOT = Path(__file__).resolve().parents[1]


def test_top_level_exports():
    for name in ["BudgetAccountant", "BudgetExceededError", "PrivacyLeakWarning", "LowBudgetWarning"]:
        assert name in skdp.__all__
        assert getattr(skdp, name) is getattr(skdp.accounting, name)
    assert issubclass(skdp.PrivacyLeakWarning, RuntimeWarning)
    assert "DPHeavyTailRegressor" in skdp.__all__
    assert skdp.DPHeavyTailRegressor is skdp.linear_model.DPHeavyTailRegressor


def test_every_listed_name_exists():
    for module in (skdp, skdp.accounting, skdp.mechanisms, skdp.losses, skdp.linear_model, skdp.solvers,
                   skdp.solvers.heavy_tail, skdp.preprocessing):
        for name in module.__all__:
            assert hasattr(module, name), f"{module.__name__}.{name}"


def test_accounting_names_from_the_spec():
    for name in ["GaussianRelease", "LaplaceRelease", "ZCDPRelease", "ApproxDPRelease", "Sequential",
                 "Parallel", "Repeated", "PoissonSampled", "gdp_to_dp", "dp_to_gdp", "zcdp_to_dp",
                 "dp_to_zcdp", "BudgetAccountant", "BudgetExceededError", "PrivacyLeakWarning"]:
        assert name in skdp.accounting.__all__


def test_no_private_scikit_learn_imports():
    pattern = re.compile(r"(from|import)\s+sklearn(\.\w+)*\._")
    offenders = [str(p) for p in (ROOT / "skdp").rglob("*.py") if pattern.search(p.read_text())]
    offenders += [str(p) for p in (ROOT / "tests").rglob("*.py") if pattern.search(p.read_text())]
    assert offenders == []


def test_runtime_dependencies_are_numpy_scipy_sklearn():
    text = (ROOT / "pyproject.toml").read_text()
    deps = re.search(r"dependencies = \[(.*?)\]", text, re.S).group(1)
    names = sorted(re.findall(r'"([a-zA-Z\-_]+)', deps))
    assert names == ["numpy", "scikit-learn", "scipy"]
