"""streamc's own small graph IR: ONNX is only the way in and out.

A :class:`Graph` is a list of nodes in topological order, constant tensors, graph inputs and
outputs, and per-tensor annotations: the exact integer :class:`~streamc.datatypes.DataType` of a
tensor, and for a quantized constant its integer codes and scale (see :class:`QuantizedConstant`).
Op types are domain-normalized (``Quant`` whatever domain Brevitas wrote it in); the original
domain is kept so the graph can be written back as ONNX that qonnx executes.
"""

from __future__ import annotations

import copy
import itertools
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

from .datatypes import DataType

QONNX_DOMAIN = "qonnx.custom_op.general"
QONNX_OPS = frozenset({"Quant", "BipolarQuant", "Trunc", "MultiThreshold"})
#: streamc's own ops (``LookupTable``), which only streamc's executor runs.
STREAMC_DOMAIN = "streamc.custom_op"
#: onnxruntime's contrib ops streamc reads: ``QGemm``, what its operator-format quantizer makes of a Gemm.
MICROSOFT_DOMAIN = "com.microsoft"
MICROSOFT_OPS = frozenset({"QGemm"})


@dataclass
class Node:
    op_type: str
    name: str
    inputs: list[str]
    outputs: list[str]
    attrs: dict[str, Any] = field(default_factory=dict)

    def describe(self) -> str:
        return f"node {self.name!r} ({self.op_type})"


@dataclass
class QuantizedConstant:
    """A constant whose float value is ``scale * (codes - zero_point)``, element by element.

    ``scale`` and ``zero_point`` are stored at the full shape of ``codes`` so that shape ops
    (Transpose, Reshape, ...) can be applied to all three alike.
    """

    codes: np.ndarray
    scale: np.ndarray
    zero_point: np.ndarray
    dtype: DataType


@dataclass
class TensorInfo:
    name: str
    shape: tuple[int, ...]
    elem_type: int = onnx.TensorProto.FLOAT


@dataclass
class Graph:
    nodes: list[Node]
    constants: dict[str, np.ndarray]
    inputs: list[TensorInfo]
    outputs: list[TensorInfo]
    opset: int = 13
    qonnx_opset: int = 1
    datatypes: dict[str, DataType] = field(default_factory=dict)
    quantized: dict[str, QuantizedConstant] = field(default_factory=dict)
    name: str = "streamc"
    #: Facts later steps need that the nodes do not carry (set by ``streamline``: see there).
    meta: dict[str, Any] = field(default_factory=dict)
    #: Names ``fresh_name`` gave out: a pass may take several before it adds their nodes.
    issued: set[str] = field(default_factory=set)

    def copy(self) -> "Graph":
        return copy.deepcopy(self)

    def producer(self, tensor: str) -> Node | None:
        for node in self.nodes:
            if tensor in node.outputs:
                return node
        return None

    def consumers(self, tensor: str) -> list[Node]:
        return [node for node in self.nodes if tensor in node.inputs]

    def is_constant(self, tensor: str) -> bool:
        return tensor in self.constants

    def fresh_name(self, base: str) -> str:
        taken = set(self.constants) | {t for n in self.nodes for t in n.inputs + n.outputs}
        taken |= {n.name for n in self.nodes} | {i.name for i in self.inputs} | self.issued
        for i in itertools.count():
            candidate = f"{base}_{i}" if i else base
            if candidate not in taken:
                self.issued.add(candidate)
                return candidate
        raise AssertionError("unreachable")

    def add_constant(self, base: str, value: np.ndarray) -> str:
        name = self.fresh_name(base)
        self.constants[name] = value
        return name

    def remove_unused_constants(self) -> None:
        used = {t for n in self.nodes for t in n.inputs} | {o.name for o in self.outputs}
        for name in [c for c in self.constants if c not in used]:
            del self.constants[name]
            self.quantized.pop(name, None)

    def to_onnx(self) -> onnx.ModelProto:
        """The graph as an ONNX model; QONNX ops go to the qonnx domain so qonnx can run it."""
        nodes = []
        for node in self.nodes:
            domain = (QONNX_DOMAIN if node.op_type in QONNX_OPS else STREAMC_DOMAIN if node.op_type == "LookupTable"
                      else MICROSOFT_DOMAIN if node.op_type in MICROSOFT_OPS else "")
            nodes.append(helper.make_node(node.op_type, node.inputs, node.outputs, name=node.name,
                                          domain=domain, **node.attrs))
        initializers = [numpy_helper.from_array(np.asarray(v), name) for name, v in self.constants.items()]
        inputs = [helper.make_tensor_value_info(i.name, i.elem_type, list(i.shape)) for i in self.inputs]
        outputs = [helper.make_tensor_value_info(o.name, o.elem_type, list(o.shape)) for o in self.outputs]
        graph = helper.make_graph(nodes, self.name, inputs, outputs, initializers)
        for tensor, dtype in sorted(self.datatypes.items()):
            annotation = onnx.TensorAnnotation()
            annotation.tensor_name = tensor
            entry = annotation.quant_parameter_tensor_names.add()
            entry.key, entry.value = "finn_datatype", dtype.name
            graph.quantization_annotation.append(annotation)
        opsets = [helper.make_opsetid("", self.opset), helper.make_opsetid(QONNX_DOMAIN, self.qonnx_opset),
                  helper.make_opsetid(STREAMC_DOMAIN, 1), helper.make_opsetid(MICROSOFT_DOMAIN, 1)]
        model = helper.make_model(graph, opset_imports=opsets, producer_name="streamc")
        # ir_version 10: what onnxruntime (which qonnx uses for standard ops) accepts today.
        model.ir_version = 10
        return model
