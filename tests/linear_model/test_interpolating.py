"""DPInterpolatingClassifier: the estimator contract, privacy accounting, real tables."""

import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer, load_digits, make_classification
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import GridSearchCV, cross_val_score, train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.estimator_checks import parametrize_with_checks

from skdp import BudgetAccountant, DPInterpolatingClassifier, PrivacyLeakWarning

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import real_tables  # noqa: E402

ALGORITHMS = ("clipped_gd", "epoch_growth", "interpolation", "adaptive", "kappa_growth")


@parametrize_with_checks([DPInterpolatingClassifier(epsilon=np.inf, random_state=0)])
def test_sklearn_compatible(estimator, check):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)
        check(estimator)


def separable(n, d=10, seed=0, flip=0.0):
    rng = np.random.default_rng(seed)
    u = rng.normal(size=d)
    u /= np.linalg.norm(u)
    X = rng.normal(size=(4 * n, d))
    margin = X @ u
    X = X[np.abs(margin) > 0.3][:n]
    y = (X @ u > 0).astype(int)
    flips = rng.random(n) < flip
    y[flips] = 1 - y[flips]
    return X * [1.0, 10.0, 1000.0, 0.01, *np.ones(d - 4)] + [0, 5, 1e4, 0, *np.zeros(d - 4)], y


@pytest.mark.parametrize("delta", [1e-5, 0.0])
@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_ledger_total_equals_the_target(algorithm, delta):
    X, y = separable(2000)
    acc = BudgetAccountant(epsilon=10.0, delta=1e-3)
    model = DPInterpolatingClassifier(epsilon=1.0, delta=delta, algorithm=algorithm, classes=[0, 1],
                                      accountant=acc, random_state=0).fit(X, y)
    # The whole fit (scaling quantiles, curvature and solver releases) spends exactly the target.
    assert model.privacy_event_.epsilon(delta) == pytest.approx(1.0, rel=1e-6)
    assert model.privacy_spent_.epsilon <= 1.0 + 1e-9
    assert model.coef_.shape == (1, X.shape[1]) and model.intercept_.shape == (1,)


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_infinite_epsilon_recovers_the_non_private_classifier(algorithm):
    X, y = separable(1500, seed=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)
        model = DPInterpolatingClassifier(epsilon=np.inf, algorithm=algorithm, classes=[0, 1], alpha=0.0,
                                          accountant=BudgetAccountant(), random_state=0).fit(X, y)
    reference = LogisticRegression(C=1e4, max_iter=10000).fit(StandardScaler().fit_transform(X), y)
    agree = np.mean(model.predict(X) == reference.predict(StandardScaler().fit(X).transform(X)))
    assert agree >= 0.99
    assert model.score(X, y) >= 0.99


def test_private_accuracy_grows_with_epsilon_and_n():
    # A weak penalty (alpha=1e-6): the default C=1 (alpha = 1 / n, LogisticRegression's penalty in
    # original units) and the earlier default 1e-4 pin down the coefficient of the 0.01-scale column
    # here; with the logistic loss the private model then stops where LogisticRegression(C=1) does
    # (0.853 on this table; 0.858 privately at every epsilon), and reaches 1.0 with alpha=1e-6.
    scores = {}
    for n in (1000, 8000):
        X, y = separable(n + 2000, seed=2)
        for eps in (0.3, 3.0):
            s = [DPInterpolatingClassifier(epsilon=eps, alpha=1e-6, classes=[0, 1], accountant=BudgetAccountant(),
                                           random_state=seed).fit(X[:n], y[:n])
                 .score(X[n:], y[n:]) for seed in range(3)]
            scores[n, eps] = np.median(s)
    assert scores[8000, 3.0] >= 0.95
    assert scores[8000, 3.0] >= scores[1000, 0.3]
    assert scores[8000, 0.3] >= scores[1000, 0.3] - 0.02


