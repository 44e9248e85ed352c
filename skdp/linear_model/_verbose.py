"""The ``verbose`` output of a private fit, shared by every estimator of the pipeline.

``verbose=1`` prints one line per stage of :class:`~skdp.linear_model._pipeline.PrivateLinearModel`
with the stage's wall-clock time: the budget plan with the share of every part,
the released scales, the solver, the post-fit releases (class counts,
calibration, fit check) and the spend. ``verbose=2`` adds the solver's progress
every tenth of its iterations (iteration, elapsed time, step size), received
through :func:`~skdp.solvers.progress_hook` from the solvers' run loops.

What may be printed (the privacy contract, section 3 of the design): public
inputs (n, the number of features, the parameters, the plan computed from
them) and released values (the scales in ``scaling_``, the schedule in
``schedule_``, the fit check in ``fit_check_``, step sizes, which are public
or derived from releases). Nothing else computed from the data: no raw norms,
no clipped fractions, no losses that were not released. Released numbers are
printed with four significant digits (:func:`released`), public ones with
:func:`public`. Elapsed times are wall-clock times of the computation; like any
timing they are outside the guarantee (as floating-point side channels are).

Printing happens after the budget is reserved, where nothing may raise: a
failing ``print`` (a closed stream, say) is ignored.
"""

import functools
import math
import time

import numpy as np

__all__ = ["FitReporter", "released", "public", "budget_shares"]

# Progress lines per solver loop at verbose=2 (about one every tenth of the iterations).
PROGRESS_LINES = 10
# Scalar schedule entries shown on the solver line (the rest stay in schedule_).
MAX_SCHEDULE_ITEMS = 8


