"""Certified minimisation of strongly convex objectives and output perturbation.

Output perturbation releases ``argmin G_D + noise``. Its sensitivity argument
(adding the strong-convexity inequalities of ``G_D`` and ``G_D'`` at their
minimisers) bounds the distance between *exact* minimisers by
``2 L / (mu n)`` when ``G_D`` is the mean of ``n`` per-row losses, each
``L``-Lipschitz on the domain, plus a data-independent mu-strongly convex part.
A numerical solver only approximates the minimiser, so we release a point ``x``
with a *certificate* ``||x - x*|| <= tol`` and add ``2 tol`` to the sensitivity.

The certificate is the gradient mapping: with ``x+ = P(x - t grad f(x))`` and a
step ``t`` that passes the sufficient-decrease test (found by backtracking, so a
wrong smoothness constant cannot break it), strong convexity gives
``||x - x*|| <= 2 ||x - x+|| / (t mu)``. The tolerance is fixed in advance from
public quantities and the solver never releases an uncertified point. Projected
gradient descent provably reaches the certificate within a number of steps that
depends only on public quantities and the step, so the solver always returns;
the number of iterations it took depends on the data and is not exposed, but
the wall-clock time of a fit reveals it (as it does for any iterative solver
run to a tolerance): do not publish fit times of private models. Floating point
limits the tolerance that can be certified: both bounds carry a margin for
rounding, and tolerances below ``16 eps * smoothness / strong_convexity *
(radius + |center|)`` are refused before anything is computed.

**A guarantee that needs no certificate.** Close to that floor the certificate
itself is decided by rounding, so whether it passes can depend on one row. A
private caller must not raise there (an exception after the budget is charged
is a release). When the caller declares ``smoothness`` a true upper bound and
gives ``gradient_bound`` (a bound on the gradient norm at the start), the
distance guarantee follows from public constants alone: the solver is then
V-FISTA (steps ``1 / smoothness``, constant momentum ``(sqrt(k) - 1) / (sqrt(k)
+ 1)``, ``k = smoothness / strong_convexity``; Beck, *First-Order Methods in
Optimization*, 2017, Theorem 10.42) for a number of steps computed from
``(strong_convexity, smoothness, radius, gradient_bound, tol)`` only
(:func:`guaranteed_steps`), after which ``||x - x*|| <= tol / 2`` in exact
arithmetic; the certificate may end it earlier. Either way the point returned
is within ``tol`` of the minimiser, and nothing raises after the public
arguments are checked.
"""

import math
from dataclasses import dataclass

import numpy as np

from ..accounting import GaussianRelease
from ._random import check_generator

__all__ = ["CertifiedSolution", "certified_minimize", "erm_sensitivity", "guaranteed_steps", "output_perturbation"]


@dataclass(frozen=True)
class CertifiedSolution:
    """A point within ``tol`` of the exact minimiser (its iteration count is not kept:
    it depends on the data and must not be released)."""

    x: np.ndarray
    tol: float


def _ball_projector(center, radius):
    def project(v):
        if math.isinf(radius):
            return v
        diff = v - center
        norm = float(np.linalg.norm(diff))
        if norm <= radius:
            return v
        return center + diff * (radius / norm)

    return project


def _gradient_step(fun_and_grad, project, x, f_x, g_x, step, min_step=0.0):
    """Projected gradient step from ``x`` with backtracking on the sufficient-decrease test.

    The test ``f(x+) <= f(x) + <g, d> + |d|^2 / (2t)`` is what the certificate
    needs. For a convex ``f`` it follows from ``<grad f(x+) - g, d> <= |d|^2/(2t)``
    (since ``f(x+) - f(x) <= <grad f(x+), d>``), a form that compares gradients
    instead of nearly equal function values and so stays exact in floating point
    close to the minimiser; either form is accepted. At ``step <= min_step`` (the
    inverse of a true smoothness bound) the test holds in exact arithmetic, so a
    failure there is rounding and the step is taken.
    """
    while True:
        x_new = project(x - step * g_x)
        diff = x_new - x
        f_new, g_new = fun_and_grad(x_new)
        quad = float(diff @ diff) / (2.0 * step)
        if (step <= min_step or float((g_new - g_x) @ diff) <= quad
                or f_new <= f_x + float(g_x @ diff) + quad):
            return x_new, f_new, g_new, step
        step *= 0.5
        if step < 1e-300:  # pragma: no cover - only for a non-finite objective
            raise FloatingPointError("Backtracking failed: is the objective finite and smooth?")


