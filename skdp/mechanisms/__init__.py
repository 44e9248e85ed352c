"""Noise and clipping primitives. Each mechanism returns its output with its privacy event.

Random numbers come from a ``numpy.random.Generator`` (see :func:`check_generator`);
``random_state=None`` seeds from operating-system entropy. The floating-point
samplers are not hardened against side channels.
"""

from ._random import check_generator
from .clipping import (
    clip_factors,
    clip_rows,
    clipped_derivatives,
    clipped_linear_gradient_sum,
    clipped_sum,
    row_norms,
)
from .erm import CertifiedSolution, certified_minimize, erm_sensitivity, guaranteed_steps, output_perturbation
from .noise import (
    NON_PRIVATE_RELEASE,
    bounded_laplace_event,
    bounded_laplace_mechanism,
    bounded_laplace_noise,
    budgeted_release,
    gaussian_mechanism,
    l2_laplace_mechanism,
    laplace_mechanism,
)
from .quantiles import private_quantile, private_scale
from .scaling import (
    SCALE_PRIOR,
    column_statistics_event,
    magnitude_check_sensitivity,
    pooled_scaling_event,
    private_column_statistics,
    private_magnitude_check,
    private_pooled_scale,
    private_robust_scaling,
    robust_scaling_event,
)
from .selection import exponential_mechanism
from .second_moment import private_second_moment, second_moment_l1_sensitivity, second_moment_sensitivity
from .sparse_vector import SparseVector, sparse_vector_event
from .spectral import MAX_GRAM_SIZE, private_top_eigenvalue, top_eigenvalue
from .tree import TreeAggregator, tree_depth, tree_nodes

__all__ = [
    "budgeted_release",
    "check_generator",
    "gaussian_mechanism",
    "exponential_mechanism",
    "NON_PRIVATE_RELEASE",
    "laplace_mechanism",
    "l2_laplace_mechanism",
    "bounded_laplace_noise",
    "bounded_laplace_mechanism",
    "bounded_laplace_event",
    "row_norms",
    "clip_factors",
    "clip_rows",
    "clipped_sum",
    "clipped_derivatives",
    "clipped_linear_gradient_sum",
    "SparseVector",
    "sparse_vector_event",
    "top_eigenvalue",
    "private_top_eigenvalue",
    "MAX_GRAM_SIZE",
    "TreeAggregator",
    "tree_depth",
    "tree_nodes",
    "private_quantile",
    "private_scale",
    "private_robust_scaling",
    "robust_scaling_event",
    "private_pooled_scale",
    "pooled_scaling_event",
    "private_column_statistics",
    "column_statistics_event",
    "private_magnitude_check",
    "magnitude_check_sensitivity",
    "SCALE_PRIOR",
    "private_second_moment",
    "second_moment_sensitivity",
    "second_moment_l1_sensitivity",
    "CertifiedSolution",
    "certified_minimize",
    "erm_sensitivity",
    "guaranteed_steps",
    "output_perturbation",
]
