"""Exact projections onto balls and their intersections, and radius-free aggregation."""

import numpy as np
from scipy.optimize import minimize

from skdp.solvers.geometry import aggregate_points, project_ball, project_balls, project_two_balls


def _reference_projection(v, balls):
    """The projection by a generic constrained solver (SLSQP), for comparison."""
    centers = [np.zeros_like(v) if c is None else c for c, _ in balls]
    cons = [{"type": "ineq", "fun": lambda x, c=c, r=r: r * r - (x - c) @ (x - c)}
            for c, (_, r) in zip(centers, balls)]
    return minimize(lambda x: (x - v) @ (x - v), np.zeros_like(v), constraints=cons, method="SLSQP",
                    options={"ftol": 1e-14, "maxiter": 500})


def test_projection_onto_one_ball():
    v = np.array([3.0, 4.0])
    np.testing.assert_allclose(project_ball(v, 1.0), [0.6, 0.8])
    assert project_ball(v, 10.0) is v  # inside: unchanged
    c = np.array([1.0, 1.0])
    np.testing.assert_allclose(project_ball(v, 1.0, c), c + (v - c) / np.linalg.norm(v - c))


def test_projection_onto_two_balls_is_exact():
    rng = np.random.default_rng(0)
    for _ in range(20):
        v = rng.normal(size=3) * 4
        c2 = rng.normal(size=3)
        r1, r2 = 1.5, 1.2
        got = project_two_balls(v, r1, c2, r2)
        ref = _reference_projection(v, [(None, r1), (c2, r2)]).x
        assert np.linalg.norm(got) <= r1 * (1 + 1e-9) and np.linalg.norm(got - c2) <= r2 * (1 + 1e-9)
        assert np.linalg.norm(got - v) <= np.linalg.norm(ref - v) + 1e-6


def test_projection_onto_two_balls_where_both_constraints_are_active():
    # Unit balls around 0 and (1, 0) meet on the line x = 1/2; from far above the lens the
    # nearest point is the upper corner, where both spheres meet.
    got = project_two_balls(np.array([0.5, 5.0]), 1.0, np.array([1.0, 0.0]), 1.0)
    np.testing.assert_allclose(got, [0.5, np.sqrt(0.75)], atol=1e-12)
    # Concentric balls: the smaller one.
    np.testing.assert_allclose(project_two_balls(np.array([5.0, 0.0, 0.0]), 1.0, np.zeros(3), 0.5),
                               [0.5, 0.0, 0.0])


def test_projection_onto_three_balls_is_exact():
    rng = np.random.default_rng(0)
    checked = 0
    for _ in range(15):
        v = rng.normal(size=3) * 4
        balls = [(None, 1.5), (rng.normal(size=3) * 0.6, 1.2), (rng.normal(size=3) * 0.6, 1.3)]
        ref = _reference_projection(v, balls)
        if not ref.success:
            continue
        checked += 1
        got = project_balls(v, balls)
        for c, r in balls:
            assert np.linalg.norm(got - (0.0 if c is None else c)) <= r * (1 + 1e-6)
        assert np.linalg.norm(got - v) <= np.linalg.norm(ref.x - v) + 1e-6
    assert checked >= 5  # the comparison is not vacuous: the reference solver converged often enough


def test_infinite_radii_are_ignored():
    v = np.array([3.0, 4.0])
    np.testing.assert_allclose(project_balls(v, [(None, np.inf), (np.zeros(2), 1.0)]), [0.6, 0.8])
    assert project_balls(v, [(None, np.inf)]) is v


def test_aggregation_returns_the_dense_cluster():
    pts = np.array([[0.0, 0.0], [0.1, 0.0], [0.0, 0.1], [50.0, 50.0], [-40.0, 3.0]])
    np.testing.assert_array_equal(aggregate_points(pts)[None], pts[[0]])


def test_aggregation_lands_within_three_radii_of_a_majority_cluster():
    rng = np.random.default_rng(1)
    z, R = np.array([2.0, -1.0, 0.5]), 0.3
    inliers = z + R * rng.uniform(-1, 1, size=(6, 3)) / np.sqrt(3)  # within R of z
    outliers = rng.normal(size=(5, 3)) * 100
    out = aggregate_points(np.vstack([outliers, inliers]))  # 6 of 11 >= 0.51 J
    assert np.linalg.norm(out - z) <= 3 * R
