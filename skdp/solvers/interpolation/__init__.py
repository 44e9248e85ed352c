"""Solvers of :class:`~skdp.DPInterpolatingClassifier` (the "interpolation" family).

``clipped_gd`` (the baseline) and the localization methods of Asi, Chadha,
Cheng and Duchi, "Private optimization in the interpolation regime: faster
rates and hardness results" (2022): ``epoch_growth`` (Algorithm 5 over 4 with
the Lipschitzian extension of Algorithm 1), ``interpolation`` (Algorithm 2),
``adaptive`` (Algorithm 3) and ``kappa_growth`` (Algorithm 6).
"""

from .clipped_gd import ClippedGD
from .localization import Adaptive, EpochGrowth, Interpolation, KappaGrowth
from .problem import ClassificationProblem, JointSquaredOutputs, OneVsRestOutputs, SoftmaxOutputs

__all__ = ["ClippedGD", "EpochGrowth", "Interpolation", "Adaptive", "KappaGrowth", "ClassificationProblem",
           "OneVsRestOutputs", "JointSquaredOutputs", "SoftmaxOutputs"]