def test_classes_none_warns_and_unknown_labels_refuse_before_spending():
    X, y = separable(500)
    with pytest.warns(PrivacyLeakWarning, match="classes=None"):
        DPInterpolatingClassifier(accountant=BudgetAccountant()).fit(X, y)
    acc = BudgetAccountant(epsilon=5.0, delta=1e-3)
    with pytest.raises(ValueError, match="not in classes"):
        DPInterpolatingClassifier(classes=[0, 2], accountant=acc).fit(X, y)
    with pytest.raises(ValueError, match="at least 2 classes; got 1 class"):
        DPInterpolatingClassifier(classes=[0], accountant=acc).fit(X, y * 0)
    with pytest.raises(ValueError, match="common minimiser"):
        DPInterpolatingClassifier(loss="logistic", algorithm="adaptive", classes=[0, 1], accountant=acc).fit(X, y)
    with pytest.raises(ValueError, match="pure DP"):
        DPInterpolatingClassifier(delta=0.0, scaling="columns", classes=[0, 1], accountant=acc).fit(X, y)
    assert acc.spent.epsilon == 0.0


@pytest.mark.parametrize("multi_class", ["ovr", "joint"])
@pytest.mark.parametrize("loss", ["squared_hinge", "logistic"])
def test_multiclass_spends_one_budget_and_predicts_probabilities(multi_class, loss):
    X, y = make_classification(n_samples=3000, n_features=8, n_informative=6, n_classes=4,
                               n_clusters_per_class=1, class_sep=2.0, random_state=0)
    model = DPInterpolatingClassifier(epsilon=2.0, loss=loss, multi_class=multi_class, classes=[0, 1, 2, 3],
                                      accountant=BudgetAccountant(), random_state=0).fit(X[:2000], y[:2000])
    assert model.coef_.shape == (4, 8) and model.intercept_.shape == (4,)
    assert model.privacy_event_.epsilon(1e-5) == pytest.approx(2.0, rel=1e-6)
    proba = model.predict_proba(X[2000:])
    assert proba.shape == (1000, 4) and np.allclose(proba.sum(axis=1), 1.0)
    assert model.score(X[2000:], y[2000:]) >= 0.75
    assert model.multi_class_ == multi_class


def test_breast_cancer_and_shared_accountant_in_grid_search():
    X, y = load_breast_cancer(return_X_y=True)
    acc = BudgetAccountant(epsilon=100.0, delta=1e-2)
    est = make_pipeline(StandardScaler(), DPInterpolatingClassifier(epsilon=1.0, classes=[0, 1], scaling="none",
                                                                    accountant=acc, random_state=0))
    scores = cross_val_score(est, X, y, cv=3)
    assert np.median(scores) >= 0.85
    grid = GridSearchCV(DPInterpolatingClassifier(epsilon=1.0, classes=[0, 1], accountant=acc, random_state=0),
                        {"alpha": [1e-4, 1e-2]}, cv=2).fit(X, y)
    assert grid.best_estimator_.privacy_spent_.epsilon <= 1.0 + 1e-9
    assert acc.spent.epsilon > 1.0  # every fit of the search is charged to the shared ledger


def classification_table(name, n, seed, rate=0.15):
    table = getattr(real_tables, name)(n, seed)
    threshold = np.quantile(table["y"], 1.0 - rate)
    return (table["X"], (table["y"] > threshold).astype(int), table["X_test"],
            (table["y_test"] > threshold).astype(int))


@pytest.mark.parametrize("name", ["rare_binary", "counts", "lognormal", "offsets", "mixed_scales"])
def test_real_tables_match_logistic_regression_without_noise_and_at_epsilon_one(name):
    X, y, Xt, yt = classification_table(name, 8000, 0)
    lr = LogisticRegression(max_iter=5000).fit(X, y)
    lr_acc, lr_auc = lr.score(Xt, yt), roc_auc_score(yt, lr.decision_function(Xt))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)
        exact = DPInterpolatingClassifier(epsilon=np.inf, classes=[0, 1], accountant=BudgetAccountant(),
                                          random_state=0).fit(X, y)
    assert exact.score(Xt, yt) >= lr_acc - 0.005
    assert roc_auc_score(yt, exact.decision_function(Xt)) >= lr_auc - 0.005
    private = DPInterpolatingClassifier(epsilon=1.0, classes=[0, 1], accountant=BudgetAccountant(),
                                        random_state=0).fit(X, y)
    assert roc_auc_score(yt, private.decision_function(Xt)) >= lr_auc - 0.02


