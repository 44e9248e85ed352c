"""The budget plan of a private linear-model fit, from public inputs only.

A fit's budget ``(epsilon, delta)`` is converted once to zero-concentrated DP
(``rho = dp_to_zcdp(epsilon, delta)``) and split between

* the private quantiles of standardisation and of the solver (clip thresholds,
  a Huber threshold): each an exponential-mechanism release at one epsilon
  ``quantile_epsilon``, which costs ``quantile_epsilon^2 / 8`` in zCDP; and
* the solver's Gaussian releases, whose Gaussian-DP parameter ``mu`` is then
  calibrated so that the whole planned event spends exactly ``epsilon`` at
  ``delta`` (:func:`skdp.accounting.calibrate_scale`); and
* the releases made after the solver on the released model (the *post-fit
  releases*, named shares of the Gaussian budget given by the estimator): the
  fit check of the regressors (:mod:`~skdp.linear_model._fit_check`, one
  release with :data:`~skdp.linear_model._fit_check.CHECK_SHARE`), and the
  class counts, the probability calibration and the fit check of the
  classifiers (:mod:`~skdp.linear_model._calibration`). The estimator may also
  ask for extra private quantiles at the plan's quantile epsilon (the
  calibration's score scale).

The quantile share follows a public rule: each quantile should get
``epsilon * n >= 80`` (its failure probability is about ``exp(-epsilon n / 4)``
relative to the mass near the target), within a cap on the share of the
budget. When the budget is too small, the plan degrades gracefully and in
public: fewer quantiles (a solver variant with fewer thresholds, coarser
scaling modes), and finally the "minimal" scaling with a public clip threshold
for the solver. Nothing here reads the data.
"""

import math
import warnings
from dataclasses import dataclass

from ..accounting import (
    ApproxDPRelease,
    ExponentialMechanismRelease,
    GaussianRelease,
    LowBudgetWarning,
    Sequential,
    calibrate_scale,
    dp_to_gdp,
    dp_to_zcdp,
)
from ..solvers import SolverBudget
from ._fit_check import CHECK_SHARE
from ._standardise import WHITENED_MODES, PrivateStandardiser

__all__ = ["BudgetPlan", "plan_budget", "plan_pure_budget"]

# epsilon x rows for reliable private medians (failure probability ~ e^(-eps n / 4)).
MIN_QUANTILE_EPS_TIMES_N = 80.0
MAX_SCALING_SHARE = 0.25
# When even the cheapest tier cannot fund its quantiles, fewer quantiles get a
# larger share: they decide whether the fit is sane at all.
STARVED_SCALING_SHARE = 0.4
STARVED_EPS_TIMES_N = 40.0
# When even that leaves the quantiles short of epsilon * n = 80, the "minimal"
# scaling releases only three quantiles and the solver's clip threshold is public.
MINIMAL_SCALING_SHARE = 0.5
# Public clip in standardised units: rows have norm about sqrt(d) and labels a
# magnitude of about 1, so initial gradient norms are about sqrt(d).
MINIMAL_CLIP = 0.5
_AUTO_TIERS = ("robust", "pooled")
# The whitened modes: each quantile should get epsilon * n = 120 within 40% of the budget, and a
# mode is used only when its quantiles get at least 100 (at 80, 0.15% of the column statistics
# failed in a study of 3,900 columns; none at 100).
WHITENED_EPS_TIMES_N_TARGET = 120.0
WHITENED_MIN_EPS_TIMES_N = 100.0
WHITENED_SHARE_CAP = 0.4
# What a regressor releases after its solver: the fit check, with CHECK_SHARE of the Gaussian budget
# (in the column-wise modes, that share of the solver's and the check's together).
REGRESSION_POST_FIT = {"check": CHECK_SHARE}
# m_B = max(1, (nu / 50)^(1/4)) of the row bounds, nu = n mu / p the budget per coefficient.
ROW_BOUND_NU0 = 50.0


