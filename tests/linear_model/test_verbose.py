"""verbose output of every estimator: its stages, and only public or released numbers.

The privacy test fits neighbouring datasets (one row changed) with the same seed on
fresh ledgers, so both fits draw the same noise. Every printed line must then be
identical between the two neighbours except for numbers printed after a label of a
released value; those numbers are replayed from the fitted attributes (which are
released), and no printed number may equal a statistic of the data that was not
released.
"""

import io
import re
import sys

import numpy as np
import pytest

from skdp import BudgetAccountant, DPHeavyTailRegressor, DPInterpolatingClassifier, DPZerothOrderRegressor
from skdp.linear_model._verbose import FitReporter, budget_shares, released
from skdp.solvers import progress_hook, report_progress

NUMBER = re.compile(r"(?<![\w.])[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:e[-+]?\d+)?")
TIME = re.compile(r"\d+\.\d\d s\b")
# Labels after which a printed number is a released value (or a step size, which the
# privacy contract makes public or derived from releases). Any other number must be the
# same on neighbouring datasets.
RELEASED_LABELS = ("target centre", "target scale", "row bound", "typical row norm", "step size",
                   "released improvement", "noise std", "calibration slope", "calibration offset",
                   "calibration temperature", "step_size=", "clip_multiplier=", "clip_threshold=",
                   "privacy_ridge=", "curvature=", "residual_scale=", "spent epsilon=", "averaged_noise_sd=")


def _regression(n=800, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3)) * [1.0, 10.0, 0.1]
    y = X @ [1.0, 0.2, 5.0] + rng.normal(size=n)
    return X, y


def _neighbour(X, y, label=None):
    X2, y2 = X.copy(), y.copy()
    X2[7] = [30.0, -200.0, 4.0]
    y2[7] = -50.0 if label is None else label
    return X2, y2


ESTIMATORS = {
    "heavy_tail": lambda: DPHeavyTailRegressor(epsilon=1.0, random_state=3, verbose=2),
    "zeroth_order": lambda: DPZerothOrderRegressor(epsilon=1.0, random_state=3, verbose=2, max_iter=20),
    "classifier": lambda: DPInterpolatingClassifier(epsilon=1.0, random_state=3, verbose=2, classes=[0, 1]),
}


def _data(kind):
    X, y = _regression()
    if kind == "classifier":
        y = (y > np.median(y)).astype(int)
        return (X, y), _neighbour(X, y, label=1 - y[7])
    return (X, y), _neighbour(X, y)


def _fit(make, X, y, capsys):
    est = make().set_params(accountant=BudgetAccountant())  # a fresh ledger: the noise stream (seed, 0)
    est.fit(X, y)
    return est, capsys.readouterr().out.splitlines()


def _released_numbers(est):
    """Every number of the fitted attributes that hold released values, as printed."""
    values = []
    for name in ("scaling_", "schedule_", "fit_check_", "calibration_"):
        attr = getattr(est, name, None) or {}
        for value in attr.values():
            if isinstance(value, (bool, str)) or value is None:
                continue
            arr = np.asarray(value, dtype=object).ravel()
            for v in arr:
                try:
                    values.append(float(v))
                except (TypeError, ValueError):
                    pass
    values.append(est.privacy_spent_.epsilon)
    return {released(v) for v in values if np.isfinite(v)} | {f"{v:+.4g}" for v in values if np.isfinite(v)}


def _label_before(line, start):
    head = line[:start].rstrip()
    return next((label for label in RELEASED_LABELS if head.endswith(label.rstrip())), None)


@pytest.mark.parametrize("kind", sorted(ESTIMATORS))
def test_verbose_lines_differ_between_neighbours_only_in_released_values(kind, capsys):
    (X, y), (X2, y2) = _data(kind)
    est, lines = _fit(ESTIMATORS[kind], X, y, capsys)
    est2, lines2 = _fit(ESTIMATORS[kind], X2, y2, capsys)
    assert len(lines) == len(lines2) and len(lines) >= 8
    stages = [line.split("] ", 1)[1].split(":")[0].split(" ")[0] for line in lines]
    assert {"plan", "scales", "solver", "post-fit", "spent"} <= set(stages)
    assert sum("iteration " in line for line in lines) >= 5  # verbose=2: solver progress
    seen_released = 0
    for a, b in zip(lines, lines2):
        a, b = TIME.sub("<t>", a), TIME.sub("<t>", b)
        na, nb = list(NUMBER.finditer(a)), list(NUMBER.finditer(b))
        assert NUMBER.sub("#", a) == NUMBER.sub("#", b)  # the same words in the same places
        assert len(na) == len(nb)
        for ma, mb in zip(na, nb):
            if ma.group() == mb.group():
                continue
            label = _label_before(a, ma.start())
            assert label is not None, f"an unlabelled number differs between neighbours: {a!r} / {b!r}"
            seen_released += 1
            if label != "step size":
                # Replay: the number is one of the released values of that fit.
                assert ma.group() in _released_numbers(est), (label, a)
                assert mb.group() in _released_numbers(est2), (label, b)
    assert seen_released > 0  # the neighbours do differ, and only in released values
    first_step = next((line for line in lines if "iteration 1/" in line and "step size" in line), None)
    if first_step is not None and "step_size" in est.schedule_:
        assert f"step size {released(est.schedule_['step_size'])}" in first_step


