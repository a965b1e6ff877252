# amaranth: UnusedElaboratable=no
"""The threshold unit a stage without a multiplier of its own ends in (a vector unit, a residual add)."""

from __future__ import annotations

import numpy as np

from ..datatypes import DataType


def threshold_unit(stage, in_dtype: DataType, channels: int, elems: int):
    """The :class:`~streamc.rtl.threshold.ThresholdUnit` after ``stage``'s arithmetic, on its ``thresholds``,
    ``out_dtype`` and ``out_bias``."""
    from ..rtl.threshold import ThresholdUnit

    # Thresholds the same in every channel (a residual add's usually are) need no ROM.
    shared = np.all(stage.thresholds == stage.thresholds[:1])
    return ThresholdUnit(thresholds=stage.thresholds[:1] if shared else stage.thresholds, in_dtype=in_dtype,
                         out_dtype=stage.out_dtype, out_bias=stage.out_bias, channels=channels, elems=elems,
                         name=f"{stage.name}_thresholds")
