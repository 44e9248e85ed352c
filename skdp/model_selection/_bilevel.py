"""``method="bilevel"`` of the tuner: Kornowski's DP bilevel algorithm for a ridge weight.

The hyperobjective is the validation loss of the model trained at weight
``omega`` (Kornowski, "Differentially Private Bilevel Optimization", section 7):

``F(omega) = mean_val loss(theta*_omega)``,
``theta*_omega = argmin_theta mean_tr loss(theta) + omega / 2 ||theta||^2``,

with the squared loss ``loss_i(theta) = (a_i' theta - b_i)^2 / 2`` (ridge, for
``DPHeavyTailRegressor``) or the logistic loss ``log(1 + exp(-b_i a_i' theta))``
with ``b_i = +-1`` (binary ``DPInterpolatingClassifier``). Its
derivative is estimated without Hessians by the value-function penalty: with
``theta^lambda_omega = argmin_theta mean_tr loss + omega / 2 ||theta||^2 +
mean_val loss / lambda``,

``dF/domega ~ lambda (||theta^lambda||^2 - ||theta*||^2) / 2``

(error ``O(1 / lambda)``; the sign is the corrected one of the spec's section
6.3: if mixing in validation loss shrinks the model, ``omega`` should grow).
Each outer step releases both minimisers by output perturbation and moves
``log omega`` against the estimate with an AdaGrad-norm step, projected on the
public box; the output is the iterate with the smallest move (``t_out``). The
final model is the estimator's own private fit at ``alpha_ = omega_out s^2``
(see *Units*).

Units (why a private scaling first)
-----------------------------------
The sensitivities need a bound ``A`` on the rows and ``B`` on the labels. The
tuner has no public bounds, and none may be read from the data, so a private
scaling is released first with :data:`SCALING_SHARE` of the budget: the
``"pooled"`` mode of :class:`~skdp.linear_model._standardise.PrivateStandardiser`
(one feature scale ``s`` for all columns, a robust centre and scale
``c_y, s_y`` of the target, a private median row norm; five private
quantiles whatever the width, so the share stays small on wide tables). In
those units rows are ``a = [x / s, 1]`` with ``x / s`` clipped to the released
row bound (twice the median norm), so ``||a|| <= A = hypot(row bound, 1)``, and
labels are ``b = clip((y - c_y) / s_y, -B, B)`` with the public
``B =`` :data:`LABEL_BOUND`. Both clips are per-record maps with released or
public thresholds. One pooled scale keeps the geometry of the estimator's
penalty: with ``coef = s_y w / s``, ``mean (y - x coef - b0)^2 / 2 + alpha / 2
||coef||^2 = s_y^2 (mean (b - a' w)^2 / 2 + alpha / (2 s^2) ||w||^2)``, so
``omega = alpha / s^2`` exactly and ``alpha_ = omega_out s^2`` is the
estimator's ``alpha`` (original units of X, mean loss, as ``ElasticNet``). A
per-column scaling would penalise a different norm than the final model does.
The intercept coordinate is penalised in the tuning problem (the target is
centred by the released ``c_y``, so it is small); the final model does not
penalise it. For the classifier nothing about the labels is released (two
quantiles: the pooled scale and the row norm); the labels are ``+-1`` by the
public classes, and the same ``omega = alpha / s^2`` holds (the logistic loss
does not scale).

Privacy (replace-one; each argument is for any data)
----------------------------------------------------
1. *Norm of both minimisers* (``R``, public given the released ``A``).
   ``theta^lambda = (G + omega I)^{-1} g`` with ``G = sum_i w_i a_i a_i'``,
   ``g = sum_i w_i a_i b_i`` and weights ``w_i = 1 / n_tr`` (train) and
   ``1 / (lambda n_val)`` (validation), which sum to ``1 + 1 / lambda``; so
   ``||theta^lambda|| <= (1 + 1/lambda) A B / omega``. Comparing the objective
   at the minimiser with its value at 0 gives
   ``omega / 2 ||theta^lambda||^2 <= (1 + 1/lambda) B^2 / 2``. ``R(omega)`` is the
   smaller of the two bounds; it holds for ``theta*`` too (weights summing to 1).
   Logistic: the optimality condition ``omega theta = -sum_i w_i loss_i'
   a_i`` with ``|loss_i'| <= 1`` gives ``(1 + 1/lambda) A / omega``, and the value at
   0 (``log 2`` per unit weight) gives ``sqrt(2 (1 + 1/lambda) log 2 / omega)``.
2. *Lipschitz constant* on the ball ``||theta|| <= R``: ``||grad loss_i|| =
   |a_i' theta - b_i| ||a_i|| <= A (A R + B) = L(omega)``; logistic: ``L = A``
   everywhere.
3. *Sensitivity of each inner release.* Both objectives are
   ``sum_i w_i loss_i + omega / 2 ||theta||^2``, ``omega``-strongly convex,
   minimised over the ball of radius ``R`` (which contains the minimiser, so
   the constraint is inactive; the argument holds either way). Neighbours
   differ in one row ``j``; its position in the split is fixed by the seeded
   permutation, drawn independently of the data. Adding the strong-convexity
   inequalities of the two objectives at the two minimisers gives
   ``omega ||theta - theta'||^2 <= w_j (loss_j - loss'_j)(theta') - (...)(theta)
   <= 2 w_j L ||theta - theta'||``, so ``||theta - theta'|| <= 2 L max_j w_j / omega``
   with ``max_j w_j = max(1 / n_tr, 1 / (lambda n_val))`` for ``theta^lambda``
   and ``1 / n_tr`` for ``theta*`` (a validation row does not enter it). The
   spec's ``Delta(omega) = 2 L(omega) max(1 / n_tr, 1 / (lambda n_val)) / omega``
   bounds both; since ``lambda >= n_tr / n_val`` it equals ``2 L / (omega n_tr)``.
   The solver (:func:`~skdp.mechanisms.certified_minimize`, started at the
   linear-algebra solution (logistic: at a damped-Newton solution, or 0 if that
   fails), with a true smoothness bound (``(1 + 1/lambda) A^2`` times 1, or
   1/4 for the logistic loss, plus ``omega``) and a gradient bound valid on the
   whole ball, so it never raises) returns a point within ``tol``
   of the minimiser; the sensitivity is ``Delta + 2 tol``
   (:func:`~skdp.mechanisms.erm_sensitivity`). The two releases use the same
   sensitivity and the same noise, so ``E||theta~||^2 = ||theta||^2 + p sigma^2``
   biases both norms equally and the bias cancels in the difference.
4. *Budget.* Every inner release is a Gaussian release with
   ``sigma_t = Delta(omega_t) / sqrt(2 rho_call)``: ``rho_call``-zCDP whatever
   ``omega_t`` is, so the adaptive choice of ``omega_t`` (a function of released
   values) does not change the cost. The event of the whole procedure — the
   scaling's five quantiles (two for the classifier), ``2T`` Gaussian releases at ``rho_call`` and the
   refit's own planned event at its epsilon — is planned from public inputs
   (``n``, ``d``, the parameters) before any data value is read, and its parts
   are scaled by one multiplier calibrated so that its epsilon is the target.
   Shares of the zero-concentrated budget: :data:`SCALING_SHARE` for the
   scaling, :data:`REFIT_SHARE` for the final model, the rest to the ``2T``
   inner releases. Sequential composition throughout (the refit reads every
   row; a training row enters all ``2T`` inner releases).
5. *Outer update = post-processing* (spec 6.4). ``lambda (||theta~^lambda||^2 -
   ||theta~||^2) / 2`` reads no data: ``R`` is data-free and ``d g / d omega =
   R(theta)`` is the same for every row. The step sizes, the projection, the
   penalty ``lambda`` (a function of released ``A`` and public inputs), the
   box (``alphas`` divided by the released ``s^2``), ``t_out`` and ``alpha_``
   are functions of released values, so they need no noise.
6. *Nothing raises after the reservation.* Non-finite estimates are mapped to 0
   (no move); a failed linear solve starts the certified solver at 0; released
   scales and bounds are clamped into public ranges before use; the refit is
   an skdp fit, which never raises after its own plan was checked (its plan is
   checked on a copy before the tuner's reservation).

Noise is drawn from the fit's generator (floating-point samplers are not
hardened against side channels).
"""

