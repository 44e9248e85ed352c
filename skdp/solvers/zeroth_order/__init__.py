"""Private zeroth-order solvers: training from loss values only (Zhang, Tran and Cutkosky, 2024).

Importing this package registers, in the family ``"zeroth_order"``:

* ``"variance_reduced"`` — :class:`VarianceReduced`: the online-to-nonconvex
  conversion driven by the variance-reduced zeroth-order oracle with tree noise
  (Algorithms 1-5);
* ``"naive"`` — :class:`Naive`: a zeroth-order gradient estimate plus fresh
  Gaussian noise at every step (Algorithm 6), and its full-batch practical
  schedule.

Both read the data only through :class:`ZOProblem`, whose two oracle sums clip
every row's finite differences to the public Lipschitz bound: privacy holds for
any loss and model, callables included. The directions and their sensitivity
bounds live in :mod:`~skdp.solvers.zeroth_order.directions`, the paper's
schedule (with its errata fixed) in :mod:`~skdp.solvers.zeroth_order.schedule`.

References
----------
Q. Zhang, H. Tran and A. Cutkosky, "Private Zeroth-Order Nonsmooth Nonconvex
Optimization", ICLR 2024, arXiv:2406.19579.
"""

from .directions import DIRECTION_MODES, DirectionDraw, draw_directions
from .naive import Naive
from .problem import ZOProblem
from .variance_reduced import VarianceReduced

__all__ = ["Naive", "VarianceReduced", "ZOProblem", "DirectionDraw", "draw_directions", "DIRECTION_MODES"]
