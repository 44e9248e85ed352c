"""Population localization with clipped DP-SGD subproblems and aggregation (paper 000, Theorem 1).

'localized' combines three algorithms of Asi, Liu and Tian:

* Algorithm 1 (Clipped-DP-SGD): full-batch noisy clipped gradient steps on a
  strongly convex subproblem ``mean f + (lambda/2) ||w - c||^2`` over
  ``Ball(0, R) ∩ Ball(c, r)``, steps ``4 / (lambda (t + 1))`` and weights
  ``t + 4``; the regulariser is not clipped;
* Algorithm 2 (population localization): phases ``i = 1..I`` with
  ``lambda_i = 32^i lambda`` centred at the previous phase's output;
* Algorithm 3 (aggregation): each phase solves ``J`` copies on disjoint
  portions and keeps the point whose ``ceil(0.51 J)``-nearest-neighbour radius
  is smallest (the radius-free rule of the note, P6).

Privacy: every (phase, portion) block is disjoint from the others and runs ``T``
Gaussian releases of sensitivity ``2 C / m`` (clipped mean of ``m`` rows), so
each block is mu-GDP with noise ``sqrt(T) 2 C / (m mu)`` and the blocks compose
in parallel; centres, radii and aggregation are post-processing. Nothing is
assumed about the loss: per-sample gradients are clipped, so any convex
callable works (non-finite derivatives are zeroed).

Schedules: "theory" uses ``J`` in ``[400, 500] log(I / failure_prob)``,
``T = max(m, m^2 rho / d)`` and the moment bounds ``(k, G_k, G_2)`` for ``C`` and
``lambda``; "practical" (default) uses ``J = 3`` portions, ``I = 2`` phases, at
most ``max_steps`` steps per block, and a private clip quantile; the leftover
rows go to phase 1 (pitfall 10).
"""

import math

import numpy as np

from ..accounting import ExponentialMechanismRelease, GaussianRelease, Parallel, Repeated, Sequential
from ..mechanisms import private_quantile
from ._glm import SolverResult, aggregate_points, project_two_balls

__all__ = ["Localized", "clipped_dp_sgd"]

_C_RP = 142.0  # the constant of Corollary 2 implied by the printed arithmetic (note section 4)


def clipped_dp_sgd(problem, rows, center, lam, clip, n_steps, mu, rng, recorder=None, name="block"):
    """Algorithm 1 on ``rows``: returns the weighted average iterate and the block's event.

    Minimises ``mean_rows f + (lam/2) ||w - center||^2 + 0.5 w^T diag(penalty) w``
    over ``Ball(0, R) ∩ Ball(center, 2 clip / lam)``.
    """
    m = len(rows)
    p = problem.n_coef
    r = 2.0 * clip / lam  # Lemma 4 with G_1 <= clip for the clipped objective
    sigma = math.sqrt(n_steps) * 2.0 * clip / (m * mu)
    x = project_two_balls(center.copy(), problem.radius, center, r)
    total = np.zeros(p)
    weight = 0.0
    for t in range(n_steps):
        total += (t + 4) * x
        weight += t + 4
        g = problem.clipped_gradient_sum(x, clip, rows) / m
        if recorder is not None:
            recorder(f"{name}/step{t}", g, 2.0 * clip / m)
        g = g + sigma * rng.standard_normal(p) + problem.penalty * x
        eta = 4.0 / (lam * (t + 1))
        y = (x - center - eta * g) / (1.0 + eta * lam)
        x = project_two_balls(center + y, problem.radius, center, r)
    return total / weight, Repeated(GaussianRelease(2.0 * clip / m, sigma), n_steps), sigma