import math
import warnings
from dataclasses import dataclass

import numpy as np
from scipy.special import expit
from sklearn.base import clone

from .._base import nested_fits
from .._validation import InvalidParameterError
from ..accounting import (
    GaussianRelease,
    Sequential,
    calibrate_sampled_gaussian,
    calibrate_scale,
    dp_to_zcdp,
    zcdp_to_dp,
)
from ..linear_model import DPHeavyTailRegressor, DPInterpolatingClassifier
from ..linear_model._standardise import PrivateStandardiser
from ..mechanisms import certified_minimize, clip_rows, erm_sensitivity, gaussian_mechanism
from ._bilevel_sgd import INNER_STEPS, MinibatchPair, planned_steps, sampling_rate

__all__ = ["OMEGA_BOUNDS", "LABEL_BOUND", "SCALING_SHARE", "REFIT_SHARE", "InnerProblem", "check_estimator",
           "fit_bilevel", "descend", "hypergradient", "outer_step", "auto_penalty"]

# Default box of omega in the tuning units (rows of typical norm sqrt(d), labels in target scales).
OMEGA_BOUNDS = (1e-3, 10.0)
# Labels are clipped at this many released target scales.
LABEL_BOUND = 3.0
# Shares of the zero-concentrated budget: the private scaling, the final model.
SCALING_SHARE = 0.05
REFIT_SHARE = 0.5
# Largest penalty lambda (spec 9.4 step 2).
PENALTY_MAX = 1e6
# Sparse input is densified for the inner problems; beyond this many values it is refused before any spend.
MAX_DENSE_VALUES = 50_000_000
# Released bounds and scales are clamped into this range (a public rule) before any use.
_CLAMP = (1e-12, 1e12)
_EPS = np.finfo(float).eps