def guaranteed_steps(strong_convexity, smoothness, radius, gradient_bound, tol):
    """V-FISTA steps after which the iterate is within ``tol / 2`` of the minimiser (public constants only).

    For ``F = f + indicator(ball)`` with ``f`` ``mu``-strongly convex and
    ``H``-smooth, V-FISTA with step ``1 / H`` satisfies
    ``F(x_k) - F* <= (1 - 1 / sqrt(kappa))^k (F(x_0) - F* + mu / 2 ||x_0 - x*||^2)``
    (Beck 2017, Theorem 10.42), and strong convexity gives
    ``||x_k - x*||^2 <= 2 (F(x_k) - F*) / mu``. With ``x_0`` and ``x*`` in the
    ball (distance at most ``2 radius``) and ``F(x_0) - F* <= G 2 radius``
    (convexity, ``G`` a bound on ``||grad f(x_0)||``), the smallest ``k`` with
    ``2 / mu (1 - 1 / sqrt(kappa))^k (2 G radius + 2 mu radius^2) <= (tol / 2)^2``.
    Computed in logarithms (no product of the constants can overflow or
    underflow), with the contraction ``1 - sqrt(mu / H)`` formed without
    cancellation when ``H`` is within rounding of ``mu``. Returns ``inf`` when a
    constant is not a finite positive number (a caller then cannot run it).

    Examples
    --------
    >>> from skdp.mechanisms import guaranteed_steps
    >>> guaranteed_steps(strong_convexity=1.0, smoothness=100.0, radius=1.0, gradient_bound=10.0, tol=1e-6)
    312
    >>> guaranteed_steps(1.0, 1.0 + 2.0**-52, 1.0, 1.0, 1e-3)
    1
    """
    mu, H, r, G, tol = (float(v) for v in (strong_convexity, smoothness, radius, gradient_bound, tol))
    finite_positive = all(0.0 < v < math.inf for v in (mu, r, tol))
    if not (finite_positive and 0.0 <= G < math.inf and H < math.inf):
        return math.inf
    H = max(H, mu)
    # log(2 / mu * 2 r (G + mu r)) and log((tol / 2)^2).
    log_start = math.log(4.0) - math.log(mu) + math.log(r) + math.log(G + mu * r)
    log_target = 2.0 * (math.log(tol) - math.log(2.0))
    if log_start <= log_target:
        return 0
    # The contraction per step, 1 - sqrt(mu / H), as (H - mu) / (sqrt(H) (sqrt(H) + sqrt(mu))).
    contraction = (H - mu) / (math.sqrt(H) * (math.sqrt(H) + math.sqrt(mu)))
    if contraction <= 0.0:
        return 1  # H == mu: one step of length 1 / mu lands on the minimiser of a quadratic-like f
    rate = -math.log(contraction) if contraction < 0.5 else -math.log1p(-math.sqrt(mu / H))
    return max(1, math.ceil((log_start - log_target) / rate))


