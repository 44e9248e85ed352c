"""Solvers of private linear-model ERM: pure functions of arrays returning coefficients and events.

Each solver object bundles its public schedule. ``event(loss, mu, eps_q)``
gives the exact privacy event of a run, computed before any data is read, and
``solve(problem, mu, eps_q, rng)`` runs it and returns a :class:`SolverResult`
whose event describes the noise actually drawn. ``mu`` is the Gaussian-DP
budget of the solver's Gaussian releases; ``eps_q`` is the epsilon of each of
its exponential-mechanism quantiles (``n_quantiles(loss)`` of them).
"""

from ..mechanisms import MAX_GRAM_SIZE
from ._glm import CallableLoss, GLMProblem, SolverResult, aggregate_points, project_ball, project_two_balls
from .accelerated import Accelerated
from .averaged_sgd import AveragedSGD
from .clipped_gd import ClippedGD
from .known_lipschitz import KnownLipschitz
from .localized import Localized
from .localized_subgradient import LocalizedSubgradient
from .one_pass_glm import OnePassGLM
from .proximal_sgd import ProximalSGD
from .svt_sgd import SVT_SGD_DISABLED, check_svt_sgd_available

SOLVER_CLASSES = {cls.name: cls for cls in (Localized, KnownLipschitz, OnePassGLM, ClippedGD,
                                              LocalizedSubgradient, Accelerated, AveragedSGD, ProximalSGD)}
# "svt_sgd" stays a recognised name so that selecting it explains why it is disabled.
SOLVERS = tuple(SOLVER_CLASSES) + ("svt_sgd",)


def make_solver(name, *, loss, n_samples, n_coef, schedule="practical", max_iter=None, huber_auto=False,
                moment_order=4, moment_bound=None, second_moment_bound=None, ridge=False):
    """Build the solver ``name`` with its public schedule for a problem of the given size."""
    moments = dict(moment_order=moment_order, moment_bound=moment_bound)
    if name == "clipped_gd":
        # The curvature release forms the p x p Gram matrix; beyond MAX_GRAM_SIZE
        # coefficients the step comes from a public bound (a public rule on p).
        return ClippedGD(n_steps=max_iter or 100, huber_auto=huber_auto,
                         curvature_release=n_coef <= MAX_GRAM_SIZE)
    if name == "one_pass_glm":
        return OnePassGLM(schedule=schedule, second_moment_bound=second_moment_bound, **moments)
    if name == "localized":
        return Localized(schedule=schedule, max_steps=max_iter or 100, n_coef=n_coef,
                         second_moment_bound=second_moment_bound, **moments)
    if name == "known_lipschitz":
        return KnownLipschitz(schedule=schedule, max_steps=max_iter or 100, **moments)
    if name == "localized_subgradient":
        # ``ridge`` (public: alpha > 0) decides whether the strongly convex wrapper runs.
        return LocalizedSubgradient(schedule=schedule, max_steps=max_iter, n_coef=n_coef, ridge=ridge,
                                    second_moment_bound=second_moment_bound, **moments)
    if name in ("accelerated", "averaged_sgd", "proximal_sgd"):
        # Their practical number of batches is set for accuracy from (n, p, mu);
        # max_iter, when given, fixes it.
        return SOLVER_CLASSES[name](schedule=schedule, n_steps=max_iter, n_coef=n_coef,
                                    second_moment_bound=second_moment_bound, **moments)
    if name == "svt_sgd":
        check_svt_sgd_available()  # raises: see skdp.solvers.svt_sgd
    raise ValueError(f"Unknown algorithm {name!r}; choose one of {SOLVERS}.")


__all__ = ["GLMProblem", "SolverResult", "CallableLoss", "aggregate_points", "project_ball",
           "project_two_balls", "ClippedGD", "LocalizedSubgradient", "Accelerated", "AveragedSGD",
           "ProximalSGD", "OnePassGLM", "SVT_SGD_DISABLED", "Localized", "KnownLipschitz",
           "SOLVERS", "SOLVER_CLASSES", "make_solver"]
