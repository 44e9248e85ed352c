"""The private variance-reduced zeroth-order method (Zhang, Tran and Cutkosky, Algorithms 1-5).

One pass over the data, permuted at random (independently of the values),
cut into ``K`` epochs of ``B1 + (T - 1) B2`` rows. Epoch ``k`` runs ``T`` steps
of the online-to-nonconvex conversion (:mod:`~skdp.solvers.zeroth_order.o2nc`,
steps of length at most ``D``):

* step 1 estimates the smoothed gradient at the epoch's start on ``B1`` rows
  (Algorithm 1, :meth:`~skdp.solvers.zeroth_order.ZOProblem.grad_sum`);
* step ``t >= 2`` adds an estimate of ``grad F_delta(w_t) - grad F_delta(w_{t-1})``
  on ``B2`` fresh rows (Algorithm 2, :meth:`~skdp.solvers.zeroth_order.ZOProblem.diff_sum`),
  with the same directions at both points;
* the running sum ``g_t`` is released only through the tree mechanism
  (Algorithm 5, :class:`~skdp.mechanisms.TreeAggregator`): ``g_t + Tree(t)``
  (the paper's "g~ <- g~ + Tree(t)" is a typo), the tree restarted every epoch.

Privacy. A row lies in one leaf of one epoch. Leaf 1 moves by at most
``s_1 = 2 max||v_i|| / B1``, leaf ``t`` by at most
``s_t = 2 max||v_i|| / B2`` with ``||v_i||`` proportional to
``||w_t - w_{t-1}|| <= 2 D`` (the differences are clipped to ``L ||w_t - w_{t-1}||``
times the mode's factor, see :mod:`~skdp.solvers.zeroth_order.directions`).
Every node of the tree gets noise ``sigma = sqrt(bit_length(T)) s_max / mu``
and at most ``bit_length(T)`` released nodes cover a leaf (the paper's
``sqrt(2 ln T)`` is short of that at ``T`` in {1, 2, 4}), so an epoch is
``mu``-GDP even though later leaves depend on earlier releases (adaptive
composition of the nodes covering the changed leaf; the other nodes have the
same conditional distributions). Epochs use disjoint rows: the run is
``mu``-GDP by parallel composition, whatever ``K``.

Per-row bounds (``m`` directions, scale ``d / (2 delta m)``, or ``d / (delta m)``
for the one-sided difference):

* ``"iid"`` (the paper): gradient ``d L``, one-sided difference
  ``d L ||w - w'|| / delta``;
* ``"orth"`` and ``"coordinates"``: gradient ``L sqrt(d / m)`` (joint clip at ``2 delta L sqrt(m / d)``),
  difference ``d L ||w - w'|| / (delta sqrt(m))`` (joint clip at
  ``sqrt(m)`` times the per-direction bound).

``schedule="theory"`` follows the paper (``"iid"``, ``m = d``, one-sided
differences, ``B1 = T + 1``, ``B2 = 1``, ``T = max(T1, T2)``, ``D = delta / T``,
a random epoch average as output); ``"practical"`` [ours] uses the orthonormal
frame, the symmetric difference (zero for a row whose loss is linear around
both points) and the last epoch average.
"""

import math
from dataclasses import dataclass

import numpy as np

from ...accounting import GaussianRelease, Parallel
from ...mechanisms import TreeAggregator, tree_depth
from ..._validation import Options
from .._contract import PUBLIC_CLIP, POSITIVE_INT, SCHEDULE, SolverResult, optional, register_solver
from ._base import ZerothOrderSolver, direction_bounds
from .directions import DIRECTION_MODES, draw_directions
from .o2nc import OUTPUTS, OnlineSubgradientDescent, select_output
from .schedule import VRSchedule, variance_reduced_theory

__all__ = ["VarianceReduced"]

# Per-row directions of a checkpoint are drawn in chunks of this many numbers (B1 m d can be
# hundreds of millions at d = 100).
_DRAW_CHUNK = 1 << 21


