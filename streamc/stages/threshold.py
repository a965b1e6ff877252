# amaranth: UnusedElaboratable=no
"""The threshold unit a stage without a multiplier of its own ends in (a vector unit, a residual add), and how
it finds the count: compares in parallel, or a binary search (:data:`~streamc.rtl.threshold.THRESHOLD_STYLES`)."""

from __future__ import annotations

import numpy as np

from ..datatypes import DataType
from ..devices import DEVICES
from ..rtl.threshold import THRESHOLD_STYLES
from .base import Knob

#: A stage's ``threshold_style``: one of the unit's styles, or ``"auto"``, the cheaper of the two on the family
#: the stage is pipelined for (:meth:`~streamc.stages.base.Stage.pipeline_for`; parallel without one).
STYLES = ("auto", *THRESHOLD_STYLES)
#: Fewer thresholds per channel than this always compare in parallel: a search of 3 takes 2 compares and 2 ROMs.
SEARCH_FROM = 4


def can_search(stage) -> bool:
    """Whether ``stage``'s thresholds may be searched: enough of them, and an output that is not ``BIPOLAR``."""
    return (stage.thresholds is not None and not stage.out_dtype.bipolar
            and stage.thresholds.shape[1] >= SEARCH_FROM)


def threshold_knobs(stage, placement: bool) -> tuple[Knob, ...]:
    """The planner's choice of ``stage.threshold_style`` (cycles are the same either way); without ``placement``
    ``"auto"``."""
    if not can_search(stage):
        return ()
    return (Knob("threshold_style", THRESHOLD_STYLES if placement else ("auto",), "none"),)


def threshold_unit(stage, in_dtype: DataType, channels: int, elems: int):
    """The :class:`~streamc.rtl.threshold.ThresholdUnit` after ``stage``'s arithmetic, on its ``thresholds``,
    ``out_dtype`` and ``out_bias``, in its ``threshold_style`` (``"auto"`` resolved by :func:`cheaper_style`)."""
    style = stage.threshold_style
    if style == "auto":
        style = cheaper_style(stage, in_dtype, channels, elems)
    return _unit(stage, in_dtype, channels, elems, style)


def cheaper_style(stage, in_dtype: DataType, channels: int, elems: int) -> str:
    """``"search"`` where the resource model prices the search below parallel compares on ``stage.family``, a
    block RAM counted as the LUTs it stands for on the family's devices (:func:`luts_per_block_ram`), else
    ``"parallel"``; remembered per lanes in ``stage.threshold_choices``."""
    if not can_search(stage) or stage.family is None:
        return "parallel"
    from ..resources import estimate_kernel, spec_of_unit, with_placement

    key = (elems, stage.family, in_dtype.name)
    if key not in stage.threshold_choices:
        spec = spec_of_unit(_unit(stage, in_dtype, channels, elems, "parallel"))
        parallel = estimate_kernel(spec, stage.family)
        search = estimate_kernel(with_placement(spec, threshold_style="search"), stage.family)
        worth = luts_per_block_ram(stage.family)
        cheaper = search.lut + worth * search.bram < parallel.lut + worth * parallel.bram
        stage.threshold_choices[key] = "search" if cheaper else "parallel"
    return stage.threshold_choices[key]


def luts_per_block_ram(family: str) -> float:
    """The fewest LUTs per block RAM among the family's devices (the UP5K's 176, the ECP5-85F's 402): a block RAM
    is worth that many LUTs where block RAM is scarcest."""
    return min(device.lut / device.bram for device in DEVICES.values() if device.family == family and device.bram)


def _unit(stage, in_dtype: DataType, channels: int, elems: int, style: str):
    from ..rtl.threshold import ThresholdUnit

    # Thresholds the same in every channel (a residual add's usually are) need no ROM.
    shared = np.all(stage.thresholds == stage.thresholds[:1])
    return ThresholdUnit(thresholds=stage.thresholds[:1] if shared else stage.thresholds, in_dtype=in_dtype,
                         out_dtype=stage.out_dtype, out_bias=stage.out_bias, channels=channels, elems=elems,
                         name=f"{stage.name}_thresholds", style=style)
