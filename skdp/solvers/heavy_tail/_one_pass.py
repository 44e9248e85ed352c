"""What the one-pass solvers of Lowy and Razaviyayn share: 'accelerated', 'averaged_sgd', 'proximal_sgd'.

All three consume the data the same way: a data-independent random permutation
is cut into ``T`` consecutive disjoint batches, and step ``t`` releases the
clipped Gaussian mean (the paper's Algorithm 1) of the per-sample loss
gradients of batch ``t`` at the current query point. Under replace-one
neighbours the clipped mean of ``s`` gradients moves by at most ``2 C / s``, so
``sigma = 2 C / (s mu)`` makes one release exactly mu-GDP. A changed record lies
in exactly one batch, so the ``T`` releases compose in parallel and each may
spend the whole budget ``mu``. The ridge gradient is added after the noise,
unclipped (it is identical on neighbours), and the L1 part is handled by exact
proximal steps; both are post-processing.

:class:`OnePassSolver` holds the public plan (``T``, batch sizes), the clip
threshold (public, from moment bounds, or a private quantile of the per-sample
gradient norms at the start), the privacy event, the checks and the gradient
oracle handed to each algorithm's iteration.

Where they work (practical schedule). Each of the ``T`` disjoint batches of
``n / T`` rows is released once, with noise ``2 C T / (n mu)`` per coordinate
and ``C ~ sqrt(p)`` on standardised data: below ``m = n mu / p`` of about 20
private rows per coefficient the noise of a single batch mean is comparable to
the signal for any ``T`` that makes progress (:func:`one_pass_poor_fit_reason`,
shared with 'one_pass_glm'; the fit then warns). Measured on the contaminated
benchmark task (d = 20, n = 2000; epsilon = 0.5 and 1, i.e. ``m = 11.5`` and
23): 2.28 and 1.44 times the Bayes error for 'accelerated', 1.91 and 1.22 for
'averaged_sgd', 1.91 and 1.25 for 'proximal_sgd'; at n = 20000 all three are
within 1.05 at epsilon >= 0.5. The threshold was measured at d = 20 only; its
scaling in ``p`` comes from the arithmetic.

References
----------
A. Lowy and M. Razaviyayn, "Private Stochastic Optimization With Large
Worst-Case Lipschitz Parameter", 2022, arXiv:2209.07403 (Algorithms 1 and 4-6).
"""

import math
from dataclasses import dataclass

import numpy as np

from ...accounting import ExponentialMechanismRelease, GaussianRelease, Parallel, Sequential
from .._contract import (
    FRACTION,
    POSITIVE_INT,
    PUBLIC_CLIP,
    SCHEDULE,
    Capabilities,
    Solver,
    SolverResult,
    optional,
)
from ..clip_threshold import CLIP_RANGE, derivative_cap, private_clip, public_derivative_bound
from ..descent import noise_std, noisy_clipped_gradient
from ..moments import VALID_MOMENTS, MomentBounds
from ..schedules import clamp_steps, sgd_practical_steps, split_batches

__all__ = ["OnePassSolver", "practical_curvature", "theory_strong_convexity", "step_constants",
           "one_pass_poor_fit_reason", "ONE_PASS_USEFUL_ROWS_PER_COEF"]

# A non-finite clip (theory schedule at mu = inf) is replaced by this finite
# value so that sensitivities stay representable; the noise is then 0 anyway.
_HUGE_CLIP = 1e300
# The practical one-pass schedules are predicted to be poor below n mu / p = 20 (one_pass_poor_fit_reason).
ONE_PASS_USEFUL_ROWS_PER_COEF = 20.0


def one_pass_poor_fit_reason(name, n_samples, n_coef, mu):
    """The public rule of the one-pass solvers: poor below ``n mu / p = 20`` private rows per coefficient.

    A one-pass method releases each disjoint block's result once, with a noise
    norm of about ``4 tau / m`` (``m = n mu / p``, ``tau`` the block's progress in
    units of inverse curvature, which must be a few units to reach the
    solution) against the ``~ 2.8 / m`` of full-batch clipped descent, which
    averages its noise over all its steps: below ``m ~ 20`` no schedule makes
    both the bias and the noise small (module docstrings of this module and of
    'one_pass_glm' for the measurements). Returns the reason as text, or None.
    """
    if not math.isfinite(mu):
        return None
    m = n_samples * mu / float(n_coef)
    if m >= ONE_PASS_USEFUL_ROWS_PER_COEF:
        return None
    return (f"a one-pass method releases each disjoint block's result once, with noise about p / (n mu) per "
            f"unit of progress, and needs n * mu / p >= {ONE_PASS_USEFUL_ROWS_PER_COEF:g} private rows per "
            f"coefficient; here n * mu / p = {m:.1f} (mu = {mu:.3g}, the Gaussian-DP budget of {name})")


