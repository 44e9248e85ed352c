"""Localization solvers of Asi, Chadha, Cheng and Duchi (2022) for linear classifiers.

Every release is an output-perturbed, certified, proximally regularised ERM on
its own block of rows (Algorithm 4, LocERM):

    G(W) = mean_{i in block} F_L(W; a_i, y_i) + ||W - c||_F^2 / (eta b) + ridge(W),

minimised over the ball ``B(c, r)``, where ``F_L`` is the Lipschitzian extension
of the loss with bound ``L`` (:mod:`~skdp.solvers.interpolation.problem`; convex
and ``L``-Lipschitz in ``W`` for *every* row, so the data need no bound), and
``c``, ``r``, ``eta``, ``L`` are public or functions of earlier releases.

**Sensitivity.** ``G`` is ``2 / (eta b)``-strongly convex; neighbouring blocks
change it by ``(F_L(.; s) - F_L(.; s')) / b``, which is ``2 L / b``-Lipschitz, so
their exact minimisers are within ``(2 L / b) / (2 / (eta b)) = L eta``. The
solver (:func:`skdp.mechanisms.certified_minimize`) returns a point within
``tol = tau_frac L eta`` of the exact minimiser, fixed in advance, proved by
its certificate or by its public step count (which needs the true smoothness
bound that rows clipped to the public ``row_bound`` give), so the replace-one
L2 sensitivity is ``L eta + 2 tol``. Gaussian noise of standard
deviation ``sensitivity / mu`` makes the release ``mu``-GDP; l2-Laplace noise of
scale ``sensitivity / epsilon`` makes it pure ``epsilon``-DP.

**Nothing raises after the budget is charged.** Every quantity a release
depends on (``L``, ``eta``, the centre, the block size) is public or a function
of earlier releases, and a public rule on those alone decides, before the
block's rows are read, whether the ERM is solved at all
(:meth:`_Run.erm_constants`): when ``L`` or ``eta`` is zero, not finite or
collapses so far that the ERM's ball ``B(c, 2 L eta b)`` is no wider than the
tolerance (a starved scaling can release a row scale of 1e-10; the theory
schedule then drives ``L`` through 1e-87 to 0), the release is the centre
itself, which reads no row and costs nothing. Otherwise the tolerance is at
least :data:`TOL_FLOOR_FACTOR` times the rounding floor of the certificate and
the ERM is solved by :func:`~skdp.mechanisms.certified_minimize` with a true
smoothness bound and a public gradient bound, which never raises: when rounding
keeps the certificate from passing, a number of steps fixed by public constants
guarantees the tolerance (``guaranteed_steps``). Divisions by released values
are total (:func:`~skdp.solvers.arithmetic.total_ratio`), so the paper's
formulas cannot divide by zero.

**Composition.** Every row lies in exactly one release (the blocks are cut from
one data-independent permutation), and every later centre, radius, step and
Lipschitz level depends on public inputs and earlier releases only. Under
replace-one neighbours only the release containing the changed row differs, so
the whole run is as private as one release (adaptive parallel composition): the
full budget goes to every release. The projections are post-processing.

Algorithms (``schedule="theory"`` keeps the paper's constants; ``"practical"``
keeps the functional forms with constants that work at realistic ``n``):

* :class:`EpochGrowth` — Algorithm 5 over Algorithm 4 with the extension
  (Algorithm 1): epochs on disjoint blocks with halving radii ``D_i = 2^-i D_0``.
* :class:`Interpolation` — Algorithm 2 (DLL): blocks of EpochGrowth whose domain
  ``B(x_i, D_{i+1} / 2)`` and Lipschitz level ``L_{i+1} = min(L_i, H D_{i+1})``
  shrink; fast when a common minimiser exists (interpolation).
* :class:`Adaptive` — Algorithm 3: EpochGrowth on the first half, then DLL on the
  second half inside ``B(x_1, D_int / 2)``; the output is projected into that
  ball. It never switches on the data.
* :class:`KappaGrowth` — Algorithm 6 for kappa-growth: radii
  ``D_{i+1} ∝ D_i^{1 / (kappa - 1)}``.

In the practical schedules the domains shrink by a public factor
(``radius_decay``) since the growth constant ``lambda`` is not known; the
theory schedules use the paper's formulas with a public ``growth`` (lambda) and
``beta = 1 / n``; at realistic ``n`` they degenerate (one block, no
localisation; see :attr:`Interpolation.schedule`).
"""