@dataclass(frozen=True)
class BudgetPlan:
    """What a fit will release and with which noise, fixed before the data are read.

    Attributes
    ----------
    standardiser : PrivateStandardiser
    solver : Solver
        The solver configuration actually run (the plan may pick a variant that
        releases fewer quantiles, or one with a public clip).
    spec : ProblemSpec
    budget : SolverBudget
    event : PrivacyEvent
        The planned event of the whole fit (standardisation, solver and the
        fit check).
    check_mu : float
        Gaussian-DP budget of the fit check (:mod:`~skdp.linear_model._fit_check`;
        0 without one, and for a pure-DP plan).
    starved : bool
        Whether the private quantiles get ``epsilon * n`` below
        :data:`STARVED_EPS_TIMES_N` each (public): the fit check then keeps the
        model only when it is confidently better than the constant.
    post_budgets : dict
        ``{name: ("gaussian", mu) or ("pure", epsilon)}``: the budget of every
        post-fit release (see the module docstring).
    """

    standardiser: PrivateStandardiser
    solver: object
    spec: object
    budget: SolverBudget
    event: object
    check_mu: float
    starved: bool = False
    post_budgets: dict = None

    def post_budget(self, name):
        """The budget of a post-fit release: ``("gaussian", mu)`` or ``("pure", epsilon)``."""
        return self.post_budgets[name]


def quantile_epsilon(n_samples, n_quantiles, rho_total, scaling_share="auto",
                     eps_times_n=MIN_QUANTILE_EPS_TIMES_N, cap=MAX_SCALING_SHARE):
    """Per-quantile epsilon of the scaling and threshold releases (public rule)."""
    if n_quantiles == 0 or math.isinf(rho_total):
        return math.inf
    if scaling_share == "auto":
        eps_needed = eps_times_n / n_samples
        share = n_quantiles * eps_needed**2 / 8.0 / rho_total
        share = min(cap, max(share, 0.02))
    else:
        share = float(scaling_share)
    return math.sqrt(8.0 * share * rho_total / n_quantiles)


def choose_scaling(scaling, n_samples, n_features, fit_intercept, solver_quantiles, rho_total,
                   scaling_share="auto", cap=MAX_SCALING_SHARE, modes=None, scale_target=True, declared=None):
    """The standardisation mode and the epsilon of every private quantile (public rule).

    With ``scaling="auto"`` the first of robust, pooled, target whose quantiles
    each get ``epsilon * n >= 80`` within the share is used, so that fewer,
    better-funded quantiles degrade accuracy gracefully instead of risking wrong
    scales. ``modes`` restricts the choice (theory schedules need the public row
    bound of "robust" or "none").
    """
    def eps_for(mode):
        need = 0.0 if mode == "none" else MIN_QUANTILE_EPS_TIMES_N
        count = (PrivateStandardiser.n_quantiles(mode, n_features, fit_intercept, scale_target, declared)
                 + solver_quantiles)
        return quantile_epsilon(n_samples, count, rho_total, scaling_share, need, cap)

    if scaling != "auto":
        if modes is not None and scaling not in modes:
            raise ValueError(f"This solver's schedule needs a public smoothness bound, so scaling must be "
                             f"one of {modes} (got scaling={scaling!r}).")
        return scaling, eps_for(scaling)
    if modes is not None:
        return modes[0], eps_for(modes[0])
    if math.isinf(rho_total):
        return "robust", math.inf
    for mode in _AUTO_TIERS:
        eps_q = eps_for(mode)
        if eps_q * n_samples >= MIN_QUANTILE_EPS_TIMES_N:
            return mode, eps_q
    return "target", eps_for("target")


def whitened_quantile_epsilon(n_samples, n_quantiles, rho_total):
    """Per-quantile epsilon of the whitened modes: ``epsilon * n = 120`` within 40% of the budget."""
    if math.isinf(rho_total):
        return math.inf
    return min(WHITENED_EPS_TIMES_N_TARGET / n_samples,
               math.sqrt(8.0 * WHITENED_SHARE_CAP * rho_total / n_quantiles))


