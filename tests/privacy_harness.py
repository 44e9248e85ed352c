"""The privacy harness shared by the solver and estimator tests.

* :func:`neighbours` — standardised-looking rows with an intercept column, and a
  neighbouring dataset in which one row is replaced by an extreme outlier;
* :class:`CoupledProblem` — a :class:`~skdp.solvers.GLMProblem` that answers every
  clipped-gradient query on the neighbouring dataset too, at the same iterate, and
  logs how far the two answers are apart relative to their claimed sensitivity
  (``2 clip``) and which rows each query read; the coupling survives the problem
  transformations the solvers use (a subset of rows, another loss, truncation,
  over the coefficient ball or a localised ball);
* :func:`record_releases` — every Gaussian or Laplace release of a run, with the
  exact value before the noise and its event (from :mod:`skdp.mechanisms`);
* :func:`assert_event_as_planned` — the released event costs what the plan said;
* :func:`spec_for` and :func:`run_as_planned` — a solver driven the way the
  pipeline drives it (check, plan, check_budget, run) on a hand-made problem;
* :class:`CoupledZOProblem` — the zeroth-order counterpart of :class:`CoupledProblem`:
  every oracle query answered on a neighbouring dataset too, at the same point
  with the same directions.
"""

import math

import numpy as np

from skdp.mechanisms import clip_rows
from skdp.mechanisms._audit import record_releases
from skdp.solvers import GLMProblem, ProblemSpec, SolverBudget

__all__ = ["neighbours", "CoupledProblem", "CoupledZOProblem", "record_releases", "assert_same_mechanisms",
           "assert_event_as_planned", "spec_for", "run_as_planned"]


def neighbours(n=400, d=4, seed=0, row=None):
    """Rows clipped to ``sqrt(d) + 3`` plus an intercept column, and a neighbour with one extreme row.

    Returns
    -------
    X, y, X2, y2 : arrays
        ``X2, y2`` differ from ``X, y`` in row ``i`` only: features of size 1e6
        (clipped to the row bound) and a label of -1e6 times the sign of the seed.
    row_bound : float
        The norm bound of the rows (intercept column included).
    i : int
    """
    rng = np.random.default_rng(seed)
    A = math.sqrt(d) + 3
    X = np.hstack([clip_rows(rng.standard_t(3, size=(n, d)), A), np.ones((n, 1))])
    y = X[:, :d] @ rng.normal(size=d) + rng.standard_t(2.5, size=n)
    X2, y2 = X.copy(), y.copy()
    i = int(rng.integers(n)) if row is None else int(row)
    X2[i, :d] = clip_rows(np.full((1, d), 1e6 * (-1) ** seed), A)[0]  # 1e6 before row clipping
    y2[i] = -1e6 * (-1) ** seed
    return X, y, X2, y2, math.hypot(A, 1.0), i


class CoupledProblem(GLMProblem):
    """A GLMProblem that evaluates every clipped-gradient query on a neighbouring dataset too.

    Parameters
    ----------
    X, y, X2, y2 : arrays
        The two datasets (same shape).
    loss, penalty, radius, row_bound : as for GLMProblem
    intercept : bool
    l1 : ndarray, optional
    active, active2 : boolean arrays, optional
        Rows that are not dummies, on each dataset.
    rows_clipped : bool
        Whether the rows are clipped to ``row_bound`` (as for GLMProblem).

    Attributes
    ----------
    checks : list of float
        ``||answer - answer on the neighbour|| / (2 clip)`` of every query: at most
        1 when every release respects its sensitivity.
    queries : list of ndarray
        The row indices (in the original numbering) of every query.
    batches : list of ndarray
        The rows of every :meth:`subset` taken (a solver's disjoint batches).
    """

    def __init__(self, X, y, X2, y2, loss, penalty, radius, row_bound, intercept=True, l1=None, active=None,
                 active2=None, rows_clipped=True, _log=None, _index=None):
        super().__init__(X, y, loss, penalty, radius, row_bound, intercept=intercept, active=active, l1=l1,
                         rows_clipped=rows_clipped)
        self.other = GLMProblem(X2, y2, loss, penalty, radius, row_bound, intercept=intercept, active=active2,
                                l1=l1, rows_clipped=rows_clipped)
        self._log = _log if _log is not None else {"checks": [], "queries": [], "batches": []}
        self.index = np.arange(len(y)) if _index is None else _index

    @property
    def checks(self):
        return self._log["checks"]

    @property
    def queries(self):
        return self._log["queries"]

    @property
    def batches(self):
        return self._log["batches"]

    def clipped_gradient_sum(self, w, clip, rows=None):
        a = super().clipped_gradient_sum(w, clip, rows)
        b = self.other.clipped_gradient_sum(w, clip, rows)
        self._log["checks"].append(float(np.linalg.norm(a - b)) / (2.0 * clip))
        self._log["queries"].append(self.index if rows is None else self.index[rows])
        return a

    def _copy(self, index=slice(None), loss=None, active=None, active2=None):
        return CoupledProblem(self.X[index], self.y[index], self.other.X[index], self.other.y[index],
                              self.loss if loss is None else loss, self.penalty, self.radius, self.row_bound,
                              intercept=self.intercept, l1=self.l1,
                              active=self.active[index] if active is None else active,
                              active2=self.other.active[index] if active2 is None else active2,
                              rows_clipped=self.rows_clipped, _log=self._log, _index=self.index[index])

    def subset(self, index):
        self._log["batches"].append(self.index[index])
        return self._copy(index)

    def with_loss(self, loss):
        return self._copy(loss=loss)

    def truncated(self, threshold, center=None, radius=None):
        # Each dataset truncates its own rows by its own per-row bounds (Algorithm 4's map).
        return self._copy(active=self.lipschitz_bounds(center, radius) <= threshold,
                          active2=self.other.lipschitz_bounds(center, radius) <= threshold)


