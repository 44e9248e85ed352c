"""Declarative parameter validation for skdp estimators.

scikit-learn's own constraint classes live in a private module, so skdp keeps a
small public-API-only equivalent: an estimator declares
``_parameter_constraints = {name: [constraint, ...]}`` and calls
:func:`validate_params` at the start of ``fit``. A parameter is valid when it
satisfies at least one of its constraints.
"""

import numbers

import numpy as np

__all__ = ["InvalidParameterError", "Interval", "Options", "Predicate", "check_values", "validate_params"]


class InvalidParameterError(ValueError, TypeError):
    """A constructor parameter has an invalid type or value (raised by ``fit``)."""


class Interval:
    """Real or integral numbers in an interval.

    Parameters
    ----------
    type : numbers.Real or numbers.Integral
    left, right : float or None
        Bounds; None means unbounded on that side.
    closed : {"both", "left", "right", "neither"}
    """

    def __init__(self, type, left, right, *, closed):
        self.type, self.left, self.right, self.closed = type, left, right, closed

    def is_satisfied_by(self, value):
        if isinstance(value, bool) or not isinstance(value, self.type):
            return False
        if isinstance(value, float) and np.isnan(value):
            return False
        left_ok = self.left is None or (
            value >= self.left if self.closed in ("both", "left") else value > self.left
        )
        right_ok = self.right is None or (
            value <= self.right if self.closed in ("both", "right") else value < self.right
        )
        return left_ok and right_ok

    def __str__(self):
        kind = "an int" if self.type is numbers.Integral else "a float"
        lb = "[" if self.closed in ("both", "left") and self.left is not None else "("
        rb = "]" if self.closed in ("both", "right") and self.right is not None else ")"
        left = "-inf" if self.left is None else self.left
        right = "inf" if self.right is None else self.right
        return f"{kind} in the range {lb}{left}, {right}{rb}"


class Options:
    """One of a fixed set of values (strings, usually)."""

    def __init__(self, options):
        self.options = set(options)

    def is_satisfied_by(self, value):
        return isinstance(value, str) and value in self.options

    def __str__(self):
        return f"a str among {sorted(self.options)}"


class Predicate:
    """A value accepted by a test function, described in words (for compound values such as tuples).

    Parameters
    ----------
    test : callable
        ``value -> bool``; an exception counts as False.
    description : str
        What the value must be ("a non-empty tuple of positive numbers").
    """

    def __init__(self, test, description):
        self.test, self.description = test, description

    def is_satisfied_by(self, value):
        try:
            return bool(self.test(value))
        except Exception:  # noqa: BLE001 - a value the test cannot handle is not valid
            return False

    def __str__(self):
        return self.description


def _satisfied(constraint, value):
    if constraint is None:
        return value is None
    if constraint == "boolean":
        return isinstance(value, (bool, np.bool_))
    if constraint == "random_state":
        return value is None or isinstance(
            value, (numbers.Integral, np.random.RandomState, np.random.Generator)
        ) and not isinstance(value, bool)
    if constraint == "verbose":
        return isinstance(value, (numbers.Integral, bool, np.bool_))
    if constraint == "callable":
        return callable(value)
    if constraint == "array-like":
        return hasattr(value, "__len__") and not isinstance(value, (str, bytes, dict))
    if isinstance(constraint, type):
        return isinstance(value, constraint)
    return constraint.is_satisfied_by(value)


def _describe(constraint):
    if constraint is None:
        return "None"
    if constraint == "boolean":
        return "an instance of bool"
    if constraint == "random_state":
        return "None, an int, a numpy RandomState or a numpy Generator"
    if constraint == "verbose":
        return "an int or a bool"
    if constraint == "callable":
        return "a callable"
    if constraint == "array-like":
        return "an array-like"
    if isinstance(constraint, type):
        return f"an instance of {constraint.__name__}"
    return str(constraint)


def validate_params(estimator):
    """Check every constructor parameter against ``estimator._parameter_constraints``.

    Raises
    ------
    InvalidParameterError
        Naming the parameter, what it must be, and what was given.
    """
    check_values(type(estimator).__name__, estimator.get_params(deep=False),
                 getattr(estimator, "_parameter_constraints", {}))


def check_values(owner, params, constraints):
    """Check ``{name: value}`` against ``{name: [constraint, ...]}`` (names without constraints pass).

    Raises
    ------
    InvalidParameterError
        Naming the parameter of ``owner``, what it must be, and what was given.
    """
    for name, value in params.items():
        options = constraints.get(name)
        if options is None or options == "no_validation":
            continue
        if any(_satisfied(c, value) for c in options):
            continue
        described = [_describe(c) for c in options]
        expected = described[0] if len(described) == 1 else ", ".join(described[:-1]) + " or " + described[-1]
        raise InvalidParameterError(
            f"The {name!r} parameter of {owner} must be {expected}. "
            f"Got {value!r} instead."
        )