def _clamp(value):
    value = float(value)
    if not math.isfinite(value):
        return _CLAMP[1] if value > 0 else _CLAMP[0]
    return min(max(value, _CLAMP[0]), _CLAMP[1])


@dataclass(frozen=True)
class InnerProblem:
    """Public constants of the two inner problems at a penalty ``lambda`` (privacy items 1-3).

    Parameters
    ----------
    row_bound : float
        ``A``: every row (intercept column included) has norm at most ``A``.
    label_bound : float
        ``B``: every label lies in ``[-B, B]``.
    penalty : float
        ``lambda >= n_train / n_val``.
    n_train, n_val : int

    Examples
    --------
    >>> from skdp.model_selection._bilevel import InnerProblem
    >>> p = InnerProblem(row_bound=2.0, label_bound=1.0, penalty=1.0, n_train=100, n_val=100)
    >>> p.radius(1.0)  # min(2 A B / omega, B sqrt(2 / omega))
    1.4142135623730951
    >>> round(p.lipschitz(1.0), 6)  # A (A R + B)
    7.656854
    """

    row_bound: float
    label_bound: float
    penalty: float
    n_train: int
    n_val: int
    loss: str = "squared"

    @property
    def weight(self):
        """Total weight ``1 + 1 / lambda`` of the rows in the ``theta^lambda`` problem."""
        return 1.0 + 1.0 / self.penalty

    def radius(self, omega):
        A, B, w = self.row_bound, self.label_bound, self.weight
        if self.loss == "logistic":  # |loss'| <= 1 and loss(0) = log 2
            return min(w * A / omega, math.sqrt(2.0 * w * math.log(2.0) / omega))
        return min(w * A * B / omega, B * math.sqrt(w / omega))

    def lipschitz(self, omega):
        if self.loss == "logistic":
            return self.row_bound
        return self.row_bound * (self.row_bound * self.radius(omega) + self.label_bound)

    def smoothness(self, omega):
        """A true bound on the Hessian of either objective: ``(1 + 1/lambda) c A^2 + omega``.

        ``c = 1`` for the squared loss and ``1 / 4`` for the logistic loss.
        """
        return self.weight * self.row_bound**2 * (0.25 if self.loss == "logistic" else 1.0) + omega

    def max_row_weight(self):
        return max(1.0 / self.n_train, 1.0 / (self.penalty * self.n_val))

    def core_sensitivity(self, omega):
        """``Delta(omega) = 2 L max(1 / n_tr, 1 / (lambda n_val)) / omega`` (exact minimisers)."""
        return 2.0 * self.lipschitz(omega) * self.max_row_weight() / omega

    def tol(self, omega):
        """The certified distance: far below ``Delta``, and four times the floating-point floor."""
        H = max(self.smoothness(omega), omega)
        floor = 16.0 * _EPS * (H / omega) * self.radius(omega)
        # The logistic solve has no closed form: a looser (still negligible) certificate.
        share = 1e-6 if self.loss == "logistic" else 1e-9
        return max(share * self.core_sensitivity(omega), 4.0 * floor)

    def sensitivity(self, omega):
        """``Delta(omega) + 2 tol`` (:func:`~skdp.mechanisms.erm_sensitivity`), the same for both problems."""
        return erm_sensitivity(self.lipschitz(omega) * self.max_row_weight() * self.n_train, omega,
                               self.n_train, self.tol(omega))

    def release(self, gram, rhs, omega, noise_std, rng):
        """Release ``argmin theta' gram theta / 2 - rhs' theta + omega / 2 ||theta||^2`` + noise.

        ``gram`` and ``rhs`` are ``sum_i w_i a_i a_i'`` and ``sum_i w_i a_i b_i`` of
        one inner problem (clipped rows). Never raises.

        Returns
        -------
        noisy : ndarray
        event : GaussianRelease
        """
        p = rhs.shape[0]
        M = gram + omega * np.eye(p)
        try:
            start = np.linalg.solve(M, rhs)
        except np.linalg.LinAlgError:
            start = np.zeros(p)
        if not np.all(np.isfinite(start)):
            start = np.zeros(p)

        def fun_and_grad(theta):
            g = M @ theta - rhs
            return 0.5 * float(theta @ (g - rhs)), g

        return self._certified_release(fun_and_grad, start, omega, noise_std, rng)

    def release_logistic(self, Z, b, weights, omega, noise_std, rng):
        """Release ``argmin sum_i weights_i log(1 + exp(-b_i z_i' theta)) + omega / 2 ||theta||^2`` + noise.

        ``b`` in {-1, +1}; ``weights`` are ``1 / n_tr`` on training rows and
        ``1 / (lambda n_val)`` (or 0) on validation rows. Never raises.
        """
        def fun_and_grad(theta):
            margin = b * (Z @ theta)
            value = float(weights @ np.logaddexp(0.0, -margin)) + 0.5 * omega * float(theta @ theta)
            return value, Z.T @ (weights * -b * expit(-margin)) + omega * theta

        def hessian(theta):
            p_ = expit(b * (Z @ theta))
            return (Z * (weights * p_ * (1.0 - p_))[:, None]).T @ Z + omega * np.eye(Z.shape[1])

        try:  # a fast start (damped Newton); the certificate below does not depend on it
            start = _damped_newton(fun_and_grad, hessian, np.zeros(Z.shape[1]))
        except Exception:  # noqa: BLE001 - any failure only changes the start
            start = np.zeros(Z.shape[1])
        if not np.all(np.isfinite(start)):
            start = np.zeros(Z.shape[1])
        return self._certified_release(fun_and_grad, start, omega, noise_std, rng)

    def _certified_release(self, fun_and_grad, start, omega, noise_std, rng):
        radius, H = self.radius(omega), self.smoothness(omega)
        # A gradient bound valid at every point of the ball, hence at the (projected) start.
        gradient_bound = self.weight * self.lipschitz(omega) + omega * radius
        solution = certified_minimize(fun_and_grad, start, strong_convexity=omega, smoothness=H,
                                      tol=self.tol(omega), radius=radius, gradient_bound=gradient_bound)
        return gaussian_mechanism(solution.x, self.sensitivity(omega), noise_std, random_state=rng)

    def release_pair(self, stats, omega, noise_std, rng):
        """Both inner releases at ``omega``: ``(theta, event), (theta_lambda, event)``.

        ``stats``: ``(G_tr, g_tr, G_val, g_val)`` (squared loss: the mean ``a a'``
        and ``a b`` of each part) or ``(Z, b, w_train, w_val)`` (logistic: the rows,
        the labels, and the mean weights of each part, zero outside it).
        """
        lam = self.penalty
        if self.loss == "logistic":
            Z, b, w_train, w_val = stats
            return (self.release_logistic(Z, b, w_train, omega, noise_std, rng),
                    self.release_logistic(Z, b, w_train + w_val / lam, omega, noise_std, rng))
        G_tr, g_tr, G_val, g_val = stats
        return (self.release(G_tr, g_tr, omega, noise_std, rng),
                self.release(G_tr + G_val / lam, g_tr + g_val / lam, omega, noise_std, rng))


