"""Folding: cycle budgets, an explicit per-layer folding, and the lanes of the stages that follow their neighbours."""

from __future__ import annotations

import math
import numbers
from fractions import Fraction

from .errors import FoldingError
from .hw import Dataflow
from .rtl.placement import RAM_STYLES, RES_TYPES
from .stages import LUTStage, MVAULayer, Stage, divisors
from .stages.threshold import STYLES as THRESHOLD_STYLES


def _decimal(value: float) -> Fraction:
    # The shortest decimal that reads back as ``value``: what the user wrote in the config.
    return Fraction(repr(float(value)))


def cycle_budget(*, target_fps: float, clock_mhz: float) -> int:
    """Cycles one frame may take in the slowest layer to reach ``target_fps`` at ``clock_mhz``.

    Computed on the decimal values, so that 2.01 MHz at 1 frame/s gives 2010000 cycles, where
    float arithmetic (2.01 * 1e6 = 2009999.9999999998) would lose one.
    """
    for name, value in (("target_fps", target_fps), ("clock_mhz", clock_mhz)):
        if not (math.isfinite(value) and value > 0):
            raise FoldingError(f"{name} must be a positive finite number, not {value!r}")
    return math.floor(_decimal(clock_mhz) * 10**6 / _decimal(target_fps))


def target_cycles(*, target_fps: float, clock_mhz: float) -> int:
    """:func:`cycle_budget`, refused when it leaves less than one cycle per frame.

    Raises
    ------
    FoldingError
        If either rate is not a positive finite number, or the target leaves less than one cycle
        per frame (no folding can meet it).
    """
    budget = cycle_budget(target_fps=target_fps, clock_mhz=clock_mhz)
    if budget < 1:
        raise FoldingError(f"target_fps={target_fps:g} at clock_mhz={clock_mhz:g} leaves less than one cycle per "
                           f"frame; the fastest streamc pipeline takes 1 cycle per frame, so at most "
                           f"{clock_mhz * 1e6:g} frames/s at {clock_mhz:g} MHz")
    return budget


