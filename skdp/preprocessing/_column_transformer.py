"""Declared bounds for the output of a fitted ``ColumnTransformer`` (public scikit-learn API only).

:func:`bounds_for_column_transformer` walks a fitted ``ColumnTransformer``
(``transformers_``, ``output_indices_``, ``feature_names_in_``), nested ones
and ``Pipeline`` steps included, and gives every output column its public
bounds:

* a ``OneHotEncoder``'s outputs: ``(0, 1)``, one block per input categorical
  (a row has at most one 1 in it; ``drop`` and infrequent-category grouping
  are followed through the encoder's ``categories_``, ``drop_idx_`` and
  ``infrequent_categories_``);
* ``"passthrough"`` outputs: the user's bounds of the input column, by name;
* ``StandardScaler`` / ``MinMaxScaler`` outputs: the user's bounds mapped
  through the fitted affine map;
* ``"drop"``: no output; anything else: undeclared (estimated privately).

What leaks. Fitting a transformer on the private data publishes what it
learned, outside any privacy accounting: an encoder with
``categories="auto"`` lists every category present, and a rare category can
reveal a person; a scaler's mean and scale are plain statistics of the data.
Both warn with :class:`~skdp.PrivacyLeakWarning`. Declare the categories
(``OneHotEncoder(categories=[...])``) and scale with public constants (or let
the estimator scale privately) instead.
"""

import warnings

import numpy as np
from sklearn.compose import ColumnTransformer
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import FunctionTransformer, MinMaxScaler, OneHotEncoder, StandardScaler

from ..accounting import PrivacyLeakWarning
from ._feature_bounds import FeatureBounds, _pair

__all__ = ["bounds_for_column_transformer"]


def bounds_for_column_transformer(column_transformer, numeric_bounds=None):
    """The :class:`FeatureBounds` of the output of a fitted ``ColumnTransformer``.

    Parameters
    ----------
    column_transformer : ColumnTransformer
        Fitted; its output (dense or sparse) is what the estimator receives.
    numeric_bounds : dict, default=None
        ``{input column: (lower, upper)}``: public bounds of the numeric input
        columns, by name (or by position when the transformer was fitted on an
        array). Numeric columns not named stay undeclared.

    Returns
    -------
    FeatureBounds
        Bounds of every output column (``nan`` for undeclared ones), the
        one-hot blocks, and the output feature names when the transformer
        provides them.

    Raises
    ------
    ValueError
        When ``numeric_bounds`` names a column the transformer does not take.

    Warns
    -----
    PrivacyLeakWarning
        For an encoder whose categories were learned from the data
        (``categories="auto"``), and for a fitted scaler (its statistics are
        the data's unless it was fitted on public data).

    Examples
    --------
    >>> import pandas as pd
    >>> from sklearn.compose import ColumnTransformer
    >>> from sklearn.preprocessing import OneHotEncoder
    >>> from skdp.preprocessing import bounds_for_column_transformer
    >>> frame = pd.DataFrame({"age": [25.0, 47.0, 61.0], "city": ["a", "b", "a"]})
    >>> ct = ColumnTransformer([("num", "passthrough", ["age"]),
    ...                         ("cat", OneHotEncoder(categories=[["a", "b", "c"]]), ["city"])]).fit(frame)
    >>> fb = bounds_for_column_transformer(ct, {"age": (17, 100)})
    >>> fb.lower.tolist(), fb.upper.tolist(), fb.blocks
    ([17.0, 0.0, 0.0, 0.0], [100.0, 1.0, 1.0, 1.0], ((1, 2, 3),))
    """
    if not isinstance(column_transformer, ColumnTransformer) or not hasattr(column_transformer, "transformers_"):
        raise TypeError("bounds_for_column_transformer needs a fitted ColumnTransformer.")
    numeric_bounds = {} if numeric_bounds is None else dict(numeric_bounds)
    names = _input_names(column_transformer)
    inputs = {}
    for key, pair in numeric_bounds.items():
        index = _index_of(key, names, column_transformer.n_features_in_)
        inputs[index] = _pair(pair, f"numeric_bounds[{key!r}]")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        lower, upper, blocks, used = _walk(column_transformer, list(range(column_transformer.n_features_in_)),
                                           inputs)
    for warning in caught:  # re-issued here so that they point at the caller's line
        warnings.warn(warning.message, warning.category, stacklevel=2)
    unused = sorted(set(inputs) - used)
    if unused:
        named = [names[i] if names is not None else i for i in unused]
        warnings.warn(f"numeric_bounds names input columns {named} that reach no output as numbers (dropped, "
                      "encoded or transformed by an unsupported transformer); their bounds are not used.",
                      UserWarning, stacklevel=2)
    try:
        out_names = column_transformer.get_feature_names_out()
    except (AttributeError, ValueError, TypeError):  # a transformer without output names
        out_names = None
    return FeatureBounds(lower, upper, blocks=blocks, feature_names=out_names)


