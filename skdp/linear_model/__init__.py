"""Private linear models: the shared pipeline and one module per estimator.

:class:`~skdp.linear_model._pipeline.PrivateLinearModel` runs every fit
(validate, plan the budget, standardise privately, solve, settle, unscale);
:class:`~skdp.linear_model._standardise.PrivateStandardiser` releases the
scales. Estimators declare parameters, the exact objective, a routing table of
solvers and the loss and penalties in solver units.
"""

from ._heavy_tail import DPHeavyTailRegressor
from ._interpolating import DPInterpolatingClassifier
from ._pipeline import PrivateLinearModel
from ._standardise import PrivateStandardiser, Scaling

__all__ = ["DPHeavyTailRegressor", "DPInterpolatingClassifier", "PrivateLinearModel", "PrivateStandardiser", "Scaling"]
