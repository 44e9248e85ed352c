"""One-pass clipped DP-SGD for smooth GLMs (paper 000, Algorithm 8; 'one_pass_glm').

Phases ``i = 1..I`` (``I = floor(log2 n)``) run one pass of projected, clipped SGD
over disjoint blocks of ``n_i = 2^(I - i)`` rows (the rows beyond ``2^I - 1`` go to
phase 1), with step ``eta_i = eta / 16^i`` and clip ``C_i = 2^i C``, starting from
the previous phase's private output. Each phase releases its average iterate
plus Gaussian noise.

Privacy (replace-one, any data): a changed row lies in one phase. For a GLM,
``grad f(w) = loss'(x.w) x`` and clipping only shrinks the scalar ``loss'``
monotonically, so the clipped step is a gradient step of a convex function
whose curvature along ``x`` lies in ``[0, beta]``: with ``eta_i <= 2 / (beta +
max ridge)`` every step on a common row is non-expansive (Lemma 14), and the
projection onto the ball is too. The differing step moves the coupled iterates
apart by at most ``2 eta_i C_i``, hence the phase average has sensitivity
``2 eta_i C_i``. ``beta`` is the *uniform* per-row smoothness
``loss.smoothness * row_bound^2``, enforced by the public row clipping. Phases
are disjoint: their Gaussian releases compose in parallel, so each phase uses
the whole budget mu (the paper's printed noise spends a quarter of it; here it
is calibrated exactly).

Schedules: ``"theory"`` uses the paper's eta and C from moment bounds
``(k, G_k, G_2)`` that the user vouches for; ``"practical"`` takes C from a
private quantile of the per-sample gradient norms at 0 (the level at which,
by the note's identity, ``(G_k / C)^k = 8 sqrt(d) / (n sqrt(rho))`` of the rows
would be clipped) and ``eta = min(sqrt(8 / n) D / C, D sqrt(rho) / (4 C sqrt(d)))``.
Both are capped so that ``eta_1 <= 2 / (beta + max ridge)``: the cap only
changes accuracy; the privacy condition is checked before any data is read.
"""

import math

import numpy as np

from ..accounting import ExponentialMechanismRelease, GaussianRelease, Parallel, Sequential
from ..mechanisms import clip_factors, private_quantile
from ._glm import SolverResult, project_ball

__all__ = ["OnePassGLM", "phase_sizes"]


def phase_sizes(n):
    """Disjoint phase sizes ``2^(I-1), ..., 1`` with the leftover rows added to phase 1."""
    I = int(math.floor(math.log2(n)))
    sizes = [2 ** (I - i) for i in range(1, I + 1)]
    sizes[0] += n - sum(sizes)
    return sizes


