"""The hardware view of a streamlined graph: host head, a chain of hardware stages, host tail."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from .datatypes import DataType
from .errors import LoweringError
from .ir import Graph, TensorInfo
from .execute import execute
from .rtl.requant import Requant, requantize

HW_OPS = frozenset({"MatMul", "MultiThreshold", "LookupTable"})


@dataclass
class MVAULayer:
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
    pe: int = 1
    simd: int = 1

    @property
    def mh(self) -> int:
        return self.weights.shape[0]

    @property
    def mw(self) -> int:
        return self.weights.shape[1]

    in_count = mw
    out_count = mh

    @property
    def in_elems(self) -> int:
        return self.simd

    @property
    def out_elems(self) -> int:
        return self.pe

    def cycles(self, pe: int | None = None, simd: int | None = None) -> int:
        return (self.mh // (pe or self.pe)) * (self.mw // (simd or self.simd))

    def describe(self) -> str:
        return f"node {self.source!r} (MatMul {self.mh}x{self.mw})"

    def emulate(self, x: np.ndarray) -> np.ndarray:
        acc = x @ self.weights.T
        if self.requant is not None:
            return requantize(acc, self.requant)
        if self.thresholds is None:
            return acc
        count = (acc[:, :, None] >= self.thresholds[None]).sum(axis=2)
        return np.where(count > 0, 1, -1) if self.out_dtype.bipolar else count + self.out_bias

    @property
    def output_stage(self) -> str:
        if self.requant is not None:
            return f"requant (x{self.requant.multiplier.max()} >> {self.requant.shift})"
        if self.thresholds is not None:
            return f"{self.thresholds.shape[1]} thresholds"
        return "accumulator"


@dataclass
class LUTStage:
    """An elementwise lookup table between two quantizers; ``elems`` elements per cycle."""

    name: str
    source: str
    table: np.ndarray
    in_dtype: DataType
    out_dtype: DataType
    count: int
    elems: int = 1

    in_count = out_count = property(lambda self: self.count)
    in_elems = out_elems = property(lambda self: self.elems)

    def cycles(self) -> int:
        return self.count // self.elems

    def emulate(self, x: np.ndarray) -> np.ndarray:
        index = (x + 1) // 2 if self.in_dtype.bipolar else x - self.in_dtype_min
        return self.table[index]

    @property
    def in_dtype_min(self) -> int:
        return self.in_dtype.min

    def describe(self) -> str:
        return f"lookup table {self.source!r} ({self.in_dtype} -> {self.out_dtype})"

    output_stage = "table"


Stage = MVAULayer | LUTStage


@dataclass
class Dataflow:
    """What runs where: ``head`` on the host (float input to integer codes), ``stages`` in
    hardware, ``tail`` on the host (hardware output to the model's output)."""

    head: Graph
    stages: list[Stage]
    tail: Graph
    hw_input: str
    hw_output: str
    boundary: dict = field(default_factory=dict)

    @property
    def layers(self) -> list[MVAULayer]:
        return [s for s in self.stages if isinstance(s, MVAULayer)]

    def cycles_per_frame(self) -> int:
        return max(stage.cycles() for stage in self.stages)

    def emulate(self, frames: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """What the hardware and the host together compute, stage by stage in integers.

        Returns the hardware's output integers ``(N, out_count)`` and the model outputs after the
        host tail. The RTL is checked against the model itself, not against this; this is the
        quick way to see what a folding-independent hardware description computes.
        """
        name = self.head.inputs[0].name
        values = execute(self.head, {name: frames})[self.hw_input]
        x = np.rint(values).reshape(len(frames), -1).astype(np.int64)
        for stage in self.stages:
            x = stage.emulate(x)
        outputs = execute(self.tail, {self.hw_output: x.astype(np.float32)})[self.tail.outputs[0].name]
        return x, outputs


def hardware_name(source: str, taken: set[str]) -> str:
    """A Verilog-safe, unique identifier for a node name such as ``/features.2/MatMul``."""
    base = re.sub(r"[^A-Za-z0-9_]+", "_", source).strip("_") or "layer"
    if base[0].isdigit():
        base = "l_" + base
    name, i = base, 1
    while name in taken:
        name, i = f"{base}_{i}", i + 1
    taken.add(name)
    return name


def _stage(spec: dict, taken: set[str], count: int) -> Stage:
    name = hardware_name(spec["name"], taken)
    if spec["kind"] == "lut":
        return LUTStage(name=name, source=spec["name"], table=spec["table"], in_dtype=spec["in_dtype"],
                        out_dtype=spec["out_dtype"], count=count)
    layer = MVAULayer(name=name, source=spec["name"], weights=spec["weights"], in_dtype=spec["in_dtype"],
                      weight_dtype=spec["weight_dtype"], thresholds=spec["thresholds"], out_dtype=spec["out_dtype"],
                      out_bias=spec["out_bias"], acc_lo=spec["acc_lo"], acc_hi=spec["acc_hi"])
    layer.requant = spec.get("requant")
    return layer


def to_hw(graph: Graph) -> Dataflow:
    """Split a streamlined graph at its integer chain and choose each layer's output stage."""
    positions = [i for i, n in enumerate(graph.nodes) if n.op_type in HW_OPS]
    if not positions:
        raise LoweringError("the streamlined graph has no MatMul: run the streamline step first")
    first, last = positions[0], positions[-1]
    stray = [n for n in graph.nodes[first:last + 1] if n.op_type not in HW_OPS]
    if stray:
        raise LoweringError(f"{stray[0].describe()} sits between hardware layers; it cannot run in hardware")
    hw_input = graph.nodes[first].inputs[0]
    hw_output = graph.nodes[last].outputs[0]
    taken: set[str] = set()
    stages: list[Stage] = []
    for spec in graph.meta["stages"]:
        count = stages[-1].out_count if stages else None
        stages.append(_stage(spec, taken, count))
    head = Graph(nodes=graph.nodes[:first], constants=graph.constants, inputs=graph.inputs,
                 outputs=[TensorInfo(hw_input, (1, stages[0].in_count))], opset=graph.opset,
                 qonnx_opset=graph.qonnx_opset, name="head")
    tail = Graph(nodes=graph.nodes[last + 1:], constants=graph.constants,
                 inputs=[TensorInfo(hw_output, (1, stages[-1].out_count))], outputs=graph.outputs,
                 opset=graph.opset, qonnx_opset=graph.qonnx_opset, name="tail")
    return Dataflow(head=head, stages=stages, tail=tail, hw_input=hw_input, hw_output=hw_output,
                    boundary=graph.meta.get("boundary", {}))
