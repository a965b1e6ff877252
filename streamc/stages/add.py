# amaranth: UnusedElaboratable=no
"""The residual add: two streams weighted and summed element by element, then thresholds."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..datatypes import DataType
from .base import Stage, activate
from .threshold import threshold_unit


@dataclass
class AddStage(Stage):
    """A residual add: ``t = ka*a + kb*b`` element by element, then per-channel thresholds on ``t``."""

    name: str
    source: str
    weights: tuple[int, int]
    in_dtypes: tuple[DataType, DataType]
    thresholds: np.ndarray    # (C, L)
    out_dtype: DataType
    out_bias: int
    channels: int
    count: int
    elems: int = 1
    # How its thresholds find the count (streamc.stages.threshold.STYLES). Its lanes follow its producer, so the
    # planner has no knob here: "auto" takes the cheaper style on the family it is pipelined for.
    threshold_style: str = "auto"
    family: str | None = None
    threshold_choices: dict = field(default_factory=dict, repr=False, compare=False)
    sources: list[int] = field(default_factory=lambda: [-1, -1])

    kind = "add"

    @classmethod
    def from_record(cls, record: dict, *, name: str, in_count: int, positions: np.ndarray | None) -> "AddStage":
        return cls(name=name, source=record["name"], weights=tuple(record["weights"]),
                   in_dtypes=tuple(record["in_dtypes"]), thresholds=record["thresholds"],
                   out_dtype=record["out_dtype"], out_bias=record["out_bias"], channels=record["channels"],
                   count=record["count"])
    in_count = out_count = property(lambda self: self.count)
    in_elems = out_elems = property(lambda self: self.elems)
    in_dtype = property(lambda self: self.in_dtypes[0])
    output_stage = property(lambda self: f"add, {self.thresholds.shape[1]} thresholds")

    def cycles(self) -> int:
        return self.count // self.elems

    def emulate(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        # in int64: the codes may come in narrower integers (activate's)
        total = self.weights[0] * a.astype(np.int64) + self.weights[1] * b.astype(np.int64)
        per_channel = total.reshape(-1, self.channels)
        return activate(per_channel, self.thresholds, None, self.out_dtype, self.out_bias).reshape(total.shape)

    def describe(self) -> str:
        return f"residual add {self.source!r}"

    def need(self, port: int) -> np.ndarray:
        return np.arange(self.out_count) + 1

    def pipeline_for(self, clock) -> None:
        self.family = clock.family

    def follow(self, before: Stage | None, after: Stage | None) -> None:
        # Its first producer's pace, as far as the channels allow.
        self.elems = math.gcd(before.out_elems if before else 1, self.channels)

    def components(self) -> list:
        from ..rtl.branch import ElementwiseAdd

        add = ElementwiseAdd(a_dtype=self.in_dtypes[0], b_dtype=self.in_dtypes[1], a_weight=self.weights[0],
                             b_weight=self.weights[1], bias=0, elems=self.elems, name=self.name)
        return [add, threshold_unit(self, add.out_dtype, self.channels, self.elems)]

    def folding(self) -> dict:
        return {"elems": self.elems, "threshold_style": self.components()[-1].style}