def _damped_newton(fun_and_grad, hessian, x, max_iter=100):
    """Newton steps with backtracking until no step decreases the objective (a start for the certificate).

    First-order methods need about ``sqrt(smoothness / omega)`` steps, which is
    prohibitive at the small ``omega`` of a box in raw units; Newton's method
    reaches the rounding floor in a few dozen steps.
    """
    f, g = fun_and_grad(x)
    for _ in range(max_iter):
        step = np.linalg.solve(hessian(x), g)
        decrement = float(g @ step)
        if not decrement > 0.0:
            break
        t = 1.0
        while t > 1e-12:
            f_new, g_new = fun_and_grad(x - t * step)
            if f_new <= f - 0.25 * t * decrement:
                break
            t *= 0.5
        else:
            break
        x, f, g = x - t * step, f_new, g_new
    return x


def hypergradient(theta, theta_lambda, penalty):
    """``lambda (||theta^lambda||^2 - ||theta||^2) / 2``: the estimate of ``dF/domega`` (0 if not finite).

    Examples
    --------
    >>> import numpy as np
    >>> from skdp.model_selection._bilevel import hypergradient
    >>> hypergradient(np.array([1.0, 0.0]), np.array([0.9, 0.0]), penalty=10.0)  # shrinks: dF/domega < 0
    -0.9499999999999997
    """
    value = 0.5 * float(penalty) * (float(theta_lambda @ theta_lambda) - float(theta @ theta))
    return value if math.isfinite(value) else 0.0


