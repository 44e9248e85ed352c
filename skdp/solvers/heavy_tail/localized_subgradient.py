"""Localized noisy clipped subgradient method (Lowy and Razaviyayn, Algorithms 2 and 3).

'localized_subgradient' is the non-smooth DP-SCO method of Lowy and Razaviyayn:

* Algorithm 2 (:func:`~skdp.solvers.descent.noisy_clipped_descent`): full-batch steps on one
  batch of ``m`` rows; every step releases the mean of the per-sample loss
  gradients, each clipped to norm ``C``, plus Gaussian noise, then moves along
  it plus the regulariser ``lambda (w - w_anchor)`` and the ridge gradient
  (both added after the noise: they are the same on neighbouring datasets)
  and projects onto the phase's domain;
* Algorithm 3: phases ``i = 1..l`` on disjoint batches ``n_i = n / 2^i`` taken
  from a data-independent permutation, steps ``eta_i = eta / 4^i``,
  regularisation ``lambda_i = 1 / (eta_i n_i^p)`` with ``p = 1`` towards the
  previous phase's output, over ``Ball(0, R) ∩ Ball(w_{i-1}, D_i)``;
* the strongly convex wrapper (their section 2.4, an FKT-style restart):
  Algorithm 3 runs ``M = ceil(log2 log2 n)`` times on disjoint chunks of
  doubling sizes, each call starting from the previous output, inside the
  distance bound ``D_j = sqrt(2 Delta_j / mu_sc)`` of the recursion of section
  2.4 with ``a = 1`` (``mu_sc`` the smallest ridge weight; with an unpenalised
  intercept it is 0 and the bound is infinite).

Privacy. A step on a batch of ``n_i`` rows releases a clipped mean of
replace-one sensitivity ``2 C_i / n_i`` with noise ``sqrt(T_i) 2 C_i / (n_i mu)``,
so the ``T_i`` steps of a phase are exactly mu-GDP for the rows of that batch.
All batches (over phases and wrapper chunks) are disjoint, so they compose in
parallel: the whole run is mu-GDP, after one exponential-mechanism quantile when
the clip threshold is chosen privately. Everything else (regulariser, ridge,
projections, averaging, restarts, distance bounds) is post-processing of the
released means and of public inputs. Batch sizes and step counts depend on
public inputs only (``n``, ``mu``, the schedule), so
:meth:`LocalizedSubgradient.plan` is exact before any data are read; a cap on
gradient evaluations lowers the step counts and the noise is calibrated to the
steps actually run: a cap changes accuracy, never privacy.

Localisation radius. The paper's ``D_i = 2 L_f / lambda_i`` uses a worst-case
Lipschitz constant, which heavy-tailed data do not have. What the solver
minimises is the clipped objective: for a linear model, clipping a row's
gradient at ``C`` is taking the gradient of a convex, ``C``-Lipschitz (Huberised)
version of its loss, so phase ``i`` minimises an objective that is Lipschitz
with ``L_i = C_i + max(penalty) R`` over ``Ball(0, R)``, plus the regulariser. By
strong convexity of the regulariser its minimiser lies within
``2 L_i / lambda_i`` of ``w_{i-1}``; that public bound is ``D_i``, so the
localisation never excludes the point the phase is trying to reach.

Schedules.

``"theory"``: the paper's formulas with this moment convention: the user's
``(k, G_k)`` means ``E sup ||grad||^k <= G_k^k`` and
Algorithm 3 uses internal order ``k' = k / 2`` with ``r~_{2k'} = G_k`` (so
``k >= 4``). Batches ``2^(l-1), ..., 1`` after discarding rows down to
``n = 2^l``, ``T_i = ceil(n_i ln n)``,
``C_i = G_k (eps n_i / sqrt(d ln n))^(1/k')`` with ``eps = sqrt(2 rho) = mu``,
the paper's simplified step (its section 2.3) with ``D = 2 R`` (or the wrapper's
``2 D_j``), the paper's explicit steps and the last iterate of the last phase.
It costs about ``n^2 ln n / 3`` gradient evaluations.

``"practical"`` (default), for standardised data (rows of norm about
``sqrt(p) unit``, labels of scale 1). The step counts are capped (``max_steps``
for phase 1, 200 by default), so the paper's ``lambda_i = 1 / (eta_i n_i)``,
which presumes ``T_i ~ n_i ln n`` steps, would leave each phase far from its
minimiser. The practical schedule keeps the paper's geometry (batches halve,
``eta_i`` falls by 4, ``lambda_i`` is proportional to ``1 / (eta_i n_i)``, so it
grows by 8 per phase, and ``T_i`` is proportional to ``n_i``) and ties the
constants to the phase-1 "time" ``eta_1 T_1`` instead of to ``n_1``:

* ``eta_1 T_1 = tau sqrt(p) / (unit min(C, sqrt(p) unit))``: the clipped mean
  gradient has norm at most about ``min(C, sqrt(p) unit)``, so this is the time
  needed to travel ``tau`` label units from 0 (for small clips the clipped
  objective is flat and the walk must be longer). ``eta_1`` is also at most
  ``1 / (unit^2 s + max(penalty))`` (``s`` the loss smoothness, 1 for
  non-smooth losses), the stable step of a standardised smooth problem;
* ``tau`` (``phase_time="auto"``) falls with the public noise level
  ``nu = 2 C sqrt(p) / (n_1 mu min(C, sqrt(p) unit))`` (the relative noise of
  the phase-1 mean gradient): ``tau = clip(3 ln(1 / nu) - 5, 2, 32)``. For a
  non-smooth loss a noisy iterate wanders beyond the kink region, where the
  restoring force no longer grows with the distance, and the error of the
  averaged iterate grows linearly with the time spent there; a long phase is
  only worth it when the noise is small (then the bias of stopping early
  dominates, and it decays exponentially in ``tau``);
* ``lambda_i = lambda (eta_1 n_1) / (eta_i n_i)`` for ``i >= 2`` (the paper's
  ``1 / (eta_i n_i)`` up to a constant, so ``lambda_2 = 8 lambda``) with
  ``lambda = regularization / t_unit``, where ``t_unit = sqrt(p) / (unit
  min(C, sqrt(p) unit))`` is the time to travel one label unit, so ``lambda``
  is a guess of the curvature of the clipped objective (``regularization =
  1/4``): phase 2 weighs its batch at most about as much as the previous
  output, and the later phases, whose ``lambda_i`` grow by 8 while their
  batches halve, make corrections that shrink geometrically, so their small,
  noisy batches barely move the estimate. Phase 1 is not regularised
  (``lambda_1 = 0``, ``D_1`` infinite): its anchor is the arbitrary start point
  0, and shrinking towards it is pure bias (in quantile regression it was most
  of the error: the intercept must travel to the quantile);
* the regulariser is applied by its exact proximal step (stable for every
  ``eta_i lambda_i``) and each phase returns the average of the last half of
  its iterates (post-processing: the privacy noise averages out);
* at most 6 phases, none smaller than 8 rows; the leftover rows (of the phases
  not run and of rounding) go to phase 1;
* the clip threshold is public for losses with a bounded derivative (absolute,
  quantile: ``max |loss'| row_bound``, so clipping never binds and never biases
  the fitted quantile) and otherwise (squared, Huber, callables) a private
  quantile at level ``clip_quantile = 0.2`` of the per-sample gradient norms at
  0, in ``[1e-6, 10] row_bound`` on a log scale. A low level makes the clipped
  squared loss behave like a (consistent, for symmetric noise) absolute loss on
  the large residuals, with much less noise than a clip at the typical norm;
* the wrapper's chunks double in size and use every row; since a chunk whose
  phase-1 noise swamps the signal returns a point the later calls cannot walk
  back from, the first chunks are merged into the next until the first has the
  public noise level ``2 sqrt(p) / (N_1 / 2 mu) <= 0.01`` (possibly down to a
  single chunk: Algorithm 3 itself).

References
----------
A. Lowy and M. Razaviyayn, "Private Stochastic Optimization With Large
Worst-Case Lipschitz Parameter", 2022, arXiv:2209.07403 (Algorithms 2 and 3,
section 2.4).
"""

