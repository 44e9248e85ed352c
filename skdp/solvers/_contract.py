"""The contract between the private linear-model pipeline and its solvers.

A solver is an immutable configuration (its public schedule) with four
operations, always called in this order by the pipeline:

1. :meth:`Solver.check` — refuse a problem it cannot solve (an L1 penalty
   without proximal steps, a non-smooth loss for a smooth-only method, a
   theory schedule without the public constants it needs). Called on the
   :class:`ProblemSpec`, before any budget is spent or data read.
2. :meth:`Solver.n_quantiles` — how many private quantiles (each an
   exponential-mechanism release at ``SolverBudget.quantile_epsilon``) a run
   releases, so that the pipeline can size the quantile budget.
3. :meth:`Solver.plan` — the exact privacy event of a run at a budget, from
   public inputs only; the pipeline calibrates the budget on it.
4. :meth:`Solver.run` — solve the problem and return a :class:`SolverResult`
   whose event describes the noise actually drawn (never more expensive than
   the plan; the pipeline checks).

A solver may also predict, from the same public inputs as :meth:`Solver.plan`,
that it will be inaccurate (:meth:`Solver.poor_fit_reason`); the pipeline then
warns before anything is spent and names the solver its routing table would run.

Capabilities are declared, not discovered (:class:`Capabilities`), and a
configuration is never mutated: :meth:`Solver.replace` returns a new one. Solvers
are found by name in a registry (:func:`register_solver`, :func:`get_solver`).

Progress: a run loop calls :func:`report_progress` once per iteration with the
iteration, the planned number of iterations and the step size. Those are public
or post-processing of released values (the schedule is public, and a step size
derived from the data is derived from a release, as the privacy contract
requires of every step size); nothing else may be passed. The estimator decides
what to do with them (:func:`progress_hook`: its ``verbose=2`` lines); solvers
never print. A hook that fails is ignored: a run is past the budget reservation,
where nothing may raise.
"""

import contextvars
import dataclasses
import math
import numbers
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np

from .._validation import Interval, Options, Predicate, check_values

__all__ = ["Capabilities", "ProblemSpec", "SolverBudget", "SolverOptions", "SolverResult", "Solver",
           "ScheduledSolver", "register_solver", "get_solver", "solver_names", "POSITIVE", "POSITIVE_INT",
           "FRACTION", "SCHEDULE", "POSITIVE_TUPLE", "PUBLIC_CLIP", "MAX_PUBLIC_CLIP", "optional", "report_progress",
           "progress_hook"]

# Constraints shared by the solvers' parameter tables (see Solver._parameter_constraints).
POSITIVE = Interval(numbers.Real, 0, math.inf, closed="neither")  # finite and > 0
POSITIVE_INT = Interval(numbers.Integral, 1, None, closed="left")
FRACTION = Interval(numbers.Real, 0, 1, closed="neither")  # in (0, 1)
SCHEDULE = Options({"practical", "theory"})
# Largest public clip threshold (standardised units, where gradients are about 1): beyond it the
# noise calibration or the gradient sums could overflow after the budget is reserved; below the
# smallest, the sensitivity is subnormal and the noise calibration (sensitivity / level) rounds, so
# the released event could cost more than the plan.
MAX_PUBLIC_CLIP = 1e100
MIN_PUBLIC_CLIP = 1e-100
PUBLIC_CLIP = Interval(numbers.Real, MIN_PUBLIC_CLIP, MAX_PUBLIC_CLIP, closed="both")
POSITIVE_TUPLE = Predicate(lambda v: isinstance(v, tuple) and len(v) > 0 and all(POSITIVE.is_satisfied_by(x) for x in v),
                           "a non-empty tuple of positive finite numbers")


def optional(*constraints):
    """The constraints, or None."""
    return [None, *constraints]