def outer_step(log_omega, gradient, omega, sum_sq, log_bounds):
    """One AdaGrad-norm step in ``log omega`` against the estimate (spec 9.4 step 10).

    Returns ``(new log omega, new sum of squares)``. Post-processing of released values.

    Examples
    --------
    >>> import math
    >>> from skdp.model_selection._bilevel import outer_step
    >>> s, g2 = outer_step(0.0, -1.0, 1.0, 0.0, (math.log(1e-3), math.log(10.0)))
    >>> round(s, 4), g2  # the first step is half the box's log-width (4.6), upwards: clipped at log 10
    (2.3026, 1.0)
    """
    lo, hi = log_bounds
    g = omega * gradient  # d F / d log omega
    if not math.isfinite(g):
        g = 0.0
    sum_sq = sum_sq + g * g
    if sum_sq <= 0.0 or not math.isfinite(sum_sq):
        return log_omega, sum_sq if math.isfinite(sum_sq) else 0.0
    step = 0.5 * (hi - lo) / math.sqrt(sum_sq)
    return min(max(log_omega - step * g, lo), hi), sum_sq


def auto_penalty(problem_at, omega_c, rho_call, n_coef, n_train, n_val):
    """``lambda`` of spec 9.4 step 2: the bias/noise balance at the box's centre, within ``[lambda_lo, 1e6]``.

    ``problem_at(lambda)`` gives the :class:`InnerProblem` at a penalty. The
    lower end ``lambda_lo = max(1, n_tr / n_val)`` keeps a validation row's
    sensitivity no larger than a training row's.
    """
    low = max(1.0, n_train / n_val)
    problem = problem_at(low)
    sigma = 0.0 if math.isinf(rho_call) else problem.sensitivity(omega_c) / math.sqrt(2.0 * rho_call)
    radius = problem.radius(omega_c)
    if sigma <= 0.0:
        return max(PENALTY_MAX, low)
    balance = (problem.lipschitz(omega_c) / omega_c) / math.sqrt(
        2.0 * sigma * math.sqrt(2.0 * radius**2 + n_coef * sigma**2))
    if not math.isfinite(balance):
        return max(PENALTY_MAX, low) if balance > 0 else low
    return min(max(balance, low), max(PENALTY_MAX, low))


def descend(problem, stats, log_bounds, omega_start, n_steps, rho_call, rng, log=None, releaser=None):
    """The outer loop (spec 9.4 steps 5-11): two inner releases per step, then a step in ``log omega``.

    Parameters
    ----------
    problem : InnerProblem
    stats : tuple
        As :meth:`InnerProblem.release_pair` takes them.
    log_bounds : (float, float)
        The box in ``log omega``.
    omega_start : float
    n_steps : int
    rho_call : float
        zCDP of each inner release (``inf``: no noise).
    rng : Generator
    log : callable, optional
    releaser : callable, optional
        ``(omega, rng) -> (theta, theta_lambda, event, noise_std)``: another
        private solver of the two inner problems (``"bilevel_sgd"``); ``stats``
        and ``rho_call`` are then unused.

    Returns
    -------
    path : dict of ndarray
        ``omega`` (``n_steps + 1`` values), ``hypergradient``, ``step`` (the moves in
        ``log omega``) and ``noise_std`` (``n_steps`` values each).
    events : list of PrivacyEvent
        The ``2 n_steps`` releases (one event per outer step with ``releaser``), in order.
    """
    lam = problem.penalty
    log_omega, sum_sq = min(max(math.log(omega_start), log_bounds[0]), log_bounds[1]), 0.0
    path = {"omega": [], "hypergradient": [], "step": [], "noise_std": []}
    events = []
    for step in range(n_steps):
        omega = math.exp(log_omega)
        if releaser is not None:
            theta, theta_lambda, event, sigma = releaser(omega, rng)
            events.append(event)
        else:
            sigma = 0.0 if math.isinf(rho_call) else problem.sensitivity(omega) / math.sqrt(2.0 * rho_call)
            (theta, event), (theta_lambda, event_lambda) = problem.release_pair(stats, omega, sigma, rng)
            events += [event, event_lambda]
        grad = hypergradient(theta, theta_lambda, lam)
        new_log, sum_sq = outer_step(log_omega, grad, omega, sum_sq, log_bounds)
        path["omega"].append(omega)
        path["hypergradient"].append(grad)
        path["step"].append(abs(new_log - log_omega))
        path["noise_std"].append(sigma)
        if log is not None:
            log(f"step {step + 1}/{n_steps}: omega={omega:.4g}, hypergradient {grad:+.4g}, "
                f"noise std {sigma:.3g}")
        log_omega = new_log
    path["omega"].append(math.exp(log_omega))
    return {key: np.asarray(value, dtype=float) for key, value in path.items()}, events


