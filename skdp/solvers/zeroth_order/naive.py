"""The naive private zeroth-order method (Zhang, Tran and Cutkosky, Algorithm 6 and Appendix E).

Every step releases a zeroth-order gradient estimate plus fresh Gaussian noise.

``schedule="theory"`` is the paper's: one row per step (disjoint rows, one
pass), one direction per row drawn uniformly on the sphere, every difference
``f(w + delta u) - f(w - delta u)`` clipped to ``[-2 L delta, 2 L delta]`` (the
Lipschitz bound; it never binds for an ``L``-Lipschitz loss), so the per-row
estimate ``d / (2 delta) a u`` has norm at most ``d L`` and replacing the row
changes the step's release by at most ``2 d L`` (the paper's ``d L`` is the
add-or-remove bound). Noise ``sigma = 2 d L / rho``; the steps touch disjoint
rows, so the whole run is ``rho``-GDP by parallel composition. The steps drive
the online-to-nonconvex conversion (:mod:`~skdp.solvers.zeroth_order.o2nc`)
with ``D = delta / T`` and ``T`` from Appendix E (with ``max``, see
:mod:`~skdp.solvers.zeroth_order.schedule`).

``schedule="practical"`` [ours] keeps the oracle and changes what the paper
leaves open:

* every step uses *all* rows (full batch): ``S`` steps compose sequentially,
  with noise ``sqrt(S) s / mu`` for a step of sensitivity ``s``; at the same
  number of steps this is ``sqrt(n / B)`` times less noise than one pass of
  batches of ``B`` rows;
* ``m`` directions per step forming one orthonormal frame shared by all rows
  (a Haar-random frame, ``directions="orth"``, or ``m`` random coordinate axes,
  ``"coordinates"``; ``m = d`` up to
  :data:`~skdp.solvers.zeroth_order._base.MAX_FULL_FRAME` parameters unless
  set), each row's vector of ``m`` differences clipped jointly at
  ``2 delta L sqrt(m / d)``: the per-row estimate ``d / (2 delta m) U^T a`` then
  has norm at most ``L sqrt(d / m)`` (Pythagoras), and a step's mean has
  sensitivity ``2 L sqrt(d / m) / n`` — for the full frame exactly that of
  first-order clipped gradient descent, ``2 L / n``. The noise is added in
  ``R^d`` and, when ``m < d``, projected on the frame's span (post-processing:
  the frame is data-independent and the signal lies in its span);
* the released gradients drive gradient descent with steps
  ``eta0 min(1, tau / (t + 1))`` (``tau = S / 4``) or Adam, and the output is the
  average of the last half of the iterates (post-processing);
* a loss with a tuning constant (Huber, Tukey, Cauchy) may start with a convex
  warm-up loss, after which the constant is set to its value times a private
  robust scale of the residuals (one exponential-mechanism quantile).

Sensitivity, per step (practical): every row's ``m`` differences are clipped
jointly to ``C``, the frame is orthonormal, so its estimate has norm at most
``scale C``; replacing one row moves the mean by at most ``2 scale C / n``.
"""

import math
import numbers
from dataclasses import dataclass

import numpy as np

from ...accounting import ExponentialMechanismRelease, GaussianRelease, Parallel, Repeated, Sequential
from ...losses import HuberLoss
from ...mechanisms import gaussian_mechanism
from ..._validation import Interval, Options, Predicate
from ...losses import Loss
from .._contract import PUBLIC_CLIP, POSITIVE_INT, SCHEDULE, SolverResult, optional, register_solver
from ..geometry import project_ball
from ..schedules import decaying_steps
from ._base import ZerothOrderSolver, release_residual_scale
from .directions import DIRECTION_MODES, draw_directions
from .o2nc import OUTPUTS, OnlineSubgradientDescent, select_output
from .schedule import naive_theory_inner

__all__ = ["Naive"]

