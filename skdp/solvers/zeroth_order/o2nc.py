"""Online-to-nonconvex conversion (Cutkosky, Mehta and Orabona; Algorithm 3 of Zhang, Tran and Cutkosky).

An epoch of ``T`` steps runs an online learner on the linear losses
``<g_t, Delta>``: its play ``Delta_t`` is the next increment of the iterate,
``x_{t+1} = x_t + Delta_t``, and the gradient is queried at the random point
``w_t = x_t + s_t Delta_t`` (``s_t ~ U[0, 1]``), which makes
``F(x_{t+1}) - F(x_t) = E <grad F(w_t), Delta_t>`` exact. The learner is
projected online subgradient descent on the ball of radius ``D`` (so every
epoch stays within ``T D`` of its start, the Goldstein radius), restarted every
epoch, with the AdaGrad-norm step ``eta_t = D / sqrt(sum_s ||g_s||^2)`` (the
paper leaves the step "tuned"; this one needs no tuning and reads only the
released gradients, so it is post-processing).

Everything here acts on released (noisy) gradients only.
"""

import math

import numpy as np

__all__ = ["OnlineSubgradientDescent", "OUTPUTS", "select_output"]

OUTPUTS = ("last_average", "random", "x_final")


class OnlineSubgradientDescent:
    """Projected OSD on ``Ball(0, radius)`` with the AdaGrad-norm step, started at 0.

    Examples
    --------
    >>> import numpy as np
    >>> from skdp.solvers.zeroth_order.o2nc import OnlineSubgradientDescent
    >>> osd = OnlineSubgradientDescent(dim=2, radius=0.1)
    >>> osd.play.tolist()
    [0.0, 0.0]
    >>> np.round(osd.update(np.array([3.0, 4.0])), 6).tolist()  # one step of length D against g
    [-0.06, -0.08]
    """

    def __init__(self, dim, radius):
        self.radius = float(radius)
        self.play = np.zeros(dim)
        self._squares = 0.0

    def update(self, gradient):
        """Take the released gradient of the last round; return the next play."""
        g = np.where(np.isfinite(gradient), gradient, 0.0)
        self._squares += float(g @ g)
        if self._squares > 0 and math.isfinite(self._squares):
            step = self.play - (self.radius / math.sqrt(self._squares)) * g
            norm = float(np.linalg.norm(step))
            self.play = step if norm <= self.radius else step * (self.radius / norm)
        return self.play


def select_output(rule, averages, x_final, rng):
    """The returned point: the last epoch average, a uniformly random one (the paper's), or the end point.

    Picking the "best" epoch by training loss would read the data again (it is
    not post-processing), so no such rule is offered.
    """
    if rule == "last_average":
        return averages[-1]
    if rule == "random":
        return averages[int(rng.integers(len(averages)))]
    if rule == "x_final":
        return x_final
    raise ValueError(f"Unknown output rule {rule!r}; choose one of {OUTPUTS}.")
