"""The documentation builds with zero warnings, and its API reference lists every public name."""

import importlib
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_api_reference_lists_every_public_name():
    api = (ROOT / "docs" / "api.rst").read_text()
    listed = set(re.findall(r"^   (skdp[\w.]*)$", api, re.M))
    constants = {"NON_PRIVATE_RELEASE", "MAX_GRAM_SIZE", "SCALE_PRIOR", "LOSSES", "__version__"}
    missing = []
    for module in ("skdp", "skdp.accounting", "skdp.mechanisms", "skdp.losses", "skdp.solvers"):
        for name in importlib.import_module(module).__all__:
            if name in constants:
                continue
            obj = getattr(importlib.import_module(module), name)
            homes = {f"{module}.{name}", f"skdp.{name}", f"skdp.accounting.{name}"}
            if not homes & listed:
                missing.append(f"{module}.{name} ({type(obj).__name__})")
    assert not missing, f"docs/api.rst does not list: {missing}"


def test_docs_build_without_warnings(tmp_path):
    pytest.importorskip("sphinx")
    pytest.importorskip("numpydoc")
    # A copy of the sources: autosummary writes its stubs next to them, never into the tree.
    for part in ("docs", "examples"):
        shutil.copytree(ROOT / part, tmp_path / part, ignore=shutil.ignore_patterns("_build", "generated"))
    res = subprocess.run([sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html",
                          str(tmp_path / "docs"), str(tmp_path / "html")],
                         capture_output=True, text=True, cwd=tmp_path)
    warnings = [line for line in res.stderr.splitlines() if "WARNING" in line or "ERROR" in line]
    assert res.returncode == 0 and not warnings, res.stderr[-4000:]
    assert (tmp_path / "html" / "api.html").exists() and (tmp_path / "html" / "verbose.html").exists()
