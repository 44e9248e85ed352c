"""Solvers for linear regression with heavy-tailed gradients (two papers, nine methods).

Importing this package registers the solvers under their names.

References
----------
H. Asi, D. Liu and K. Tian, "Private Stochastic Convex Optimization with Heavy
Tails: Near-Optimality from Simple Reductions", 2024, arXiv:2406.02789:
"localized", "known_lipschitz", "svt_sgd" (disabled), "one_pass_glm".

A. Lowy and M. Razaviyayn, "Private Stochastic Optimization With Large
Worst-Case Lipschitz Parameter", 2022, arXiv:2209.07403:
"localized_subgradient", "accelerated", "averaged_sgd", "proximal_sgd".

"sufficient_statistics": ridge regression from one private release of X'X,
X'y and y'y (squared loss), from which every ridge strength's model follows.

"clipped_gd", full-batch clipped DP gradient descent with private adaptive
thresholds, is the practical default every benchmark compares against.
"""

from .accelerated import Accelerated
from .averaged_sgd import AveragedSGD
from .clipped_gd import ClippedGD
from .known_lipschitz import KnownLipschitz
from .localized import Localized
from .localized_subgradient import LocalizedSubgradient
from .one_pass_glm import OnePassGLM
from .proximal_sgd import ProximalSGD
from .sufficient_statistics import SufficientStatistics
from .svt_sgd import SVTSGD

__all__ = ["ClippedGD", "Localized", "KnownLipschitz", "SVTSGD", "OnePassGLM", "LocalizedSubgradient",
           "Accelerated", "AveragedSGD", "ProximalSGD",
           "SufficientStatistics"]