import dataclasses
import math
import numbers
from dataclasses import dataclass

import numpy as np

from ..._validation import Interval
from ...accounting import Parallel
from ...mechanisms import certified_minimize, guaranteed_steps
from .._contract import POSITIVE_INT, SCHEDULE, Capabilities, Solver, SolverResult, register_solver, report_progress
from ..arithmetic import total_ratio
from ..geometry import project_balls
from ..schedules import permuted_blocks
from ._noise import release_vector, solver_event

__all__ = ["EpochGrowth", "Interpolation", "Adaptive", "KappaGrowth"]


# Largest condition number of a block's regularised ERM; a public cap on eta, see _Run.capped_eta.
# At 1e6 a degenerate starved scaling (breast cancer, epsilon 0.1, smoothness 7.7e18) still did not
# certify in 12 minutes; at 1e4 it took 0.5 s, and the cap bound on none of the synthetic or digits
# benchmark fits checked (only on breast cancer, where these methods predict the majority class).
MAX_ERM_CONDITION = 1e4
# The certified tolerance is at least this many times certified_minimize's rounding floor
# (16 eps * condition * (radius + |centre|)): at the floor itself the certificate passes or
# fails on rounding, which then depends on the rows.
TOL_FLOOR_FACTOR = 64.0
# Tolerances and sensitivities below this are treated as degenerate (the centre is released): far
# above the subnormal range, where the noise calibration sensitivity / level would round.
_SMALLEST_TOLERANCE = 1e-250
# Largest public step count of a block ERM (guaranteed_steps); with the condition number capped at
# MAX_ERM_CONDITION it stays below a few thousand at any realistic size, so the cap binds only on
# degenerate constants, which then release the centre.
MAX_GUARANTEED_STEPS = 10**6
_MULTIPLIER = Interval(numbers.Real, 1e-6, 1e6, closed="both")