def certified_minimize(fun_and_grad, x0, *, strong_convexity, smoothness, tol, center=None,
                       radius=math.inf, max_iter=None, gradient_bound=None):
    """Minimise a strongly convex smooth function over a ball, with a distance certificate.

    Parameters
    ----------
    fun_and_grad : callable
        ``x -> (value, gradient)`` of a ``strong_convexity``-strongly convex,
        differentiable function.
    x0 : ndarray
        Starting point (projected onto the ball).
    strong_convexity : float > 0
        Public strong-convexity constant ``mu``.
    smoothness : float > 0
        Smoothness estimate; sets the initial step and the momentum. If it is
        too small the solver backtracks (slower, equally certified).
    tol : float > 0
        Required certified distance to the exact minimiser.
    center : ndarray, optional
        Centre of the feasible ball (default: the origin).
    radius : float
        Radius of the feasible ball. Must be finite; for an unconstrained
        objective pass a radius that provably contains the minimiser.
    max_iter : int, optional
        Iteration budget of the accelerated phase (default: ``20 * sqrt(H / mu)``
        times the number of halvings of the initial distance needed).
    gradient_bound : float, optional
        A bound on the gradient norm of ``fun_and_grad`` at the (projected)
        start. Giving it declares ``smoothness`` a true upper bound, and the
        function then never raises after checking its arguments: it runs at
        most :func:`guaranteed_steps` V-FISTA steps (see the module docstring). Without it, ``smoothness`` may be an estimate
        (backtracking corrects it) and a run that cannot be certified raises
        ``RuntimeError``.

    Returns
    -------
    CertifiedSolution

    Examples
    --------
    >>> import numpy as np
    >>> from skdp.mechanisms import certified_minimize
    >>> A = np.diag([1.0, 10.0]); b = np.array([1.0, -2.0])
    >>> f = lambda x: (0.5 * x @ A @ x - b @ x, A @ x - b)
    >>> sol = certified_minimize(f, np.zeros(2), strong_convexity=1.0, smoothness=10.0,
    ...                          tol=1e-8, radius=10.0)
    >>> np.allclose(sol.x, np.linalg.solve(A, b), atol=1e-8)
    True
    """
    mu = float(strong_convexity)
    H = float(smoothness)
    tol = float(tol)
    radius = float(radius)
    if not (mu > 0 and H > 0 and tol > 0):
        raise ValueError("certified_minimize needs strong_convexity, smoothness and tol > 0.")
    if not math.isfinite(radius) or radius <= 0:
        raise ValueError("certified_minimize needs a finite, positive radius (a ball that "
                         "contains the minimiser).")
    bounded = gradient_bound is not None
    if bounded and not (math.isfinite(float(gradient_bound)) and gradient_bound >= 0 and math.isfinite(H)):
        raise ValueError("gradient_bound and smoothness must be finite (and gradient_bound >= 0).")
    if bounded and not math.isfinite(guaranteed_steps(mu, H, radius, gradient_bound, tol)):
        raise ValueError("The constants give no finite number of guaranteed steps (is every one a finite "
                         "positive number?).")
    H = max(H, mu)
    # With a true smoothness bound, 1 / H always passes the sufficient-decrease test.
    min_step = 1.0 / H if bounded else 0.0
    x0 = np.asarray(x0, dtype=float)
    center = np.zeros_like(x0) if center is None else np.asarray(center, dtype=float)
    eps = np.finfo(float).eps
    scale = radius + float(np.linalg.norm(center))
    floor = 16.0 * eps * (H / mu) * scale
    if tol < floor:
        raise ValueError(
            f"tol={tol:.3g} is below what floating point can certify for this problem "
            f"(16 eps * smoothness / strong_convexity * (radius + |center|) = {floor:.3g}).")
    project = _ball_projector(center, radius)

    # Budget of projected gradient descent: with a step t that passes the
    # sufficient-decrease test, the squared distance to the minimiser contracts by
    # (1 - mu t) per step from at most (2 radius)^2 (Nesterov's gradient-mapping
    # inequality), and the certificate 2||x - x+||/(t mu) <= 4 ||x - x*|| / (t mu)
    # holds once ||x - x*|| <= tol mu t / 4. The budget is recomputed from the
    # smallest step backtracking has needed, so a wrong smoothness bound costs
    # time, never privacy; the iteration count itself is never released.
    def pgd_budget(step):
        target = tol * mu * step / 4.0
        rate = -math.log1p(-min(mu * step, 1.0 - 1e-16))
        return 1 + int(math.ceil(2.0 * math.log(max(2.0 * radius / target, 1.0)) / rate))

    def certified(x, f_x, g_x, step):
        x_plus, f_plus, g_plus, step = _gradient_step(fun_and_grad, project, x, f_x, g_x, step, min_step)
        # Two valid bounds on ||x - x*|| for feasible x: the gradient bound
        # ||grad f(x)|| / mu (strong convexity + the optimality condition at x*),
        # which has no cancellation, and the gradient-mapping bound, which also
        # handles active constraints; the latter gets a margin for the rounding
        # of x+ (when t * grad is below an ulp of x, x+ == x in floating point).
        size = float(np.linalg.norm(x)) + float(np.linalg.norm(x_plus))
        # Rounding in the gradient is about eps * H * |x|; in x+ about eps * |x|.
        grad_bound = (float(np.linalg.norm(g_x)) + 8.0 * eps * H * size) / mu
        mapping_bound = 2.0 * (float(np.linalg.norm(x - x_plus)) + 8.0 * eps * size) / (step * mu)
        return min(grad_bound, mapping_bound) <= tol, x_plus, f_plus, g_plus, step

    kappa = H / mu
    momentum = (math.sqrt(kappa) - 1.0) / (math.sqrt(kappa) + 1.0)
    if bounded:
        # V-FISTA for a number of steps fixed by public constants (guaranteed_steps); the
        # certificate may end it early. Its last point is within tol / 2 of the minimiser in
        # exact arithmetic, whether or not rounding lets the certificate see it. No restarts:
        # close to the minimiser the objective's changes fall below its rounding, and
        # function-value restarts then fire at random and stall the method (1e5 steps seen).
        x = x_prev = project(x0)
        for it in range(guaranteed_steps(mu, H, radius, gradient_bound, tol)):
            if it % 5 == 0 and certified(x, *fun_and_grad(x), 1.0 / H)[0]:
                break
            y = project(x + momentum * (x - x_prev))
            x_prev, x = x, project(y - fun_and_grad(y)[1] / H)
        return CertifiedSolution(x=x, tol=tol)

    # Phase 1: accelerated projected gradient with function-value restarts.
    if max_iter is None:
        halvings = math.log2(max(8.0 * radius * H / (tol * mu), 2.0))
        max_iter = int(20 * math.sqrt(H / mu) * halvings) + 10
    x = project(x0)
    f_x, g_x = fun_and_grad(x)
    step = 1.0 / H
    x_prev = x
    for it in range(max_iter):
        if it % 5 == 0:
            ok, _, _, _, step = certified(x, f_x, g_x, step)
            if ok:
                return CertifiedSolution(x=x, tol=tol)
        y = project(x + momentum * (x - x_prev))
        f_y, g_y = fun_and_grad(y)
        x_new, f_new, g_new, step = _gradient_step(fun_and_grad, project, y, f_y, g_y, step)
        if f_new > f_x:  # restart: drop the momentum
            x_prev = x
            continue
        x_prev, x, f_x, g_x = x, x_new, f_new, g_new

    # Phase 2: plain projected gradient descent, whose budget is guaranteed.
    done = 0
    while done < pgd_budget(step):
        ok, x_plus, f_plus, g_plus, step = certified(x, f_x, g_x, step)
        if ok:
            return CertifiedSolution(x=x, tol=tol)
        x, f_x, g_x = x_plus, f_plus, g_plus
        done += 1
    raise RuntimeError(  # pragma: no cover - excluded by the contraction argument above
        "The minimiser could not be certified within the projected-gradient budget; the "
        "objective cannot be strongly convex with the stated constant. Nothing was released."
    )