import math
import warnings
from dataclasses import dataclass

import numpy as np

from ..._validation import Options
from ...accounting import ExponentialMechanismRelease, GaussianRelease, Parallel, Repeated, Sequential
from .._contract import (
    FRACTION,
    POSITIVE,
    POSITIVE_INT,
    PUBLIC_CLIP,
    SCHEDULE,
    Capabilities,
    Solver,
    SolverResult,
    optional,
    register_solver,
)
from ..clip_threshold import private_clip, public_derivative_bound
from ..descent import noisy_clipped_descent
from ..geometry import project_balls
from ..moments import VALID_MOMENTS, MomentBounds

__all__ = ["LocalizedSubgradient"]

_PRACTICAL_STEPS = 200
_PRACTICAL_MAX_PHASES = 6
_PRACTICAL_MIN_BATCH = 8
_WRAPPER_NOISE = 0.01
# Phase-1 time of the practical schedule: clip(slope * ln(1 / nu) - offset, min, max).
_TAU_MIN, _TAU_MAX, _TAU_SLOPE, _TAU_OFFSET = 2.0, 32.0, 3.0, 5.0
# The theory schedule warns when a run needs more gradient evaluations than this.
_EXPENSIVE = 1e8
# Clip threshold standing in for "no clipping" when mu = inf (the theory clip grows with eps).
_NO_CLIP = 1e150