def practical_curvature(problem):
    """The curvature scale used by the practical step sizes (public inputs only).

    Rows of a standardised problem have coordinates of size ``unit``, so for
    weakly correlated features the population Hessian of a smooth loss has
    largest eigenvalue about ``smoothness * unit^2``; the factor 2 keeps the
    steps stable for eigenvalues up to ``4 unit^2`` (they diverge beyond
    ``2 / step``). The worst-case bound ``problem.uniform_smoothness()``
    (``row_bound^2`` for the squared loss, about ``p`` times larger) would make
    a handful of steps useless. Steps never affect privacy: only the clip and
    the batch sizes enter the noise.
    """
    ridge = float(np.max(problem.penalty, initial=0.0))
    value = 2.0 * float(problem.loss.smoothness) * problem.unit**2 + ridge
    return min(value, problem.uniform_smoothness())


def _free_ridge(problem):
    """Smallest ridge weight over the coefficients of features (the intercept excluded)."""
    free = problem.free_coordinates() > 0
    return float(np.min(problem.penalty[free])) if free.any() else 0.0


def theory_strong_convexity(problem):
    """Public strong-convexity constant of the regularised objective (theory schedules).

    The ridge gives ``min(penalty)`` on the feature coefficients. The intercept
    coefficient carries no ridge; its curvature comes from the loss on the
    constant column (value ``unit``): ``smoothness * unit^2`` for the squared
    loss, exactly when the features are centred, which the estimator's robust
    scaling makes approximately true. The smaller of the two is used; with a
    ridge below ``unit^2`` (the usual case) this is the ridge itself. A Huber
    loss has that curvature only in its quadratic zone, so for it the
    intercept direction is an assumption of the guarantee (never of privacy).
    """
    mu_sc = _free_ridge(problem)
    if problem.intercept:
        mu_sc = min(mu_sc, float(problem.loss.smoothness) * problem.unit**2)
    return mu_sc


def step_constants(problem, schedule, name):
    """``(beta, mu)`` shaping the steps of Algorithms 5 and 6.

    "theory": ``beta = problem.uniform_smoothness()`` and the public strong
    convexity of :func:`theory_strong_convexity`; without a ridge there is none
    and the schedule refuses (its ``T`` and guarantee need ``mu > 0``).
    "practical": ``beta = L`` (:func:`practical_curvature`) and
    ``mu = max(ridge, L / 2)``, i.e. a standardised design with a Hessian of
    condition number about 2; a worse conditioning only slows the run down.
    """
    if schedule == "theory":
        beta = problem.uniform_smoothness()
        mu_sc = theory_strong_convexity(problem)
        if not np.any(problem.penalty[problem.free_coordinates() > 0] > 0) and not mu_sc > 0:
            raise ValueError(
                f"{name} with schedule='theory' needs a public strong-convexity constant: set a ridge "
                "(alpha > 0) on every feature coefficient, or use schedule='practical'.")
        # A ridge that underflowed in standardised units (alpha ~ 1e-300): the
        # estimator checked alpha > 0 before spending, so run with a tiny constant
        # (T then clamps to n) rather than refuse after the data were read.
        return beta, min(max(mu_sc, 1e-300), beta)
    L = practical_curvature(problem)
    return L, min(max(L / 2.0, _free_ridge(problem)), L)