def _input_names(ct):
    names = getattr(ct, "feature_names_in_", None)
    return None if names is None else [str(name) for name in names]


def _index_of(key, names, n_in):
    if names is not None and str(key) in names:
        return names.index(str(key))
    if isinstance(key, (int, np.integer)) and not isinstance(key, bool) and 0 <= key < n_in:
        return int(key)
    known = names if names is not None else list(range(n_in))
    raise ValueError(f"numeric_bounds names {key!r}, which is not an input column of the ColumnTransformer; "
                     f"its input columns are {known}.")


def _selected(columns, ct_names, n_in):
    """Positions (in the transformer's input) of the columns a ColumnTransformer entry selects."""
    if isinstance(columns, slice):
        if columns.start is not None and isinstance(columns.start, str) and ct_names is not None:
            stop = ct_names.index(columns.stop) + 1 if columns.stop is not None else n_in
            return list(range(ct_names.index(columns.start), stop))
        return list(range(n_in))[columns]
    columns = np.atleast_1d(np.asarray(columns, dtype=object))
    if columns.size and isinstance(columns[0], (bool, np.bool_)):
        return [i for i, keep in enumerate(columns) if keep]
    if columns.size and isinstance(columns[0], str):
        return [ct_names.index(c) for c in columns]
    return [int(c) for c in columns]


def _walk(ct, input_map, inputs):
    """Bounds and blocks of a ColumnTransformer's output; ``input_map[i]`` is the top-level index of its input i."""
    width = max((sl.stop for sl in ct.output_indices_.values()), default=0)
    lower, upper = np.full(width, np.nan), np.full(width, np.nan)
    blocks, used = [], set()
    names = _input_names(ct)
    for name, transformer, columns in ct.transformers_:
        out = ct.output_indices_.get(name, slice(0, 0))
        if out.stop <= out.start or (isinstance(transformer, str) and transformer == "drop"):
            continue
        sources = [input_map[i] for i in _selected(columns, names, ct.n_features_in_)]
        lo, hi, sub_blocks, sub_used = _transformed(transformer, sources, inputs, out.stop - out.start, name)
        lower[out], upper[out] = lo, hi
        blocks += [tuple(out.start + i for i in block) for block in sub_blocks]
        used |= sub_used
    return lower, upper, blocks, used


def _transformed(transformer, sources, inputs, width, name):
    """Bounds of one transformer's output (width columns) from the bounds of its inputs (``sources``)."""
    lo = np.array([inputs.get(s, (np.nan, np.nan))[0] for s in sources])
    hi = np.array([inputs.get(s, (np.nan, np.nan))[1] for s in sources])
    if _identity(transformer):
        return lo, hi, [], {s for s in sources if s in inputs}
    if isinstance(transformer, ColumnTransformer):
        return _walk(transformer, sources, inputs)
    if isinstance(transformer, Pipeline):
        return _pipeline(transformer, sources, inputs, width, name)
    if isinstance(transformer, OneHotEncoder):
        return _one_hot(transformer, width, name)
    if isinstance(transformer, (StandardScaler, MinMaxScaler)):
        lo, hi = _scaled(transformer, lo, hi, name)
        return lo, hi, [], {s for s in sources if s in inputs}
    return np.full(width, np.nan), np.full(width, np.nan), [], set()


