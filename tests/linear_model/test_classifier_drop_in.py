"""DPInterpolatingClassifier as a drop-in for LogisticRegression: probabilities, C, class_weight, fit check.

Privacy of the classifier's own releases (class counts, calibration, fit check)
is checked on coupled neighbours: the first dataset's releases are recorded,
the neighbour's run is given exactly the values released on the first (so every
branch after a release is the same), and every release's exact value must move
by at most its stated sensitivity.
"""

import math
import warnings

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer, load_iris
from sklearn.linear_model import LogisticRegression
from sklearn.preprocessing import StandardScaler

from skdp import BudgetAccountant, DPInterpolatingClassifier
from skdp.accounting import LowBudgetWarning, PrivacyLeakWarning
from skdp.linear_model import _calibration
from skdp.linear_model._fit_check import private_classification_check


def _neighbours(n=400, k=2, seed=0):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, k, size=n)
    scores = rng.normal(size=(n, k)) + 2.0 * np.eye(k)[labels] if k > 2 else rng.normal(size=n) + 2.0 * labels - 1
    scores2, labels2 = scores.copy(), labels.copy()
    i = int(rng.integers(n))
    scores2[i] = -1e6 * np.sign(scores2[i] + 0.5)  # an extreme score, far beyond any clip
    labels2[i] = (labels[i] + 1) % k
    return scores, labels, scores2, labels2


def _replayed(fn, monkeypatch):
    """Run ``fn`` on two datasets; the second gets the first's released values. Returns the ratios."""
    original = _calibration._release
    log, ratios = [], []

    def record(value, sensitivity_l2, sensitivity_l1, budget, rng):
        noisy, event = original(value, sensitivity_l2, sensitivity_l1, budget, rng)
        log.append((np.array(value, dtype=float), noisy, sensitivity_l2))
        return noisy, event

    scales, quantile = [], _calibration.private_quantile

    def record_scale(*args, **kwargs):
        scales.append(quantile(*args, **kwargs))
        return scales[-1]

    monkeypatch.setattr(_calibration, "_release", record)
    monkeypatch.setattr(_calibration, "private_quantile", record_scale)
    fn(0)
    first = list(log)
    log.clear()
    # The score scale is an exponential-mechanism release: the neighbour gets the same released value.
    monkeypatch.setattr(_calibration, "private_quantile", lambda *args, **kwargs: scales[0])

    def replay(value, sensitivity_l2, sensitivity_l1, budget, rng):
        exact, noisy, sensitivity = first[len(log)]
        assert sensitivity == sensitivity_l2
        ratios.append(float(np.linalg.norm(np.asarray(value, dtype=float) - exact)) / sensitivity)
        log.append(None)
        _, event = original(value, sensitivity_l2, sensitivity_l1, budget, rng)
        return noisy, event

    monkeypatch.setattr(_calibration, "_release", replay)
    fn(1)
    assert len(log) == len(first)
    return ratios


@pytest.mark.parametrize("pure", [False, True])
@pytest.mark.parametrize("k", [2, 3])
def test_calibration_releases_are_within_their_sensitivity_on_coupled_neighbours(k, pure, monkeypatch):
    scores, labels, scores2, labels2 = _neighbours(k=k, seed=k)
    budget = ("pure", 1.0) if pure else ("gaussian", 1.0)
    prior = np.full(k, 1.0 / k)
    data = [(scores, labels), (scores2, labels2)]
    results = []

    def run(which):
        s, y = data[which]
        results.append(_calibration.private_calibration(s, y, prior, budget, 1.0, np.random.default_rng(7),
                                                        score_bound=1e3))

    ratios = _replayed(run, monkeypatch)
    assert ratios and max(ratios) <= 1.0 + 1e-12
    assert max(ratios) > 0.05  # the extreme row is felt: the bound is not vacuous
    (cal1, event1), (cal2, event2) = results
    assert cal1 == cal2  # everything after the releases is post-processing of released values
    assert event1 == event2