def check_estimator(estimator, classifier, method="bilevel"):
    """The estimator to refit (a clone), or a ValueError that says what to change (before any spend)."""
    if classifier:
        if not isinstance(estimator, DPInterpolatingClassifier):
            raise ValueError(
                f"method={method!r} tunes DPInterpolatingClassifier (binary logistic) among classifiers; got "
                f"{type(estimator).__name__}. Use method='select'. Nothing was spent.")
        params = estimator.get_params(deep=False)
        if params["loss"] not in ("auto", "logistic") or params["class_weight"] is not None:
            raise ValueError(
                f"method={method!r} tunes the binary logistic form: the lower-level problem is the "
                "unweighted logistic loss with an L2 penalty, so the classifier needs loss='auto' or "
                f"'logistic' and class_weight=None (got loss={params['loss']!r}, "
                f"class_weight={params['class_weight']!r}). Use method='select'. Nothing was spent.")
        return estimator
    if estimator is None:
        return DPHeavyTailRegressor()
    if not isinstance(estimator, DPHeavyTailRegressor):
        raise ValueError(
            f"method={method!r} tunes DPHeavyTailRegressor(loss='squared', l1_ratio=0) (or estimator=None); "
            f"got {type(estimator).__name__}. Use method='select' for other estimators. Nothing was spent.")
    params = estimator.get_params(deep=False)
    if params["loss"] != "squared" or params["l1_ratio"] != 0:
        raise ValueError(
            f"method={method!r} tunes the ridge form: the lower-level problem is the squared loss with an L2 "
            f"penalty, so the estimator needs loss='squared' and l1_ratio=0 (got loss={params['loss']!r}, "
            f"l1_ratio={params['l1_ratio']!r}). Use method='select' for the Lasso or robust losses. Nothing "
            "was spent.")
    algorithm = params.get("algorithm")
    if getattr(algorithm, "alphas", None) is not None:
        # That solver would choose its own multiple of alpha on its own split: alpha_ would misreport.
        raise ValueError(
            f"method={method!r} chooses alpha itself; the estimator's solver has its own grid of alphas "
            f"({algorithm!r}). Pass a solver without alphas, or use method='select'. Nothing was spent.")
    return estimator


def _box(alphas, method="bilevel"):
    """The public box in the estimator's alpha units (None: :data:`OMEGA_BOUNDS` in tuning units)."""
    if alphas is None:
        return None
    positive = np.asarray(alphas, dtype=float)
    positive = positive[positive > 0]
    if positive.size < 1 or positive.min() == positive.max():
        raise InvalidParameterError(
            f"method={method!r} uses the range of the positive alphas as its box; give at least two "
            "different positive values (or alphas=None for the default box). Nothing was spent.")
    return float(positive.min()), float(positive.max())


