"""Localized clipped DP-SGD with the sparse vector technique (paper 000, Algorithm 7; 'svt_sgd').

For smooth losses that are not GLMs clipping can break the contraction of SGD
(paper 000, Appendix B), so Algorithm 7 clips only when a sparse-vector test
says a gradient is large, and halts when too many are. Phases ``i = 1..I`` use
disjoint blocks of ``n_i = 2^(I-i)`` rows (leftover rows go to phase 1), steps
``eta_i = eta / 4^i`` and release their average iterate with Gaussian noise.
The algorithm is (epsilon, delta)-DP, not zCDP.

Privacy per phase (the note's section 3, Lemma 11), for a changed row in phase i:
(a) the noisy count threshold ``c_hat = c + BLap(3/eps, c/2)`` hides whether
    the changed step was clipped; (b) the clip decisions after it are a sparse
    vector run on queries ``||grad||`` whose sensitivity is at most
    ``6 C eta_i beta`` while both runs agree, with threshold noise
    ``BLap(omega_i, omega_i l_i)`` and query noise ``BLap(2 omega_i, 2 omega_i l_i)``;
    (c) the phase average moves by at most ``6 C eta_i``, covered by Gaussian
    noise. Lemma 11 needs, and ``check_preconditions`` enforces before reading
    any data, ``eta_i beta <= 1``, ``192 eta_i beta c <= 1`` and
    ``48 omega eta_i beta log(30 n_i / delta) <= 1``; (a) and (b) need
    ``c >= (6/eps) log(12/delta)`` and ``omega >= (18/eps) sqrt(2 c log(15/delta))``
    for the printed constants. skdp computes the (epsilon, delta) of each part
    from the parameters actually used (bounded Laplace, sparse vector and
    Gaussian events) and composes them: basic composition within a phase,
    parallel composition across phases.

``beta`` is the uniform per-row smoothness ``loss.smoothness * row_bound^2``.
The preconditions force tiny steps at realistic sizes (the note measures
``beta <= 1e-6 G_2 / D`` for moderate n with the theory constants); the
practical schedule takes the largest step they allow, so the algorithm is
always private and usually slow to move.
"""

import math

import numpy as np

from ..accounting import GaussianRelease, Parallel, Sequential
from ..mechanisms import bounded_laplace_event, bounded_laplace_noise, sparse_vector_event
from ._glm import SolverResult, project_ball
from .one_pass_glm import phase_sizes

__all__ = ["SVTSGD"]