def test_class_counts_and_fit_check_are_within_their_sensitivity():
    scores, labels, scores2, labels2 = _neighbours(k=3, seed=1)
    proba = np.exp(scores - scores.max(axis=1, keepdims=True))
    proba /= proba.sum(axis=1, keepdims=True)
    proba2 = proba.copy()
    proba2[np.flatnonzero(labels != labels2)] = [1.0, 0.0, 0.0]
    prior = np.array([0.2, 0.3, 0.5])
    for weights, max_weight in [(None, 1.0), (np.array([3.0, 1.0, 0.5]), 3.0)]:
        row_w = None if weights is None else weights[labels]
        row_w2 = None if weights is None else weights[labels2]
        exact = [private_classification_check(p, y, prior, ("gaussian", math.inf), weights=w, max_weight=max_weight)
                 for p, y, w in ((proba, labels, row_w), (proba2, labels2, row_w2))]
        sensitivity = 2.0 * max_weight / labels.shape[0]
        assert abs(exact[0].improvement - exact[1].improvement) <= sensitivity + 1e-15
    counts = [_calibration.private_class_counts(y, 3, ("gaussian", math.inf), None)[0] for y in (labels, labels2)]
    assert np.linalg.norm(counts[0] - counts[1]) <= math.sqrt(2.0) + 1e-12


def test_probabilities_are_a_logistic_model_of_the_decision_function():
    X, y = load_breast_cancer(return_X_y=True)
    clf = DPInterpolatingClassifier(epsilon=1.0, classes=[0, 1], accountant=BudgetAccountant(),
                                    random_state=0).fit(X, y)
    proba = clf.predict_proba(X)
    np.testing.assert_allclose(proba[:, 1], 1.0 / (1.0 + np.exp(-clf.decision_function(X))))
    assert np.all((proba > 0) & (proba < 1))  # no saturated probabilities on an ordinary table
    extreme = np.vstack([X[:5], np.full((2, X.shape[1]), 1e300), np.full((2, X.shape[1]), -1e300)])
    assert np.all(np.isfinite(clf.predict_log_proba(extreme)))
    np.testing.assert_array_equal(clf.predict(X), clf.classes_[proba.argmax(axis=1)])
    assert clf.calibration_["slope"] > 0 and clf.class_prior_.shape == (2,)


def test_a_failed_check_predicts_the_released_prior():
    """Wine-like budget: epsilon * n = 30 on noise labels, so the check cannot find the model better."""
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(300, 5)), rng.integers(0, 3, size=300)
    with pytest.warns(LowBudgetWarning, match="prior is predicted"):
        clf = DPInterpolatingClassifier(epsilon=0.1, classes=[0, 1, 2], accountant=BudgetAccountant(),
                                        random_state=0).fit(X, y)
    assert clf.fit_check_["fallback"]
    np.testing.assert_allclose(clf.predict_proba(X[:4]), np.tile(clf.class_prior_, (4, 1)))
    np.testing.assert_array_equal(clf.predict(X[:4]), np.full(4, np.argmax(clf.class_prior_)))
    np.testing.assert_array_equal(clf.coef_, 0.0)


def _standardised_breast_cancer():
    X, y = load_breast_cancer(return_X_y=True)
    return StandardScaler().fit_transform(X), y