def choose_whitened(scaling, n_samples, n_features, fit_intercept, solver_quantiles, rho_total, scale_target=True,
                    declared=None):
    """The whitened mode the budget funds (``epsilon * n >= 100`` per quantile) and its epsilon, or None."""
    candidates = WHITENED_MODES if scaling == "auto" else (scaling,)
    for mode in candidates:
        count = (PrivateStandardiser.n_quantiles(mode, n_features, fit_intercept, scale_target, declared)
                 + solver_quantiles)
        eps_q = whitened_quantile_epsilon(n_samples, count, rho_total)
        if scaling != "auto" or eps_q * n_samples >= WHITENED_MIN_EPS_TIMES_N:
            return mode, eps_q
    return None


def plan_budget(*, epsilon, delta, n_samples, n_features, fit_intercept, solver, make_spec, scaling="auto",
                scaling_share="auto", schedule="practical", adapt_solver=True, stacklevel=3, scale_target=True,
                post_fit=REGRESSION_POST_FIT, extra_quantiles=0, declared=None, block_means=False):
    """The :class:`BudgetPlan` of a fit, from public inputs only.

    The whitened modes (:mod:`~skdp.linear_model._standardise`) are used when
    the budget gives each of their quantiles ``epsilon * n >= 100`` within 40%
    of the budget (or when asked for); otherwise the column-wise modes, down to
    the starved "minimal" scaling.

    Parameters
    ----------
    epsilon, delta : float
        The fit's target.
    n_samples, n_features : int
    fit_intercept : bool
    solver : Solver
        The configured solver (already checked against the spec).
    make_spec : callable
        ``(mode) -> ProblemSpec``: the problem specification under a scaling
        mode (the mode decides whether a smoothness bound is public).
    scaling, scaling_share : see the estimators
    schedule : {"practical", "theory"}
    adapt_solver : bool, default=True
        Whether the plan may run a variant of the solver: for whitened rows
        (:meth:`~skdp.solvers.Solver.for_whitened_rows`, and
        :meth:`~skdp.solvers.Solver.for_block_rows` when the declared bounds put
        every column in a one-hot block), with fewer quantiles or with a public
        clip on a starved budget. False for a solver instance
        the user passed, which is run as given (the scaling still adapts).
    post_fit : dict, default=REGRESSION_POST_FIT
        ``{name: share}``: the post-fit releases and their shares of the
        Gaussian budget (each one Gaussian release of unit sensitivity in the
        planned event; a part that makes several releases splits its ``mu``).
        Empty for none.
    extra_quantiles : int, default=0
        Private quantiles released after the solver, at the plan's quantile
        epsilon (the calibration's score scale).
    declared : DeclaredBounds or None, default=None
        Public bounds (:mod:`~skdp.linear_model._bounds`): declared one-hot
        columns release no quantile and other declared columns fewer (the
        target keeps its own), so the plan counts fewer, and
        what they would have cost goes to the Gaussian releases (the calibration
        spends the whole target on what remains).
    block_means : bool, default=False
        Whether the estimator asks for the block-means release of the
        whitened modes (:mod:`~skdp.linear_model._standardise`; made only when
        every column is in a declared block, with an intercept).

    Warns
    -----
    LowBudgetWarning
        When the private quantiles get ``epsilon * n`` below about 40.
    """
    n, d = n_samples, n_features
    non_private = math.isinf(epsilon)
    rho_total = math.inf if non_private else dp_to_zcdp(epsilon, delta)
    if not rho_total > 0.0:
        raise ValueError(
            f"epsilon={epsilon:g} at delta={delta:g} leaves no zero-concentrated budget to plan with (epsilon is "
            "tiny against log(1 / delta)); raise epsilon, or use delta=0 for a pure-DP fit. Nothing was spent.")
    modes = ("robust", "none") if solver.needs_public_smoothness() else None
    spec = make_spec("robust" if modes else "none")
    if modes is None and scaling_share == "auto" and (scaling == "auto" or scaling in WHITENED_MODES):
        whitened_solver = solver.for_whitened_rows() if adapt_solver else solver
        if adapt_solver and declared is not None and declared.all_public():
            whitened_solver = whitened_solver.for_block_rows()  # every column in a declared block (public)
        chosen = choose_whitened(scaling, n, d, fit_intercept,
                                 whitened_solver.n_quantiles(spec) + extra_quantiles, rho_total, scale_target,
                                 declared)
        if chosen is not None:
            return _plan_whitened(epsilon, delta, n, d, fit_intercept, whitened_solver, make_spec, *chosen,
                                  scale_target=scale_target, post_fit=post_fit, extra_quantiles=extra_quantiles,
                                  declared=declared, block_means=block_means)
    if scaling in WHITENED_MODES:
        raise ValueError(f"scaling={scaling!r} needs scaling_share='auto' and a solver schedule without a "
                         "public smoothness bound.")

    def tier(solver, cap=MAX_SCALING_SHARE, modes=modes):
        return choose_scaling(scaling, n, d, fit_intercept, solver.n_quantiles(spec) + extra_quantiles,
                              rho_total, scaling_share, cap, modes, scale_target, declared)

    mode, eps_q = tier(solver)
    if scaling_share == "auto" and eps_q * n < MIN_QUANTILE_EPS_TIMES_N:
        fewer = solver.with_fewer_quantiles() if adapt_solver else solver
        if fewer is not solver:
            # Starved budget: a variant with fewer thresholds, and a larger share for the
            # quantiles that remain.
            solver = fewer
            mode, eps_q = tier(solver, STARVED_SCALING_SHARE)
    starved = eps_q * n < MIN_QUANTILE_EPS_TIMES_N
    if scaling == "auto" and scaling_share == "auto" and modes is None and starved:
        # Still starved: two scaling quantiles, and a public clip for solvers that would
        # spend a quantile on their per-sample gradient clip.
        if (adapt_solver and solver.capabilities.public_clip and schedule == "practical"
                and solver.n_quantiles(spec) > 0 and solver.clip is None):
            solver = solver.with_public_clip(MINIMAL_CLIP * math.sqrt(d))
        mode, eps_q = tier(solver, MINIMAL_SCALING_SHARE, ("minimal",))
    starved = mode != "none" and eps_q * n < STARVED_EPS_TIMES_N
    if starved:
        _warn_starved(epsilon, n, eps_q, "check" in post_fit, stacklevel + 1)
    spec = make_spec(mode)
    standardiser = PrivateStandardiser(mode, eps_q, fit_intercept, scale_target=scale_target, declared=declared)
    pre_event = standardiser.planned_event(d)
    # Each post-fit release gets its share of the Gaussian budget of the solver and the
    # post-fit releases together: mu_i = sqrt(share_i / (1 - sum of shares)) * mu_solver.
    rest = 1.0 - sum(post_fit.values())
    ratios = {name: math.sqrt(share / rest) for name, share in post_fit.items()}

    def planned(mu):
        return _with_post_fit([pre_event, solver.plan(spec, SolverBudget(mu, eps_q))],
                              {name: ratio * mu for name, ratio in ratios.items()}, eps_q, extra_quantiles)

    if non_private:
        mu = math.inf
    else:
        # A relative margin of 1e-10 absorbs the rounding between the planned event
        # (unit sensitivities) and the released one (actual thresholds).
        guess = 1.0 / max(dp_to_gdp(epsilon, delta), 1e-12)
        scale = calibrate_scale(lambda s: planned(1.0 / s), epsilon * (1.0 - 1e-10), delta, initial=guess,
                                rtol=1e-7)
        mu = 1.0 / scale
    budget = SolverBudget(mu, eps_q)
    solver.check_budget(spec, budget)
    post = {name: ("gaussian", ratio * mu) for name, ratio in ratios.items()}
    return BudgetPlan(standardiser, solver, spec, budget, planned(mu), _check_mu(post), starved, post)


