"""The README's example and commands, the demo and the gallery examples stay runnable."""

import re
import runpy
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_demo_runs_and_reports_reference_values():
    out = subprocess.run([sys.executable, "-m", "skdp", "demo"], capture_output=True, text=True,
                         check=True, cwd=ROOT).stdout
    assert "4.8866" in out  # one Gaussian, sensitivity 1, std 1, delta 1e-6
    assert "5.2215" in out  # 0.5-zCDP at delta 1e-6
    assert "1.7118" in out  # DP-SGD example, RDP
    assert "composed: epsilon=5.222" in out
    assert "DPHeavyTailRegressor(epsilon=1)" in out and "spent (epsilon, delta) = (1.0000" in out
    assert "DPInterpolatingClassifier(epsilon=1)" in out and "spent (epsilon, delta) = (4.0000" in out
    accuracies = [float(a) for a in re.findall(r"DPInterpolatingClassifier\(epsilon=1\)\s+accuracy = ([0-9.]+)", out)]
    assert len(accuracies) == 2 and min(accuracies) > 0.7  # breast cancer and digits, private


def test_cli_without_a_command_prints_help():
    res = subprocess.run([sys.executable, "-m", "skdp"], capture_output=True, text=True, cwd=ROOT)
    assert res.returncode == 2
    assert "demo" in res.stdout
    assert res.stdout.startswith("usage: python -m skdp [-h] [--version]")  # not "__main__.py"


def _console_script():
    """The installed ``skdp`` console script next to this interpreter (pip puts both in one folder)."""
    script = Path(sys.executable).parent / ("skdp.exe" if sys.platform == "win32" else "skdp")
    if not script.exists():
        script = shutil.which("skdp")
    assert script is not None, "the skdp console script is not installed (pip install -e .)"
    return str(script)


def test_version_from_the_module_and_in_process(capsys, monkeypatch):
    import skdp
    from skdp.__main__ import main

    res = subprocess.run([sys.executable, "-m", "skdp", "--version"], capture_output=True, text=True,
                         cwd=ROOT)
    assert res.returncode == 0 and res.stdout.strip() == f"skdp {skdp.__version__}"
    monkeypatch.setattr(sys, "argv", [_console_script()])
    with pytest.raises(SystemExit) as stop:
        main(["--version"])
    assert stop.value.code == 0 and capsys.readouterr().out.strip() == f"skdp {skdp.__version__}"


def test_the_console_script_names_itself_in_the_usage_line():
    res = subprocess.run([_console_script()], capture_output=True, text=True, cwd=ROOT)
    assert res.returncode == 2 and res.stdout.startswith("usage: skdp [-h] [--version]")


def test_demo_help_says_it_fits_both_estimators(capsys):
    from skdp.__main__ import main

    with pytest.raises(SystemExit):
        main(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "DPHeavyTailRegressor" in text and "DPInterpolatingClassifier" in text


def test_license_matches_the_package_metadata():
    text = (ROOT / "LICENSE").read_text()
    assert text.startswith("BSD 3-Clause License") and "The skdp developers" in text
    assert 'license = "BSD-3-Clause"' in (ROOT / "pyproject.toml").read_text()


def test_readme_examples_run_and_say_what_they_print():
    readme = (ROOT / "README.md").read_text()
    code = re.findall(r"```python\n(.*?)```", readme, re.S)
    assert len(code) >= 2, "README.md lost its examples"
    namespace = {}
    exec(compile(code[0], "README.md", "exec"), namespace)  # noqa: S102
    model, X_test, y_test = namespace["model"], namespace["X_test"], namespace["y_test"]
    # The comment under the example: R^2 about 0.81 for the private model, 1.0 spent.
    assert model.score(X_test, y_test) > 0.75
    assert model.privacy_spent_.epsilon == pytest.approx(1.0, rel=1e-6)
    assert model.privacy_spent_.delta == 5e-6  # delta="auto" on 20,000 rows: 1 / (10 n)
    namespace = {}
    exec(compile(code[1], "README.md", "exec"), namespace)  # noqa: S102
    assert namespace["budget"].spent.epsilon <= 1.0


def _readme_blocks():
    return re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S)


def test_readme_has_an_example_per_estimator_and_stays_short():
    import skdp

    readme = (ROOT / "README.md").read_text()
    code = "\n".join(_readme_blocks())
    estimators = [name for name in skdp.__all__ if name.startswith("DP")]
    assert estimators and all(f"{name}(" in code for name in estimators), "an estimator has no README example"
    assert "classes=" in code and "predict_proba" in code
    assert len(readme.splitlines()) <= 150


@pytest.mark.parametrize("index", [1, 2])
def test_readme_examples_are_fast_and_right(index, capsys):
    import time

    code = _readme_blocks()[index]
    namespace = {}
    start = time.process_time()
    exec(compile(code, "README.md", "exec"), namespace)  # noqa: S102
    assert time.process_time() - start < 5.0  # CPU seconds: the README's examples are quick to try
    assert capsys.readouterr().out
    if "DPInterpolatingClassifier" in code:
        clf, X = namespace["clf"], namespace["X"]
        proba = clf.predict_proba(X[:3])
        assert proba.shape == (3, 2) and abs(proba.sum(axis=1) - 1).max() < 1e-9
        assert 0.65 < namespace["budget"].spent.epsilon < 0.75  # the comment: about 0.7 for two fits of 0.5
    if "DPZerothOrderRegressor" in code:
        tukey = namespace["tukey"]
        assert abs(tukey.coef_ - [1.0, -2.0, 0.5]).max() < 0.1 and abs(tukey.intercept_) < 0.15


def test_readme_names_the_two_setup_commands_and_ci_runs_them():
    readme = (ROOT / "README.md").read_text()
    assert 'pip install . && python -m skdp demo' in readme
    assert 'pip install -e ".[test]" && pytest' in readme
    # Separate environments: the demo's install must not be the test suite's.
    assert ". .venv-demo/bin/activate && pip install . && python -m skdp demo" in readme
    assert '. .venv/bin/activate && pip install -e ".[test]" && pytest' in readme
    ci = (ROOT / ".ci" / "run").read_text()
    assert 'pip install -e ".[test]"' in ci and "\npytest" in ci


@pytest.mark.parametrize("path", sorted((ROOT / "examples").glob("*.py")), ids=lambda p: p.name)
def test_examples_run(path, capsys):
    runpy.run_path(str(path), run_name="__main__")
    assert capsys.readouterr().out
