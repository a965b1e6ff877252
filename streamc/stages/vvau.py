# amaranth: UnusedElaboratable=no
"""The vector-vector unit: a depthwise convolution or an average, each channel over its own window."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..datatypes import DataType
from .base import Knob, Stage, activate, channel_need, divisors, placement_knobs
from .threshold import threshold_knobs, threshold_unit
from .window import conv_window


@dataclass
class VVAULayer(Stage):
    """A vector-vector unit: each channel's own taps over its window (a depthwise convolution, or an average
    as taps of one), then thresholds or the bare accumulator; ``simd`` channels per cycle."""

    name: str
    source: str
    weights: np.ndarray       # (C, K)
    in_dtype: DataType
    weight_dtype: DataType
    thresholds: np.ndarray | None
    out_dtype: DataType
    out_bias: int
    acc_lo: np.ndarray
    acc_hi: np.ndarray
    vectors: int = 1          # output pixels per frame
    simd: int = 1
    ram_style: str = "auto"   # where the weight ROM goes (streamc.rtl.placement.RAM_STYLES)
    res_type: str = "auto"    # where the lanes' multiplies go (streamc.rtl.placement.RES_TYPES)
    threshold_style: str = "auto"   # how its thresholds find the count (streamc.stages.threshold.STYLES)
    family: str | None = None       # the device family it is pipelined for, which "auto" prices on
    threshold_choices: dict = field(default_factory=dict, repr=False, compare=False)
    sources: list[int] = field(default_factory=lambda: [-1])

    kind = "vvau"

    @classmethod
    def from_record(cls, record: dict, *, name: str, in_count: int, positions: np.ndarray | None) -> "VVAULayer":
        return cls(name=name, source=record["name"], weights=record["weights"], in_dtype=record["in_dtype"],
                   weight_dtype=record["weight_dtype"], thresholds=record["thresholds"],
                   out_dtype=record["out_dtype"], out_bias=record["out_bias"], acc_lo=record["acc_lo"],
                   acc_hi=record["acc_hi"], vectors=int(np.prod(record["conv"]["out_shape"][:-1])))

    @classmethod
    def window_of(cls, record: dict) -> dict | None:
        conv = record["conv"]
        if conv["kernel"] == tuple(conv["in_shape"][:-1]) and not any(conv["pads_begin"] + conv["pads_end"]):
            return None  # a global average: the stream already is its one window, in (k, c) order
        return conv_window(record)

    in_elems = out_elems = property(lambda self: self.simd)
    output_stage = property(lambda self: "accumulator" if self.thresholds is None
                            else f"{self.thresholds.shape[1]} thresholds")

    @property
    def channels(self) -> int:
        return self.weights.shape[0]

    @property
    def taps(self) -> int:
        return self.weights.shape[1]

    @property
    def in_count(self) -> int:
        return self.vectors * self.taps * self.channels

    @property
    def out_count(self) -> int:
        return self.vectors * self.channels

    def cycles(self, simd: int | None = None) -> int:
        return self.in_count // (simd or self.simd)

    def emulate(self, x: np.ndarray) -> np.ndarray:
        patches = x.reshape(len(x) * self.vectors, self.taps, self.channels)
        acc = np.einsum("nkc,ck->nc", patches, self.weights)
        return activate(acc, self.thresholds, None, self.out_dtype, self.out_bias).reshape(len(x), -1)

    def describe(self) -> str:
        return f"node {self.source!r} (vector unit {self.channels}x{self.taps})"

    def need(self, port: int) -> np.ndarray:
        return channel_need(self.out_count, self.channels, self.taps)

    @property
    def constant_weights(self) -> bool:
        """Weights all alike (an average): a constant, not a ROM, and multiplies that fold into shifts."""
        return bool(np.all(self.weights == self.weights.flat[0]))

    def knobs(self, *, placement: bool = True) -> tuple[Knob, ...]:
        constant = self.constant_weights
        multiplies = not (constant or self.in_dtype.bipolar or self.weight_dtype.bipolar)
        return (Knob("simd", tuple(divisors(self.channels)), "both"),
                *placement_knobs([] if constant else ["ram_style"], multiplies, placement),
                *threshold_knobs(self, placement))

    def pipeline_for(self, clock) -> None:
        self.family = clock.family

    def fit_to(self, cycles: int) -> None:
        self.simd = next((d for d in divisors(self.channels) if self.cycles(d) <= cycles), self.channels)

    def components(self) -> list:
        from ..rtl.vvau import VectorVectorUnit

        unit = VectorVectorUnit(weights=self.weights, in_dtype=self.in_dtype, weight_dtype=self.weight_dtype,
                                simd=self.simd, vectors=self.vectors, ram_style=self.ram_style,
                                res_type=self.res_type, name=self.name)
        if self.thresholds is None:
            return [unit]
        return [unit, threshold_unit(self, unit.out_dtype, self.channels, self.simd)]

    def built_threshold_style(self) -> str | None:
        """The style its threshold unit is built in (``"auto"`` resolved), None without thresholds."""
        return None if self.thresholds is None else self.components()[-1].style

    def folding(self) -> dict:
        style = self.built_threshold_style()
        return {"simd": self.simd, "ram_style": self.ram_style, "res_type": self.res_type,
                **({"threshold_style": style} if style else {})}

    def report(self) -> dict:
        return {"kind": self.kind, "channels": self.channels, "taps": self.taps, "vectors": self.vectors,
                "simd": self.simd, "ram_style": self.ram_style, "res_type": self.res_type,
                "threshold_style": self.built_threshold_style(), "weight_dtype": self.weight_dtype.name}

    def summary(self) -> dict:
        return {"shape": f"{self.channels} x {self.taps}", "weights": self.weight_dtype.name, "pe": "",
                "simd": str(self.simd), "fields": {"elems": self.in_elems, "kind": type(self).__name__}}