def _check_mu(post):
    return post["check"][1] if "check" in post and post["check"][0] == "gaussian" else 0.0


def _with_post_fit(events, post_mus, eps_q, extra_quantiles):
    """The fit's event: the given releases, the extra quantiles, then one Gaussian release per post-fit part."""
    extra = [ExponentialMechanismRelease(eps_q)] * extra_quantiles
    return Sequential(list(events) + extra + [GaussianRelease(1.0, 0.0 if math.isinf(mu) else 1.0 / mu)
                                              for mu in post_mus.values()])


def _warn_starved(epsilon, n, eps_q, fit_check, stacklevel):
    consequence = ("the fit is likely worse than predicting the mean, possibly far worse, so the constant is "
                   "returned unless the private fit check finds the model clearly better" if fit_check else
                   "the model is likely poor")
    warnings.warn(
        f"With epsilon={epsilon:g} and {n} rows (epsilon * n_samples = {epsilon * n:.0f}) the private "
        f"quantiles that locate and scale the data get epsilon * n = {eps_q * n:.0f} each; below about "
        f"{STARVED_EPS_TIMES_N:.0f} they are unreliable and {consequence}. Standardise the data with public "
        "knowledge and use scaling='none', or use a larger epsilon.", LowBudgetWarning, stacklevel=stacklevel)


