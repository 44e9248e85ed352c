"""The clipped Gaussian mean oracle (paper 001, Algorithm 1) and the shared one-pass machinery.

Algorithm 1 clips every vector of a batch of ``s`` to norm ``C``, averages and
adds ``N(0, sigma^2 I)``. Under replace-one neighbours the clipped mean moves by
at most ``2 C / s`` (both clipped vectors lie in the C-ball), so
``sigma = 2 C / (s mu)`` makes one release exactly mu-GDP.

The three one-pass solvers of the note ('accelerated', Algorithm 4;
'averaged_sgd', Algorithm 5; 'proximal_sgd', Algorithm 6) all consume the data
the same way: a data-independent random permutation is cut into ``T``
consecutive disjoint batches, and step ``t`` calls the oracle on the per-sample
loss gradients of batch ``t`` at the current query point. A changed record lies
in exactly one batch, so the ``T`` releases compose in parallel and each may
spend the whole budget ``mu`` (note section 3.5). The ridge gradient is added
after the noise, unclipped (it is identical on neighbours), and the L1 part is
handled by exact proximal steps; both are post-processing.

:class:`OnePassSolver` holds what the three solvers share: the public plan
(``T``, batch sizes), the clip threshold (public, from moment bounds, or a
private quantile of the per-sample gradient norms at the start), the privacy
event, the loss checks and the gradient oracle handed to each algorithm's
iteration.
"""

import math

import numpy as np

from ..accounting import ExponentialMechanismRelease, GaussianRelease, Parallel, Sequential
from ..mechanisms import clip_factors, private_quantile
from ._glm import CLIP_RANGE, SolverResult, public_derivative_bound

__all__ = ["clipped_gaussian_mean", "noise_std", "split_batches", "practical_curvature", "step_constants",
           "theory_strong_convexity", "OnePassSolver"]

# A non-finite clip (theory schedule at mu = inf) is replaced by this finite
# value so that sensitivities stay representable; the noise is then 0 anyway.
_HUGE_CLIP = 1e300


def noise_std(sensitivity, mu):
    """Standard deviation ``sensitivity / mu`` of a mu-GDP Gaussian release (0 when ``mu = inf``)."""
    if math.isinf(mu):
        return 0.0
    return float(sensitivity) / float(mu)


def clipped_gaussian_mean(vectors, clip, mu, random_state):
    """Algorithm 1: clipped mean of a batch of vectors plus isotropic Gaussian noise.

    Parameters
    ----------
    vectors : ndarray of shape (..., s, d)
        One batch of ``s`` vectors, or a stack of independent batches (the
        leading axes), which is how tests run many repetitions at once.
    clip : float > 0
        Every vector is scaled to norm at most ``clip``.
    mu : float > 0
        Gaussian-DP parameter of the release (``inf``: no noise).
    random_state : numpy Generator

    Returns
    -------
    noisy_mean : ndarray of shape (..., d)
    event : GaussianRelease
        Sensitivity ``2 clip / s`` and the noise actually drawn.
    """
    G = np.asarray(vectors, dtype=float)
    s, d = G.shape[-2:]
    factors = clip_factors(np.linalg.norm(G, axis=-1), clip)
    mean = np.einsum("...ij,...i->...j", G, factors) / s
    sensitivity = 2.0 * float(clip) / s
    sigma = noise_std(sensitivity, mu)
    noisy = mean + sigma * random_state.standard_normal(mean.shape) if sigma > 0 else mean
    return noisy, GaussianRelease(sensitivity, sigma)


def split_batches(n, n_batches, random_state):
    """``n_batches`` disjoint batches from a data-independent random permutation of ``range(n)``.

    The permutation is cut into consecutive blocks whose sizes differ by at
    most one (``n mod T`` blocks get one extra row), so every row is used once
    and the batches are disjoint by construction.
    """
    if not 1 <= n_batches <= n:
        raise ValueError(f"Need 1 <= n_batches <= n; got {n_batches} batches for {n} rows.")
    order = random_state.permutation(n)
    return np.array_split(order, n_batches)


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


def sgd_practical_steps(n, p, mu):
    """Practical ``T`` of Algorithms 5 and 6: ``min(2 log2(m) - 1.5, 4 sqrt(n / p))``, ``m = n mu / p``.

    With steps about ``1 / curvature`` the first half contracts the initial
    error by about 1/2 per step (``2^-T`` in squared distance) while the
    averaged privacy noise grows like ``2 T / m^2`` (the noise of a batch is
    ``2 C T / (n mu)`` with ``C ~ sqrt(p)``); the two balance at
    ``2^-T = 2 / (m^2 ln 2)``. The cap is the noise-free regime, where more
    steps only shrink the batches.
    """
    m = n * mu / p
    T_private = 2.0 * math.log2(m) - 1.5 if m > 1.0 else 1.0
    return min(T_private, 4.0 * math.sqrt(n / p))