@dataclass(frozen=True)
class Capabilities:
    """What a solver can do, declared by its class.

    Attributes
    ----------
    l1 : bool
        Handles an L1 penalty by exact proximal steps.
    callable_losses : bool
        Clips every per-sample gradient and assumes nothing else of the loss,
        so user callables are accepted.
    smooth_only : bool
        Needs a loss with a finite smoothness constant (its steps or its
        privacy argument use it).
    approximate_dp : bool
        Its guarantee is an (epsilon, delta) statement only (no Gaussian-DP
        event): the pipeline then cannot calibrate it jointly with zCDP parts.
    public_clip : bool
        Its per-sample gradient clip, chosen by a private quantile in the
        practical schedule, may be replaced by a public value (``clip=``), which
        the pipeline does when the budget is too small to fund the quantile.
    unbounded_rows : bool
        Its privacy does not rest on a bound of the row norms (every release
        clips what it needs itself), so the pipeline may leave rows whole: an
        informative heavy-tailed column is then not cut off. Without it, rows
        are clipped to the problem's ``row_bound``.
    matrix_penalty : bool
        It handles a ridge given as a matrix (``GLMProblem.penalty_matrix``), as
        joint whitening produces.
    implicit_design : bool
        It only multiplies the rows by vectors and takes row subsets, so a
        sparse design may stay implicit (:class:`~skdp.solvers.design.LinearDesign`).
    pure_dp : bool
        It can run on a pure epsilon-DP budget (``SolverBudget.pure_epsilon``),
        with Laplace-type noise.
    """

    l1: bool = False
    callable_losses: bool = False
    smooth_only: bool = False
    approximate_dp: bool = False
    public_clip: bool = False
    unbounded_rows: bool = False
    matrix_penalty: bool = False
    implicit_design: bool = False
    pure_dp: bool = False


@dataclass(frozen=True)
class ProblemSpec:
    """Everything public about a problem, known before any data value is read.

    Attributes
    ----------
    n_samples : int
    n_coef : int
        Number of coefficients, the intercept column included.
    loss : Loss or CallableLoss
        The loss in solver units (a Huber threshold set later by a private
        release keeps the loss's type).
    intercept : bool
        Whether the last coefficient multiplies a constant intercept column.
    l1 : bool
        Whether an L1 penalty is set on the feature coefficients.
    ridge : bool
        Whether every feature coefficient carries a positive ridge weight.
    schedule : {"practical", "theory"}
    public_smoothness : float or None
        A public bound on every row's smoothness in the coefficients (loss
        smoothness times the public row bound squared, plus the ridge), when the
        preprocessing makes one public; theory schedules of some solvers need it.
    radius : float or None
        The radius of the coefficient ball when it is public.
    n_outputs : int
        Number of rows of the coefficient matrix (1 for regression and binary
        classification; the number of classes for multiclass models).
    centred_rows : bool
        Whether the standardisation centres every column (public: the scaling
        mode decides it), so a solver need not spend budget on centring.
    """

    n_samples: int
    n_coef: int
    loss: object
    intercept: bool = True
    l1: bool = False
    ridge: bool = False
    schedule: str = "practical"
    public_smoothness: float = None
    radius: float = None
    n_outputs: int = 1
    centred_rows: bool = False

    @property
    def smooth(self):
        return math.isfinite(float(getattr(self.loss, "smoothness", math.inf)))

    @property
    def callable_loss(self):
        return not hasattr(self.loss, "derivative_bound")


@dataclass(frozen=True)
class SolverBudget:
    """The privacy budget handed to a solver.

    Attributes
    ----------
    mu : float
        Gaussian-DP parameter of the solver's Gaussian releases together (inf:
        no noise).
    quantile_epsilon : float
        Epsilon of each of its private quantiles (exponential mechanism).
    pure_epsilon : float or None
        For a pure-DP fit (``delta = 0``): the epsilon of all the solver's
        releases together (basic composition); ``mu`` is then unused. Only
        solvers with ``capabilities.pure_dp`` accept it.
    """

    mu: float
    quantile_epsilon: float = math.inf
    pure_epsilon: float = None

    @property
    def pure(self):
        """Whether the solver's releases must be pure epsilon-DP (``pure_epsilon``; ``mu`` is unused)."""
        return self.pure_epsilon is not None


@dataclass(frozen=True)
class SolverOptions:
    """The estimator-level options every solver maps onto its own parameters.

    Attributes
    ----------
    schedule : {"practical", "theory"}
    max_iter : int or None
        Cap on noisy steps (each solver says what it caps).
    moment_order, moment_bound, second_moment_bound : float
        Public moment bounds of the per-sample gradient norms (theory schedules).
    huber_auto : bool
        The Huber threshold is to be set by the solver (from a private release)
        where it can.
    """

    schedule: str = "practical"
    max_iter: int = None
    moment_order: float = 4.0
    moment_bound: float = None
    second_moment_bound: float = None
    huber_auto: bool = False


