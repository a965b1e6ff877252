# amaranth: UnusedElaboratable=no
"""The lookup table: any elementwise function between two quantizers, one ROM read per element."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..datatypes import DataType
from .base import Stage


@dataclass
class LUTStage(Stage):
    """An elementwise lookup table between two quantizers; ``elems`` elements per cycle. ``table`` is
    1-D, or one row per channel (a dense layer's output, a bias among the ops)."""

    name: str
    source: str
    table: np.ndarray
    in_dtype: DataType
    out_dtype: DataType
    count: int
    elems: int = 1
    sources: list[int] = field(default_factory=lambda: [-1])
    ram_style: str = "auto"   # where each lane's ROM goes (streamc.rtl.placement.RAM_STYLES)

    kind = "lut"

    @classmethod
    def from_record(cls, record: dict, *, name: str, in_count: int, positions: np.ndarray | None) -> "LUTStage":
        return cls(name=name, source=record["name"], table=record["table"], in_dtype=record["in_dtype"],
                   out_dtype=record["out_dtype"], count=in_count)
    in_count = out_count = property(lambda self: self.count)
    in_elems = out_elems = property(lambda self: self.elems)
    output_stage = "table"

    def cycles(self) -> int:
        return self.count // self.elems

    def emulate(self, x: np.ndarray) -> np.ndarray:
        x = x.astype(np.int64)   # the codes may come in narrower integers (activate's), the index may not
        index = (x + 1) // 2 if self.in_dtype.bipolar else x - self.in_dtype.min
        if self.table.ndim == 1:
            return self.table[index]
        # One row per channel: element e of a frame is in channel e % channels.
        return self.table[np.arange(x.shape[-1]) % len(self.table), index]

    def describe(self) -> str:
        per_channel = f", one table per channel of {len(self.table)}" if self.table.ndim == 2 else ""
        return f"lookup table {self.source!r} ({self.in_dtype} -> {self.out_dtype}{per_channel})"

    def need(self, port: int) -> np.ndarray:
        return np.arange(self.out_count) + 1

    def follow(self, before: Stage | None, after: Stage | None) -> None:
        # Its producer's pace: a table has no arithmetic to fold.
        self.elems = before.out_elems if before else 1

    def components(self) -> list:
        from ..rtl.lut import LookupTable

        return [LookupTable(table=self.table, in_dtype=self.in_dtype, out_dtype=self.out_dtype, elems=self.elems,
                            frame_elems=self.count, ram_style=self.ram_style, name=self.name)]

    def folding(self) -> dict:
        return {"elems": self.in_elems, "ram_style": self.ram_style}
