# amaranth: UnusedElaboratable=no
"""The concat: the channels of several streams side by side, pixel by pixel."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..datatypes import DataType
from ..errors import LoweringError
from .base import Stage


@dataclass
class ConcatStage(Stage):
    """Channels of several streams side by side, pixel by pixel."""

    name: str
    source: str
    channels: tuple[int, ...]
    pixels: int
    dtype: DataType
    elems: int = 1
    sources: list[int] = field(default_factory=list)

    kind = "concat"

    @classmethod
    def from_record(cls, record: dict, *, name: str, in_count: int, positions: np.ndarray | None) -> "ConcatStage":
        if len(set(record["in_dtypes"])) != 1:
            raise LoweringError(f"node {record['name']!r} (Concat): its inputs have different types "
                                f"({', '.join(str(d) for d in record['in_dtypes'])}); streamc concatenates one type")
        return cls(name=name, source=record["name"], channels=record["channels"], pixels=record["pixels"],
                   dtype=record["dtype"], sources=[-1] * len(record["channels"]))
    in_elems = out_elems = property(lambda self: self.elems)
    in_dtype = out_dtype = property(lambda self: self.dtype)
    output_stage = "concat"

    @property
    def in_count(self) -> int:
        return self.pixels * self.channels[0]

    @property
    def out_count(self) -> int:
        return self.pixels * sum(self.channels)

    def cycles(self) -> int:
        return self.out_count // self.elems

    def emulate(self, *parts: np.ndarray) -> np.ndarray:
        frames = len(parts[0])
        pixels = [p.reshape(frames, self.pixels, c) for p, c in zip(parts, self.channels)]
        return np.concatenate(pixels, axis=2).reshape(frames, -1)

    def describe(self) -> str:
        return f"concat {self.source!r}"

    def need(self, port: int) -> np.ndarray:
        # Port p's channels sit at the same place in every output pixel.
        pixel, within = np.divmod(np.arange(self.out_count), sum(self.channels))
        inside = np.clip(within - sum(self.channels[:port]) + 1, 0, self.channels[port])
        return pixel * self.channels[port] + inside

    def port_count(self, port: int) -> int:
        return self.pixels * self.channels[port]

    def follow(self, before: Stage | None, after: Stage | None) -> None:
        self.elems = math.gcd(before.out_elems if before else 1, *self.channels)

    def components(self) -> list:
        from ..rtl.branch import ChannelConcat

        return [ChannelConcat(channels=self.channels, dtype=self.dtype, elems=self.elems, name=self.name)]