def _pipeline(pipe, sources, inputs, width, name):
    """A Pipeline of passthrough steps and scalers keeps column positions; anything else ends the bounds."""
    lo = np.array([inputs.get(s, (np.nan, np.nan))[0] for s in sources])
    hi = np.array([inputs.get(s, (np.nan, np.nan))[1] for s in sources])
    for step_name, step in pipe.steps:
        if _identity(step):
            continue
        if isinstance(step, (StandardScaler, MinMaxScaler)):
            lo, hi = _scaled(step, lo, hi, f"{name}/{step_name}")
            continue
        if isinstance(step, OneHotEncoder) and step is pipe.steps[-1][1]:
            return _one_hot(step, width, f"{name}/{step_name}")
        return np.full(width, np.nan), np.full(width, np.nan), [], set()
    if lo.shape[0] != width:
        return np.full(width, np.nan), np.full(width, np.nan), [], set()
    return lo, hi, [], {s for s in sources if s in inputs}


def _identity(transformer):
    """"passthrough" (a fitted ColumnTransformer holds it as a FunctionTransformer without a function)."""
    if transformer is None or (isinstance(transformer, str) and transformer == "passthrough"):
        return True
    return isinstance(transformer, FunctionTransformer) and transformer.func is None


def _scaled(scaler, lo, hi, name):
    """Bounds through a fitted StandardScaler / MinMaxScaler (warns: its statistics come from its fit data)."""
    warnings.warn(
        f"The {type(scaler).__name__} {name!r} was fitted on data: its statistics (mean, scale, min, max) are "
        "published in the model's pipeline outside any privacy accounting unless those data were public. "
        "Scale with public constants, or leave the scaling to the private estimator.", PrivacyLeakWarning)
    if isinstance(scaler, StandardScaler):
        mean = 0.0 if scaler.mean_ is None else scaler.mean_
        scale = 1.0 if scaler.scale_ is None else scaler.scale_
        a, b = (lo - mean) / scale, (hi - mean) / scale
    else:
        a, b = lo * scaler.scale_ + scaler.min_, hi * scaler.scale_ + scaler.min_
    return np.minimum(a, b), np.maximum(a, b)


def _one_hot(encoder, width, name):
    """(0, 1) for every output and one block per input categorical (following drop and infrequent levels)."""
    if isinstance(encoder.categories, str) and encoder.categories == "auto":
        warnings.warn(
            f"The OneHotEncoder {name!r} learned its categories from the data (categories='auto'): the list of "
            "categories is published outside any privacy accounting, and a rare category can reveal a person. "
            "Declare them: OneHotEncoder(categories=[...], handle_unknown='ignore').", PrivacyLeakWarning)
    infrequent = getattr(encoder, "infrequent_categories_", None)
    drop = getattr(encoder, "drop_idx_", None)
    sizes = []
    for i, cats in enumerate(encoder.categories_):
        size = len(cats)
        if infrequent is not None and infrequent[i] is not None:
            size = size - len(infrequent[i]) + 1
        if drop is not None and drop[i] is not None:
            size -= 1
        sizes.append(size)
    if sum(sizes) != width:
        raise ValueError(f"Could not match the OneHotEncoder {name!r}'s {width} outputs to its categories "
                         f"(computed {sum(sizes)}).")
    blocks, start = [], 0
    for size in sizes:
        if size > 0:
            blocks.append(tuple(range(start, start + size)))
        start += size
    return np.zeros(width), np.ones(width), blocks, set()