class OnePassGLM:
    """Algorithm 8 of paper 000 (see module docstring).

    Parameters
    ----------
    schedule : {"practical", "theory"}
    moment_order, moment_bound, second_moment_bound : public moment bounds
        ``k``, ``G_k`` and ``G_2`` for ``schedule="theory"``.
    clip : float or None
        Public clip threshold ``C`` (skips the private quantile).
    """

    name = "one_pass_glm"
    gradient_clip = True  # ``clip`` bounds per-sample gradient norms

    def __init__(self, schedule="practical", moment_order=4, moment_bound=None, second_moment_bound=None,
                 clip=None):
        self.schedule = schedule
        self.moment_order = moment_order
        self.moment_bound = moment_bound
        self.second_moment_bound = second_moment_bound
        self.clip = clip
        self.recorder = None  # tests: called with (name, value_before_noise, sensitivity)
        if schedule == "theory" and moment_bound is None:
            raise ValueError("schedule='theory' needs public moment bounds (moment_bound, moment_order).")

    def n_quantiles(self, loss):
        return 0 if (self.clip is not None or self.schedule == "theory") else 1

    def check_loss(self, loss):
        if not np.isfinite(getattr(loss, "smoothness", np.inf)):
            raise ValueError("one_pass_glm needs a smooth loss (squared or huber); its privacy rests on "
                             "the uniform smoothness of every row's loss.")

    def event(self, loss, mu, eps_q, n_samples):
        """The run's event: a private clip quantile, then one mu-GDP release per disjoint phase."""
        self.check_loss(loss)
        parts = [ExponentialMechanismRelease(eps_q)] if self.n_quantiles(loss) else []
        phases = [GaussianRelease(1.0, 1.0 / mu) for _ in phase_sizes(n_samples)]
        return Sequential(parts + [Parallel(phases)])

    def _step_and_clip(self, n, p, D, rho, C):
        if self.schedule == "theory":
            k = float(self.moment_order)
            Gk = float(self.moment_bound)
            G2 = float(self.second_moment_bound if self.second_moment_bound is not None else Gk)
            eta = min(math.sqrt(8.0 / n) * D / G2,
                      (1.0 / n) * (n * n * rho / (32.0 * p)) ** ((k - 1) / (2 * k))
                      * 2 ** ((k + 1) / (2 * k)) * D / Gk)
            C = (Gk**k * D * rho * n / (32.0 * eta * p)) ** (1.0 / (k + 1))
            return eta, C
        eta = min(math.sqrt(8.0 / n) * D / C, D * math.sqrt(rho) / (4.0 * C * math.sqrt(p)))
        return eta, C

    def check_theory(self, n, p, beta, radius, mu):
        """Raise (before any data is read) when the paper's step breaks ``eta / 16 <= 2 / beta``."""
        if self.schedule != "theory":
            return
        eta, _ = self._step_and_clip(n, p, 2.0 * radius, mu * mu / 2.0, None)
        if eta > 32.0 / beta:
            raise ValueError(
                f"The paper's step eta={eta:.3g} breaks the privacy condition eta/16 <= 2/beta "
                f"(beta={beta:.3g}); use schedule='practical' or tighter moment bounds.")

    def solve(self, problem, mu, eps_q, random_state):
        rng = random_state
        loss = problem.loss
        self.check_loss(loss)
        n, p = problem.X.shape
        beta = problem.uniform_smoothness()
        D = 2.0 * problem.radius
        rho = mu * mu / 2.0
        events = []
        if self.clip is not None:
            C = float(self.clip)
        elif self.schedule == "theory":
            C = None
        else:
            g = np.abs(problem.derivatives(np.zeros(p))) * problem.norms
            level = min(0.99, max(0.5, 1.0 - 8.0 * math.sqrt(p) / (n * math.sqrt(rho))))
            C, ev = private_quantile(g, level, eps_q, (1e-6 * problem.row_bound, 10 * problem.row_bound),
                                     scale="log", random_state=rng)
            events.append(ev)
        self.check_theory(n, p, beta, problem.radius, mu)  # defence in depth; fit checks it first
        eta, C = self._step_and_clip(n, p, D, rho, C)
        eta = min(eta, 32.0 / beta)  # eta_1 = eta / 16 <= 2 / beta
        sizes = phase_sizes(n)
        phases = []
        x = np.zeros(p)
        start = 0
        for i, size in enumerate(sizes, start=1):
            eta_i = eta / 16.0**i
            C_i = C * 2.0**i
            rows = np.arange(start, start + size)
            start += size
            x = project_ball(x, problem.radius)
            total = np.zeros(p)
            for j in rows:
                total += x
                xj = problem.X[j]
                d = float(problem.loss.derivative(np.array([xj @ x]), problem.y[j : j + 1])[0])
                grad = d * xj * clip_factors(np.array([abs(d) * problem.norms[j]]), C_i)[0]
                x = project_ball(x - eta_i * (grad + problem.penalty * x), problem.radius)
            average = total / size
            sensitivity = 2.0 * eta_i * C_i
            sigma = sensitivity / mu
            if self.recorder is not None:
                self.recorder(f"phase{i}", average, sensitivity)
            x = average + sigma * rng.standard_normal(p)
            phases.append(GaussianRelease(sensitivity, sigma))
        coef = project_ball(x, problem.radius)
        events.append(Parallel(phases))
        schedule = {"algorithm": self.name, "n_steps": n, "phases": len(sizes), "phase_sizes": sizes,
                    "step_size": eta, "clip_threshold": C, "grad_evals": n}
        return SolverResult(coef, Sequential(events), schedule)
