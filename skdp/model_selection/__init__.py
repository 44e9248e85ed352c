"""Private model selection: choosing the regularisation strength of an skdp estimator.

:class:`DPRegularizationTuner` wraps an skdp estimator as ``RidgeCV`` and
``GridSearchCV`` wrap scikit-learn's, and covers the choice, the candidates'
released scores and the final model with one ``(epsilon, delta)``.
"""

from ._tuner import DEFAULT_ALPHAS, DPRegularizationTuner

__all__ = ["DPRegularizationTuner", "DEFAULT_ALPHAS"]