@pytest.mark.parametrize("C", [0.05, 1.0])
def test_C_is_logistic_regressions_inverse_penalty_without_noise(C):
    X, y = _standardised_breast_cancer()
    lr = LogisticRegression(C=C, max_iter=10_000, tol=1e-10).fit(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)
        dp = DPInterpolatingClassifier(epsilon=math.inf, C=C, classes=[0, 1], accountant=BudgetAccountant()).fit(X, y)
    assert dp.loss_ == "logistic"
    np.testing.assert_allclose(dp.coef_, lr.coef_, rtol=2e-3, atol=2e-3 * np.abs(lr.coef_).max())
    np.testing.assert_allclose(dp.predict_proba(X), lr.predict_proba(X), atol=2e-3)
    # alpha = 1 / (C n) is the same penalty.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)
        via_alpha = DPInterpolatingClassifier(epsilon=math.inf, alpha=1.0 / (C * X.shape[0]), classes=[0, 1],
                                              accountant=BudgetAccountant()).fit(X, y)
    np.testing.assert_allclose(via_alpha.coef_, dp.coef_, rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("class_weight", ["balanced", {0: 3.0, 1: 0.5}])
def test_class_weight_matches_logistic_regression_without_noise(class_weight):
    X, y = load_iris(return_X_y=True)
    X, y = StandardScaler().fit_transform(X)[:120], y[:120]  # three classes of 50, 50, 20 rows
    keys = {0: 3.0, 1: 0.5} if class_weight != "balanced" else "balanced"
    lr = LogisticRegression(class_weight=keys, max_iter=10_000, tol=1e-10).fit(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)
        dp = DPInterpolatingClassifier(epsilon=math.inf, class_weight=class_weight, classes=[0, 1, 2],
                                       accountant=BudgetAccountant()).fit(X, y)
    np.testing.assert_allclose(dp.predict_proba(X), lr.predict_proba(X), atol=5e-3)


def test_class_weight_scales_the_sensitivity_and_keeps_the_budget():
    X, y = _standardised_breast_cancer()
    accountant = BudgetAccountant()
    clf = DPInterpolatingClassifier(epsilon=2.0, class_weight={0: 2.0}, classes=[0, 1], accountant=accountant,
                                    random_state=0).fit(X, y)
    assert clf.privacy_spent_.epsilon <= 2.0 + 1e-9
    assert accountant.spent.epsilon <= 2.0 + 1e-9
    assert clf.score(X, y) > 0.8


@pytest.mark.parametrize(("params", "match"), [
    ({"C": 0.5, "alpha": 1e-3}, "not both"),
    ({"class_weight": "balanced", "algorithm": "epoch_growth"}, "class_weight"),
    ({"class_weight": {5: 2.0}}, "not classes"),
    ({"class_weight": {0: -1.0}}, "positive finite"),
    ({"class_weight": {0: math.inf}}, "positive finite"),
    ({"C": 0.0}, "C"),
])
def test_refusals_before_spend(params, match):
    X, y = _standardised_breast_cancer()
    accountant = BudgetAccountant()
    with pytest.raises(ValueError, match=match):
        DPInterpolatingClassifier(classes=[0, 1], accountant=accountant, **params).fit(X, y)
    assert len(accountant.events) == 0


def test_the_automatic_loss_follows_its_public_rule():
    X, y = _standardised_breast_cancer()
    three = np.r_[y[:-60], np.full(60, 2)]
    cases = [({"epsilon": 1.0}, y, "logistic", "clipped_gd"),
             ({"epsilon": math.inf}, y, "logistic", "clipped_gd"),
             ({"epsilon": 1.0}, three, "logistic", "clipped_gd"),
             ({"epsilon": 1.0, "delta": 0.0}, y, "squared_hinge", "epoch_growth")]
    for params, labels, loss, algorithm in cases:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            clf = DPInterpolatingClassifier(classes=np.unique(labels), accountant=BudgetAccountant(), random_state=0,
                                            **params).fit(X, labels)
        assert (clf.loss_, clf.algorithm_) == (loss, algorithm)


def test_histogram_edges_spread_a_centred_score_over_every_bin():
    # u = z / median|z|: about half of the rows have |u| <= 1 whatever the bin count.
    rng = np.random.default_rng(0)
    z = rng.normal(size=20000)
    u = np.clip(z / np.median(np.abs(z)), -_calibration.SCORE_CLIP, _calibration.SCORE_CLIP)
    for bins in (4, 14, 32):
        edges = _calibration.histogram_edges(bins)
        assert edges[0] == -_calibration.SCORE_CLIP and edges[-1] == _calibration.SCORE_CLIP
        assert np.all(np.diff(edges) > 0)
        shares = np.histogram(u, bins=edges)[0] / u.size
        assert shares.min() > 0.5 / bins and shares.max() < 2.0 / bins


def test_pooling_keeps_two_pools_and_the_slope_never_reverses_the_ranking():
    # Every bin below the pooling threshold: still two pools, so a slope is identified.
    noisy = np.array([[30.0, 20.0, 5.0, 1.0], [1.0, 5.0, 20.0, 30.0]])
    centres, positives, totals, cells = _calibration._pooled(noisy, np.array([-2.0, -0.5, 0.5, 2.0]),
                                                             cell_std=100.0)
    assert len(centres) == 2 and centres[0] < 0 < centres[1] and positives[1] > positives[0]
    assert list(cells) == [2.0, 2.0] and list(totals) == [56.0, 56.0]
    # A histogram whose labels run against the scores gives the flat map at the prior, not a reversal.
    rng = np.random.default_rng(1)
    labels = rng.integers(0, 2, size=600)
    u = np.clip(rng.normal(size=600) - 1.5 * (2 * labels - 1), -4, 4)
    a, _, _, _ = _calibration._platt(u, labels, np.array([0.5, 0.5]), ("gaussian", 2.0), rng,
                                     np.ones(600), 1.0, False, 0.0)
    assert a == 0.0


def test_a_sharp_map_on_a_large_table_keeps_its_slope():
    # Labels drawn from expit(6 u - 1): with little noise (mu = 50) the released slope is the true one
    # within the binning's error; the ridge towards the prior must not shrink it (a fixed ridge of 1e-3
    # per row gave a slope of 5.0 here).
    rng = np.random.default_rng(3)
    n = 20000
    u = np.clip(rng.normal(-0.5, 1.0, size=n), -_calibration.SCORE_CLIP, _calibration.SCORE_CLIP)
    labels = (rng.random(n) < 1.0 / (1.0 + np.exp(-(6.0 * u - 1.0)))).astype(int)
    prior = np.bincount(labels) / n
    a, b, bins, _ = _calibration._platt(u, labels, prior, ("gaussian", 50.0), rng, np.ones(n), 1.0, False, 0.0)
    assert bins == 32
    assert 5.6 < a < 6.4 and abs(b + 1.0) < 0.25


def test_the_noisy_platt_slope_is_not_flattened_by_the_noise(monkeypatch):
    # A rare class (labels from expit(6 u - 1), u ~ N(-1, 1)) at the noise of a table of 6000 rows at
    # epsilon = 1: the noise of the far tails (counts clipped at 0, unweighted equations) flattened the
    # slope by a third; the noise-weighted equations on the counts as released are about unbiased.
    rng = np.random.default_rng(5)
    n = 6000
    u = np.clip(rng.normal(-1.0, 1.0, size=n), -_calibration.SCORE_CLIP, _calibration.SCORE_CLIP)
    labels = (rng.random(n) < 1.0 / (1.0 + np.exp(-(6.0 * u - 1.0)))).astype(int)
    prior = np.bincount(labels) / n

    def mean_slope():
        return np.mean([_calibration._platt(u, labels, prior, ("gaussian", 0.08), np.random.default_rng(100 + r),
                                            np.ones(n), 1.0, False, 0.0)[0] for r in range(40)])

    exact = _calibration._platt(u, labels, prior, ("gaussian", math.inf), rng, np.ones(n), 1.0, True, 0.0)[0]
    assert 0.85 * exact < mean_slope() < 1.15 * exact
    monkeypatch.setattr(_calibration, "_weighted_platt_equations", lambda *args: None)  # the fallback
    assert mean_slope() < 0.75 * exact


def test_a_small_table_at_epsilon_one_beats_the_majority_class():
    # Breast cancer (426 training rows): the calibration's histogram has 4 bins; with equal-width bins and
    # strict pooling its slope was lost and half the fits fell back to the prior.
    X, y = load_breast_cancer(return_X_y=True)
    rng = np.random.default_rng(0)
    accuracies = []
    for seed in range(4):
        order = rng.permutation(len(y))
        train, test = order[:426], order[426:]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", LowBudgetWarning)
            model = DPInterpolatingClassifier(epsilon=1.0, classes=[0, 1], accountant=BudgetAccountant(),
                                              random_state=seed).fit(X[train], y[train])
        accuracies.append(model.score(X[test], y[test]))
    majority = max(np.mean(y), 1 - np.mean(y))
    assert np.median(accuracies) > majority + 0.15
