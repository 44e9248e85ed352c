"""Solvers of private linear-model ERM behind one contract, and the blocks they share.

Every solver follows :class:`Solver` (declared :class:`Capabilities`, a check of
the :class:`ProblemSpec` before any budget is spent, a plan that returns the
privacy event for a :class:`SolverBudget`, and a run that returns a
:class:`SolverResult` with the event of what it drew) and is found by name with
:func:`get_solver`. The shared blocks:

* :mod:`~skdp.solvers.problem` — :class:`GLMProblem`, the data every solver sees;
* :mod:`~skdp.solvers.clip_threshold` — the private clip-threshold rule;
* :mod:`~skdp.solvers.descent` — noisy clipped gradients and descent;
* :mod:`~skdp.solvers.geometry` — projections and aggregation;
* :mod:`~skdp.solvers.schedules` — phase layouts, batches, steps, averaging;
* :mod:`~skdp.solvers.moments` — public moment bounds of the theory schedules.

One subpackage per family of papers: :mod:`~skdp.solvers.heavy_tail` (regression),
:mod:`~skdp.solvers.interpolation` (classification) and
:mod:`~skdp.solvers.zeroth_order` (loss values only).
"""

from ._contract import (
    Capabilities,
    ProblemSpec,
    ScheduledSolver,
    Solver,
    SolverBudget,
    SolverOptions,
    SolverResult,
    get_solver,
    progress_hook,
    register_solver,
    report_progress,
    solver_names,
)
from .heavy_tail import (
    SVTSGD,
    Accelerated,
    AveragedSGD,
    ClippedGD,
    KnownLipschitz,
    Localized,
    LocalizedSubgradient,
    OnePassGLM,
    ProximalSGD,
    SufficientStatistics,
)
from . import interpolation  # noqa: F401  (registers the classification solvers)
from . import zeroth_order  # noqa: F401  (registers the zeroth-order solvers)
from .moments import MomentBounds
from .problem import GLMProblem

__all__ = ["Capabilities", "ProblemSpec", "Solver", "ScheduledSolver", "SolverBudget", "SolverOptions", "SolverResult",
           "get_solver", "register_solver", "solver_names", "progress_hook", "report_progress", "MomentBounds", "GLMProblem",
           "ClippedGD", "Localized", "KnownLipschitz", "SVTSGD", "OnePassGLM", "LocalizedSubgradient",
           "Accelerated", "AveragedSGD", "ProximalSGD", "SufficientStatistics"]
