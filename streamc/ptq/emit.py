"""Write the plan as a QONNX model: qonnx ``Quant`` nodes on the weights (per channel), after the input
and after each quantized activation (per tensor), and a requantizing ``Quant`` on each rescaled edge."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper

from .propagate import Plan, UniformType

QONNX_DOMAIN = "qonnx.custom_op.general"


def _quant(name: str, source: str, output: str, qtype: UniformType) -> tuple[onnx.NodeProto, list[onnx.TensorProto]]:
    constants = [numpy_helper.from_array(np.asarray(qtype.scale, np.float32), f"{name}_scale"),
                 numpy_helper.from_array(np.asarray(qtype.zero_point, np.float32), f"{name}_zero_point"),
                 numpy_helper.from_array(np.asarray(qtype.bits, np.float32), f"{name}_bitwidth")]
    node = helper.make_node("Quant", [source] + [c.name for c in constants], [output], name=name, domain=QONNX_DOMAIN,
                            signed=int(qtype.signed), narrow=int(qtype.narrow), rounding_mode="ROUND")
    return node, constants


def emit(model: onnx.ModelProto, plan: Plan) -> onnx.ModelProto:
    """A copy of the (fused) float ``model`` with the plan's quantizers in it."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    graph = out.graph
    renamed: dict[str, str] = {}
    new_nodes: list[onnx.NodeProto] = []
    for weight, qtype in plan.weights.items():
        node, constants = _quant(f"{weight}_quant", weight, f"{weight}_quantized", qtype)
        new_nodes.append(node)
        graph.initializer.extend(constants)
        renamed[weight] = node.output[0]
    input_name = graph.input[0].name
    if input_name in plan.activations:
        node, constants = _quant("input_quant", input_name, f"{input_name}_quantized", plan.activations[input_name])
        new_nodes.append(node)
        graph.initializer.extend(constants)
        renamed[input_name] = node.output[0]
    rescales = {(name, index): qtype for name, index, qtype in plan.rescales}
    for original in model.graph.node:
        node = onnx.NodeProto()
        node.CopyFrom(original)
        for index, name in enumerate(node.input):
            node.input[index] = renamed.get(name, name)
            if (node.name, index) in rescales:
                rescale, constants = _quant(f"{node.name}_rescale_{index}", node.input[index],
                                            f"{node.name}_rescaled_{index}", rescales[(node.name, index)])
                new_nodes.append(rescale)
                graph.initializer.extend(constants)
                node.input[index] = rescale.output[0]
        new_nodes.append(node)
        for name in node.output:
            if name in plan.activations:
                quant, constants = _quant(f"{name}_quant", name, f"{name}_quantized", plan.activations[name])
                new_nodes.append(quant)
                graph.initializer.extend(constants)
                renamed[name] = quant.output[0]
    del graph.node[:]
    graph.node.extend(new_nodes)
    del graph.value_info[:]
    if not any(o.domain == QONNX_DOMAIN for o in out.opset_import):
        out.opset_import.append(helper.make_opsetid(QONNX_DOMAIN, 1))
    return out