def apply_folding(layers: list[MVAULayer], folding: dict[str, dict], *, source: str,
                  tables: list[LUTStage] = (), thresholded: list[Stage] = ()) -> None:
    """Take an explicit per-layer folding (``{layer: {pe: .., simd: .., ram_style: ..,
    ram_style_thresholds: .., res_type: .., operand_register: .., route_register: .., tree_every: ..,
    keep_adders: ..}}``, the placements, pipeline registers and a fully unrolled layer's ``keep_adders``
    optional); every layer must be named.
    A lookup table of ``tables`` may be named with its ``ram_style`` alone (its lanes follow the
    layer before it); one not named stays ``"auto"``. So may a stage of ``thresholded`` (a vector unit or a
    residual add, whose lanes the folding does not give) with its ``threshold_style`` alone
    (:data:`streamc.stages.threshold.STYLES`); one not named stays ``"auto"``.

    Raises
    ------
    FoldingError
        If the folding names a layer the model does not have, misses one, gives a pe (simd)
        that is not a positive divisor of the layer's MH (MW), or a placement that is not one of
        :mod:`streamc.rtl.placement`'s, or gives a table anything but its ram_style; the message
        lists the valid values.
    """
    names = [layer.name for layer in layers]
    table_names = [table.name for table in tables]
    thresholded_names = [stage.name for stage in thresholded]
    unknown = [name for name in folding if name not in names + table_names + thresholded_names]
    if unknown:
        listed = (f"layers: {', '.join(names)}" + (f"; lookup tables: {', '.join(table_names)}" if tables else "")
                  + (f"; thresholds: {', '.join(thresholded_names)}" if thresholded else ""))
        raise FoldingError(f"folding names layer {unknown[0]!r}, which the model does not have; "
                           f"{listed} (in {source})")
    for stage in thresholded:
        _check_sole_key(stage, folding.get(stage.name, {}), "threshold_style", THRESHOLD_STYLES,
                        "its lanes are not chosen there", "a threshold style", source)
    for table in tables:
        _check_sole_key(table, folding.get(table.name, {}), "ram_style", RAM_STYLES,
                        "a lookup table's lanes follow the layer before it", "a placement", source)
    for layer in layers:
        if layer.name not in folding:
            raise FoldingError(f"folding has no entry for layer {layer.name!r} (in {source}); "
                               f"give pe and simd for every layer: {', '.join(names)}")
        entry = folding[layer.name]
        for key, size in (("pe", layer.mh), ("simd", layer.mw)):
            value = entry.get(key)
            valid = ", ".join(str(d) for d in divisors(size))
            if value is None:
                raise FoldingError(f"{layer.describe()}: folding gives no {key}; valid {key}: {valid} "
                                   f"(set folding.{layer.name}.{key} in {source})")
            if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
                problem = "is not a positive integer"
            elif size % value:
                problem = f"does not divide {size}"
            else:
                continue
            raise FoldingError(f"{layer.describe()}: {key}={value!r} {problem}; valid {key}: {valid} "
                               f"(set folding.{layer.name}.{key} in {source})")
        for key, valid in (("ram_style", RAM_STYLES), ("ram_style_thresholds", RAM_STYLES), ("res_type", RES_TYPES)):
            if entry.get(key, "auto") not in valid:
                raise FoldingError(f"{layer.describe()}: {key}={entry[key]!r} is not a placement; valid "
                                   f"{key}: {', '.join(valid)} (set folding.{layer.name}.{key} in {source})")
        every = entry.get("tree_every")
        if every is not None and (isinstance(every, bool) or not isinstance(every, numbers.Integral) or every < 0):
            raise FoldingError(f"{layer.describe()}: tree_every={every!r} is not 0 (no registers in the adder "
                               f"trees) or a number of adder levels (set folding.{layer.name}.tree_every in {source})")
        for key in ("operand_register", "route_register", "keep_adders"):
            if entry.get(key) not in (None, True, False):
                raise FoldingError(f"{layer.describe()}: {key}={entry[key]!r} is not true or false "
                                   f"(set folding.{layer.name}.{key} in {source})")
        if entry.get("route_register") and entry.get("operand_register") is not True:
            raise FoldingError(f"{layer.describe()}: route_register=True is a second register after a ROM's read "
                               f"and needs operand_register=True (set folding.{layer.name}.operand_register in "
                               f"{source})")
    # Only once every entry is valid: a refused folding leaves the layers as they were.
    for layer in layers:
        entry = folding[layer.name]
        layer.pe, layer.simd = int(entry["pe"]), int(entry["simd"])
        layer.ram_style = entry.get("ram_style", "auto")
        layer.ram_style_thresholds = entry.get("ram_style_thresholds", "auto")
        layer.res_type = entry.get("res_type", "auto")
        layer.operand_register, layer.tree_every = entry.get("operand_register"), entry.get("tree_every")
        layer.route_register = entry.get("route_register")
        layer.keep_adders = entry.get("keep_adders")
    for table in tables:
        table.ram_style = folding.get(table.name, {}).get("ram_style", "auto")
    for stage in thresholded:
        stage.threshold_style = folding.get(stage.name, {}).get("threshold_style", "auto")


def fold_vector_units(stages: list[Stage], bottleneck: int) -> None:
    """With an explicit MVAU folding: the fewest lanes that keep each stage it does not name (a vector unit)
    within the MVAU bottleneck, no faster than the pipeline needs."""
    for stage in stages:
        stage.fit_to(bottleneck)


def fold_streaming_stages(dataflow: Dataflow) -> None:
    """Lanes for the stages without arithmetic to fold, from their neighbours (:meth:`Stage.follow`): a table
    keeps its producer's pace, a sliding window its consumer's (channels per beat must divide the channels),
    a max pool its window's, an add or concat its first producer's (as far as the channels allow)."""
    stages = dataflow.stages
    # Each stage's first reader (Dataflow.consumers' first), found in one pass: the planner folds the followers
    # again for every pair of neighbours' sides it prices.
    first_reader: dict[int, int] = {}
    for index, stage in enumerate(stages):
        for source in stage.sources:
            first_reader.setdefault(source, index)
    for index, stage in enumerate(stages):
        reader = first_reader.get(index)
        stage.follow(stages[stage.sources[0]] if stage.sources[0] >= 0 else None,
                     stages[reader] if reader is not None else None)


def _check_sole_key(stage, entry: dict, key: str, valid: tuple[str, ...], why: str, kind: str, source: str) -> None:
    """A stage whose lanes a folding does not choose may be given ``key`` alone, one of ``valid``."""
    extra = sorted(name for name in entry if name != key)
    if extra:
        raise FoldingError(f"{stage.describe()}: folding gives {', '.join(extra)}, but {why}; give only {key} "
                           f"({', '.join(valid)}) (in {source})")
    if entry.get(key, "auto") not in valid:
        raise FoldingError(f"{stage.describe()}: {key}={entry[key]!r} is not {kind}; valid {key}: {', '.join(valid)} "
                           f"(set folding.{stage.name}.{key} in {source})")