class OnePassSolver:
    """Shared planning, clipping and accounting of the one-pass solvers (Algorithms 4-6).

    Parameters
    ----------
    schedule : {"practical", "theory"}
        "theory" uses the note's ``T`` and ``C`` from the public moment bounds;
        "practical" uses the rules documented by each solver.
    moment_order : float >= 2
        ``k`` of the moment bound (theory schedule).
    moment_bound : float or None
        ``G_k >= r_k``, a bound on the k-th moment of the per-sample gradient
        norms over the coefficient ball (Assumption 2). Required by "theory".
    second_moment_bound : float or None
        ``G_2 >= r_2`` for the sampling-variance terms (default ``G_k``).
    clip : float or None
        Public clip threshold; None takes the schedule's rule.
    n_steps : int or None
        Number of batches ``T`` (None: the schedule's rule).
    clip_quantile : float in (0, 1)
        Level of the private quantile of the per-sample gradient norms at the
        starting point (practical schedule without a public clip).
    n_coef : int or None
        Number of coefficients, when known before the data; it lets
        :meth:`event` list exactly the ``T`` releases of the practical schedule.
    """

    name = None
    supports_l1 = False
    gradient_clip = True  # ``clip`` bounds per-sample gradient norms

    def __init__(self, schedule="practical", moment_order=4, moment_bound=None, second_moment_bound=None,
                 clip=None, n_steps=None, clip_quantile=0.5, n_coef=None):
        if schedule not in ("practical", "theory"):
            raise ValueError(f"schedule must be 'practical' or 'theory'; got {schedule!r}.")
        if schedule == "theory" and moment_bound is None:
            raise ValueError("schedule='theory' needs public moment bounds (moment_bound, moment_order).")
        if schedule == "theory" and not float(moment_order) > 1.0:
            raise ValueError(f"moment_order must exceed 1 (the bias bound divides by k - 1); "
                             f"got {moment_order!r}.")
        if not 0.0 < float(clip_quantile) < 1.0:
            raise ValueError(f"clip_quantile must lie in (0, 1); got {clip_quantile!r}.")
        self.schedule = schedule
        self.moment_order = moment_order
        self.moment_bound = moment_bound
        self.second_moment_bound = second_moment_bound
        self.clip = clip
        self.n_steps = n_steps
        self.clip_quantile = float(clip_quantile)
        self.n_coef = n_coef
        self.recorder = None  # tests: called as recorder(name, value_before_noise, sensitivity)

    # -- public plan ------------------------------------------------------------------------
    def n_quantiles(self, loss):
        """Private quantiles released by a run: 1 for the practical clip, else 0."""
        if self.clip is not None or self.schedule == "theory" or public_derivative_bound(loss) is not None:
            return 0
        return 1

    def check_loss(self, loss):
        """Refuse, before any data is read, losses without a finite smoothness constant."""
        if not np.isfinite(float(getattr(loss, "smoothness", np.inf))):
            raise ValueError(
                f"{self.name} needs a smooth data loss (squared or huber): its step sizes and "
                "guarantee rest on the smoothness of the objective. For absolute or quantile "
                "losses use algorithm='localized_subgradient' (or 'localized').")

    def practical_steps(self, n, p, mu):
        """``T`` of the practical schedule from public inputs (overridden per algorithm)."""
        raise NotImplementedError

    def planned_steps(self, n_samples, n_coef=None, mu=None):
        """``T`` when it follows from public inputs alone, else None (theory: it needs ``beta``)."""
        if self.n_steps is not None:
            return int(min(max(int(self.n_steps), 1), n_samples))
        p = n_coef if n_coef is not None else self.n_coef
        if self.schedule == "theory" or p is None or mu is None:
            return None
        return _clamp_steps(self.practical_steps(n_samples, p, mu), n_samples)

    def event(self, loss, mu, eps_q, n_samples):
        """The run's event, from public inputs: a clip quantile (if any), then T parallel releases.

        Each batch's release is exactly mu-GDP and the batches are disjoint, so
        the parallel composition is mu-GDP whatever ``T``; when ``T`` is not
        known before the data (theory schedule: it depends on the smoothness
        bound, i.e. on the row bound chosen in preprocessing; practical
        schedule without ``n_coef``) one representative release stands for
        them, with the same epsilon at every delta.
        """
        self.check_loss(loss)
        parts = [ExponentialMechanismRelease(eps_q)] if self.n_quantiles(loss) else []
        T = self.planned_steps(n_samples, mu=mu) or 1
        parts.append(Parallel([GaussianRelease(1.0, noise_std(1.0, mu))] * T))
        return Sequential(parts)

    # -- pieces used by solve -------------------------------------------------------------------
    def _check_problem(self, problem):
        self.check_loss(problem.loss)
        if problem.has_l1 and not self.supports_l1:
            raise ValueError(f"{self.name} does not support an L1 penalty (it has no proximal step); "
                             "use algorithm='proximal_sgd'.")
        if self.n_coef is not None and problem.n_coef != self.n_coef:
            raise ValueError(f"The solver was planned for {self.n_coef} coefficients, not {problem.n_coef}.")

    def _moments(self):
        k = float(self.moment_order)
        Gk = float(self.moment_bound)
        G2 = float(self.second_moment_bound) if self.second_moment_bound is not None else Gk
        return k, Gk, G2

    def _private_clip(self, problem, eps_q, rng):
        """Clip threshold of the practical schedule and the events it cost.

        A public clip is used as given. A loss with a public derivative bound
        (absolute, quantile; refused by these solvers, kept for completeness)
        is clipped at ``max|loss'| * row_bound``, which never changes a
        gradient. Otherwise the threshold is a private quantile (log scale,
        ``[1e-6, 10] x row_bound``) of the per-sample gradient norms at the
        starting point 0.
        """
        if self.clip is not None:
            return float(self.clip), []
        bound = public_derivative_bound(problem.loss)
        if bound is not None:
            return bound * problem.row_bound, []
        norms = np.abs(problem.derivatives(np.zeros(problem.n_coef))) * problem.norms
        upper = CLIP_RANGE[1] * problem.row_bound
        # A Huber derivative never exceeds delta: searching above delta * row_bound
        # would only waste the quantile's resolution.
        slope = _derivative_cap(problem.loss)
        if slope is not None and CLIP_RANGE[0] * problem.row_bound < slope * problem.row_bound < upper:
            upper = slope * problem.row_bound
        lower = CLIP_RANGE[0] * problem.row_bound
        C, event = private_quantile(norms, self.clip_quantile, eps_q, (lower, upper), scale="log",
                                    random_state=rng)
        return float(C), [event]

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
            s = len(rows)
            mean = problem.clipped_gradient_sum(w, finite_clip, rows) / s
            sensitivity = 2.0 * finite_clip / s
            if self.recorder is not None:
                self.recorder(f"batch{t}", mean, sensitivity)
            sigma = noise_std(sensitivity, mu)
            noisy = mean + sigma * rng.standard_normal(mean.shape) if sigma > 0 else mean
            releases.append(GaussianRelease(sensitivity, sigma))
            # The ridge gradient is data-independent: added after the noise, unclipped.
            return noisy + problem.penalty * w

        return oracle

    def solve(self, problem, mu, eps_q, random_state):
        """Run the solver; returns a :class:`~skdp.solvers.SolverResult`.

        Parameters
        ----------
        problem : GLMProblem
        mu : float
            Gaussian-DP budget of every batch's release (parallel composition).
        eps_q : float
            Epsilon of the private clip quantile (if any).
        random_state : numpy Generator
        """
        rng = random_state
        self._check_problem(problem)
        n, p = problem.n_samples, problem.n_coef
        plan = self._plan(problem, mu)
        T = plan["n_steps"]
        # The permutation is drawn first and from public randomness only.
        batches = split_batches(n, T, rng)
        events = []
        if plan.get("clip") is not None:
            C = plan["clip"]
        else:
            C, events = self._private_clip(problem, eps_q, rng)
        releases = []
        oracle = self._oracle(problem, batches, C, mu, rng, releases)
        coef, details = self._iterate(problem, oracle, T, C, mu, plan)
        sizes = [len(b) for b in batches]
        events.append(Parallel(releases))
        schedule = {"algorithm": self.name, "schedule": self.schedule, "n_steps": T,
                    "clip_threshold": C, "batch_size": min(sizes), "batch_sizes": sorted(set(sizes)),
                    "grad_evals": int(sum(sizes) + (n if self.n_quantiles(problem.loss) else 0))}
        schedule.update(details)
        return SolverResult(coef, Sequential(events), schedule)

    def _plan(self, problem, mu):
        """Public plan of the run: ``{"n_steps": T, "clip": C or None}`` (per algorithm)."""
        raise NotImplementedError

    def _iterate(self, problem, oracle, T, C, mu, plan):
        """Run the algorithm with the oracle; returns ``(coef, schedule details)``."""
        raise NotImplementedError


def _clamp_steps(T, n):
    if not math.isfinite(T):
        return int(n)
    return int(min(max(int(math.ceil(T)), 1), n))


def _derivative_cap(loss):
    """``max |loss'|`` when finite (Huber: delta), else None."""
    bound = getattr(loss, "derivative_bound", None)
    if bound is None:
        return None
    value = float(np.max(bound(np.array([np.inf]), np.array([0.0]))))
    return value if np.isfinite(value) and value > 0 else None