@dataclass
class SolverResult:
    """Coefficients, the privacy event of everything the run released, and its public schedule."""

    coef: np.ndarray
    event: object
    schedule: dict = field(default_factory=dict)


class Solver:
    """Base class of the solvers (see the module docstring for the contract).

    Subclasses are frozen dataclasses holding their public schedule; they set
    ``name``, ``capabilities`` and implement :meth:`plan` and :meth:`run`,
    and usually :meth:`from_options`.
    """

    name = None
    family = None  # the estimator family whose `algorithm` parameter offers it ("heavy_tail", ...)
    capabilities = Capabilities()
    # Why the solver may not be used at all (a broken privacy proof, say); None when usable.
    unavailable = None
    # {field: [constraint, ...]} for every dataclass field, checked by validate() before any
    # spend: a configuration passed as an instance (algorithm=ClippedGD(n_steps=0)) reaches the
    # solver without the estimator's own parameter checks, and a bad value found later (a
    # division by zero, a negative sensitivity) would raise after the budget is charged.
    _parameter_constraints = {}

    @classmethod
    def from_options(cls, options):
        """The solver configured from the estimator-level :class:`SolverOptions`."""
        return cls()

    def replace(self, **changes):
        """A copy with some parameters changed (configurations are never mutated)."""
        return dataclasses.replace(self, **changes)

    def with_fewer_quantiles(self):
        """A variant that releases fewer private quantiles, for starved budgets (default: itself)."""
        return self

    def for_whitened_rows(self):
        """The configuration for whitened, possibly unbounded rows (default: itself)."""
        return self

    def for_block_rows(self):
        """The configuration for whitened rows whose every column is in a declared one-hot block (default: itself).

        A public rule: the plan asks for it when the declared bounds put every
        column in a block (:meth:`~skdp.linear_model._bounds.DeclaredBounds.all_public`).
        """
        return self

    def with_public_clip(self, clip):
        """The same solver with a public per-sample gradient clip (needs ``capabilities.public_clip``)."""
        if not self.capabilities.public_clip:
            raise ValueError(f"{self.name} does not take a public clip threshold.")
        return self.replace(clip=float(clip))

    # -- the contract ------------------------------------------------------------------------
    def validate(self):
        """Raise ``ValueError`` naming the parameter when a field of this configuration is invalid.

        Every field must be declared in ``_parameter_constraints`` (a test checks it),
        and :meth:`_check_parameter_relations` checks what involves several fields.
        """
        fields = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)} if dataclasses.is_dataclass(self) \
            else {}
        check_values(type(self).__name__, fields, self._parameter_constraints)
        self._check_parameter_relations()

    def _check_parameter_relations(self):
        """Raise ``ValueError`` when valid fields are invalid together (default: nothing to check)."""

    def check(self, spec):
        """Raise ``ValueError`` if the solver cannot solve ``spec`` (before any budget is spent)."""
        if self.unavailable:
            raise ValueError(self.unavailable)
        self.validate()
        caps = self.capabilities
        if spec.l1 and not caps.l1:
            with_l1 = sorted(name for name in solver_names(self.family) if get_solver(name, self.family).capabilities.l1)
            raise ValueError(f"algorithm={self.name!r} does not support an L1 penalty (l1_ratio > 0); "
                             f"use one of {with_l1}.")
        if spec.callable_loss and not caps.callable_losses:
            accepting = sorted(name for name in solver_names(self.family)
                               if get_solver(name, self.family).capabilities.callable_losses)
            raise ValueError(f"A callable loss is supported by algorithm in {accepting} only.")
        if caps.smooth_only and not spec.smooth:
            raise ValueError(
                f"{self.name} needs a smooth loss (squared or huber): its steps or its privacy argument "
                "rest on the smoothness of every row's loss. For absolute or quantile losses use "
                "algorithm='localized_subgradient' or 'clipped_gd'.")

    def n_quantiles(self, spec):
        """Number of private quantiles a run releases."""
        return 0

    def needs_public_smoothness(self):
        """Whether this configuration's privacy conditions need ``ProblemSpec.public_smoothness``."""
        return False

    def check_budget(self, spec, budget):
        """Raise ``ValueError`` if the calibrated budget breaks a condition of the privacy proof.

        Called once, after calibration and before anything is spent.
        """

    def plan(self, spec, budget):
        """The exact privacy event of a run at ``budget`` (public inputs only)."""
        raise NotImplementedError

    def poor_fit_reason(self, spec, budget):
        """Why a run at ``budget`` is predicted to be inaccurate, or None (public inputs only).

        A rule on ``spec`` and the calibrated ``budget`` (never on data), stated
        with its arithmetic by the solvers that have a known failure regime; it
        changes nothing in the run. The default predicts nothing.
        """
        return None

    def run(self, spec, problem, budget, rng):
        """Solve ``problem`` (a :class:`~skdp.solvers.GLMProblem` matching ``spec``)."""
        raise NotImplementedError