def _never_raises(method):
    """Stage printers run after the budget is reserved: a failure in one prints nothing instead of raising."""

    @functools.wraps(method)
    def safe(self, *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        except Exception:  # noqa: BLE001 - an exception after the reservation would be a release
            return None

    return safe


def released(value):
    """A released number as printed (four significant digits)."""
    return f"{float(value):.4g}"


def public(value):
    """A public number as printed."""
    return f"{value:g}" if isinstance(value, float) else str(value)


def _rho(event):
    """The zCDP cost of an event built of Gaussian, exponential-mechanism and zCDP releases, else None."""
    from ..accounting import ExponentialMechanismRelease, GaussianRelease, ZCDPRelease

    total = 0.0
    for item in event._items():
        leaf = item.event
        if isinstance(leaf, GaussianRelease):
            cost = math.inf if leaf.noise_std == 0 else 0.5 * (leaf.sensitivity / leaf.noise_std) ** 2
        elif isinstance(leaf, ExponentialMechanismRelease):
            cost = leaf.epsilon0**2 / 8.0  # bounded range (Cesar and Rogers)
        elif isinstance(leaf, ZCDPRelease):
            cost = leaf.rho
        else:
            return None
        total += item.count * cost
    return total


def budget_shares(plan):
    """``[(part, share)]`` of the planned event's parts, or None when no common measure applies.

    The parts are those of the plan's event in order: the standardisation, the
    solver, the extra quantiles and the post-fit releases (named as in the
    plan). Shares are of the zCDP cost (Gaussian and exponential-mechanism
    releases), or of epsilon for a pure-DP plan (basic composition). Public:
    the plan is computed from public inputs only.
    """
    parts = list(plan.event.events)
    names = ["scaling", "solver"]
    post = list(plan.post_budgets or {})
    extra = len(parts) - len(names) - len(post)
    names += ["score scale"] * extra + post
    if plan.budget.pure:
        costs = [part.epsilon(0.0) for part in parts]
    else:
        costs = [_rho(part) for part in parts]
    if any(c is None or not math.isfinite(c) for c in costs) or sum(costs) <= 0:
        return None
    total = sum(costs)
    merged = {}
    for name, cost in zip(names, costs):
        merged[name] = merged.get(name, 0.0) + cost / total
    return list(merged.items())


class FitReporter:
    """Prints the stages of one fit for an estimator with ``verbose > 0`` (does nothing otherwise).

    Parameters
    ----------
    estimator : estimator
        Its class name prefixes every line; its ``verbose`` sets the level.
    """

    def __init__(self, estimator):
        self.prefix = f"[{type(estimator).__name__}]"
        verbose = estimator.verbose
        self.level = int(verbose) if verbose else 0
        self._start = self._mark = time.perf_counter()

    def __bool__(self):
        return self.level > 0

    def emit(self, line):
        """Print one line; never raises (it runs after the budget is reserved)."""
        try:
            print(f"{self.prefix} {line}", flush=True)
        except Exception:  # noqa: BLE001 - a failing stream must not become an exception after the charge
            pass

    def stage(self, text):
        """One stage line with the time since the previous stage (verbose >= 1)."""
        if self.level < 1:
            return
        now = time.perf_counter()
        elapsed, self._mark = now - self._mark, now
        self.emit(f"{text} ({elapsed:.2f} s)")

    def elapsed(self):
        """Seconds since the fit started."""
        return time.perf_counter() - self._start

    # -- the stages -------------------------------------------------------------------------------
    @_never_raises
    def plan(self, plan, n, d, delta, auto_delta, epsilon):
        if self.level < 1:
            return
        mode = plan.standardiser.mode
        n_q = plan.standardiser.n_quantiles(mode, d, plan.standardiser.fit_intercept,
                                            plan.standardiser.scale_target, plan.standardiser.declared)
        eps_q = plan.budget.quantile_epsilon
        text = (f"plan: n_samples={n}, n_features={d}, epsilon={public(float(epsilon))}, "
                f"delta={delta:.3g}{' (auto)' if auto_delta else ''}; algorithm={plan.solver.name!r}, "
                f"scaling={mode!r} ({n_q} private quantiles")
        text += f" at epsilon {eps_q:.3g} each)" if n_q and math.isfinite(eps_q) else ")"
        if math.isinf(float(epsilon)):
            self.stage(text + "; no noise (epsilon=inf)")
            return
        shares = budget_shares(plan)
        if shares is not None:
            measure = "epsilon" if plan.budget.pure else "zCDP"
            text += f"; budget shares ({measure}): " + ", ".join(f"{name} {100 * s:.1f}%" for name, s in shares)
        if plan.budget.pure:
            text += f"; solver epsilon {plan.budget.pure_epsilon:.3g}"
        else:
            text += f"; solver mu {plan.budget.mu:.3g}"
        self.stage(text)

    @_never_raises
    def scales(self, scaling, scale_target):
        if self.level < 1:
            return
        text = f"scales released: mode={scaling.mode!r}"
        if scale_target:
            text += (f", target centre {released(scaling.target_center)}, "
                     f"target scale {released(scaling.target_scale)}")
        text += f", row bound {released(scaling.row_bound)}"
        if scaling.typical_row_norm is not None:
            text += f", typical row norm {released(scaling.typical_row_norm)}"
        self.stage(text)

    @_never_raises
    def solver(self, name, schedule):
        if self.level < 1:
            return
        steps = int(schedule.get("n_steps", 0))
        items = []
        for key, value in schedule.items():
            if key in ("algorithm", "n_steps") or len(items) >= MAX_SCHEDULE_ITEMS:
                continue
            if isinstance(value, (bool, np.bool_, str)):
                items.append(f"{key}={value}")
            elif isinstance(value, (int, np.integer)):
                items.append(f"{key}={int(value)}")
            elif isinstance(value, (float, np.floating)):
                items.append(f"{key}={released(value)}")
        text = f"solver {name}: {steps} iterations"
        if items:
            text += "; " + ", ".join(items)
        self.stage(text)

    @_never_raises
    def post_fit(self, plan, post):
        if self.level < 1 or not plan.post_budgets:
            return
        budgets = ", ".join(f"{name} (epsilon {level:.3g})" if kind == "pure" else f"{name} (mu {level:.3g})"
                            for name, (kind, level) in plan.post_budgets.items())
        text = f"post-fit releases: {budgets}"
        shown = post.extras.get("verbose", {})
        if shown:
            text += "; " + ", ".join(f"{name} {released(value)}" for name, value in shown.items())
        check = post.check
        if check is not None:
            info = check.as_dict()
            text += (f"; fit check: released improvement {info['improvement']:+.4g}, noise std "
                     f"{released(info['noise_std'])}, "
                     + ("constant returned" if check.fallback else "doubtful" if check.doubtful else "model kept"))
        self.stage(text)

    # -- solver progress (verbose >= 2) ----------------------------------------------------------------
    def progress_callback(self, solver_name):
        """The :func:`~skdp.solvers.progress_hook` callback of the solver's run, or None below verbose=2."""
        if self.level < 2:
            return None
        start = time.perf_counter()
        state = {"next": 1, "total": None, "last": 0}

        def report(iteration, n_iterations, step_size=None, **counts):
            # A loop that starts again (the next phase of a solver that loops per phase) restarts the throttle.
            if n_iterations != state["total"] or iteration <= state["last"]:
                state["total"], state["next"] = n_iterations, 1
            state["last"] = iteration
            last = n_iterations is not None and iteration == n_iterations
            if iteration < state["next"] and not last:
                return
            if n_iterations is None:
                state["next"] = 2 * iteration  # 1, 2, 4, 8, ...
            else:
                state["next"] = iteration + max(1, n_iterations // PROGRESS_LINES)
            text = f"solver {solver_name}: iteration {iteration}"
            text += f"/{n_iterations}" if n_iterations is not None else ""
            text += f", {time.perf_counter() - start:.2f} s"
            if step_size is not None:
                text += f", step size {released(step_size)}"
            for key, value in counts.items():
                text += f", {value:.3g} {key.replace('_', ' ')}"
            self.emit(text)

        return report