class Localized:
    """Theorem 1 pipeline of paper 000 (see module docstring).

    Parameters
    ----------
    schedule : {"practical", "theory"}
    n_portions, n_phases : int or None
        ``J`` and ``I`` (None: from the schedule).
    max_steps : int
        Cap on the steps of every block (the noise is calibrated to the steps
        actually taken).
    failure_prob : float
        ``delta_f`` of the theory schedule (not the privacy delta).
    moment_order, moment_bound, second_moment_bound
        ``k``, ``G_k``, ``G_2`` (theory schedule; optional in practice).
    clip : float or None
        Public clip threshold; None takes a private quantile.
    n_coef : int
        Number of coefficients (public; the theory schedule's step count uses it).
    """

    name = "localized"
    gradient_clip = True  # ``clip`` bounds per-sample gradient norms

    def __init__(self, schedule="practical", n_portions=None, n_phases=None, max_steps=100,
                 failure_prob=0.05, moment_order=4, moment_bound=None, second_moment_bound=None,
                 clip=None, n_coef=1):
        self.schedule = schedule
        self.n_portions = n_portions
        self.n_phases = n_phases
        self.max_steps = int(max_steps)
        self.failure_prob = float(failure_prob)
        self.moment_order = moment_order
        self.moment_bound = moment_bound
        self.second_moment_bound = second_moment_bound
        self.clip = clip
        self.n_coef = int(n_coef)
        self.recorder = None
        if schedule == "theory" and moment_bound is None:
            raise ValueError("schedule='theory' needs public moment bounds (moment_bound, moment_order).")

    def n_quantiles(self, loss):
        return 0 if (self.clip is not None or self.schedule == "theory") else 1

    def event(self, loss, mu, eps_q, n_samples):
        """A private clip quantile, then T Gaussian steps on every disjoint block (mu-GDP each)."""
        parts = [ExponentialMechanismRelease(eps_q)] if self.n_quantiles(loss) else []
        J, _, sizes = self.layout(n_samples)
        blocks = []
        for m_i, T in zip(sizes, self._steps(sizes, mu)):
            blocks += [Repeated(GaussianRelease(1.0, math.sqrt(T) / mu), T)] * J
        return Sequential(parts + [Parallel(blocks)])

    def _steps(self, sizes, mu):
        """Steps per block of each phase (public): max(m, m^2 rho / d), capped."""
        rho = mu * mu / 2.0
        p = self.n_coef
        return [min(self.max_steps, int(math.ceil(max(m, m * m * rho / p)))) if math.isfinite(rho)
                else self.max_steps for m in sizes]

    def layout(self, n):
        """Portions J, phases I and the block size of every phase (public)."""
        if self.schedule == "theory":
            J = self.n_portions
            I = self.n_phases
            if J is None or I is None:
                I = max(1, int(math.floor(math.log2(max(n / 400.0, 2.0)))))
                for _ in range(20):
                    J = int(math.ceil(400.0 * math.log(max(I, 1) / self.failure_prob)))
                    I_new = max(1, int(math.floor(math.log2(max(n / J, 2.0)))))
                    if I_new == I:
                        break
                    I = I_new
            m = 2 ** int(math.floor(math.log2(max(n // J, 1))))
            sizes = [max(m // 2**i, 1) for i in range(1, I + 1)]
        else:
            J = self.n_portions or 3
            I = self.n_phases or 2
            m = n // J
            sizes = [max(m // 2**i, 1) for i in range(1, I + 1)]
            sizes[0] += m - sum(sizes)  # leftover rows of each portion go to phase 1
        if J * sum(sizes) > n or min(sizes) < 1:
            raise ValueError(f"'localized' needs more rows: {J} portions x {sum(sizes)} rows > n = {n}.")
        return J, I, sizes

    def solve(self, problem, mu, eps_q, random_state):
        rng = random_state
        n, p = problem.X.shape
        J, I, sizes = self.layout(n)
        D = 2.0 * problem.radius
        rho = mu * mu / 2.0
        events = []
        m = sizes[0] * 2  # nominal portion size for the constants
        if self.schedule == "theory":
            k = float(self.moment_order)
            Gk = float(self.moment_bound)
            G2 = float(self.second_moment_bound or Gk)
            C = Gk * (25.0 * m * m * rho / (32.0 * p)) ** (1.0 / (2.0 * k))
            Delta = 3.0 * _C_RP * (Gk * (math.sqrt(p) / (m * math.sqrt(rho))) ** (1 - 1 / k) + G2 / math.sqrt(m))
        else:
            if self.clip is not None:
                C = float(self.clip)
            else:
                g = np.abs(problem.derivatives(np.zeros(p))) * problem.norms
                C, ev = private_quantile(g, 0.5, eps_q, (1e-6 * problem.row_bound, 10 * problem.row_bound),
                                         scale="log", random_state=rng)
                events.append(ev)
            Delta = C * (math.sqrt(p) / (m * math.sqrt(rho)) + 1.0 / math.sqrt(m))
        lam = Delta / D
        order = np.arange(n)
        start = 0
        x = np.zeros(p)
        blocks = []
        if p != self.n_coef:
            raise ValueError(f"The solver was planned for {self.n_coef} coefficients, not {p}.")
        steps_used = self._steps(sizes, mu)
        for i, (m_i, T) in enumerate(zip(sizes, steps_used), start=1):
            lam_i = 32.0**i * lam
            outputs = []
            for j in range(J):
                rows = order[start:start + m_i]
                start += m_i
                out, ev, sigma = clipped_dp_sgd(problem, rows, x, lam_i, C, T, mu, rng, self.recorder,
                                                name=f"phase{i}/portion{j}")
                outputs.append(out)
                blocks.append(ev)
            x = aggregate_points(outputs)
        coef = x
        events.append(Parallel(blocks))
        schedule = {"algorithm": self.name, "n_steps": int(sum(steps_used)), "portions": J, "phases": I,
                    "block_sizes": sizes, "steps_per_block": steps_used, "clip_threshold": C,
                    "lambda": lam, "grad_evals": int(J * sum(s * t for s, t in zip(sizes, steps_used)))}
        return SolverResult(coef, Sequential(events), schedule)