class ScheduledSolver(Solver):
    """A solver with a paper-exact schedule (``schedule="theory"``) and a practical one.

    Subclasses hold a ``schedule`` field and implement ``_run_theory(problem, mu,
    rng)`` (the paper's constants, Gaussian budget only) and
    ``_run_practical(problem, budget, rng)``; both release what :meth:`plan`
    planned for that schedule.
    """

    def run(self, spec, problem, budget, rng):
        if self.schedule == "theory":
            return self._run_theory(problem, budget.mu, rng)
        return self._run_practical(problem, budget, rng)


_PROGRESS = contextvars.ContextVar("skdp_solver_progress", default=None)


@contextmanager
def progress_hook(callback):
    """Send the progress of the solver runs in this context to ``callback``.

    Parameters
    ----------
    callback : callable or None
        ``callback(iteration, n_iterations, step_size, **counts)``; None turns
        reporting off in the context. The innermost hook wins; the context is
        per thread and asyncio task, so concurrent fits do not see each other's.

    Examples
    --------
    >>> from skdp.solvers import progress_hook, report_progress
    >>> seen = []
    >>> with progress_hook(lambda i, n, step, **counts: seen.append((i, n, step))):
    ...     report_progress(1, 10, 0.5)
    >>> seen
    [(1, 10, 0.5)]
    """
    token = _PROGRESS.set(callback)
    try:
        yield
    finally:
        _PROGRESS.reset(token)


def report_progress(iteration, n_iterations, step_size=None, **counts):
    """Report one iteration of a solver's run loop to the active :func:`progress_hook`, if any.

    Parameters
    ----------
    iteration : int
        Iterations done (1 after the first).
    n_iterations : int or None
        The planned number of iterations of the loop (public), None when the
        loop's length is decided as it goes (by public rules).
    step_size : float or None
        The step of this iteration: public, or post-processing of released values.
    **counts
        Further public counts (for example function evaluations).

    Only public or released numbers may be passed: the hook prints them. A hook
    that raises is ignored (the run is after the budget reservation).
    """
    callback = _PROGRESS.get()
    if callback is None:
        return
    try:
        callback(int(iteration), None if n_iterations is None else int(n_iterations),
                 None if step_size is None else float(step_size), **counts)
    except Exception:  # noqa: BLE001 - printing must never turn into an exception after the reservation
        pass


_REGISTRY = {}


def register_solver(cls):
    """Class decorator: make a solver available by its ``family`` and ``name``.

    Two families may use the same name (each estimator's ``algorithm``
    parameter offers its own family); a later registration of the same family
    and name replaces the earlier one.
    """
    if not (isinstance(cls, type) and issubclass(cls, Solver) and cls.name):
        raise TypeError("register_solver expects a Solver subclass with a name.")
    _REGISTRY[(cls.family, cls.name)] = cls
    return cls


def get_solver(name, family=None):
    """The solver class registered under ``name`` (in ``family``; None: the first registered with that name)."""
    for (fam, registered), cls in _REGISTRY.items():
        if registered == name and (family is None or fam == family):
            return cls
    raise ValueError(f"Unknown algorithm {name!r}; choose one of {solver_names(family)}.")


def solver_names(family=None):
    """Names of the registered solvers (of one ``family``, or all), in registration order, without repeats."""
    names = [name for (fam, name) in _REGISTRY if family is None or fam == family]
    return tuple(dict.fromkeys(names))
