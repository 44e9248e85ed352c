"""What the zeroth-order solvers share: their family, public options, bounds and the loss-scale release."""

import math

import numpy as np

from ...mechanisms import private_quantile
from .._contract import Capabilities, Solver
from .directions import DIRECTION_MODES, DirectionDraw

__all__ = ["ZerothOrderSolver", "direction_bounds", "release_residual_scale", "MAX_FULL_FRAME"]

# Up to this many parameters the practical default uses the full orthonormal frame (m = d):
# for a loss of a linear prediction its estimate is then the exact gradient of the smoothed
# loss (no projection noise), at 2 d evaluations per row and step.
MAX_FULL_FRAME = 64
# Above it, this many directions per row and step.
PARTIAL_FRAME = 32
# Range of the private residual scale, relative to the standardised target (public).
_SCALE_RANGE = (1e-4, 10.0)
_JITTER = 0.05


def direction_bounds(mode, m, d):
    """A :class:`DirectionDraw` without directions, to compute the clip thresholds and bounds of a mode."""
    if mode not in DIRECTION_MODES:
        raise ValueError(f"Unknown direction mode {mode!r}; choose one of {DIRECTION_MODES}.")
    return DirectionDraw(mode, np.empty((m, d)))


def release_residual_scale(problem, theta, epsilon, rng):
    """A private robust scale of the residuals at ``theta``: ``1.4826`` times a private median of ``|r|``.

    One exponential-mechanism release (epsilon-DP) on a log scale within the
    public range ``_SCALE_RANGE`` (standardised units); a non-finite residual
    counts as the top of the range (a per-record rule).
    """
    residual = problem.absolute_residuals(theta, _SCALE_RANGE[1])  # chunked values on a cluster
    median, event = private_quantile(residual, 0.5, epsilon, _SCALE_RANGE, scale="log", jitter=_JITTER,
                                     random_state=rng)
    return 1.4826 * float(median), event


class ZerothOrderSolver(Solver):
    """Base of the zeroth-order solvers (family ``"zeroth_order"``): loss values only, any callable.

    Every finite difference is clipped to the public Lipschitz bound of the
    problem, so the solvers assume nothing of the loss or the model (callables
    included) and need no derivative.
    """

    family = "zeroth_order"
    capabilities = Capabilities(callable_losses=True)

    def _mode(self):
        return self.directions or ("iid" if self.schedule == "theory" else "orth")

    def _n_directions(self, d):
        if self.n_directions is not None:
            return int(self.n_directions) if self._mode() == "iid" else min(int(self.n_directions), d)
        return d if d <= MAX_FULL_FRAME else PARTIAL_FRAME

    def check(self, spec):
        super().check(spec)
        if self.schedule not in ("practical", "theory"):
            raise ValueError(f"schedule must be 'practical' or 'theory'; got {self.schedule!r}.")
        if self.directions is not None and self.directions not in DIRECTION_MODES:
            raise ValueError(f"directions must be None or one of {DIRECTION_MODES}; got {self.directions!r}.")
        if self.n_directions is not None and int(self.n_directions) < 1:
            raise ValueError(f"n_directions must be at least 1; got {self.n_directions!r}.")
        if not (0 < float(self.smoothing_radius()) < math.inf):
            raise ValueError(f"The smoothing radius must be a positive number; "
                             f"got {self.smoothing_radius()!r}.")

    def smoothing_radius(self):
        raise NotImplementedError