PURE_MODES = ("robust", "pooled", "none")


def plan_pure_budget(*, epsilon, n_samples, n_features, fit_intercept, solver, make_spec, scaling="auto",
                     scaling_share="auto", scale_target=True, stacklevel=3, post_fit=None, extra_quantiles=0,
                     declared=None, block_means=False):
    """The :class:`BudgetPlan` of a pure epsilon-DP fit (``delta = 0``), from public inputs only.

    Only pure mechanisms are used: the exponential-mechanism quantiles of the
    column-wise modes (robust, pooled, none; the whitened modes release a
    Gaussian second-moment matrix, so ``block_means``, a request of the
    whitened modes, is accepted and has no effect) and Laplace-type releases.
    They compose by basic composition: the quantiles get
    ``epsilon * n >= 80`` each within 25% of ``epsilon`` (robust, else
    pooled; 40% when even pooled is short), every post-fit release
    (``post_fit``, ``{name: share}``) its share of the rest, and the solver
    what remains, ``SolverBudget.pure_epsilon``.
    """
    post_fit = {} if post_fit is None else post_fit
    n, d = n_samples, n_features
    if not solver.capabilities.pure_dp:
        raise ValueError(f"algorithm={solver.name!r} has no pure-DP version (delta=0); use delta > 0.")
    if scaling != "auto" and scaling not in PURE_MODES:
        raise ValueError(f"With delta=0 (pure DP) scaling must be 'auto' or one of {PURE_MODES}: the other "
                         f"modes release a Gaussian second-moment matrix. Got scaling={scaling!r}.")
    spec = make_spec("none")

    def eps_for(mode, cap):
        count = (PrivateStandardiser.n_quantiles(mode, d, fit_intercept, scale_target, declared)
                 + solver.n_quantiles(spec) + extra_quantiles)
        if count == 0 or math.isinf(epsilon):
            return count, math.inf
        if scaling_share == "auto":
            share = min(cap, max(count * MIN_QUANTILE_EPS_TIMES_N / (n * epsilon), 0.02))
        else:
            share = float(scaling_share)
        return count, share * epsilon / count

    if scaling != "auto":
        mode = scaling
        count, eps_q = eps_for(mode, MAX_SCALING_SHARE)
    else:
        for mode in _AUTO_TIERS:
            count, eps_q = eps_for(mode, MAX_SCALING_SHARE)
            if eps_q * n >= MIN_QUANTILE_EPS_TIMES_N:
                break
        else:
            count, eps_q = eps_for(mode, STARVED_SCALING_SHARE)
    starved = mode != "none" and eps_q * n < STARVED_EPS_TIMES_N
    if starved:
        _warn_starved(epsilon, n, eps_q, False, stacklevel + 1)
    spec = make_spec(mode)
    standardiser = PrivateStandardiser(mode, eps_q, fit_intercept, scale_target=scale_target, declared=declared)
    pre_event = standardiser.planned_event(d)
    if math.isinf(epsilon):
        rest = math.inf
    else:
        # What the quantiles leave, less a relative margin for rounding.
        rest = (epsilon - (count * eps_q if math.isfinite(eps_q) else 0.0)) * (1.0 - 1e-10)
    post = {name: ("pure", share * rest) for name, share in post_fit.items()}
    solver_epsilon = rest * (1.0 - sum(post_fit.values()))
    budget = SolverBudget(0.0, eps_q, pure_epsilon=solver_epsilon)
    solver.check_budget(spec, budget)
    extra = [ExponentialMechanismRelease(eps_q)] * extra_quantiles
    event = Sequential([pre_event, solver.plan(spec, budget), *extra,
                        *(ApproxDPRelease(level, 0.0) for _, level in post.values())])
    return BudgetPlan(standardiser, solver, spec, budget, event, 0.0, starved, post)