def assert_same_mechanisms(log, other):
    """Two runs' release logs hold the same mechanisms in order, at the same noise per unit of sensitivity.

    For coupled runs on neighbouring datasets whose released scales differ: every Gaussian or Laplace
    release must have the same ``mu`` (noise per unit of sensitivity), every exponential draw the same
    epsilon and utility sensitivity.
    """
    assert len(log) == len(other)
    for a, b in zip(log, other):
        assert a.mechanism == b.mechanism
        if a.mechanism == "exponential":
            assert a.event.epsilon0 == b.event.epsilon0 and a.sensitivity == b.sensitivity
        else:
            assert math.isclose(a.event.mu, b.event.mu, rel_tol=1e-12)


def assert_event_as_planned(released, planned, deltas=(1e-4, 1e-6), rel=1e-9):
    """The released event costs exactly the planned one at every delta (and never more)."""
    for delta in deltas:
        r, p = released.epsilon(delta), planned.epsilon(delta)
        assert r <= p * (1 + rel) + 1e-12, (delta, r, p)
        assert math.isclose(r, p, rel_tol=rel, abs_tol=1e-12), (delta, r, p)


def spec_for(problem, **changes):
    """The public :class:`~skdp.solvers.ProblemSpec` of ``problem``, with ``changes`` applied.

    ``ridge`` is set when every feature coefficient carries a positive ridge
    weight (the intercept excluded), as the estimators declare it.
    """
    free = problem.free_coordinates() > 0
    fields = dict(n_samples=problem.n_samples, n_coef=problem.n_coef, loss=problem.loss,
                  intercept=bool(problem.intercept), l1=problem.has_l1,
                  ridge=bool(free.any() and np.all(problem.penalty[free] > 0)), radius=problem.radius)
    fields.update(changes)
    return ProblemSpec(**fields)


def run_as_planned(solver, problem, mu, quantile_epsilon, rng, **spec_changes):
    """Check, plan and run ``solver`` on ``problem`` in the pipeline's order.

    Returns
    -------
    result : SolverResult
    planned : PrivacyEvent
        The event :meth:`~skdp.solvers.Solver.plan` gave before the run.
    """
    spec = spec_for(problem, **spec_changes)
    budget = SolverBudget(mu, quantile_epsilon)
    solver.check(spec)
    planned = solver.plan(spec, budget)
    solver.check_budget(spec, budget)
    if isinstance(rng, (int, np.integer)):
        rng = np.random.default_rng(rng)
    return solver.run(spec, problem, budget, rng), planned


class CoupledZOProblem:
    """A :class:`~skdp.solvers.zeroth_order.ZOProblem` that answers every oracle query on a neighbour too.

    Both problems see the same point and the same direction draw; the log
    records ``||answer - answer on the neighbour|| / claimed sensitivity`` of
    every query (at most 1 when the clipping holds the bound), the claimed
    sensitivities and the rows each query read. Every other attribute is the
    first problem's, so a solver runs on it unchanged.

    Parameters
    ----------
    problem, other : ZOProblem
        The two datasets (same shapes, same model and loss objects or their
        counterparts).
    """

    def __init__(self, problem, other, _log=None, _index=None):
        self._problem = problem
        self._other = other
        self._log = _log if _log is not None else {"checks": [], "sensitivities": [], "queries": []}
        self._index = np.arange(problem.n_samples) if _index is None else _index

    def __getattr__(self, name):
        return getattr(self._problem, name)

    @property
    def checks(self):
        return self._log["checks"]

    @property
    def sensitivities(self):
        return self._log["sensitivities"]

    @property
    def queries(self):
        return self._log["queries"]

    def _record(self, a, b, rows):
        (va, sa), (vb, sb) = a, b
        assert sa == sb, "the claimed sensitivity must not depend on the data"
        gap = float(np.linalg.norm(va - vb))
        self._log["checks"].append(gap / sa if sa > 0 else (0.0 if gap == 0 else math.inf))
        self._log["sensitivities"].append(sa)
        self._log["queries"].append(self._index if rows is None else self._index[rows])
        return va, sa

    def grad_sum(self, theta, draw, smoothing, rows=None):
        return self._record(self._problem.grad_sum(theta, draw, smoothing, rows),
                            self._other.grad_sum(theta, draw, smoothing, rows), rows)

    def diff_sum(self, w, w_prev, draw, smoothing, rows=None, symmetric=False, max_distance=math.inf):
        return self._record(self._problem.diff_sum(w, w_prev, draw, smoothing, rows, symmetric, max_distance),
                            self._other.diff_sum(w, w_prev, draw, smoothing, rows, symmetric, max_distance), rows)

    def with_loss(self, loss):
        return CoupledZOProblem(self._problem.with_loss(loss), self._other.with_loss(loss), self._log, self._index)