class SVTSGD:
    """Algorithm 7 of paper 000 (see module docstring).

    Parameters
    ----------
    clip : float
        Clip threshold ``C`` in the solver's (standardised) units.
    schedule : {"practical", "theory"}
        "theory" uses the paper's step, ``c = 480 sqrt(d) l / eps`` (the
        corrected count, erratum 10) and needs moment bounds; "practical" uses
        the smallest ``c`` and ``omega`` the privacy lemmas allow and the largest
        step the preconditions allow.
    """

    name = "svt_sgd"
    budget_kind = "approx"

    def __init__(self, clip=1.0, schedule="practical", moment_order=4, moment_bound=None,
                 second_moment_bound=None, max_step=1.0):
        self.clip = float(clip)
        self.schedule = schedule
        self.moment_order = moment_order
        self.moment_bound = moment_bound
        self.second_moment_bound = second_moment_bound
        self.max_step = float(max_step)
        self.recorder = None

    def n_quantiles(self, loss):
        return 0

    # -- public parameters ------------------------------------------------------------------
    def parameters(self, n, p, beta, radius, epsilon, delta):
        """All of the run's constants, from public inputs only; raises if privacy cannot hold."""
        if not (0 < epsilon and 0 < delta < 1):
            raise ValueError("svt_sgd needs epsilon > 0 and delta in (0, 1).")
        if self.schedule == "theory" and not epsilon < 1:
            raise ValueError("svt_sgd with schedule='theory' needs epsilon < 1 (Theorem 3).")
        sizes = phase_sizes(n)
        n_pow = 2 ** len(sizes)
        if self.schedule == "theory":
            if self.moment_bound is None:
                raise ValueError("schedule='theory' needs public moment bounds.")
            ell = math.log(15 * n_pow / delta)
            c = 480.0 * math.sqrt(p) * ell / epsilon
            A = 14400.0 * p * ell**2 / (n_pow * epsilon**2)
            k = float(self.moment_order)
            Gk = float(self.moment_bound)
            G2 = float(self.second_moment_bound or Gk)
            D = 2 * radius
            I = len(sizes)
            eta = min(2 * D / (G2 * math.sqrt(n_pow)),
                      (D * I / (Gk * n_pow)) * (n_pow / A) ** ((k - 1) / (2 * k)))
        else:
            c = (6.0 / epsilon) * math.log(12.0 / delta)
            eta = None
        omega = (18.0 / epsilon) * math.sqrt(2.0 * c * math.log(15.0 / delta))
        # Largest eta_1 = eta/4 allowed by the three conditions of Lemma 11 (phase 1 is
        # the binding one: eta_i and n_i only shrink).
        n1 = sizes[0]
        limit = min(1.0 / beta, 1.0 / (192.0 * beta * c),
                    1.0 / (48.0 * omega * beta * math.log(30.0 * n1 / delta)))
        if eta is None:
            eta = min(4.0 * limit, self.max_step)
        self.check_preconditions(eta, beta, c, omega, sizes, epsilon, delta)
        return dict(c=c, omega=omega, eta=eta, sizes=sizes)

    @staticmethod
    def check_preconditions(eta, beta, c, omega, sizes, epsilon, delta):
        """The data-free conditions of Lemmas 9-11; raise ValueError when one fails."""
        failures = []
        if c < (6.0 / epsilon) * math.log(12.0 / delta) * (1 - 1e-12):
            failures.append("c >= (6/eps) log(12/delta)")
        if omega < (18.0 / epsilon) * math.sqrt(2.0 * c * math.log(15.0 / delta)) * (1 - 1e-12):
            failures.append("omega >= (18/eps) sqrt(2 c log(15/delta))")
        for i, n_i in enumerate(sizes, start=1):
            eta_i = eta / 4.0**i
            if eta_i * beta > 1:
                failures.append(f"eta_{i} beta <= 1")
            if 192.0 * eta_i * beta * c > 1 * (1 + 1e-12):
                failures.append(f"192 eta_{i} beta c <= 1")
            if 48.0 * omega * eta_i * beta * math.log(30.0 * n_i / delta) > 1 * (1 + 1e-12):
                failures.append(f"48 omega eta_{i} beta log(30 n_{i}/delta) <= 1")
        if failures:
            raise ValueError("svt_sgd refuses to fit: its privacy proof needs " + "; ".join(failures[:3])
                             + ". Use a smaller step (schedule='practical') or another algorithm.")

    def _phase_noise(self, i, n_i, params, beta, epsilon, delta):
        """Noise parameters of phase ``i``: the single source for both the draws and the event."""
        C, c, omega, eta = self.clip, params["c"], params["omega"], params["eta"]
        eta_i = eta / 4.0**i
        omega_i = omega * 6.0 * C * eta_i * beta
        ell_i = math.log(30.0 * n_i / delta)
        return dict(
            eta_i=eta_i,
            count_scale=3.0 / epsilon, count_bound=c / 2.0,
            query_sensitivity=6.0 * C * eta_i * beta,
            threshold_scale=omega_i, threshold_bound=omega_i * ell_i,
            query_scale=2.0 * omega_i, query_bound=2.0 * omega_i * ell_i,
            max_above=int(math.floor(1.5 * c)) + 1, n_queries=n_i, svt_delta=delta / 3.0,
            sensitivity=6.0 * C * eta_i,
            sigma=30.0 * C * eta_i * math.sqrt(math.log(3.0 / delta)) / epsilon,
        )

    @staticmethod
    def _event_from(noise):
        """The (epsilon, delta) event of one phase run with the given noise parameters."""
        count_event = bounded_laplace_event(1.0, noise["count_scale"], noise["count_bound"])
        svt_event = sparse_vector_event(noise["query_sensitivity"], noise["threshold_scale"],
                                        noise["threshold_bound"], noise["max_above"], noise["n_queries"],
                                        delta=noise["svt_delta"])
        return Sequential([count_event, svt_event, GaussianRelease(noise["sensitivity"], noise["sigma"])])

    def _phase_event(self, i, n_i, params, beta, epsilon, delta):
        return self._event_from(self._phase_noise(i, n_i, params, beta, epsilon, delta))

    def event_for(self, n, p, beta, radius, epsilon, delta):
        params = self.parameters(n, p, beta, radius, epsilon, delta)
        return Parallel([self._phase_event(i, n_i, params, beta, epsilon, delta)
                         for i, n_i in enumerate(params["sizes"], start=1)])

    # -- run -----------------------------------------------------------------------------------
    @staticmethod
    def check_loss(loss):
        """Refuse non-smooth losses before any data is read."""
        if not np.isfinite(getattr(loss, "smoothness", np.inf)):
            raise ValueError("svt_sgd needs a smooth loss (squared or huber); its privacy proof uses "
                             "uniform smoothness.")

    def solve(self, problem, epsilon, delta, random_state):
        rng = random_state
        loss = problem.loss
        self.check_loss(loss)
        n, p = problem.X.shape
        beta = problem.uniform_smoothness()
        params = self.parameters(n, p, beta, problem.radius, epsilon, delta)
        C, c, eta = self.clip, params["c"], params["eta"]
        x = np.zeros(p)
        start = 0
        phases = []
        halted = False
        for i, n_i in enumerate(params["sizes"], start=1):
            noise = self._phase_noise(i, n_i, params, beta, epsilon, delta)
            eta_i = noise["eta_i"]

            def new_threshold():
                return C + bounded_laplace_noise(noise["threshold_scale"], noise["threshold_bound"],
                                                 random_state=rng)

            threshold = new_threshold()
            c_hat = c + bounded_laplace_noise(noise["count_scale"], noise["count_bound"], random_state=rng)
            count = 0
            xi = project_ball(x, problem.radius)
            total = np.zeros(p)
            # Sequential SGD: each step depends on the previous iterate, so this
            # loop over the phase's rows cannot be vectorised.
            for j in range(start, start + n_i):
                total += xi
                xj = problem.X[j]
                d = float(problem.derivatives(xi, rows=slice(j, j + 1))[0])
                g = d * xj + problem.penalty * xi
                norm = float(np.linalg.norm(g))
                nu = bounded_laplace_noise(noise["query_scale"], noise["query_bound"], random_state=rng)
                if norm + nu >= threshold:
                    count += 1
                    if norm > C:
                        g = g * (C / norm)
                    threshold = new_threshold()
                if count >= c_hat:
                    halted = True
                    break
                xi = project_ball(xi - eta_i * g, problem.radius)
            # A halted phase has still run its count and sparse-vector mechanisms
            # (its Gaussian release is skipped, which only lowers the cost).
            phases.append(self._event_from(noise))
            if halted:
                # Return the last completed phase's private output (post-processing).
                break
            start += n_i
            average = total / n_i
            if self.recorder is not None:
                self.recorder(f"phase{i}", average, noise["sensitivity"])
            x = average + noise["sigma"] * rng.standard_normal(p)
        coef = project_ball(x, problem.radius)
        schedule = {"algorithm": self.name, "n_steps": n, "phases": len(params["sizes"]),
                    "step_size": eta, "count_threshold": c, "omega": params["omega"], "halted": halted,
                    "grad_evals": n}
        return SolverResult(coef, Parallel(phases), schedule)
