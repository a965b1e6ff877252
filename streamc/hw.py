"""The hardware view of a streamlined graph: host head, a chain of MVAU layers, host tail."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from .datatypes import DataType
from .errors import LoweringError
from .ir import Graph, TensorInfo

HW_OPS = frozenset({"MatMul", "MultiThreshold"})


@dataclass
class MVAULayer:
    """One matrix-vector(-threshold) unit: integer weights, optional thresholds, and its folding."""

    name: str
    source: str
    weights: np.ndarray
    in_dtype: DataType
    weight_dtype: DataType
    thresholds: np.ndarray | None
    out_dtype: DataType
    out_bias: int
    pe: int = 1
    simd: int = 1

    @property
    def mh(self) -> int:
        return self.weights.shape[0]

    @property
    def mw(self) -> int:
        return self.weights.shape[1]

    def cycles(self, pe: int | None = None, simd: int | None = None) -> int:
        return (self.mh // (pe or self.pe)) * (self.mw // (simd or self.simd))

    def describe(self) -> str:
        return f"node {self.source!r} (MatMul {self.mh}x{self.mw})"


@dataclass
class Dataflow:
    """What runs where: ``head`` on the host (float input to integer codes), ``layers`` in
    hardware, ``tail`` on the host (hardware output to the model's output)."""

    head: Graph
    layers: list[MVAULayer]
    tail: Graph
    hw_input: str
    hw_output: str
    boundary: dict = field(default_factory=dict)

    @property
    def in_dtype(self) -> DataType:
        return self.layers[0].in_dtype

    @property
    def out_dtype(self) -> DataType:
        return self.layers[-1].out_dtype

    def cycles_per_frame(self) -> int:
        return max(layer.cycles() for layer in self.layers)


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


def to_hw(graph: Graph) -> Dataflow:
    """Split a streamlined graph at its integer MatMul/MultiThreshold chain."""
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
    layers = [MVAULayer(name=hardware_name(spec["name"], taken), source=spec["name"], weights=spec["weights"],
                        in_dtype=spec["in_dtype"], weight_dtype=spec["weight_dtype"], thresholds=spec["thresholds"],
                        out_dtype=spec["out_dtype"], out_bias=spec["out_bias"])
              for spec in graph.meta["layers"]]
    head = Graph(nodes=graph.nodes[:first], constants=graph.constants, inputs=graph.inputs,
                 outputs=[TensorInfo(hw_input, (1, layers[0].mw))], opset=graph.opset,
                 qonnx_opset=graph.qonnx_opset, name="head")
    tail = Graph(nodes=graph.nodes[last + 1:], constants=graph.constants,
                 inputs=[TensorInfo(hw_output, (1, layers[-1].mh))], outputs=graph.outputs,
                 opset=graph.opset, qonnx_opset=graph.qonnx_opset, name="tail")
    return Dataflow(head=head, layers=layers, tail=tail, hw_input=hw_input, hw_output=hw_output,
                    boundary=graph.meta.get("boundary", {}))