@register_solver
@dataclass(frozen=True)
class VarianceReduced(ZerothOrderSolver):
    """Online-to-nonconvex conversion with the variance-reduced oracle and tree noise (module docstring).

    Parameters
    ----------
    schedule : {"practical", "theory"}
    directions : {"orth", "coordinates", "iid"} or None
        None: "orth" (practical), "iid" (theory).
    n_directions : int or None
        None: ``d`` (theory); practical the full frame up to 64 parameters, else 32.
    smoothing : float
        ``delta``: the smoothing radius (the certified Goldstein radius is ``2 delta``).
    loss_gap : float
        ``F*``, a public bound on the initial loss gap (only changes ``T``).
    n_inner : int or None
        ``T`` (None: the paper's rule).
    diff_batch : int
        ``B2`` (the paper's is 1).
    symmetric : bool or None
        Symmetric differences (None: practical True, theory False).
    output : {"last_average", "random", "x_final"} or None
        None: "last_average" (practical), "random" (theory, the paper's).
    """

    schedule: str = "practical"
    directions: str = None
    n_directions: int = None
    smoothing: float = 0.05
    loss_gap: float = 1.0
    n_inner: int = None
    diff_batch: int = 1
    symmetric: bool = None
    output: str = None

    # Every field is a public input checked before any spend (real values within the public clip range).
    _parameter_constraints = {
        "schedule": [SCHEDULE],
        "directions": optional(Options(set(DIRECTION_MODES))),
        "n_directions": optional(POSITIVE_INT),
        "smoothing": [PUBLIC_CLIP],
        "loss_gap": [PUBLIC_CLIP],
        "n_inner": optional(POSITIVE_INT),
        "diff_batch": [POSITIVE_INT],
        "symmetric": optional("boolean"),
        "output": optional(Options(set(OUTPUTS))),
    }

    name = "variance_reduced"

    @classmethod
    def from_options(cls, options):
        return cls(schedule=options.schedule)

    def smoothing_radius(self):
        return float(self.smoothing)

    def _n_directions(self, d):
        if self.n_directions is None and self.schedule == "theory":
            return d
        return super()._n_directions(d)

    def _symmetric(self):
        return (self.schedule == "practical") if self.symmetric is None else bool(self.symmetric)

    def _output(self):
        return self.output or ("random" if self.schedule == "theory" else "last_average")

    def check(self, spec):
        super().check(spec)
        if spec.n_samples < 4:
            raise ValueError(f"algorithm='variance_reduced' needs at least 4 rows (one epoch of two steps); "
                             f"got n_samples = {spec.n_samples}.")
        if self._output() not in OUTPUTS:
            raise ValueError(f"output must be one of {OUTPUTS}; got {self.output!r}.")
        if int(self.diff_batch) < 1:
            raise ValueError(f"diff_batch must be at least 1; got {self.diff_batch!r}.")
        if self.n_inner is not None and int(self.n_inner) < 2:
            raise ValueError(f"n_inner must be at least 2; got {self.n_inner!r}.")

    def layout(self, n, d, lipschitz, mu):
        """The public block layout (:class:`~skdp.solvers.zeroth_order.schedule.VRSchedule`)."""
        delta, B2 = self.smoothing_radius(), int(self.diff_batch)
        if self.n_inner is None:
            return variance_reduced_theory(n, d, lipschitz, delta, float(self.loss_gap), mu, B2)
        T = int(self.n_inner)
        while T > 2 and T + 1 + (T - 1) * B2 > n:
            T -= 1
        return VRSchedule(T, max(1, n // (T + 1 + (T - 1) * B2)), T + 1, B2, delta / T)

    def leaf_bounds(self, layout, d, lipschitz):
        """The sensitivity caps of the checkpoint leaf and of a difference leaf (public)."""
        m, delta = self._n_directions(d), self.smoothing_radius()
        bounds = direction_bounds(self._mode(), m, d)
        grad_scale = d / (2.0 * delta * m)
        grad_row = bounds.row_bound(bounds.grad_threshold(lipschitz, delta))
        grad = 2.0 * grad_scale * grad_row / layout.checkpoint_batch
        symmetric = self._symmetric()
        diff_scale = d / ((2.0 if symmetric else 1.0) * delta * m)
        threshold = bounds.diff_threshold(lipschitz, 2.0 * layout.step_radius, symmetric)
        diff = 2.0 * diff_scale * bounds.row_bound(threshold) / layout.diff_batch
        return grad, diff

    def plan(self, spec, budget):
        # Every epoch is mu-GDP (the tree's noise is calibrated to its depth), and epochs
        # compose in parallel: one mu-GDP release describes the cost; the run reports the tree.
        return Parallel([GaussianRelease(1.0, 0.0 if math.isinf(budget.mu) else 1.0 / budget.mu)])

    def run(self, spec, problem, budget, rng):
        n, d = problem.n_samples, problem.n_params
        mode, m, delta = self._mode(), self._n_directions(d), self.smoothing_radius()
        L, mu = float(problem.lipschitz), float(budget.mu)
        layout = self.layout(n, d, L, mu)
        T, K, B1, B2, D = (layout.n_inner, layout.n_epochs, layout.checkpoint_batch, layout.diff_batch,
                           layout.step_radius)
        cap_grad, cap_diff = self.leaf_bounds(layout, d, L)
        s_max = max(cap_grad, cap_diff)
        depth = tree_depth(T)
        sigma = 0.0 if math.isinf(mu) else math.sqrt(depth) * s_max / mu
        symmetric = self._symmetric()
        order = rng.permutation(n)
        epoch_rows = layout.rows_per_epoch
        x = problem.start(rng)
        averages, event = [], None
        for k in range(K):
            block = order[k * epoch_rows:(k + 1) * epoch_rows]
            tree = TreeAggregator(T, d, sigma, rng, leaf_sensitivity=s_max)
            osd = OnlineSubgradientDescent(d, D)
            play, wsum, w_prev = osd.play, np.zeros(d), None
            for t in range(1, T + 1):
                w = x + rng.random() * play
                x = x + play
                wsum += w
                if t == 1:
                    leaf = self._checkpoint(problem, w, block[:B1], mode, m, d, delta, rng) / B1
                else:
                    rows = block[B1 + (t - 2) * B2:B1 + (t - 1) * B2]
                    draw = draw_directions(mode, rng, len(rows), m, d)
                    total, _ = problem.diff_sum(w, w_prev, draw, delta, rows=rows, symmetric=symmetric,
                                                max_distance=2.0 * D)
                    leaf = total / B2
                noisy = tree.append(np.where(np.isfinite(leaf), leaf, 0.0))
                play = osd.update(noisy)
                w_prev = w
            averages.append(wsum / T)
            event = tree.privacy_event(s_max)
            problem.report((k + 1) * T, K * T)
        theta = select_output(self._output(), averages, x, rng)
        schedule = {"n_inner": T, "n_epochs": K, "checkpoint_batch": B1, "diff_batch": B2, "step_radius": D,
                    "directions": mode, "n_directions": m, "smoothing": delta, "symmetric": symmetric,
                    "noise_std": sigma, "tree_layers": depth, "sensitivity_max": s_max,
                    "n_steps": K * T, "n_rows_used": layout.n_rows_used, "output": self._output(),
                    "epoch_averages": np.array(averages), "n_function_evals": int(problem.n_evaluations[0])}
        return SolverResult(theta, Parallel([event]), schedule)

    @staticmethod
    def _checkpoint(problem, w, rows, mode, m, d, delta, rng):
        """Sum of the clipped gradient estimates at ``w`` over ``rows`` (per-row directions in chunks)."""
        if mode != "iid":
            return problem.grad_sum(w, draw_directions(mode, rng, len(rows), m, d), delta, rows=rows)[0]
        chunk = max(1, _DRAW_CHUNK // (m * d))
        total = np.zeros(d)
        for start in range(0, len(rows), chunk):
            part = rows[start:start + chunk]
            total += problem.grad_sum(w, draw_directions(mode, rng, len(part), m, d), delta, rows=part)[0]
        return total