def _plan_whitened(epsilon, delta, n, d, fit_intercept, solver, make_spec, mode, eps_q, *, scale_target=True,
                   post_fit=REGRESSION_POST_FIT, extra_quantiles=0, declared=None, block_means=False):
    """The plan of a whitened mode: one Gaussian budget ``mu`` shared by standardisation and solver."""
    spec = make_spec(mode)
    full = not spec.l1 and (not spec.ridge or solver.capabilities.matrix_penalty)
    over = math.inf if math.isinf(epsilon) else dp_to_gdp(epsilon, delta)  # a public over-estimate of mu
    if declared is None:
        check = PrivateStandardiser.magnitude_check_useful(n, d, over)
    else:  # only the undeclared columns are checked
        free = declared.n_free(d)
        check = free > 0 and PrivateStandardiser.magnitude_check_useful(n, free, over)

    def standardiser(mu, bound_multiplier=1.0):
        return PrivateStandardiser(mode, eps_q, fit_intercept, mu=mu, bound_multiplier=bound_multiplier,
                                   full_whitening=full, magnitude_check=check, scale_target=scale_target,
                                   declared=declared, block_means=block_means)

    share = standardiser(1.0).gaussian_share()
    solver_fraction = math.sqrt(1.0 - share - sum(post_fit.values()))
    fractions = {name: math.sqrt(part) for name, part in post_fit.items()}

    def with_post_fit(events, mu):
        return _with_post_fit(events, {name: f * mu for name, f in fractions.items()}, eps_q, extra_quantiles)

    def planned(mu):
        return with_post_fit([standardiser(mu).planned_event(d),
                              solver.plan(spec, SolverBudget(solver_fraction * mu, eps_q))], mu)

    if math.isinf(epsilon):
        mu = math.inf
    else:
        guess = 1.0 / max(over, 1e-12)
        mu = 1.0 / calibrate_scale(lambda s: planned(1.0 / s), epsilon * (1.0 - 1e-10), delta, initial=guess,
                                   rtol=1e-7)
    budget = SolverBudget(solver_fraction * mu, eps_q)
    solver.check_budget(spec, budget)
    # Row bounds grow with the public budget per coefficient (infinite without noise).
    nu = n * budget.mu / spec.n_coef
    bound_multiplier = max(1.0, (nu / ROW_BOUND_NU0) ** 0.25) if math.isfinite(nu) else math.inf
    final = standardiser(mu, bound_multiplier)
    event = with_post_fit([final.planned_event(d), solver.plan(spec, budget)], mu)
    post = {name: ("gaussian", f * mu) for name, f in fractions.items()}
    return BudgetPlan(final, solver, spec, budget, event, _check_mu(post), False, post)
