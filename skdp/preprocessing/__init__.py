"""Public knowledge about the features: declared bounds and one-hot blocks, and a helper for ColumnTransformer."""

from ._column_transformer import bounds_for_column_transformer
from ._feature_bounds import FeatureBounds

__all__ = ["FeatureBounds", "bounds_for_column_transformer"]
