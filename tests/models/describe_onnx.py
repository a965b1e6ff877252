"""Print what a compiler needs to know about an ONNX model, node by node.

Run as ``python tests/models/describe_onnx.py MODEL.onnx [...]``; the make_* scripts
write this text beside the models they export (``*.onnx.txt``).
"""
import sys

import numpy as np
import onnx
from onnx import numpy_helper

# Initializers this small are printed in full; larger ones as shape, dtype and range.
MAX_PRINTED_VALUES = 8


def _shape_of(value_info: onnx.ValueInfoProto) -> str:
    dims = value_info.type.tensor_type.shape.dim
    return "(" + ", ".join(d.dim_param or str(d.dim_value) for d in dims) + ")"


def _summarise_array(array: np.ndarray) -> str:
    if array.size <= MAX_PRINTED_VALUES:
        return f"{array.dtype}{list(array.shape)} = {np.array2string(array.ravel(), precision=8)}"
    return (f"{array.dtype}{list(array.shape)} in [{array.min():.6g}, {array.max():.6g}],"
            f" {len(np.unique(array))} distinct values")


def _summarise_attribute(attribute: onnx.AttributeProto) -> str:
    value = onnx.helper.get_attribute_value(attribute)
    if isinstance(value, bytes):
        value = value.decode()
    if isinstance(value, onnx.TensorProto):
        value = _summarise_array(numpy_helper.to_array(value))
    return f"{attribute.name}={value!r}" if isinstance(value, str) else f"{attribute.name}={value}"


def describe(model: onnx.ModelProto) -> str:
    """Return a plain-text description of ``model``'s interface and nodes in order.

    Parameters
    ----------
    model : onnx.ModelProto
        The model to describe; external data must already be loaded.

    Returns
    -------
    str
        IR version, opset imports, graph inputs and outputs, whether initializers are
        also graph inputs, and every node with its inputs (initializers with their
        values or ranges) and attributes.
    """
    graph = model.graph
    initializers = {init.name: numpy_helper.to_array(init) for init in graph.initializer}
    graph_input_names = [value.name for value in graph.input]
    lines = [
        f"ir_version: {model.ir_version}",
        f"producer: {model.producer_name} {model.producer_version}",
        "opset_import: " + ", ".join(f"{o.domain or 'ai.onnx'}={o.version}" for o in model.opset_import),
        "inputs: " + ", ".join(f"{v.name} {_shape_of(v)}" for v in graph.input if v.name not in initializers),
        "outputs: " + ", ".join(f"{v.name} {_shape_of(v)}" for v in graph.output),
        f"initializers: {len(initializers)};"
        f" also listed as graph inputs: {sum(name in initializers for name in graph_input_names)}",
        f"value_info entries: {len(graph.value_info)}",
        "nodes:",
    ]
    for index, node in enumerate(graph.node):
        domain = f" [{node.domain}]" if node.domain else ""
        lines.append(f"  {index:2d} {node.op_type}{domain} name={node.name!r}")
        for position, name in enumerate(node.input):
            described = f"init {_summarise_array(initializers[name])}" if name in initializers else "tensor"
            lines.append(f"       in{position}: {name!r} {described}")
        for position, name in enumerate(node.output):
            lines.append(f"       out{position}: {name!r}")
        for attribute in node.attribute:
            lines.append(f"       attr {_summarise_attribute(attribute)}")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    for path in sys.argv[1:]:
        print(f"== {path}")
        print(describe(onnx.load(path)))
