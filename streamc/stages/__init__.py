"""The hardware stages, one module per kind, each answering what the compiler asks of it
(:class:`~streamc.stages.base.Stage`)."""

from .add import AddStage
from .base import PLACEMENTS, Knob, Stage, divisors
from .concat import ConcatStage
from .lut import LUTStage
from .mvau import MVAULayer
from .pool import PoolStage
from .vvau import VVAULayer
from .window import WindowStage, sliding_window

#: The stage kind of each kind of record the streamline step writes.
STAGE_KINDS: dict[str, type[Stage]] = {kind.kind: kind for kind in (MVAULayer, VVAULayer, AddStage, ConcatStage,
                                                                     LUTStage, PoolStage)}

__all__ = ["PLACEMENTS", "STAGE_KINDS", "AddStage", "ConcatStage", "Knob", "LUTStage", "MVAULayer", "PoolStage",
           "Stage", "VVAULayer", "WindowStage", "divisors", "sliding_window"]