def erm_sensitivity(lipschitz, strong_convexity, n_samples, tol=0.0):
    """Replace-one L2 sensitivity of a certified regularised-ERM solution.

    ``2 L / (mu n) + 2 tol`` for the mean of ``n`` per-row losses that are
    ``L``-Lipschitz on the domain, a data-independent ``mu``-strongly convex
    remainder, and a solution certified within ``tol`` of the exact minimiser.

    Examples
    --------
    >>> from skdp.mechanisms import erm_sensitivity
    >>> erm_sensitivity(lipschitz=1.0, strong_convexity=0.1, n_samples=1000, tol=0.001)
    0.022
    """
    return 2.0 * float(lipschitz) / (float(strong_convexity) * int(n_samples)) + 2.0 * float(tol)


def output_perturbation(fun_and_grad, x0, *, n_samples, lipschitz, strong_convexity, smoothness,
                        noise_std, tol, center=None, radius, random_state=None, gradient_bound=None):
    """Solve a strongly convex ERM to a certified tolerance and add Gaussian noise.

    The caller guarantees the structure behind :func:`erm_sensitivity`: the
    objective is ``(1/n) sum_i loss_i(x) + R(x)`` with every ``loss_i``
    ``lipschitz``-Lipschitz on the ball (enforce it, e.g. with the Lipschitzian
    extension of :mod:`skdp.losses`) and ``R`` independent of the data and
    ``strong_convexity``-strongly convex.

    Give ``gradient_bound`` (a bound on the objective's gradient norm at the
    projected ``x0``, for example ``lipschitz`` plus the regulariser's gradient
    norm there) with ``smoothness`` a true bound, and the solve never raises
    (see :func:`certified_minimize`): in private code, whether an exception is
    raised must not depend on the data.

    Returns
    -------
    noisy : ndarray
    event : GaussianRelease
        With the sensitivity of :func:`erm_sensitivity`.

    Examples
    --------
    >>> import numpy as np
    >>> from skdp.mechanisms import output_perturbation
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(200, 3)); X /= np.maximum(1, np.linalg.norm(X, axis=1))[:, None]
    >>> y = np.sign(X @ [1.0, -1.0, 0.5])
    >>> mu = 0.1
    >>> def f(w):  # mean logistic loss (1-Lipschitz for unit rows) + ridge
    ...     z = y * (X @ w)
    ...     value = np.logaddexp(0, -z).mean() + 0.5 * mu * w @ w
    ...     grad = X.T @ (-y / (1 + np.exp(z))) / len(y) + mu * w
    ...     return value, grad
    >>> w, event = output_perturbation(f, np.zeros(3), n_samples=200, lipschitz=1.0,
    ...                                strong_convexity=mu, smoothness=0.25 + mu,
    ...                                noise_std=0.5, tol=1e-4, radius=1.0 / mu,
    ...                                random_state=0)
    >>> round(event.sensitivity, 6), event.noise_std  # 2 L / (mu n) + 2 tol
    (0.1002, 0.5)
    """
    solution = certified_minimize(fun_and_grad, x0, strong_convexity=strong_convexity,
                                  smoothness=smoothness, tol=tol, center=center, radius=radius,
                                  gradient_bound=gradient_bound)
    sensitivity = erm_sensitivity(lipschitz, strong_convexity, n_samples, tol)
    event = GaussianRelease(sensitivity, noise_std)
    rng = check_generator(random_state)
    noisy = solution.x + event.noise_std * rng.standard_normal(solution.x.shape)
    return noisy, event