OPTIMIZERS = ("gd", "adam")
_DEFAULT_STEPS = 100
_THEORY_SMOOTHING = 0.05
_PRACTICAL_SMOOTHING = 1e-3
_STEP = {"gd": 0.5, "adam": 0.02}


def rescaled(loss, scale):
    """The loss with its tuning constant multiplied by ``scale`` (Huber ``delta``, Tukey and Cauchy ``c``).

    A scale that is not a positive finite number (impossible for a released one, which lies in a
    public range) leaves the loss unchanged rather than raising after the budget is reserved.
    """
    if not (math.isfinite(scale) and scale > 0):
        return loss
    if isinstance(loss, HuberLoss):
        return HuberLoss(loss.delta * scale)
    if hasattr(loss, "c"):
        return type(loss)(loss.c * scale)
    return loss


# Largest per-step array of row-wise random directions (float64: 2 GiB).
MAX_IID_ELEMENTS = 2**28


@register_solver
@dataclass(frozen=True)
class Naive(ZerothOrderSolver):
    """Private zeroth-order steps with fresh noise each (see the module docstring).

    Parameters
    ----------
    schedule : {"practical", "theory"}
    n_steps : int or None
        Practical: full-batch steps (None: 100). Theory: ignored (one row per step).
    directions : {"orth", "coordinates", "iid"} or None
        None: "orth" (practical), "iid" (theory).
    n_directions : int or None
        Directions per row and step. None: practical the full frame up to 64
        parameters, else 32; theory 1.
    smoothing : float or None
        The smoothing radius ``delta`` (None: 1e-3 practical, 0.05 theory).
    loss_gap : float
        ``F*`` of the theory schedule's ``T``.
    optimizer : {"gd", "adam"}
        Practical schedule's use of the released gradients.
    step_size : float or None
        ``eta0`` (None: 0.5 for "gd", 0.02 for "adam").
    radius : float or None
        Iterates are projected onto this ball (None: the specification's
        radius, or none).
    output : {"last_average", "random", "x_final"}
        Theory schedule's returned point.
    warm_loss : Loss or None
        Loss of the first ``warm_fraction`` of the steps (practical).
    warm_fraction : float
    rescale_loss : bool
        After the warm-up, multiply the loss's tuning constant by a private
        robust scale of the residuals (one quantile).
    """

    schedule: str = "practical"
    n_steps: int = None
    directions: str = None
    n_directions: int = None
    smoothing: float = None
    loss_gap: float = 1.0
    optimizer: str = "gd"
    step_size: float = None
    radius: float = None
    output: str = "last_average"
    warm_loss: object = None
    warm_fraction: float = 0.3
    rescale_loss: bool = False

    # Every field is a public input checked before any spend; the real-valued ones stay within the public
    # clip range so that no formula of the schedule leaves the floating-point range after the reservation.
    _parameter_constraints = {
        "schedule": [SCHEDULE],
        "n_steps": optional(POSITIVE_INT),
        "directions": optional(Options(set(DIRECTION_MODES))),
        "n_directions": optional(POSITIVE_INT),
        "smoothing": optional(PUBLIC_CLIP),
        "loss_gap": [PUBLIC_CLIP],
        "optimizer": [Options({"gd", "adam"})],
        "step_size": optional(PUBLIC_CLIP),
        "radius": optional(PUBLIC_CLIP),
        "output": [Options(set(OUTPUTS))],
        "warm_loss": optional(Predicate(lambda v: isinstance(v, Loss), "a Loss instance")),
        "warm_fraction": [Interval(numbers.Real, 0, 1, closed="left")],
        "rescale_loss": ["boolean"],
    }

    name = "naive"

    @classmethod
    def from_options(cls, options):
        return cls(schedule=options.schedule, n_steps=options.max_iter)

    def smoothing_radius(self):
        if self.smoothing is not None:
            return float(self.smoothing)
        return _THEORY_SMOOTHING if self.schedule == "theory" else _PRACTICAL_SMOOTHING

    def check(self, spec):
        super().check(spec)
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"optimizer must be one of {OPTIMIZERS}; got {self.optimizer!r}.")
        if self.output not in OUTPUTS:
            raise ValueError(f"output must be one of {OUTPUTS}; got {self.output!r}.")
        if self.n_steps is not None and int(self.n_steps) < 1:
            raise ValueError(f"n_steps must be at least 1; got {self.n_steps!r}.")
        if not 0.0 <= float(self.warm_fraction) < 1.0:
            raise ValueError(f"warm_fraction must lie in [0, 1); got {self.warm_fraction!r}.")
        d = int(spec.n_coef)
        if self.schedule == "practical" and self._mode() == "iid":
            # Random directions are drawn per row: an (n, m, d) array every step. Refused here, before the
            # reservation, when it would not fit in memory (a MemoryError after the charge is a crash).
            elements = int(spec.n_samples) * self._n_directions(d) * d
            if elements > MAX_IID_ELEMENTS:
                raise ValueError(
                    f"directions='iid' draws {elements:.3g} numbers per step at n_samples = {spec.n_samples} and "
                    f"{d} parameters, more than {MAX_IID_ELEMENTS:.3g}: use directions='orth' or "
                    "'coordinates' (one frame shared by all rows), or fewer n_directions. Nothing was spent.")

    def n_quantiles(self, spec):
        return int(self._rescales())

    def _rescales(self):
        # The rescale runs after the warm-up: with no warm-up step (one step in all) it is not made, and
        # the plan must not count its quantile (the spend would fall short of the target).
        return (bool(self.rescale_loss) and self.warm_loss is not None and self.schedule == "practical"
                and self._stage_steps()[0] > 0)

    def _steps(self):
        return _DEFAULT_STEPS if self.n_steps is None else int(self.n_steps)

    def _stage_steps(self):
        S = self._steps()
        warm = int(round(self.warm_fraction * S)) if self.warm_loss is not None else 0
        return min(max(warm, 0), S - 1), S

    # -- plan ----------------------------------------------------------------------------------------
    def plan(self, spec, budget):
        if self.schedule == "theory":
            # One Gaussian release per row on disjoint rows: parallel composition.
            return Parallel([GaussianRelease(1.0, _std(1.0, budget.mu))])
        S = self._steps()
        steps = Repeated(GaussianRelease(1.0, _std(math.sqrt(S), budget.mu)), S)
        if self._rescales():
            return Sequential([steps, ExponentialMechanismRelease(budget.quantile_epsilon)])
        return steps

    # -- run -----------------------------------------------------------------------------------------
    def run(self, spec, problem, budget, rng):
        if self.schedule == "theory":
            return self._run_theory(spec, problem, budget, rng)
        return self._run_practical(spec, problem, budget, rng)

    def _radius(self, spec):
        if self.radius is not None:
            return float(self.radius)
        return math.inf if spec.radius is None else float(spec.radius)

    def _run_practical(self, spec, problem, budget, rng):
        d = problem.n_params
        mode, m = self._mode(), self._n_directions(d)
        delta = self.smoothing_radius()
        warm, S = self._stage_steps()
        multiplier = _std(math.sqrt(S), budget.mu)
        radius = self._radius(spec)
        eta0 = _STEP[self.optimizer] if self.step_size is None else float(self.step_size)
        events = []
        theta = problem.start(rng)
        schedule = {"n_steps": S, "directions": mode, "n_directions": m, "smoothing": delta,
                    "optimizer": self.optimizer, "step_size": eta0, "noise_multiplier": multiplier,
                    "batch": "full"}
        stages = [(self.warm_loss, warm), (problem.loss, S - warm)] if warm > 0 else [(problem.loss, S)]
        done = [0, S]  # steps taken, of all stages (for the progress report)
        for index, (loss, steps) in enumerate(stages):
            if index == 1 and self._rescales():
                # Post-warm-up: the loss's constant in units of a private residual scale.
                scale, event = release_residual_scale(problem, theta, budget.quantile_epsilon, rng)
                events.append(event)
                loss = rescaled(loss, scale)
                schedule["residual_scale"] = scale
            stage_problem = problem if loss is problem.loss else problem.with_loss(loss)
            theta = self._descend(stage_problem, theta, steps, mode, m, delta, multiplier, radius, eta0, rng,
                                  events, done)
        schedule["loss"] = repr(loss)
        if warm > 0:
            schedule["warm_steps"], schedule["warm_loss"] = warm, repr(self.warm_loss)
        schedule["n_function_evals"] = int(problem.n_evaluations[0])
        return SolverResult(theta, Sequential(events), schedule)

    def _descend(self, problem, theta, steps, mode, m, delta, multiplier, radius, eta0, rng, events, done):
        n, d = problem.n_samples, problem.n_params
        etas = decaying_steps(eta0, steps)
        average, count = np.zeros(d), 0
        first, second = np.zeros(d), np.zeros(d)
        for t in range(steps):
            draw = draw_directions(mode, rng, n, m, d)
            total, sensitivity = problem.grad_sum(theta, draw, delta)
            noisy, event = gaussian_mechanism(total / n, sensitivity / n, multiplier * sensitivity / n, rng)
            events.append(event)
            if draw.shared and m < d:
                # The signal lies in the frame's span: projecting the noise on it is post-processing.
                U = draw.directions
                noisy = U.T @ (U @ noisy)
            noisy = np.where(np.isfinite(noisy), noisy, 0.0)
            if self.optimizer == "adam":
                first = 0.9 * first + 0.1 * noisy
                second = 0.999 * second + 0.001 * noisy * noisy
                step = (first / (1 - 0.9 ** (t + 1))) / (np.sqrt(second / (1 - 0.999 ** (t + 1))) + 1e-12)
            else:
                step = noisy
            theta = project_ball(theta - etas[t] * step, radius)
            if t >= steps // 2:
                average += theta
                count += 1
            done[0] += 1
            problem.report(done[0], done[1], etas[t])
        return average / max(count, 1)

    def _run_theory(self, spec, problem, budget, rng):
        n, d = problem.n_samples, problem.n_params
        mode = self._mode()
        m = 1 if self.n_directions is None else int(self.n_directions)
        if mode != "iid":
            m = min(m, d)
        delta = self.smoothing_radius()
        mu = budget.mu
        T = naive_theory_inner(n, d, problem.lipschitz, delta, float(self.loss_gap), mu)
        K = max(1, n // T)
        D = delta / T
        order = rng.permutation(n)
        x = problem.start(rng)
        averages, events = [], {}
        for k in range(K):
            osd = OnlineSubgradientDescent(d, D)
            play = osd.play
            wsum = np.zeros(d)
            for t in range(T):
                row = order[k * T + t: k * T + t + 1]
                w = x + rng.random() * play
                x = x + play
                wsum += w
                draw = draw_directions(mode, rng, 1, m, d)
                total, sensitivity = problem.grad_sum(w, draw, delta, rows=row)
                noisy, event = gaussian_mechanism(total, sensitivity, _std(1.0, mu) * sensitivity, rng)
                events[event] = None  # the same public bound at every step: one block's event
                play = osd.update(noisy)
            averages.append(wsum / T)
            problem.report((k + 1) * T, K * T)
        theta = select_output(self.output, averages, x, rng)
        schedule = {"n_inner": T, "n_epochs": K, "batch": 1, "step_radius": D, "directions": mode,
                    "n_directions": m, "smoothing": delta, "n_steps": K * T, "n_rows_used": K * T,
                    "output": self.output, "n_function_evals": int(problem.n_evaluations[0])}
        return SolverResult(theta, Parallel(list(events)), schedule)


def _std(count_root, mu):
    """Noise per unit sensitivity for ``count_root^2`` releases that are ``mu``-GDP together."""
    return 0.0 if math.isinf(mu) else count_root / mu
