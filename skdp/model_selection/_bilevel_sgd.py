"""``method="bilevel_sgd"``: the inner solves of the bilevel tuner by noisy projected mini-batch SGD.

Kornowski's mini-batch variant (Algorithms 3 and 4 of "Differentially Private
Bilevel Optimization"; spec sections 3.3 and 3.4) with the outer rule of
``method="bilevel"`` (``_bilevel.py``: the same private scaling, split, box,
penalty ``lambda``, AdaGrad-norm step in ``log omega``, smallest-move output
and refit). Only the two inner releases of each outer step change: instead of
output perturbation of the exact minimisers, each of the two problems

``theta*:      min_{||theta|| <= R} mean_tr loss(theta) + omega / 2 ||theta||^2``,
``theta^lambda: min_{||theta|| <= R} mean_tr loss + mean_val loss / lambda + omega / 2 ||theta||^2``

is solved by :data:`INNER_STEPS` steps of noisy projected SGD on
Poisson-subsampled mini-batches (DP-Loc-SGD with one localisation round: the
ball of radius ``R(omega)`` around 0, which holds both minimisers), with the
strongly convex steps of :func:`~skdp.solvers.schedules.stich_schedule`
(``1 / beta`` with ``beta`` the public smoothness bound, then
``4 / (mu (4 kappa + t - t0))`` once the steps exceed ``2 kappa``: the
practical form of the paper's ``1 / (mu (t + 1))``) and the plain average of
the last half of the iterates
(:func:`~skdp.solvers.schedules.tail_average_weights`; at the small ``omega``
of the box Stich's weights are nearly uniform and would keep the start's
error), warm-started at the previous outer step's released solutions
(post-processing). One round of 100 steps is far from the paper's ``n^2``
steps and ``log log n`` localisation rounds (infeasible, spec 8.2).

The two solves run in lockstep on the same Poisson batches (common random
numbers: the mini-batch noise largely cancels in the difference of their
squared norms, which is the quantity the outer rule uses) and every step
releases the two clipped gradient sums together, with independent noise on each
(a shared noise draw would release their difference without noise).

Privacy (replace-one; for any data)
-----------------------------------
1. *Per-example terms.* Row ``i`` (clipped to ``||a_i|| <= A``, label in
   ``[-B, B]`` or ``+-1``) enters the ``theta*`` sum with weight ``c_i = 1`` if
   it is a training row and 0 otherwise, and the ``theta^lambda`` sum with
   ``c_i = 1`` (training) or ``min(1, n_tr / (lambda n_val))`` (validation;
   ``lambda >= n_tr / n_val``, so the minimum changes nothing). Its gradient is
   clipped to the public ``L(omega)`` (the Lipschitz bound on the ball, a no-op
   up to rounding; :func:`~skdp.mechanisms.clipped_derivatives`, which maps
   non-finite values to finite ones) and divided by ``L``: each term
   ``u_i = c_i clip(g_i, L) / L`` has norm at most ``c_i <= 1``.
2. *Sensitivity of one step.* The released vector is ``v = (sum_{i in B} u_i^*,
   sum_{i in B} u_i^lambda)`` for the Poisson batch ``B``: a sum over the batch
   of per-row vectors ``(u_i^*, u_i^lambda)`` of norm at most ``C = sqrt 2``.
   With the batch fixed, replacing row ``j`` changes each half by at most 2
   (two vectors of norm at most 1), so ``||v - v'|| <= 2 sqrt 2 = 2 C`` (a
   validation row changes only the second half: at most 2). The split of rows
   into parts is the seeded permutation of ``"bilevel"``, drawn before and
   independently of the data, so row ``j`` has the same part in both datasets.
   The step is the Gaussian mechanism on ``v`` with sensitivity
   :data:`PAIR_SENSITIVITY` and noise ``z`` times it, applied to a Poisson
   subsample of rate ``q``: ``PoissonSampled(GaussianRelease(2 sqrt 2,
   2 sqrt 2 z), q)`` (the Mironov-Talwar-Zhang curve with the replace-one
   sensitivity ``2 C``, conservative for replace-one;
   ``skdp/accounting/events.py``).
   The batch is drawn row by row with the public rate from the fit's
   generator, so its size is data-independent; an empty batch releases
   noise alone. The division by ``q n_tr`` (public), the added ``omega
   theta``, the step, the projection, the averaging and the warm starts are
   post-processing.
3. *Budget.* Every step has the same noise multiplier ``z`` whatever ``omega_t``
   is (``L(omega_t)`` only rescales released units), so the ``outer_steps *``
   :data:`INNER_STEPS` steps are ``Repeated(PoissonSampled(...), T K)`` planned
   from public inputs. ``z`` is calibrated
   (:func:`~skdp.accounting.calibrate_sampled_gaussian`) so that the steps alone
   spend the epsilon of the inner share of ``"bilevel"``'s zero-concentrated
   budget; the scaling and the refit are then scaled together
   (:func:`~skdp.accounting.calibrate_scale`) so that the whole event spends the
   target exactly. Sequential composition throughout.
4. *Nothing raises after the reservation.* Empty batches, non-finite
   gradients (mapped by the clip), non-finite iterate entries (set to 0, a
   public rule on released values) and the rest of the outer loop are those of
   ``"bilevel"``.

Noise is drawn from the fit's generator (floating-point samplers are not
hardened against side channels).
"""