@dataclass(frozen=True)
class OnePassSolver(Solver):
    """Shared planning, clipping and accounting of the one-pass solvers.

    Parameters
    ----------
    schedule : {"practical", "theory"}
        "theory" uses the paper's ``T`` and ``C`` from the public moment bounds;
        "practical" uses the rules documented by each solver.
    moments : MomentBounds
        ``(k, G_k, G_2)``: ``G_k`` bounds the k-th moment of the per-sample
        gradient norms over the coefficient ball. Required by "theory".
    clip : float or None
        Public clip threshold; None takes the schedule's rule.
    n_steps : int or None
        Number of batches ``T`` (None: the schedule's rule).
    clip_quantile : float in (0, 1)
        Level of the private quantile of the per-sample gradient norms at the
        starting point (practical schedule without a public clip).
    """

    schedule: str = "practical"
    moments: MomentBounds = MomentBounds()
    clip: float = None
    n_steps: int = None
    clip_quantile: float = 0.5

    family = "heavy_tail"
    capabilities = Capabilities(smooth_only=True, public_clip=True)
    _parameter_constraints = {
        "schedule": [SCHEDULE],
        "moments": [VALID_MOMENTS],
        "clip": optional(PUBLIC_CLIP),
        "n_steps": optional(POSITIVE_INT),
        "clip_quantile": [FRACTION],
    }
    # Whether the theory schedule needs a public strong-convexity constant (a ridge).
    theory_needs_ridge = False

    def __post_init__(self):
        if self.schedule not in ("practical", "theory"):
            raise ValueError(f"schedule must be 'practical' or 'theory'; got {self.schedule!r}.")
        if not 0.0 < float(self.clip_quantile) < 1.0:
            raise ValueError(f"clip_quantile must lie in (0, 1); got {self.clip_quantile!r}.")

    @classmethod
    def from_options(cls, options):
        # The practical number of batches is set for accuracy from (n, p, mu);
        # max_iter, when given, fixes it.
        return cls(schedule=options.schedule, n_steps=options.max_iter,
                   moments=MomentBounds.from_options(options))

    # -- public plan ------------------------------------------------------------------------
    def check(self, spec):
        super().check(spec)
        if self.schedule == "theory":
            self.moments.require(self.name)
            if not self.moments.k > 1.0:
                raise ValueError(f"moment_order must exceed 1 (the bias bound divides by k - 1); "
                                 f"got {self.moments.order!r}.")
            if self.theory_needs_ridge and not spec.ridge:
                raise ValueError(f"algorithm={self.name!r} with schedule='theory' needs a public "
                                 "strong-convexity constant: a ridge (alpha > 0, l1_ratio < 1), or use "
                                 "schedule='practical'.")

    def n_quantiles(self, spec):
        """Private quantiles released by a run: 1 for the practical clip, else 0."""
        public = self.clip is not None or public_derivative_bound(spec.loss) is not None
        if public or self.schedule == "theory":
            return 0
        return 1

    def poor_fit_reason(self, spec, budget):
        """The practical schedule is predicted to be poor below ``n mu / p = 20``.

        See :func:`one_pass_poor_fit_reason`; theory schedules never warn.
        """
        if self.schedule != "practical":
            return None
        return one_pass_poor_fit_reason(self.name, spec.n_samples, spec.n_coef, budget.mu)

    def practical_steps(self, n, p, mu):
        """``T`` of the practical schedule from public inputs (:func:`sgd_practical_steps` by default)."""
        return sgd_practical_steps(n, p, mu)

    def planned_steps(self, n_samples, n_coef, mu):
        """``T`` when it follows from public inputs alone, else None (theory: it needs ``beta``)."""
        if self.n_steps is not None:
            return int(min(max(int(self.n_steps), 1), n_samples))
        if self.schedule == "theory" or mu is None:
            return None
        return clamp_steps(self.practical_steps(n_samples, n_coef, mu), n_samples)

    def plan(self, spec, budget):
        """The run's event, from public inputs: a clip quantile (if any), then T parallel releases.

        Each batch's release is exactly mu-GDP and the batches are disjoint, so
        the parallel composition is mu-GDP whatever ``T``; when ``T`` is not
        known before the data (theory schedule: it depends on the smoothness
        bound, i.e. on the row bound chosen in preprocessing) one
        representative release stands for them, with the same epsilon at every
        delta.
        """
        parts = [ExponentialMechanismRelease(budget.quantile_epsilon)] if self.n_quantiles(spec) else []
        T = self.planned_steps(spec.n_samples, spec.n_coef, budget.mu) or 1
        parts.append(Parallel([GaussianRelease(1.0, noise_std(1.0, budget.mu))] * T))
        return Sequential(parts)

    # -- pieces used by run -------------------------------------------------------------------
    def _private_clip(self, problem, eps_q, rng):
        """Clip threshold of the practical schedule and the events it cost.

        A public clip is used as given. A loss with a public derivative bound
        (absolute, quantile; refused by these solvers, kept for completeness)
        is clipped at ``max|loss'| * row_bound``, which never changes a
        gradient. Otherwise the threshold is a private quantile (log scale,
        ``CLIP_RANGE x row_bound``) of the per-sample gradient norms at 0.
        """
        if self.clip is not None:
            return float(self.clip), []
        bound = public_derivative_bound(problem.loss)
        if bound is not None:
            return bound * problem.row_bound, []
        upper = CLIP_RANGE[1] * problem.row_bound
        # A Huber derivative never exceeds delta: searching above delta * row_bound
        # would only waste the quantile's resolution.
        slope = derivative_cap(problem.loss)
        if slope is not None and CLIP_RANGE[0] * problem.row_bound < slope * problem.row_bound < upper:
            upper = slope * problem.row_bound
        C, event = private_clip(problem, self.clip_quantile, eps_q, rng, upper=upper)
        return C, [event]

    def _oracle(self, problem, batches, clip, mu, rng, releases):
        """The gradient oracle ``(w, t) -> noisy clipped mean gradient of batch t + ridge gradient``."""
        finite_clip = clip if math.isfinite(clip) else _HUGE_CLIP
        served = set()

        def oracle(w, t):
            # The ledger is one release per disjoint batch (parallel composition): a
            # second query of a batch would need sequential accounting.
            if t in served:
                raise RuntimeError(f"batch {t} was queried twice; its release would be under-counted.")
            served.add(t)
            rows = batches[t]
            std = noise_std(2.0 * finite_clip / len(rows), mu)
            noisy, event = noisy_clipped_gradient(problem, w, finite_clip, std, rng, rows)
            releases.append(event)
            # The ridge gradient is data-independent: added after the noise, unclipped.
            return noisy + problem.penalty * w

        return oracle

    def run(self, spec, problem, budget, rng):
        """Run the solver; returns a :class:`~skdp.solvers.SolverResult`."""
        mu = budget.mu
        n = problem.n_samples
        plan = self._plan(problem, mu)
        T = plan["n_steps"]
        # The permutation is drawn first and from public randomness only.
        batches = split_batches(n, T, rng)
        events = []
        if plan.get("clip") is not None:
            C = plan["clip"]
        else:
            C, events = self._private_clip(problem, budget.quantile_epsilon, rng)
        releases = []
        oracle = self._oracle(problem, batches, C, mu, rng, releases)
        coef, details = self._iterate(problem, oracle, T, C, mu, plan)
        sizes = [len(b) for b in batches]
        events.append(Parallel(releases))
        schedule = {"algorithm": self.name, "schedule": self.schedule, "n_steps": T,
                    "clip_threshold": C, "batch_size": min(sizes), "batch_sizes": sorted(set(sizes)),
                    "grad_evals": int(sum(sizes) + (n if self.n_quantiles(spec) else 0))}
        schedule.update(details)
        return SolverResult(coef, Sequential(events), schedule)

    def _plan(self, problem, mu):
        """Public plan of the run: ``{"n_steps": T, "clip": C or None}`` and the step constants."""
        n, p = problem.n_samples, problem.n_coef
        constants = self._step_constants(problem)  # raises before any data is read
        if self.n_steps is not None or self.schedule == "practical":
            T = self.planned_steps(n, p, mu)
        else:
            T = self._theory_steps(problem, mu, constants)
        clip = None
        if self.schedule == "theory":
            clip = float(self.clip) if self.clip is not None else self._theory_clip(n, p, mu, T)
        return {"n_steps": T, "clip": clip, **constants}

    def _step_constants(self, problem):
        """Constants that shape the steps (smoothness, strong convexity), from public inputs."""
        return {}

    def _theory_steps(self, problem, mu, constants):
        """``T`` of the theory schedule."""
        raise NotImplementedError

    def _theory_clip(self, n, p, mu, T):
        """The clip threshold of the theory schedule, from the moment bounds."""
        raise NotImplementedError

    def _iterate(self, problem, oracle, T, C, mu, plan):
        """Run the algorithm with the oracle; returns ``(coef, schedule details)``."""
        raise NotImplementedError
