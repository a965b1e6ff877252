# amaranth: UnusedElaboratable=no
"""The matrix-vector unit: a dense layer, or a convolution behind its sliding window."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from ..datatypes import DataType
from ..resources.constant_products import (
    constant_adder_bits,
    is_one_magnitude,
    luts_per_adder_bit,
)
from ..rtl.arithmetic import shape_of_range, tree_levels
from ..rtl.constant_products import graph_levels, keeps_adders
from ..rtl.requant import Requant
from ..timing import Clock
from .base import Knob, Stage, activate, divisors, integer_matmul, placement_knobs
from .window import conv_window


@dataclass
class MVAULayer(Stage):
    """One matrix-vector unit: integer weights, an output stage (thresholds, requantization or
    none: the accumulator), and its folding."""

    name: str
    source: str
    weights: np.ndarray
    in_dtype: DataType
    weight_dtype: DataType
    thresholds: np.ndarray | None
    out_dtype: DataType
    out_bias: int
    acc_lo: np.ndarray
    acc_hi: np.ndarray
    requant: Requant | None = None
    vectors: int = 1          # input vectors per frame: output pixels of a convolution
    pe: int = 1
    simd: int = 1
    # Where the weight and threshold ROMs go (streamc.rtl.placement.RAM_STYLES).
    ram_style: str = "auto"
    ram_style_thresholds: str = "auto"
    res_type: str = "auto"    # where the lanes' multiplies go (streamc.rtl.placement.RES_TYPES)
    # The clock the unit's pipeline registers are chosen for (streamc.timing), and the registers an explicit
    # folding fixes instead (None: as the clock asks).
    clock: Clock | None = None
    operand_register: bool | None = None
    route_register: bool | None = None
    tree_every: int | None = None
    # The device family the unit is built for, and whether a fully unrolled unit keeps its adder graph's adders as
    # an explicit folding fixes it (None: as the family gives, streamc.rtl.constant_products.KEPT_ADDERS).
    family: str | None = None
    keep_adders: bool | None = None
    sources: list[int] = field(default_factory=lambda: [-1])

    kind = "mvau"

    @classmethod
    def from_record(cls, record: dict, *, name: str, in_count: int, positions: np.ndarray | None) -> "MVAULayer":
        weights = record["weights"]
        if positions is not None:
            # Weight j of the model meets the element the stream carries at positions[j].
            reordered = np.empty_like(weights)
            reordered[:, positions.reshape(-1)] = weights
            weights = reordered
        conv = record.get("conv")
        return cls(name=name, source=record["name"], weights=weights, in_dtype=record["in_dtype"],
                   weight_dtype=record["weight_dtype"], thresholds=record["thresholds"],
                   out_dtype=record["out_dtype"], out_bias=record["out_bias"], acc_lo=record["acc_lo"],
                   acc_hi=record["acc_hi"], requant=record.get("requant"),
                   vectors=int(np.prod(conv["out_shape"][:-1])) if conv else 1)

    @classmethod
    def window_of(cls, record: dict) -> dict | None:
        return conv_window(record) if record.get("conv") else None

    @property
    def mh(self) -> int:
        return self.weights.shape[0]

    @property
    def mw(self) -> int:
        return self.weights.shape[1]

    @property
    def in_count(self) -> int:
        return self.vectors * self.mw

    @property
    def out_count(self) -> int:
        return self.vectors * self.mh

    @property
    def in_elems(self) -> int:
        return self.simd

    @property
    def out_elems(self) -> int:
        return self.pe

    def cycles(self, pe: int | None = None, simd: int | None = None) -> int:
        return self.vectors * (self.mh // (pe or self.pe)) * (self.mw // (simd or self.simd))

    def describe(self) -> str:
        return f"node {self.source!r} (MatMul {self.mh}x{self.mw})"

    def emulate(self, x: np.ndarray) -> np.ndarray:
        acc = integer_matmul(x.reshape(-1, self.mw), self.weights.T)
        return activate(acc, self.thresholds, self.requant, self.out_dtype, self.out_bias).reshape(len(x), -1)

    @property
    def threshold_rom(self) -> bool:
        """Whether the unit keeps thresholds in a ROM (a requantization replaces them)."""
        return self.thresholds is not None and self.requant is None

    @property
    def output_stage(self) -> str:
        if self.requant is not None:
            corrections = f", {self.requant.corrections} corrections" if self.requant.corrections else ""
            return f"requant (x{self.requant.multiplier.max()} >> {self.requant.shift}{corrections})"
        if self.thresholds is not None:
            return f"{self.thresholds.shape[1]} thresholds"
        return "accumulator"

    def need(self, port: int) -> np.ndarray:
        # Every output of a vector needs the whole input vector.
        return (np.arange(self.out_count) // self.mh + 1) * self.mw

    @property
    def beat_interval(self) -> float:
        # a beat of PE outputs takes its SIMD folds
        return self.mw // self.simd

    @property
    def input_burst(self) -> int:
        # The unit takes its input vector in a burst during its first neuron fold.
        return self.mw // self.simd

    def knobs(self, *, placement: bool = True) -> tuple[Knob, ...]:
        roms = ["ram_style"] + (["ram_style_thresholds"] if self.threshold_rom else [])
        multiplies = not (self.in_dtype.bipolar or self.weight_dtype.bipolar)
        knobs = placement_knobs(roms, multiplies, placement)
        if placement and self.clock is not None and not self.clock.delays.hard_multiplies(self.clock.period_ns):
            # A clock no hard multiplier closes at keeps the multiplies in LUTs.
            knobs = tuple(Knob(k.name, ("lut",), k.side) if k.name == "res_type" else k for k in knobs)
        return (Knob("simd", tuple(divisors(self.mw)), "in"), Knob("pe", tuple(divisors(self.mh)), "out"), *knobs)

    def build_for(self, family: str) -> None:
        self.family = family

    def pipeline_for(self, clock: Clock) -> None:
        self.clock = clock

    @property
    def unrolled(self) -> bool:
        """Whether the folding unrolls the layer fully (PE = MH, SIMD = MW): its lanes are an adder graph."""
        return self.pe == self.mh and self.simd == self.mw

    def closes(self) -> bool:
        return not self.unrolled or self.clock is None or self.clock.delays.spread_closes(self.clock.period_ns,
                                                                                          self.graph_luts())

    def graph_luts(self) -> float:
        """The estimated LUTs of the layer's adder graph, fully unrolled, on the family of its clock, its adders kept
        or merged as it builds them (:mod:`streamc.resources.constant_products`)."""
        family = self.clock.family
        adder_bits, one_magnitude = self._graph_estimate
        return adder_bits * luts_per_adder_bit(family, self._keeps_adders_on(family), one_magnitude,
                                               self.in_dtype.bitwidth)

    @cached_property
    def _graph_estimate(self) -> tuple[float, bool]:
        """The graph's estimated adder bits and whether its weights are of one magnitude: the weights' alone."""
        return (constant_adder_bits(self.weights, self.in_dtype.bitwidth, self.weight_dtype.bitwidth),
                is_one_magnitude(self.weights))

    @property
    def kept_adders(self) -> bool:
        """Whether a fully unrolled unit keeps every adder of its graph: as an explicit folding gives it, else as
        its device family does best (:func:`~streamc.rtl.constant_products.keeps_adders`)."""
        return self._keeps_adders_on(self.family)

    def _keeps_adders_on(self, family: str | None) -> bool:
        return keeps_adders(family) if self.keep_adders is None else self.keep_adders

    def pipelining(self, simd: int | None = None) -> dict:
        """The unit's ``operand_register``, ``route_register`` and ``tree_every`` at this folding (or with ``simd``
        lanes per PE): as an explicit folding gives them, else what the clock needs by its family's delay model
        (the adder tree of ``simd`` products, or fully unrolled the adder graph's levels, and the accumulator after
        it; the compares after the ROM reads), else none."""
        simd = simd or self.simd
        needed = {"operand_register": False, "route_register": False, "tree_every": 0}
        if self.clock is not None:
            delays, period = self.clock.delays, self.clock.period_ns
            multiplies = not (self.in_dtype.bipolar or self.weight_dtype.bipolar)
            rom_words = (self.mh // self.pe) * (self.mw // simd) if self.ram_style == "distributed" else 0
            width = shape_of_range(int(self.acc_lo.min()), int(self.acc_hi.max())).width
            graph = self.pe == self.mh and simd == self.mw
            levels = self.graph_levels if graph else tree_levels(simd)
            spread = delays.spread_route_ns(self.graph_luts()) if graph else 0.0
            needed = {"operand_register": delays.operand_register(period, multiplies, rom_words),
                      "route_register": delays.route_register(period, width),
                      "tree_every": delays.tree_every(period, levels, width, spread)}
        chosen = {key: value if getattr(self, key) is None else getattr(self, key) for key, value in needed.items()}
        # The route register is the second after a ROM's read: none where the first is not there.
        chosen["route_register"] = chosen["route_register"] and chosen["operand_register"]
        return chosen

    def pipeline_at(self, in_elems: int) -> dict:
        return self.pipelining(in_elems)

    @cached_property
    def graph_levels(self) -> int:
        """The most adder levels of the layer's adder graph, fully unrolled and pipelined
        (:func:`~streamc.rtl.constant_products.graph_levels`)."""
        return graph_levels(self.weights)

    def components(self) -> list:
        from ..rtl.mvau import MatrixVectorUnit

        return [MatrixVectorUnit(weights=self.weights, in_dtype=self.in_dtype, weight_dtype=self.weight_dtype,
                                 pe=self.pe, simd=self.simd,
                                 thresholds=None if self.requant is not None else self.thresholds,
                                 requant=self.requant, out_dtype=self.out_dtype,
                                 out_bias=0 if self.requant is not None else self.out_bias,
                                 ram_style=self.ram_style, ram_style_thresholds=self.ram_style_thresholds,
                                 res_type=self.res_type, **self.pipelining(), flow_control="stall" if self.clock is None
                                 else self.clock.delays.flow_control(self.clock.period_ns),
                                 multiply_register=self.clock is not None
                                 and self.clock.delays.multiply_register(self.clock.period_ns),
                                 keep_adders=self.kept_adders, name=self.name)]

    def folding(self) -> dict:
        return {"pe": self.pe, "simd": self.simd, "ram_style": self.ram_style,
                **({"ram_style_thresholds": self.ram_style_thresholds} if self.threshold_rom else {}),
                "res_type": self.res_type, **self.pipelining(), **self.adder_choice()}

    def adder_choice(self) -> dict:
        """``{"keep_adders": ...}`` where the layer is fully unrolled, the folding field that applies only there."""
        return {"keep_adders": self.kept_adders} if self.unrolled else {}

    def report(self) -> dict:
        return {"kind": self.kind, "mh": self.mh, "mw": self.mw, "vectors": self.vectors, "pe": self.pe,
                "simd": self.simd, "ram_style": self.ram_style, "ram_style_thresholds": self.ram_style_thresholds,
                "res_type": self.res_type, **self.pipelining(), **self.adder_choice(), "weight_dtype": self.weight_dtype.name,
                "weight_bits": self.mh * self.mw * self.weight_dtype.bitwidth}

    def summary(self) -> dict:
        return {"shape": f"{self.mh} x {self.mw}", "weights": self.weight_dtype.name, "pe": str(self.pe),
                "simd": str(self.simd), "fields": {"shape": [self.mh, self.mw], "pe": self.pe, "simd": self.simd,
                                                   "weight_dtype": self.weight_dtype.name}}