@register_solver
@dataclass(frozen=True)
class LocalizedSubgradient(Solver):
    """Localized noisy clipped subgradient method of Lowy and Razaviyayn (see module docstring).

    Parameters
    ----------
    schedule : {"practical", "theory"}
    max_grad_evals : int or None
        Cap on the total number of per-sample gradient evaluations. The steps of
        every phase are cut to a common maximum ``T*``, the largest for which the
        run fits (at least one step per phase); the noise follows the steps run.
    moments : MomentBounds
        ``k``, ``G_k`` and ``G_2`` (``E sup_W ||grad f||^k <= G_k^k``): required by the
        theory schedule (``k >= 4``), unused by the practical one.
    clip : float or None
        Public clip threshold; None uses the schedule's rule.
    strongly_convex : {"auto", True, False}
        Run the strongly convex wrapper; "auto" runs it when the problem has a
        public ridge on every feature coefficient (``ProblemSpec.ridge``).
    max_steps : int or None
        Steps of phase 1 (practical; later phases get proportionally fewer, at
        least ``min_steps``) or cap on the steps of every phase (theory). None:
        200 (practical), no cap (theory).
    lipschitz_bound : float or None
        Public worst-case Lipschitz bound ``L_f`` (theory step size only).
    phase_time : "auto" or float
        ``tau`` of the practical schedule (label units travelled in phase 1).
    regularization : float
        ``lambda_2 t_unit / 8`` of the practical schedule (module docstring).
    clip_quantile : float
        Level of the private clip quantile (practical schedule).
    min_steps : int
        Fewest steps of a practical phase.
    """

    schedule: str = "practical"
    max_grad_evals: int = None
    moments: MomentBounds = MomentBounds()
    clip: float = None
    strongly_convex: object = "auto"
    max_steps: int = None
    lipschitz_bound: float = None
    phase_time: object = "auto"
    regularization: float = 0.25
    clip_quantile: float = 0.2
    min_steps: int = 10

    name = "localized_subgradient"
    family = "heavy_tail"
    capabilities = Capabilities(callable_losses=True, public_clip=True)
    _parameter_constraints = {
        "schedule": [SCHEDULE],
        "max_grad_evals": optional(POSITIVE_INT),
        "moments": [VALID_MOMENTS],
        "clip": optional(PUBLIC_CLIP),
        "strongly_convex": [Options({"auto"}), "boolean"],
        "max_steps": optional(POSITIVE_INT),
        "lipschitz_bound": optional(POSITIVE),
        "phase_time": [Options({"auto"}), POSITIVE],
        "regularization": [POSITIVE],
        "clip_quantile": [FRACTION],
        "min_steps": [POSITIVE_INT],
    }

    def __post_init__(self):
        if self.schedule not in ("practical", "theory"):
            raise ValueError(f"schedule must be 'practical' or 'theory'; got {self.schedule!r}.")
        if self.strongly_convex not in ("auto", True, False):
            raise ValueError(f"strongly_convex must be 'auto', True or False; got {self.strongly_convex!r}.")

    @classmethod
    def from_options(cls, options):
        return cls(schedule=options.schedule, max_steps=options.max_iter,
                   moments=MomentBounds.from_options(options))

    # -- planning (public inputs only) ------------------------------------------------------
    def check(self, spec):
        """Every convex loss is accepted (per-sample gradients are clipped); theory needs k >= 4."""
        super().check(spec)
        if self.schedule == "theory":
            # Algorithm 3 runs with internal moment order k/2, whose guarantee needs k >= 4.
            self.moments.require(self.name, min_order=4)

    def n_quantiles(self, spec):
        """Number of private quantiles: 1 for the practical clip of an unbounded derivative, else 0."""
        if (self.clip is not None or self.schedule == "theory"
                or public_derivative_bound(spec.loss) is not None):
            return 0
        return 1

    def uses_wrapper(self, spec):
        """Whether the strongly convex wrapper runs (a public decision)."""
        return spec.ridge if self.strongly_convex == "auto" else bool(self.strongly_convex)

    def _chunk_sizes(self, spec, mu):
        """Sizes of the wrapper's disjoint chunks (one chunk of ``n`` rows without it)."""
        n = spec.n_samples
        if not self.uses_wrapper(spec) or n < 4:
            return [n]
        log_n = math.log2(n)
        M = max(1, int(math.ceil(math.log2(log_n))))
        if self.schedule == "theory":
            # N_j = 2^(j - 2) n / log2 n rounded down to a power of two (sizes double, sum < n).
            sizes = [2.0 ** (j - 2) * n / log_n for j in range(1, M + 1)]
            return [2 ** int(math.floor(math.log2(s))) for s in sizes if s >= 1]
        sizes = [n * 2 ** (j - 1) // (2**M - 1) for j in range(1, M + 1)]
        sizes[-1] += n - sum(sizes)
        sizes = [s for s in sizes if s > 0]
        p = spec.n_coef
        while len(sizes) > 1 and 2.0 * math.sqrt(p) / (max(sizes[0] // 2, 1) * mu) > _WRAPPER_NOISE:
            sizes = [sizes[0] + sizes[1]] + sizes[2:]
        return sizes

    def _phase_sizes(self, m):
        """Batch sizes of Algorithm 3 on ``m`` rows."""
        if m < 1:
            return []
        if self.schedule == "theory":
            l = int(math.floor(math.log2(m)))  # discard rows down to 2^l; batches 2^(l-1), ..., 1
            return [2 ** (l - i) for i in range(1, l + 1)]
        sizes = []
        i = 1
        while i <= _PRACTICAL_MAX_PHASES and m // 2**i >= _PRACTICAL_MIN_BATCH:
            sizes.append(m // 2**i)
            i += 1
        if not sizes:
            return [m]
        sizes[0] += m - sum(sizes)
        return sizes

    def _raw_steps(self, n_i, m, n_1):
        if self.schedule == "theory":
            T = int(math.ceil(n_i * math.log(max(m, 2))))  # T_i = n_i^p ln n with p = 1
            return max(1, T if self.max_steps is None else min(T, int(self.max_steps)))
        T = int(self.max_steps if self.max_steps is not None else _PRACTICAL_STEPS)
        return max(1, min(T, self.min_steps), int(round(T * n_i / n_1)))

    def layout(self, spec, mu):
        """The public layout at budget ``mu``: a list of chunks, each a list of ``(batch_size, steps)``."""
        chunks = []
        for m in self._chunk_sizes(spec, mu):
            sizes = self._phase_sizes(m)
            chunks.append([(n_i, self._raw_steps(n_i, m, sizes[0])) for n_i in sizes])
        if self.max_grad_evals is not None:
            flat = [phase for chunk in chunks for phase in chunk]

            def cost(cap):
                return sum(n_i * min(T, cap) for n_i, T in flat)

            top = max((T for _, T in flat), default=1)
            if cost(top) > float(self.max_grad_evals):
                lo, hi = 1, top  # the largest common cap T* >= 1 with cost(T*) <= max_grad_evals
                while lo < hi:
                    mid = (lo + hi + 1) // 2
                    if cost(mid) <= float(self.max_grad_evals):
                        lo = mid
                    else:
                        hi = mid - 1
                chunks = [[(n_i, min(T, lo)) for n_i, T in chunk] for chunk in chunks]
        return chunks

    def plan(self, spec, budget):
        """The exact event of a run: a private quantile (if any), then every disjoint batch mu-GDP."""
        mu = budget.mu
        parts = [ExponentialMechanismRelease(budget.quantile_epsilon)] if self.n_quantiles(spec) else []
        blocks = [Repeated(GaussianRelease(1.0, math.sqrt(T) / mu), T)
                  for chunk in self.layout(spec, mu) for _, T in chunk]
        return Sequential(parts + [Parallel(blocks)])

    # -- solving -------------------------------------------------------------------------
    def _theory_constants(self, m, p, mu, diameter):
        """Clip rule and base step of the theory schedule for one call of Algorithm 3 on ``m`` rows."""
        k = self.moments.k / 2.0  # internal order k' = k / 2, with r~_{2k'} = G_k
        G = self.moments.G
        r = self.moments.second
        # Without a public L_f the 1/L_f terms are dropped.
        inv_lf = 1.0 / float(self.lipschitz_bound) if self.lipschitz_bound is not None else math.inf
        log_n = math.log(max(m, 2))
        eps = mu  # the paper's eps = sqrt(2 rho) with rho = mu^2 / 2
        expo = (k - 1.0) / k
        if math.isfinite(eps):
            priv = (eps * m / math.sqrt(p * log_n)) ** expo
            eps_term = (eps / math.sqrt(p)) ** expo / G
        else:
            priv, eps_term = math.inf, math.inf
        eta_b = diameter / math.sqrt(m) * min(1.0 / r, inv_lf, priv / (G * math.sqrt(m)))
        # eta_A with R~ / L replaced by 1 / sqrt(2) (Lemma 9 and section 2.3 of the paper).
        eta_a = diameter * m * m / math.sqrt(2.0) * min(inv_lf, eps_term) * (1.0 / math.sqrt(m) + 1.0 / priv)

        def clip_for(n_i):
            if not math.isfinite(eps):
                return _NO_CLIP
            return G * (eps * n_i / math.sqrt(p * log_n)) ** (1.0 / k)

        return clip_for, min(eta_a, eta_b)

    def _phase_time(self, C, g_ref, n_1, mu, p):
        """``tau`` of the practical schedule (see module docstring)."""
        if self.phase_time != "auto":
            return float(self.phase_time)
        nu = 2.0 * C * math.sqrt(p) / (n_1 * mu * g_ref)
        if nu == 0:
            return _TAU_MAX
        return min(_TAU_MAX, max(_TAU_MIN, _TAU_SLOPE * math.log(1.0 / nu) - _TAU_OFFSET))

    def _distance_bound(self, radius, m, p, mu, mu_sc, G):
        """``D_j = sqrt(2 Delta_j / mu_sc)`` after a call on ``m`` rows (the paper's section 2.4, a = 1).

        ``Delta_j = G D_{j-1} (1 / sqrt(N_j) + (sqrt(d ln N_j) / (eps N_j))^((k'-1)/k'))`` with
        ``G = G_k`` (theory) or the clip threshold (practical) standing for ``R~``.
        """
        k = self.moments.k / 2.0
        priv = (math.sqrt(p * math.log(max(m, 2))) / (mu * m)) ** ((k - 1.0) / k)
        delta = G * radius * (1.0 / math.sqrt(m) + priv)
        return math.sqrt(2.0 * delta / mu_sc)

    def run(self, spec, problem, budget, rng):
        """Run the planned schedule on ``problem``; returns a :class:`SolverResult`."""
        mu, eps_q = budget.mu, budget.quantile_epsilon
        n, p = problem.X.shape
        theory = self.schedule == "theory"
        plan = self.layout(spec, mu)
        evals = sum(n_i * T for chunk in plan for n_i, T in chunk)
        if theory and evals > _EXPENSIVE:
            warnings.warn(f"schedule='theory' runs {evals:.3g} per-sample gradient evaluations (about "
                          "n^2 ln n / 3); set max_grad_evals to cap them.", RuntimeWarning, stacklevel=2)
        events = []
        # The permutation comes first, from public randomness only.
        order = rng.permutation(n)  # data-independent: batches are disjoint blocks of it
        bound = public_derivative_bound(problem.loss)
        if self.clip is not None:
            C = float(self.clip)
        elif theory:
            C = None  # per phase, from the moment bound
        elif bound is not None:
            C = bound * problem.row_bound
        else:
            C, ev = private_clip(problem, self.clip_quantile, eps_q, rng)
            events.append(ev)
        R = problem.radius
        unit2 = problem.unit**2
        pen_max = float(np.max(problem.penalty, initial=0.0))
        wrapper = self.uses_wrapper(spec)
        # Every row's objective is mu_sc-strongly convex; 0 (no distance bound) when a
        # coefficient such as the intercept is not penalised.
        mu_sc = float(np.min(problem.penalty, initial=0.0)) if wrapper else 0.0
        G_sc = self.moments.G if theory else C
        sc_radius = 2.0 * (G_sc + pen_max * R) / mu_sc if mu_sc > 0 else math.inf  # D_0 = 2 L / mu_sc

        used = np.zeros(n, dtype=bool)
        start = 0
        w = np.zeros(p)
        blocks = []
        log = {key: [] for key in ("batch_sizes", "steps_per_phase", "clip_thresholds", "step_sizes",
                                   "regularization", "localization_radii", "chunk_sizes", "phase_times")}
        for chunk in plan:
            if not chunk:
                continue
            m = sum(n_i for n_i, _ in chunk)
            n_1, T_1 = chunk[0]
            center = w.copy()
            outer = [(None, R), (center, sc_radius)]
            if theory:
                clip_for, eta = self._theory_constants(m, p, mu, min(2.0 * R, 2.0 * sc_radius))
            else:
                g_ref = min(C, math.sqrt(p) * problem.unit)
                t_unit = math.sqrt(p) * problem.unit / (g_ref * unit2)  # time to travel one label unit
                tau = self._phase_time(C, g_ref, n_1, mu, p)
                log["phase_times"].append(tau)
                eta_1 = min(tau * t_unit / T_1, 1.0 / (unit2 * problem.loss_smoothness_or_one() + pen_max))
                eta = 4.0 * eta_1
                lam_1 = self.regularization / t_unit
            for i, (n_i, T_i) in enumerate(chunk, start=1):
                rows = order[start:start + n_i]
                start += n_i
                if used[rows].any():  # pragma: no cover - the layout keeps batches disjoint
                    raise RuntimeError("localized_subgradient batches overlap.")
                used[rows] = True
                C_i = clip_for(n_i) if C is None else C
                eta_i = eta / 4.0**i
                if theory:
                    lam_i = 1.0 / (eta_i * n_i)
                else:  # phase 1 is not pulled towards the arbitrary start point (module docstring)
                    lam_i = lam_1 * (eta_1 * n_1) / (eta_i * n_i) if i > 1 else 0.0
                D_i = 2.0 * (C_i + pen_max * R) / lam_i if lam_i > 0 else math.inf
                noise = math.sqrt(T_i) * 2.0 * C_i / (n_i * mu)
                sub = problem.subset(rows)  # one copy per phase keeps the T_i queries contiguous
                balls = outer + [(w, D_i)]
                # Practical: the average of the last half of the iterates; theory: the last one.
                weights = None if theory else [0.0] * (T_i // 2 + 1) + [1.0] * (T_i - T_i // 2)
                w, ev = noisy_clipped_descent(sub, w, clip=C_i, std=noise, steps=[eta_i] * T_i, rng=rng,
                                              anchor=w, lam=lam_i, proximal=not theory,
                                              project=lambda v, balls=balls: project_balls(v, balls),
                                              weights=weights)
                blocks.append(ev)
                for key, value in zip(("batch_sizes", "steps_per_phase", "clip_thresholds", "step_sizes",
                                       "regularization", "localization_radii"),
                                      (n_i, T_i, C_i, eta_i, lam_i, D_i)):
                    log[key].append(value)
            log["chunk_sizes"].append(m)
            if mu_sc > 0:
                sc_radius = self._distance_bound(sc_radius, m, p, mu, mu_sc, G_sc)
        events.append(Parallel(blocks))
        steps = log["steps_per_phase"]
        schedule = {"algorithm": self.name, "schedule": self.schedule, "n_steps": int(sum(steps)),
                    "phases": len(steps), "step_size": log["step_sizes"][0] if steps else 0.0,
                    "strongly_convex": wrapper, "rows_used": int(used.sum()),
                    "grad_evals": int(sum(s * t for s, t in zip(log["batch_sizes"], steps))), **log}
        return SolverResult(w, Sequential(events), schedule)