class _Run:
    """One solver run: the problem, the budget, the generator and the log of public facts."""

    def __init__(self, problem, budget, rng, tau_frac, schedule):
        self.problem = problem
        self.budget = ("pure", budget.pure_epsilon) if budget.pure else ("gaussian", budget.mu)
        self.rng = rng
        self.tau_frac = tau_frac
        self.schedule = schedule
        self.k, self.p = problem.n_outputs, problem.n_coef
        self.dim = self.k * self.p
        self.releases = 0
        self.events = []  # what each release drew; they read disjoint rows (parallel composition)
        self.log = []
        self.capped = 0  # releases whose eta was lowered to bound the ERM's condition number
        self.skipped = 0  # releases that were the centre itself (public rule of erm_constants)
        # The solvers' run() gives rows clipped to a finite public bound (see _Localized.run), so this
        # is a true bound of every row's smoothness; the factor covers clip_rows' last-bit rounding.
        bound = float(problem.row_bound) * (1.0 + 1e-12)
        self.smooth_row = problem.outputs.smoothness * bound * bound

    # -- the paper's statistical and privacy terms (public) --------------------------------
    def noise_factor(self):
        """``d_eff / epsilon``: ``sqrt(dim) / mu`` (Gaussian; the paper's ``sqrt(d ln(1/delta)) / epsilon``
        up to constants) or ``dim / epsilon`` (pure)."""
        kind, level = self.budget
        if math.isinf(level):
            return 0.0
        return (math.sqrt(self.dim) if kind == "gaussian" else self.dim) / level

    def stat_privacy(self, N, beta):
        """The paper's ``A(N, beta)`` and ``P(N, beta)``."""
        N = max(N, 3)
        lb = math.log(1.0 / beta)
        A = math.sqrt(lb) * math.log(N) ** 1.5 / math.sqrt(N)
        P = self.noise_factor() * lb * math.log(N) / N
        return A, P

    # -- Algorithm 4's release ----------------------------------------------------------------
    def erm_release(self, rows, L, center, eta):
        """The certified regularised ERM on ``rows`` plus noise (see the module docstring)."""
        eta = self.capped_eta(len(rows), eta)
        x, sensitivity = self.certified_erm(self.problem, rows, L, center, eta)
        noisy, event = release_vector(x, sensitivity, self.budget, self.rng)
        self.events.append(event)
        self.releases += 1
        self.skipped += sensitivity == 0.0
        self.log.append({"rows": len(rows), "lipschitz": L, "eta": eta, "sensitivity": sensitivity})
        report_progress(self.releases, None, eta)  # eta: public rule on public values and earlier releases
        return noisy

    def capped_eta(self, b, eta):
        """``eta`` lowered so that the block's ERM has condition number at most ``MAX_ERM_CONDITION``.

        The ERM's strong convexity is ``2 / (eta b)`` and its smoothness that plus the
        public row smoothness and ridge, so its condition number is
        ``1 + (smooth_row + ridge) eta b / 2``; the certified solver needs about the
        square root of it in iterations. Raw tables under a public clip (breast
        cancer at epsilon = 0.1) reached 3.5e9 and one fit took 100 s. A smaller
        ``eta`` only regularises the block more towards its (released) centre; the
        sensitivity ``L eta + 2 tol`` is computed from the ``eta`` actually used, and
        the cap reads public quantities only.
        """
        curvature = self.smooth_row + self.problem.max_penalty  # the ridge is the same for every block
        if not math.isfinite(curvature):
            return 0.0  # no finite smoothness: erm_constants releases the centre
        if curvature <= 0 or b < 1:
            return eta
        cap = 2.0 * (MAX_ERM_CONDITION - 1.0) / (b * curvature)
        if eta > cap:
            self.capped += 1
            return cap
        return eta

    def erm_constants(self, b, L, center, eta):
        """The block ERM's constants, or None when the public rule releases the centre instead.

        Reads only public values and earlier releases (the block size ``b``, ``L``,
        ``eta``, the centre, the public row smoothness and ridge), never the rows.
        Returns ``(strong_convexity, smoothness, radius, tol, gradient_bound)``:
        the objective is ``strong``-strongly convex and ``smoothness``-smooth (rows
        are clipped to the public bound, and the extension keeps the loss's
        smoothness), its minimiser over ``B(c, radius)`` is the release's target,
        and its gradient at the centre is at most ``L`` (the extended losses) plus
        the ridge's ``max_penalty |c|`` (the proximal term vanishes there). None
        when a constant is not a finite positive number, when the objective could
        overflow on the ball, when the tolerance or the sensitivity would leave
        the normal floating-point range (a subnormal sensitivity rounds the noise
        calibration), or when ``radius <= tol``: the centre is then already within
        ``tol`` of the minimiser.
        """
        if b < 1 or not (0.0 < L < math.inf) or not (0.0 < eta < math.inf):
            return None
        strong = 2.0 / (eta * b)
        radius = 2.0 * L * eta * b  # the minimiser is within L eta b / 2 of the centre
        smoothness = self.smooth_row + strong + self.problem.max_penalty
        c = float(np.linalg.norm(center))
        reach = radius + c
        values = (strong, radius, smoothness, c, smoothness * reach * reach, L * eta)
        if not all(math.isfinite(v) for v in values) or strong <= 0 or radius <= 0:
            return None
        # The tolerance is fixed before solving, from public inputs and earlier releases only
        # (never from what the solver reaches): tau_frac L eta, raised to a margin above the
        # floor where floating point decides the certificate.
        floor = 16.0 * np.finfo(float).eps * (smoothness / strong) * reach
        tol = max(self.tau_frac * L * eta, TOL_FLOOR_FACTOR * floor)
        if radius <= tol or tol < _SMALLEST_TOLERANCE or L * eta < _SMALLEST_TOLERANCE:
            return None
        gradient_bound = L + self.problem.max_penalty * c
        if not guaranteed_steps(strong, smoothness, radius, gradient_bound, tol) <= MAX_GUARANTEED_STEPS:
            return None
        return strong, smoothness, radius, tol, gradient_bound

    def certified_erm(self, problem, rows, L, center, eta):
        """The certified minimiser of the block's objective and its replace-one L2 sensitivity.

        ``(center, 0)`` when :meth:`erm_constants` says so: the centre is an earlier
        release, the rows are not read, and the release costs nothing.
        """
        constants = self.erm_constants(len(rows), L, center, eta)
        if constants is None:
            return np.array(center, dtype=float), 0.0
        strong, smoothness, radius, tol, gradient_bound = constants
        sub = problem.subset(rows)
        b = len(rows)
        k, p = self.k, self.p
        C = center.reshape(k, p)
        with np.errstate(divide="ignore"):
            norms = sub.row_norms()
            slope = np.where(norms > 0, L / norms, np.inf)

        def fun_and_grad(x):
            W = x.reshape(k, p)
            value, grad = sub.mean_loss_and_gradient(W, slope)
            ridge_value, ridge_grad = sub.penalty_value_and_gradient(W)
            D = W - C
            value += float((D * D).sum()) / (eta * b) + ridge_value
            return value, (grad + 2.0 * D / (eta * b) + ridge_grad).ravel()

        solution = certified_minimize(fun_and_grad, center, strong_convexity=strong, smoothness=smoothness,
                                      tol=tol, center=center, radius=radius, gradient_bound=gradient_bound)
        return solution.x, L * eta + 2.0 * tol

    # -- Algorithm 4 (LocERM) -------------------------------------------------------------------
    def locerm(self, rows, domain, x0, eta, L, n_phases):
        N = len(rows)
        k_phases = max(1, min(n_phases, N))
        b = N // k_phases
        c = project_balls(x0, domain)
        for j in range(1, k_phases + 1):
            if self.schedule == "theory":
                eta_j = eta * 16.0 ** (-j)  # 2^(-4j)
            else:
                eta_j = eta * 4.0 ** (-(j - 1))
            x = self.erm_release(rows[(j - 1) * b:j * b], L, c, eta_j)
            c = project_balls(x, domain)  # post-processing
        return c

    # -- Algorithm 5 (EpochGrowth) over the extension (Algorithm 1) -----------------------------
    def epoch_growth(self, rows, domain, x0, D0, L, n_epochs, n_phases, c_eta, kappa_low=2.0):
        N = len(rows)
        beta = 1.0 / (N + self.dim)
        if self.schedule == "theory":
            T5 = max(1, math.ceil(2.0 * math.log(max(N, 2)) / (kappa_low - 1.0)))
            while T5 > 1 and N // T5 < 2:
                T5 -= 1
            n0 = N // T5
            n_phases = max(1, math.ceil(math.log(max(n0, 2))))
            lb = math.log(1.0 / beta)
            nf = self.noise_factor()
            eta0 = total_ratio(D0, 2.0 * L) * min(1.0 / math.sqrt(max(n0, 3) * math.log(max(n0, 3)) * lb),
                                             1.0 / (nf * lb) if nf > 0 else math.inf)
        else:
            T5 = max(1, min(n_epochs, N))
            n0 = N // T5
        x = x0
        for i in range(T5):
            D_i = D0 * 2.0 ** (-i)
            block = rows[i * n0:(i + 1) * n0]
            epoch_domain = list(domain)
            if i > 0:
                epoch_domain.append((project_balls(x, domain), D_i))
            if self.schedule == "theory":
                eta_i = eta0 * 2.0 ** (-i)
            else:
                b = max(1, n0 // max(1, min(n_phases, n0)))
                eta_i = total_ratio(c_eta * D_i, L * b)
            x = self.locerm(block, epoch_domain, x, eta_i, L, n_phases)
        return x

    def result(self, coef, name, extra):
        schedule = {"algorithm": name, "n_steps": self.releases, "releases": self.releases,
                    "lipschitz": [e["lipschitz"] for e in self.log], "block_rows": [e["rows"] for e in self.log],
                    "eta": [e["eta"] for e in self.log], "capped_steps": self.capped,
                    "centre_releases": self.skipped}
        schedule.update(extra)
        return SolverResult(coef.reshape(self.k, self.p), Parallel(self.events), schedule)


@dataclass(frozen=True)
class _Localized(Solver):
    """Shared configuration of the localization solvers.

    Parameters
    ----------
    lipschitz : float, default=1.0
        ``L`` as a multiple of the released typical row norm.
    c_eta : float, default=0.5
        Practical step: ``eta = c_eta D / (L b)`` lets the first ERM of an epoch
        just reach the edge of its ball.
    n_epochs, n_phases : int
        Practical EpochGrowth layout.
    radius_decay : float, default=0.5
        Practical shrink factor of the domains (lambda unknown).
    growth : float, default=1.0
        Public growth constant lambda (standardised units) used by the theory schedules.
    tau_frac : float, default=0.1
        Certified tolerance ``tau_frac L eta`` of each ERM.
    schedule : {"practical", "theory"}
    """

    family = "interpolation"
    # Rows are clipped to the released row bound: the sensitivity's Lipschitz part does not need
    # it (the extension bounds every row's gradient), but the certified ERM's guarantee does (its
    # public step count rests on a true smoothness bound), and its iteration count grows with the
    # largest row's smoothness, which an unbounded outlier would make arbitrarily large.
    capabilities = Capabilities(pure_dp=True, matrix_penalty=True)
    lipschitz: float = 1.0
    c_eta: float = 0.5
    n_epochs: int = 2
    n_phases: int = 1
    radius_decay: float = 0.5
    growth: float = 1.0
    tau_frac: float = 0.1
    schedule: str = "practical"

    # Multipliers within [1e-6, 1e6]: outside, the paper's formulas leave the floating-point range
    # (a Lipschitz level of 1e-163 underflowed a tolerance to 0, a growth of 1e-160 overflowed).
    _parameter_constraints = {
        "lipschitz": [_MULTIPLIER],
        "c_eta": [_MULTIPLIER],
        "n_epochs": [POSITIVE_INT],
        "n_phases": [POSITIVE_INT],
        "radius_decay": [Interval(numbers.Real, 0, 1, closed="right")],
        "growth": [_MULTIPLIER],
        "tau_frac": [_MULTIPLIER],
        "schedule": [SCHEDULE],
    }

    @classmethod
    def from_options(cls, options):
        return cls(schedule=options.schedule)

    def check(self, spec):
        super().check(spec)
        if getattr(spec.loss, "name", None) in ("logistic", "softmax"):
            raise ValueError(
                f"algorithm={self.name!r} needs a loss with a common minimiser on separable data (its "
                "localisation and its privacy argument use the loss's Lipschitzian extension); the "
                f"{spec.loss.name} loss has none. Use loss='squared_hinge', 'smoothed_hinge' or "
                "'modified_huber', or algorithm='clipped_gd'.")

    def plan(self, spec, budget):
        # Every row is in exactly one release, each calibrated to the full budget.
        return solver_event(("pure", budget.pure_epsilon) if budget.pure else ("gaussian", budget.mu))

    def _setup(self, problem, budget, rng):
        run = _Run(problem, budget, rng, self.tau_frac, self.schedule)
        L = self.lipschitz * problem.row_scale
        if not 0.0 < L < math.inf:
            L = 0.0  # a degenerate released row scale: every release is its centre (public rule)
        R = problem.radius
        x0 = np.zeros(run.dim)
        return run, L, R, x0

    def run(self, spec, problem, budget, rng):
        if problem.weights is not None:
            raise ValueError(f"algorithm={self.name!r} does not take row weights (class_weight): its "
                             "sensitivity argument is for the unweighted mean. Nothing was released.")
        # The certified ERMs need a true smoothness bound, hence rows clipped to a finite public bound
        # (the estimator always passes one; a direct caller without one is refused here).
        if not problem.rows_clipped or not math.isfinite(problem.row_bound):
            problem = _rows_clipped_to_bound(problem)
        return self._solve(problem, budget, rng)


def _rows_clipped_to_bound(problem):
    """The problem with every row scaled down to norm at most its public ``row_bound``.

    The estimator always passes clipped rows. A direct caller may not: the
    certified ERM's guarantee rests on a true smoothness bound (without one its
    public step count proves nothing), and one unbounded row would make its
    iteration count and floating-point range depend on that row (a run time set
    by one person, or an overflow). Scaling rows to a public bound is a
    per-record map, so it changes nothing in the privacy argument.
    """
    if not math.isfinite(problem.row_bound) or problem.row_bound <= 0:
        raise ValueError("The localization solvers need rows bounded by a public row_bound: pass a finite "
                         "row_bound (rows are then scaled down to it) or rows already clipped to it. "
                         "Nothing was released.")
    X = np.asarray(problem.X, dtype=float)
    # A row with a non-finite entry becomes 0 (a per-record rule, as in clip_rows); norms are
    # taken of rows divided by their largest entry, so no row above 1e154 overflows to a
    # zero scaling factor.
    X = np.where(np.isfinite(X).all(axis=1)[:, None], X, 0.0)
    peak = np.abs(X).max(axis=1, initial=0.0)
    unit = X / np.where(peak > 0, peak, 1.0)[:, None]
    unit_norm = np.sqrt(np.einsum("ij,ij->i", unit, unit))
    length = np.minimum(peak, problem.row_bound / np.maximum(unit_norm, 1e-300))
    return dataclasses.replace(problem, X=unit * length[:, None], rows_clipped=True)


@register_solver
@dataclass(frozen=True)
class EpochGrowth(_Localized):
    """Algorithm 5 (EpochGrowth) over LocERM with the Lipschitzian extension (the paper's baseline)."""

    name = "epoch_growth"

    def _solve(self, problem, budget, rng):
        run, L, R, x0 = self._setup(problem, budget, rng)
        rows = permuted_blocks(problem.n_samples, [problem.n_samples], rng)[0]
        x = run.epoch_growth(rows, [(None, R)], x0, 2.0 * R, L, self.n_epochs, self.n_phases, self.c_eta)
        return run.result(x, self.name, {"schedule": self.schedule})


def _dll(run, rows, domain, x0, D1, L1, n_blocks, solver, H):
    """Algorithm 2 (DLL) on ``rows`` inside ``domain``; returns the last point and the radii used."""
    N = len(rows)
    T = max(1, min(n_blocks, N))
    m = N // T
    x, D, L = x0, D1, L1
    dom = list(domain)
    radii, levels = [], []
    for i in range(T):
        x = run.epoch_growth(rows[i * m:(i + 1) * m], dom, x, D, L, 1 if run.schedule == "practical" else None,
                             solver.n_phases, solver.c_eta)
        if run.schedule == "theory":
            A, P = run.stat_privacy(m, 1.0 / (T * (m + run.dim)))
            D_next = 256.0 * (L / solver.growth) * max(A, P)
        else:
            D_next = solver.radius_decay * D
        D_next = min(D_next, D)  # intersecting with the previous domain is harmless (X* lies in both)
        L = min(L, H * D_next)
        D = D_next
        dom = list(domain) + [(project_balls(x, domain), D / 2.0)]
        radii.append(D)
        levels.append(L)
    return x, radii, levels


def _theory_blocks(run, N, solver):
    """Theorem 2's block size ``m`` and ``T = floor(N / m)`` (at least 1)."""
    lam, H = solver.growth, run.problem.outputs.smoothness * run.problem.row_scale * run.problem.row_scale
    ln = math.log(max(N, 3))
    beta = 1.0 / (N + run.dim)
    nf = run.noise_factor()
    ratio = H / lam
    m = ln * ln * math.log(1.0 / beta) * max(65536.0 * ratio * ratio, 256.0 * ratio * nf / math.sqrt(ln))
    if not m >= 1.0:  # a degenerate released row scale (H = 0 or not a number): blocks of one row
        return N, m
    return max(1, int(N // m)), m


@register_solver
@dataclass(frozen=True)
class Interpolation(_Localized):
    """Algorithm 2 (DLL): domain and Lipschitz localisation over blocks of EpochGrowth."""

    name = "interpolation"

    def _solve(self, problem, budget, rng):
        run, L, R, x0 = self._setup(problem, budget, rng)
        n = problem.n_samples
        rows = permuted_blocks(n, [n], rng)[0]
        H = problem.outputs.smoothness * problem.row_bound * problem.row_bound
        if self.schedule == "theory":
            T, m = _theory_blocks(run, n, self)
            extra = {"theory_block_rows": m, "fell_back_to_one_block": n < m}
        else:
            T, extra = self.n_epochs, {}
        x, radii, levels = _dll(run, rows, [(None, R)], x0, 2.0 * R, L, T, self, H)
        extra.update({"blocks": T, "radii": radii, "lipschitz_levels": levels, "schedule": self.schedule})
        return run.result(x, self.name, extra)


@register_solver
@dataclass(frozen=True)
class Adaptive(_Localized):
    """Algorithm 3 (Adapt): EpochGrowth on half the rows, then DLL inside the first stage's ball.

    Parameters
    ----------
    interpolation_radius : float, default=0.5
        Practical ``D_int`` as a fraction of the domain's diameter ``2 R``.
    """

    name = "adaptive"
    interpolation_radius: float = 0.5
    _parameter_constraints = {**_Localized._parameter_constraints, "interpolation_radius": [_MULTIPLIER]}

    def _solve(self, problem, budget, rng):
        run, L, R, x0 = self._setup(problem, budget, rng)
        n = problem.n_samples
        first, second = permuted_blocks(n, [n // 2, n - n // 2], rng)
        domain = [(None, R)]
        x1 = run.epoch_growth(first, domain, x0, 2.0 * R, L, self.n_epochs, self.n_phases, self.c_eta)
        if self.schedule == "theory":
            A, P = run.stat_privacy(len(first), 1.0 / (2 * (len(first) + run.dim)))
            D_int = 128.0 * (L / self.growth) * (A + P)
            T, _ = _theory_blocks(run, len(second), self)
        else:
            D_int = self.interpolation_radius * 2.0 * R
            T = self.n_epochs
        x1 = project_balls(x1, domain)
        inner = domain + [(x1, D_int / 2.0)]
        H = problem.outputs.smoothness * problem.row_bound * problem.row_bound
        x, radii, levels = _dll(run, second, inner, x1, D_int, L, T, self, H)
        x = project_balls(x, inner)  # the guarantee needs the output inside X_int (post-processing)
        return run.result(x, self.name, {"interpolation_radius": D_int, "blocks": T, "radii": radii,
                                         "lipschitz_levels": levels, "schedule": self.schedule})


@register_solver
@dataclass(frozen=True)
class KappaGrowth(_Localized):
    """Algorithm 6: epochs of EpochGrowth with radii shrinking as for kappa-growth (kappa > 2).

    Parameters
    ----------
    growth_exponent : float > 2, default=3.0
        kappa.
    n_blocks : int, default=3
        Practical number of blocks (theory: ``ceil(ln n)``).
    """

    name = "kappa_growth"
    growth_exponent: float = 3.0
    n_blocks: int = 3
    _parameter_constraints = {**_Localized._parameter_constraints,
                              "growth_exponent": [Interval(numbers.Real, 2, math.inf, closed="neither")],
                              "n_blocks": [POSITIVE_INT]}

    def _solve(self, problem, budget, rng):
        run, L, R, x0 = self._setup(problem, budget, rng)
        n = problem.n_samples
        kappa = float(self.growth_exponent)
        T = max(1, math.ceil(math.log(n))) if self.schedule == "theory" else self.n_blocks
        T = max(1, min(T, n))
        m = n // T
        rows = permuted_blocks(n, [m] * T, rng)
        H = problem.outputs.smoothness * problem.row_bound * problem.row_bound
        domain = [(None, R)]
        x, D1 = x0, 2.0 * R
        D = D1
        dom = list(domain)
        c_kappa = 4.0 * 2.0 ** (12.0 / kappa)
        radii = []
        for i in range(T):
            x = run.epoch_growth(rows[i], dom, x, D, L, 1 if self.schedule == "practical" else None,
                                 self.n_phases, self.c_eta, kappa_low=kappa)
            if self.schedule == "theory":
                A, P = run.stat_privacy(m, 1.0 / (T * (m + run.dim)))
                D_next = c_kappa * ((L / self.growth) * max(A, P)) ** (1.0 / (kappa - 1.0))
            else:
                D_next = self.radius_decay * D1 * (D / D1) ** (1.0 / (kappa - 1.0))
            D = min(D_next, D)
            L = min(L, H * D)
            dom = list(domain) + [(project_balls(x, domain), D / 2.0)]
            radii.append(D)
        return run.result(x, self.name, {"blocks": T, "radii": radii, "growth_exponent": kappa,
                                         "schedule": self.schedule})