import math

import numpy as np
from scipy.special import expit

from ..accounting import GaussianRelease, PoissonSampled, Repeated, Sequential
from ..mechanisms import clip_factors, clipped_derivatives, gaussian_mechanism, row_norms
from ..solvers.heavy_tail.averaged_sgd import averaged_sgd
from ..solvers.schedules import stich_schedule, tail_average_weights

__all__ = ["INNER_STEPS", "MIN_BATCH", "PAIR_SENSITIVITY", "MinibatchPair", "planned_steps", "sampling_rate",
           "step_event"]

# Noisy SGD steps of each inner solve (per outer step; warm starts carry the progress across outer steps).
INNER_STEPS = 100
# Expected batch size: max(MIN_BATCH, sqrt(n)) rows, as a Poisson rate over all n rows.
MIN_BATCH = 64
# Replace-one L2 sensitivity of one step's pair of clipped sums in units of L (each half at most 2).
PAIR_SENSITIVITY = 2.0 * math.sqrt(2.0)


def sampling_rate(n):
    """The public Poisson rate: an expected batch of ``max(MIN_BATCH, sqrt(n))`` of the ``n`` rows.

    Examples
    --------
    >>> from skdp.model_selection._bilevel_sgd import sampling_rate
    >>> sampling_rate(2000), round(sampling_rate(20000), 6), sampling_rate(40)  # 64, 141.4 and all 40 rows
    (0.032, 0.007071, 1.0)
    """
    return min(1.0, max(float(MIN_BATCH), math.sqrt(n)) / n)


def step_event(noise_multiplier, rate):
    """The event of one lockstep step: the pair of clipped sums, Poisson-sampled at ``rate``."""
    return PoissonSampled(GaussianRelease(PAIR_SENSITIVITY, noise_multiplier * PAIR_SENSITIVITY), rate)


def planned_steps(noise_multiplier, rate, count):
    """``count`` steps (``outer_steps * INNER_STEPS``), as the plan charges them."""
    return Repeated(step_event(noise_multiplier, rate), count)