@pytest.mark.parametrize("kind", sorted(ESTIMATORS))
def test_verbose_prints_no_unreleased_statistic(kind, capsys):
    (X, y), _ = _data(kind)
    est, lines = _fit(ESTIMATORS[kind], X, y, capsys)
    printed = set()
    for line in lines:
        printed |= {m.group().lstrip("+") for m in NUMBER.finditer(TIME.sub("", line))}
    norms = np.linalg.norm(X, axis=1)
    yf = y.astype(float)
    pred = est.predict(X).astype(float)
    Xc = (X - X.mean(axis=0)) / X.std(axis=0)
    unreleased = [yf.mean(), np.median(yf), yf.std(), norms.max(), norms.mean(), np.median(norms),
                  np.linalg.norm(Xc, axis=1).max(), np.median(np.linalg.norm(Xc, axis=1)),
                  *X.mean(axis=0), *X.std(axis=0), *np.median(X, axis=0),
                  np.mean((pred - yf) ** 2), 1 - np.mean((pred - yf) ** 2) / yf.var(), np.mean(np.abs(pred - yf)),
                  np.mean(norms > np.median(norms) * 2)]  # a clipped fraction
    for value in unreleased:
        for fmt in ("{:.4g}", "{:.3g}"):
            text = fmt.format(value)
            # Only formats with three significant digits or more say something (a "1" is everywhere).
            if len(text.split("e")[0].replace("-", "").replace(".", "").lstrip("0")) >= 3:
                assert text not in printed, (value, text, lines)


def test_verbose_levels(capsys):
    X, y = _regression(2000)
    DPHeavyTailRegressor(epsilon=1.0, verbose=0).fit(X, y)
    assert capsys.readouterr().out == ""
    DPHeavyTailRegressor(epsilon=1.0, verbose=1).fit(X, y)
    out = capsys.readouterr().out
    assert "plan:" in out and "scales released" in out and "solver clipped_gd:" in out
    assert "iteration " not in out and "budget shares (zCDP)" in out and "fit done in" in out
    # Every line is short: no event reprs.
    assert max(len(line) for line in out.splitlines()) < 400
    DPInterpolatingClassifier(epsilon=1.0, delta=0.0, verbose=2, classes=[0, 1]).fit(X, y > 0)
    out = capsys.readouterr().out
    assert "budget shares (epsilon)" in out and "calibration temperature" in out and "iteration 1," in out


class _BrokenStream(io.TextIOBase):
    def write(self, text):
        raise OSError("the stream is closed")


@pytest.mark.parametrize("kind", sorted(ESTIMATORS))
def test_printing_never_raises_after_the_reservation(kind, monkeypatch):
    (X, y), _ = _data(kind)
    accountant = BudgetAccountant()
    monkeypatch.setattr(sys, "stdout", _BrokenStream())
    est = ESTIMATORS[kind]().set_params(accountant=accountant).fit(X, y)
    assert len(accountant.events) == 1 and est.privacy_spent_.epsilon > 0


def test_a_failing_stage_printer_prints_nothing_and_does_not_raise(capsys):
    reporter = FitReporter(DPHeavyTailRegressor(verbose=2))
    reporter.scales(None, True)  # an object without the attributes: the stage line is skipped
    reporter.solver("clipped_gd", None)
    reporter.post_fit(None, None)
    assert capsys.readouterr().out == ""


def test_progress_hook_is_scoped_and_a_failing_hook_is_ignored():
    seen = []
    report_progress(1, 2, 0.1)  # no hook: nothing happens
    with progress_hook(lambda i, n, step, **counts: seen.append((i, n, step, counts))):
        report_progress(1, 2, 0.5, function_evaluations=10)
        with progress_hook(None):
            report_progress(2, 2, 0.5)
    assert seen == [(1, 2, 0.5, {"function_evaluations": 10})]

    def failing(*args, **kwargs):
        raise RuntimeError("a broken hook")

    with progress_hook(failing):
        report_progress(1, 1, 1.0)  # ignored


def test_progress_lines_are_throttled(capsys):
    est = DPHeavyTailRegressor(verbose=2)
    reporter = FitReporter(est)
    callback = reporter.progress_callback("clipped_gd")
    for t in range(1, 101):
        callback(t, 100, 0.5)
    for t in range(1, 6):  # a loop of unknown length: 1, 2, 4
        callback(t, None, 0.1)
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 11 + 3
    assert lines[-4].startswith("[DPHeavyTailRegressor] solver clipped_gd: iteration 100/100, ")
    assert FitReporter(DPHeavyTailRegressor(verbose=1)).progress_callback("x") is None


def test_budget_shares_sum_to_one():
    X, y = _regression(2000)
    est = DPHeavyTailRegressor(epsilon=1.0)
    solver = est._configured(est._choose_algorithm(2000, 3))
    est.n_features_in_ = 3
    plan = est._plan(solver, 2000, 3)
    shares = dict(budget_shares(plan))
    assert set(shares) == {"scaling", "solver", "check"}
    assert abs(sum(shares.values()) - 1.0) < 1e-9 and all(v > 0 for v in shares.values())


def test_the_plan_line_counts_the_quantiles_of_a_fit_with_declared_bounds(capsys):
    from skdp.accounting import ExponentialMechanismRelease, Sequential
    from skdp.preprocessing import FeatureBounds

    rng = np.random.default_rng(3)
    X = np.eye(5)[rng.integers(0, 5, 1500)]
    y = X @ rng.normal(size=5) + rng.normal(size=1500)
    model = DPHeavyTailRegressor(epsilon=1.0, verbose=1, random_state=0, accountant=BudgetAccountant(),
                                 bounds=FeatureBounds(np.zeros(5), np.ones(5), blocks=[range(5)])).fit(X, y)
    line = next(line for line in capsys.readouterr().out.splitlines() if "plan:" in line)
    # The standardiser's quantiles (y's four and one row-norm median); the solver's clips are not counted here.
    scaling = Sequential(model.privacy_event_.events[:1]).releases(ExponentialMechanismRelease)
    assert f"({scaling} private quantiles" in line and scaling == 5
