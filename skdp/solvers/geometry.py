"""Euclidean projections and radius-free aggregation: the geometry every solver shares."""

import math

import numpy as np

__all__ = ["project_ball", "project_two_balls", "project_balls", "aggregate_points"]


def project_ball(v, radius, center=None):
    """Euclidean projection onto the ball of ``radius`` around ``center`` (exact).

    Examples
    --------
    >>> import numpy as np
    >>> from skdp.solvers.geometry import project_ball
    >>> project_ball(np.array([3.0, 4.0]), 1.0).tolist()
    [0.6000000000000001, 0.8]
    """
    c = 0.0 if center is None else center
    diff = v - c
    norm = float(np.linalg.norm(diff))
    if norm <= radius:
        return v
    return c + diff * (radius / norm)


def project_two_balls(v, r1, c2, r2):
    """Exact projection onto ``Ball(0, r1) ∩ Ball(c2, r2)`` (assumed non-empty).

    If ``v`` is in both balls it is returned; else the projection onto one ball
    is returned when it lies in the other; else both constraints are active and
    ``v`` is projected onto the sphere where the two boundary spheres meet.
    """
    in1 = np.linalg.norm(v) <= r1
    in2 = np.linalg.norm(v - c2) <= r2
    if in1 and in2:
        return v
    p1 = project_ball(v, r1)
    if np.linalg.norm(p1 - c2) <= r2 * (1 + 1e-12):
        return p1
    p2 = project_ball(v, r2, c2)
    if np.linalg.norm(p2) <= r1 * (1 + 1e-12):
        return p2
    dist = float(np.linalg.norm(c2))
    if dist == 0.0:
        return project_ball(v, min(r1, r2))
    u = c2 / dist
    a = (dist**2 + r1**2 - r2**2) / (2 * dist)
    h = np.sqrt(max(r1**2 - a**2, 0.0))
    m = a * u
    w = v - m - ((v - m) @ u) * u
    norm_w = float(np.linalg.norm(w))
    if norm_w == 0.0:
        # Any point of the intersection circle is a projection; pick a fixed one.
        basis = np.zeros_like(v)
        basis[int(np.argmin(np.abs(u)))] = 1.0
        w = basis - (basis @ u) * u
        norm_w = float(np.linalg.norm(w))
    return m + h * w / norm_w


def project_balls(v, balls):
    """Exact Euclidean projection onto an intersection of balls (assumed non-empty).

    Parameters
    ----------
    v : ndarray of shape (p,)
    balls : sequence of (center, radius)
        ``center`` None means the origin; infinite radii are ignored.

    Returns
    -------
    ndarray of shape (p,)

    Notes
    -----
    If the projection onto a superset of the intersection (one ball, or the
    intersection of two) lies in every ball, it is the projection onto the
    intersection. Those candidates are exact (:func:`project_two_balls`); only
    when three constraints are active at once does the function fall back to
    Dykstra's algorithm (a fixed number of sweeps at most), which converges to
    the projection.
    """
    balls = [(np.zeros_like(v) if c is None else np.asarray(c, dtype=float), float(r))
             for c, r in balls if math.isfinite(r)]

    def feasible(x):
        return all(np.linalg.norm(x - c) <= r * (1 + 1e-9) + 1e-12 for c, r in balls)

    if feasible(v):
        return v
    for c, r in balls:
        x = project_ball(v, r, c)
        if feasible(x):
            return x
    for a in range(len(balls)):
        for b in range(a + 1, len(balls)):
            (c1, r1), (c2, r2) = balls[a], balls[b]
            x = c1 + project_two_balls(v - c1, r1, c2 - c1, r2)
            if feasible(x):
                return x
    x = v.copy()
    corrections = [np.zeros_like(v) for _ in balls]
    for _ in range(10000):
        x_old = x
        for j, (c, r) in enumerate(balls):
            y = project_ball(x + corrections[j], r, c)
            corrections[j] = x + corrections[j] - y
            x = y
        if np.linalg.norm(x - x_old) <= 1e-12 * (1.0 + np.linalg.norm(x)):
            break
    return x


def aggregate_points(points):
    """Radius-free geometric aggregation of private points.

    For every point, the distance to its ``ceil(0.51 J)``-th nearest point (itself
    included) is computed; the point with the smallest such radius is returned.
    If at least 0.51 J of the points lie within R of some z, the output is within
    3R of z, without knowing R. Pure post-processing of private points.
    """
    P = np.asarray(points, dtype=float)
    J = P.shape[0]
    k = int(np.ceil(0.51 * J))
    dist = np.linalg.norm(P[:, None, :] - P[None, :, :], axis=2)
    radius = np.sort(dist, axis=1)[:, k - 1]
    return P[int(np.argmin(radius))].copy()
