# amaranth: UnusedElaboratable=no
"""The max pool: the largest code of each window, per channel, behind a sliding window."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..datatypes import DataType
from .base import Stage, channel_need


@dataclass
class PoolStage(Stage):
    """Max over each window of ``window`` pixels, per channel: what follows a sliding window in a max pool."""

    name: str
    source: str
    channels: int
    window: int
    vectors: int
    dtype: DataType
    elems: int = 1
    sources: list[int] = field(default_factory=lambda: [-1])

    kind = "maxpool"

    @classmethod
    def from_record(cls, record: dict, *, name: str, in_count: int, positions: np.ndarray | None) -> "PoolStage":
        return cls(name=name, source=record["name"], channels=record["in_shape"][0],
                   window=int(np.prod(record["attrs"]["kernel_shape"])),
                   vectors=int(np.prod(record["out_shape"][1:])), dtype=record["dtype"])

    @classmethod
    def window_of(cls, record: dict) -> dict | None:
        attrs, kernel = record["attrs"], tuple(record["attrs"]["kernel_shape"])
        pads = list(attrs.get("pads", [0] * 2 * len(kernel)))
        # Padding holds the smallest code, which no max picks over a real one.
        return dict(in_shape=(*record["in_shape"][1:], record["in_shape"][0]), out_shape=record["out_shape"][1:],
                    kernel=kernel, strides=attrs.get("strides", [1] * len(kernel)), pads_begin=pads[:len(kernel)],
                    pads_end=pads[len(kernel):], dilations=attrs.get("dilations", [1] * len(kernel)),
                    dtype=record["dtype"], pad_value=record["dtype"].min)
    in_elems = out_elems = property(lambda self: self.elems)
    in_dtype = out_dtype = property(lambda self: self.dtype)
    output_stage = "max pool"

    @property
    def in_count(self) -> int:
        return self.vectors * self.window * self.channels

    @property
    def out_count(self) -> int:
        return self.vectors * self.channels

    def cycles(self) -> int:
        return self.in_count // self.elems

    def emulate(self, x: np.ndarray) -> np.ndarray:
        # in int64 as every stage's output: the window before it hands over narrower integers
        pooled = x.reshape(len(x), self.vectors, self.window, self.channels).max(axis=2)
        return pooled.reshape(len(x), -1).astype(np.int64)

    def describe(self) -> str:
        return f"max pool {self.source!r}"

    def need(self, port: int) -> np.ndarray:
        return channel_need(self.out_count, self.channels, self.window)

    def follow(self, before: Stage | None, after: Stage | None) -> None:
        # Its window's lanes: the window before it always is one.
        self.elems = before.elems

    def components(self) -> list:
        from ..rtl.window import WindowReduce

        return [WindowReduce(channels=self.channels, window=self.window, mode="max", in_dtype=self.dtype,
                             out_dtype=self.dtype, simd=self.elems, vectors=self.vectors, name=self.name)]
