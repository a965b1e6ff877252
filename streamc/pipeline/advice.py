"""What to ask instead when a build cannot give what its config asks: the fastest frames/s that fits the
device, and the clock and frames/s pairs a placed and routed design meets.

Each answer comes from the design itself (a planner run, nextpnr's fmax), so that the advice, once
followed, does not fail again on the other half of the pair (a lower clock missing ``target_fps``).
"""

from __future__ import annotations

import copy
import math

from ..errors import FoldingError
from ..hw import Dataflow
from ..planner import plan_folding
from .config import BuildConfig


def fastest_that_fits(dataflow: Dataflow, config: BuildConfig) -> str:
    """For a ``target_fps`` or ``budget`` the first device cannot hold: the fastest frames/s within the whole
    of it (what ``budget: 1.0`` would build), as a sentence to append to the planner's error."""
    if config.folding is not None or config.budget == 1.0 or not config.devices:
        return ""
    device = config.devices[0]
    try:
        # A copy: the planner folds the dataflow it plans, and the failed build's summary shows this one's.
        plan = plan_folding(copy.deepcopy(dataflow), config.model_copy(update={"target_fps": None, "budget": 1.0}))
    except FoldingError:
        return f". No folding fits the {device}, however slow"
    mhz = plan.clock_mhz or config.clock_mhz
    fps = mhz * 1e6 / plan.cycles
    ask = (f"ask target_fps: {_floor(fps)}, or budget: 1.0 for the fastest folding within the device"
           if config.target_fps is not None else "ask budget: 1.0")
    return (f". The fastest that fits the {device} takes {plan.cycles} cycles per frame: {_floor(fps):,} frames/s at "
            f"clock_mhz {mhz:g} ({ask})")


def timing_advice(fmax_mhz: float, cycles: int, config: BuildConfig) -> str:
    """After timing was not met: the clock the placed design meets, and the frames/s it gives at this folding."""
    clock = math.floor(fmax_mhz * 10) / 10
    fps = _floor(clock * 1e6 / cycles)
    at = f"at this folding ({cycles} cycles per frame) clock_mhz {clock:g} gives {fps:,} frames/s"
    if config.target_fps is None:
        return f"{at}"
    if fps >= config.target_fps:
        return f"{at}, so clock_mhz: {clock:g} with target_fps: {config.target_fps:g} fits this design"
    return (f"{at}, short of target_fps {config.target_fps:g}: give clock_mhz: {clock:g} with target_fps: {fps} "
            "(or folding: from reports/folding.json, which pins these registers too), or budget: (a share of the "
            "device) for the fastest folding within it")


def _floor(fps: float) -> int:
    return max(1, math.floor(fps))