@pytest.mark.parametrize("relabel", [False, True])
def test_public_classes_decide_the_label_check_not_one_row(relabel):
    """With classes given, whether the fit runs cannot depend on one row's label (a continuous-looking label set
    is refused for every dataset, not only for those that contain a non-integral label)."""
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(200, 3)), rng.integers(0, 2, size=200).astype(float)
    if relabel:
        y[0] = 2.5
    acc = BudgetAccountant()
    with pytest.raises(ValueError, match="[Uu]nknown label type"):
        DPInterpolatingClassifier(classes=[0.0, 1.0, 2.5], accountant=acc, random_state=0).fit(X, y)
    assert acc.spent.epsilon == 0.0
    model = DPInterpolatingClassifier(classes=[0, 1, 2], accountant=BudgetAccountant(), random_state=0)
    model.fit(X, np.where(y == 2.5, 2, y).astype(int))
    assert model.classes_.tolist() == [0, 1, 2]


def test_clipped_gd_refuses_too_many_coefficients_before_spending():
    X = np.random.default_rng(0).normal(size=(20, 4100))
    y = np.arange(20) % 2
    acc = BudgetAccountant()
    with pytest.raises(ValueError, match="at most 4096 coefficients.*Nothing was spent"):
        DPInterpolatingClassifier(classes=[0, 1], accountant=acc, random_state=0).fit(X, y)
    assert acc.spent.epsilon == 0.0


def test_whitened_modes_clip_at_the_released_norm_of_the_whitened_rows_and_centre():
    """Digits (n = 1347, d = 64) at epsilon = 5 runs a whitened mode whose second moments are noisy:
    the clip follows the released median norm of the whitened rows (not sqrt(d) alone), and the solver
    centres the columns the shrunk whitening means left off-centre."""
    X, y = load_digits(return_X_y=True)
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.25, stratify=y, random_state=0)
    scores = []
    for seed in range(5):
        model = DPInterpolatingClassifier(epsilon=5.0, classes=np.arange(10), accountant=BudgetAccountant(),
                                          random_state=seed).fit(X_train, y_train)
        scaling, schedule = model.scaling_, model.schedule_
        assert scaling["mode"] in ("columns", "coarse", "scale")
        # The clip scale is the geometric mean of sqrt(d) and the released median norm; the
        # centring shrinks it by the removed mean, to at least sqrt(0.1) of it.
        scale = np.sqrt(scaling["typical_row_norm"] * np.sqrt(X.shape[1]))
        kappa = scaling["intercept_value"]
        assert np.hypot(np.sqrt(0.1) * scale, kappa) <= schedule["clip_threshold"] <= np.hypot(scale, kappa)
        assert schedule["centred_columns"] > 0
        assert model.privacy_event_.epsilon(1e-5) == pytest.approx(5.0, rel=1e-6)
        scores.append(model.score(X_test, y_test))
    # Median 0.84 (0.80-0.90); 0.79 (0.78-0.88) with the clip at sqrt(d) and no centring.
    # StandardScaler + LogisticRegression: 0.97.
    assert np.median(scores) >= 0.82


@pytest.mark.parametrize("algorithm", ["clipped_gd", "epoch_growth"])
def test_error_on_separable_data_falls_faster_than_one_over_n_squared(algorithm):
    """Interpolation: with a margin, the test error at epsilon = 1 falls much faster than 1/n
    (the rate for non-separable data is 1/sqrt(n)). From n = 2000 to 8000 it falls by more than
    16 = 4^2: measured medians 0.041 -> 0.000 (clipped_gd) and 0.116 -> 0.0002 (epoch_growth).
    The localization method does not beat the clipped baseline at any n measured (see the
    benchmark), so this test checks the fast rate of each, not the paper's comparison."""
    errors = {}
    for n in (2000, 8000):
        runs = []
        for seed in range(5):
            X, y = separable(n + 4000, d=20, seed=seed)
            model = DPInterpolatingClassifier(epsilon=1.0, algorithm=algorithm, classes=[0, 1],
                                              accountant=BudgetAccountant(), random_state=seed)
            runs.append(1.0 - model.fit(X[:n], y[:n]).score(X[n:], y[n:]))
        errors[n] = np.median(runs)
    assert errors[2000] > 0.01  # the test can fail: the smaller fit still errs
    assert errors[8000] <= errors[2000] / 16