class MinibatchPair:
    """Both inner solves of each outer step by lockstep noisy projected SGD (privacy items 1-3).

    Parameters
    ----------
    problem : InnerProblem
        Public constants (``A``, ``B``, ``lambda``, the part sizes, the loss).
    Z : ndarray of shape (n, p)
        Clipped rows (intercept column included), ``||a_i|| <= A``.
    b : ndarray of shape (n,)
        Labels in ``[-B, B]`` (squared loss) or ``+-1`` (logistic).
    train : ndarray of bool of shape (n,)
        The training part (the rest is the validation part).
    rate : float
        Poisson rate over all rows.
    noise_multiplier : float
        ``z``: noise std per unit of sensitivity (0: no noise).
    steps : int

    Examples
    --------
    >>> import numpy as np
    >>> from skdp.model_selection._bilevel import InnerProblem
    >>> from skdp.model_selection._bilevel_sgd import MinibatchPair
    >>> rng = np.random.default_rng(0)
    >>> Z = np.c_[rng.normal(size=(200, 2)), np.ones(200)] / 2
    >>> b = np.clip(Z @ [1.0, -1.0, 0.0] + 0.1 * rng.normal(size=200), -3, 3)
    >>> problem = InnerProblem(2.0, 3.0, 10.0, 100, 100)
    >>> pair = MinibatchPair(problem, Z, b, np.arange(200) < 100, rate=0.5, noise_multiplier=0.0, steps=50)
    >>> theta, theta_lambda, event, std = pair.release_pair(0.1, rng)
    >>> theta.shape, len(event.events), std
    ((3,), 50, 0.0)
    """

    def __init__(self, problem, Z, b, train, rate, noise_multiplier, steps=INNER_STEPS):
        self.problem = problem
        self.Z = Z
        self.b = b
        self.norms = row_norms(Z)
        self.rate = float(rate)
        self.noise_multiplier = float(noise_multiplier)
        self.steps = int(steps)
        # Per-row weights relative to 1 / n_tr (privacy item 1).
        val_weight = min(1.0, problem.n_train / (problem.penalty * problem.n_val))
        self.weights = np.stack([np.where(train, 1.0, 0.0), np.where(train, 1.0, val_weight)])
        self.start = np.zeros((2, Z.shape[1]))

    def _unit_sums(self, thetas, rows, lipschitz):
        """``sum_{i in rows} c_i clip(grad_i, L) / L`` for both problems: shape (2, p)."""
        Zb, bb, norms = self.Z[rows], self.b[rows], self.norms[rows]
        margins = thetas @ Zb.T  # (2, batch)
        if self.problem.loss == "logistic":
            derivative = -bb * expit(-bb * margins)
        else:
            derivative = margins - bb
        scaled = np.stack([clipped_derivatives(derivative[k], norms, lipschitz) for k in range(2)])
        return (scaled * self.weights[:, rows]) @ Zb / lipschitz

    def release_pair(self, omega, rng):
        """Run both solves at ``omega``; returns ``theta, theta_lambda, event, gradient noise std``.

        ``event`` is the ``Sequential`` of the steps' ``PoissonSampled`` releases;
        the std is that of the noise on each coordinate of each step's gradient
        estimate. Never raises.
        """
        problem = self.problem
        radius, L = problem.radius(omega), problem.lipschitz(omega)
        n, p = self.Z.shape
        scale = L / (self.rate * problem.n_train)  # released units -> gradient of the mean objective
        noise = self.noise_multiplier * PAIR_SENSITIVITY
        steps, _ = stich_schedule(self.steps, problem.smoothness(omega), omega)
        # The plain average of the last half of the iterates: at the small omega of the box (kappa far
        # above the steps) Stich's weights are nearly uniform and would keep the warm start's error.
        weights = tail_average_weights(self.steps)[1:]
        events = []

        def oracle(thetas, t):
            rows = np.flatnonzero(rng.random(n) < self.rate)  # Poisson: each row with the public rate
            sums = self._unit_sums(thetas, rows, L)
            noisy, event = gaussian_mechanism(sums.ravel(), PAIR_SENSITIVITY, noise, random_state=rng)
            events.append(PoissonSampled(event, self.rate))
            grad = scale * noisy.reshape(2, p) + omega * thetas
            return np.where(np.isfinite(grad), grad, 0.0)

        def project(thetas):
            thetas = np.where(np.isfinite(thetas), thetas, 0.0)
            return thetas * clip_factors(np.linalg.norm(thetas, axis=1), radius)[:, None]

        out = averaged_sgd(oracle, project(self.start), steps, weights, project)
        out = project(out)
        self.start = out
        return out[0], out[1], Sequential(events), noise * scale