def fit_bilevel(tuner, X, y, common, classifier, outer_steps, method="bilevel"):
    """Run ``method`` (``"bilevel"`` or ``"bilevel_sgd"``) for ``tuner`` (sets its fitted attributes).

    ``common`` holds the inner estimators' ``delta``, ``random_state`` and ``verbose``.
    Refusals spend nothing. ``"bilevel_sgd"`` differs only in its inner releases
    (``_bilevel_sgd.py``) and in how their noise is calibrated.
    """
    sgd = method == "bilevel_sgd"
    refit_template = check_estimator(tuner.estimator, classifier, method)
    box = _box(tuner.alphas, method)
    n, d = X.shape
    T = int(outer_steps)
    delta = common["delta"]
    eps = float(tuner.epsilon)
    if delta == 0.0:
        raise InvalidParameterError(
            f"method={method!r} releases its inner models with Gaussian noise, so it needs delta > 0. "
            "Nothing was spent.")
    classes = common.get("classes")
    if classifier and len(classes) != 2:
        raise ValueError(f"method={method!r} tunes binary logistic regression; got {len(classes)} classes. "
                         "Use method='select' for more classes. Nothing was spent.")
    if hasattr(X, "toarray") and n * d > MAX_DENSE_VALUES:
        # The tuning problem is solved on dense rows: densifying after the reservation could fail.
        raise ValueError(f"method={method!r} solves its inner problems on dense rows; this sparse input has "
                         f"{n} x {d} = {n * d} values, above {MAX_DENSE_VALUES}. Use method='default' or "
                         "'select', or fewer columns. Nothing was spent.")
    n_val, n_train = tuner._split_sizes(n)
    fit_intercept = bool(refit_template.get_params(deep=False)["fit_intercept"])
    loss = "logistic" if classifier else "squared"
    extra = {"C": 1.0} if classifier else {}
    n_quantiles = PrivateStandardiser.n_quantiles("pooled", d, fit_intercept, scale_target=not classifier)
    rho = math.inf if math.isinf(eps) else dp_to_zcdp(eps, delta)
    if not rho > 0.0:
        # The RDP conversion certifies no zero-concentrated budget at this (epsilon, delta) (epsilon far below
        # log(1 / delta) / 4000): every share would be zero, which later steps reject with a misleading message.
        raise InvalidParameterError(
            f"method={method!r} at epsilon={eps:g} and delta={delta:g} has no zero-concentrated budget to "
            "share between its releases; raise epsilon (or delta). Nothing was spent.")
    inner_share = 1.0 - SCALING_SHARE - REFIT_SHARE
    if sgd:
        # The inner steps' noise is fixed first: alone they spend the epsilon of the inner share of the
        # zero-concentrated budget; the multiplier t below then scales only the scaling and the refit.
        rate = sampling_rate(n)
        noise_multiplier = 0.0 if math.isinf(rho) else calibrate_sampled_gaussian(
            rate, T * INNER_STEPS, zcdp_to_dp(inner_share * rho, delta), delta)
        steps_event = planned_steps(noise_multiplier, rate, T * INNER_STEPS)

    def parts(t):
        """(quantile epsilon, rho per inner release, refit epsilon) at multiplier ``t``.

        For ``"bilevel_sgd"`` the rho per inner solve only sets the penalty ``lambda`` (a public rule).
        """
        if math.isinf(rho):
            return math.inf, math.inf, math.inf
        return (math.sqrt(8.0 * t * SCALING_SHARE * rho / n_quantiles),
                (1.0 if sgd else t) * inner_share * rho / (2 * T),
                zcdp_to_dp(t * REFIT_SHARE * rho, delta))

    def refit(alpha, epsilon):
        return clone(refit_template).set_params(alpha=alpha, epsilon=epsilon, **common, **extra)

    cache = {}

    def event_at(t):
        eps_q, rho_call, eps_r = parts(t)
        if eps_r not in cache:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                # The refit's plan depends on alpha only through whether it is positive (it always is).
                cache[eps_r] = refit(1.0, eps_r)._planned_event(X, y)
        standardiser = PrivateStandardiser("pooled", eps_q, fit_intercept, scale_target=not classifier)
        scaling = standardiser.planned_event(d)
        if sgd:
            inner = steps_event
        else:
            noise = 0.0 if math.isinf(rho_call) else 1.0 / math.sqrt(2.0 * rho_call)
            inner = Sequential([GaussianRelease(1.0, noise)] * (2 * T))
        return Sequential([scaling, inner, cache[eps_r]])

    if math.isinf(eps):
        t = 1.0
    else:
        t = 1.0 / calibrate_scale(lambda s: event_at(1.0 / s), eps * (1.0 - 1e-10), delta, initial=1.0,
                                  rtol=1e-6)
    plan = event_at(t)
    eps_q, rho_call, eps_r = parts(t)

    def solve(rng):
        standardiser = PrivateStandardiser("pooled", eps_q, fit_intercept, scale_target=not classifier)
        scaling, scaling_event = standardiser.fit(X, y, rng)
        s = _clamp(scaling.feature_scale[0])
        s_y = _clamp(scaling.target_scale)
        c_y = float(scaling.target_center) if math.isfinite(scaling.target_center) else 0.0
        feature_bound = _clamp(scaling.row_bound)
        A = math.hypot(feature_bound, 1.0) if fit_intercept else feature_bound
        Z = clip_rows(np.nan_to_num(np.clip(_dense(X) / s, -1e100, 1e100)), feature_bound)
        if fit_intercept:
            Z = np.hstack([Z, np.ones((n, 1))])
        order = rng.permutation(n)
        val, train = np.sort(order[:n_val]), np.sort(order[n_val:])
        if classifier:  # labels +-1 (the public classes); the rows and the mean weights of each part
            b = np.where(np.asarray(y) == classes[1], 1.0, -1.0)
            w_train, w_val = np.zeros(n), np.zeros(n)
            w_train[train], w_val[val] = 1.0 / n_train, 1.0 / n_val
            stats = (Z, b, w_train, w_val)
        else:
            b = np.clip(np.nan_to_num((np.asarray(y, dtype=float) - c_y) / s_y), -LABEL_BOUND, LABEL_BOUND)
            stats = None if sgd else (Z[train].T @ Z[train] / n_train, Z[train].T @ b[train] / n_train,
                                      Z[val].T @ Z[val] / n_val, Z[val].T @ b[val] / n_val)
        # The box in tuning units: public constants, or the alphas' range over the released s^2.
        lo, hi = OMEGA_BOUNDS if box is None else (box[0] / s**2, box[1] / s**2)
        lo, hi = _clamp(lo), _clamp(hi)
        hi = max(hi, lo)
        log_bounds = (math.log(lo), math.log(hi))
        omega_c = math.sqrt(lo * hi)

        def problem_at(penalty):
            return InnerProblem(A, 1.0 if classifier else LABEL_BOUND, penalty, n_train, n_val, loss)

        penalty = auto_penalty(problem_at, omega_c, rho_call, Z.shape[1], n_train, n_val)
        problem = problem_at(penalty)
        tuner._log(f"{method}: released feature scale {s:.4g}, row bound {A:.4g}; omega box [{lo:.3g}, "
                   f"{hi:.3g}], penalty lambda={penalty:.4g}, {T} outer steps")
        releaser = None
        if sgd:
            in_train = np.zeros(n, dtype=bool)
            in_train[train] = True
            releaser = MinibatchPair(problem, Z, b, in_train, rate, noise_multiplier).release_pair
        path, releases = descend(problem, stats, log_bounds, omega_c, T, rho_call, rng, tuner._log,
                                 releaser=releaser)
        t_out = int(np.argmin(path["step"]))
        omega_out = path["omega"][t_out]
        alpha_out = omega_out * s**2
        tuner._log(f"omega_out={omega_out:.4g} (step {t_out}); refit at alpha={alpha_out:.4g}")
        final = refit(alpha_out, eps_r)
        if not _plan_within(final, cache[eps_r], X, y, delta):
            # A refit whose plan at alpha_out would cost more than the one charged (at alpha = 1): refit at
            # the planned strength instead (a public rule on a released value; no configuration accepted
            # today plans differently, this keeps a future one from failing after the reservation).
            tuner._log(f"the refit's plan at alpha={alpha_out:.4g} exceeds the charged one; refit at alpha=1")
            alpha_out = 1.0
            final = refit(alpha_out, eps_r)
        with nested_fits(rng) as run:
            final.fit(X, y)
        event = Sequential([scaling_event, Sequential(releases), Sequential(run.events)])
        info = dict(path)
        info.update(t_out=t_out, penalty=penalty, omega_bounds=(lo, hi), feature_scale=s,
                    alpha=info["omega"] * s**2)
        if sgd:
            info.update(batch_rate=rate, inner_steps=INNER_STEPS, noise_multiplier=noise_multiplier)
        return event, (final, alpha_out, info)

    final, alpha_out, info = tuner._run_private(plan, solve, n_samples=n)
    tuner.best_estimator_ = final
    tuner.alpha_ = float(alpha_out)
    tuner.alphas_ = info["alpha"]
    tuner.best_index_ = info["t_out"]
    tuner.validation_scores_ = None
    tuner.bilevel_path_ = info
    return tuner


def _plan_within(estimator, charged, X, y, delta):
    """Whether ``estimator``'s planned event costs at most ``charged`` (never raises)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            planned = clone(estimator)._planned_event(X, y)
        return planned.epsilon(delta) <= charged.epsilon(delta) * (1.0 + 1e-9)
    except Exception:  # noqa: BLE001 - after the reservation: fall back to the charged plan's strength
        return False


def _dense(X):
    return X.toarray() if hasattr(X, "toarray") else np.asarray(X, dtype=float)
