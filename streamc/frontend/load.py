"""Read an ONNX file as real exporters write it into a :class:`~streamc.ir.Graph`.

Accepts IR versions up to 14 and default-domain opsets 9 to 21, external data files (only from
the model's own folder), initializers that are also listed as graph inputs, ``Constant`` nodes,
and the three domains QONNX ops are written in.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import external_data_helper, helper, numpy_helper

from ..errors import FrontendError
from ..ir import QONNX_OPS, Graph, Node, TensorInfo
from ..reference import SUPPORTED_OPS

QONNX_DOMAINS = frozenset({"qonnx.custom_op.general", "finn.custom_op.general", "onnx.brevitas"})
MIN_OPSET, MAX_OPSET = 9, 21
MAX_IR_VERSION = 14


def load_onnx(path: Path) -> Graph:
    """Load, check and convert the model at ``path``. Raises :class:`FrontendError` naming what is wrong."""
    path = Path(path)
    if not path.is_file():
        raise FrontendError(f"model file {str(path)!r} does not exist")
    try:
        model = onnx.load(str(path), load_external_data=False)
    except Exception as exc:  # protobuf raises DecodeError and others, unrelated to each other
        raise FrontendError(f"{str(path)!r} is not a readable ONNX model: {exc}") from None
    _load_external_data(model, path.parent)
    return graph_from_model(model)


def _load_external_data(model: onnx.ModelProto, folder: Path) -> None:
    folder = folder.resolve()
    for tensor in external_data_helper._get_all_tensors(model):
        if not external_data_helper.uses_external_data(tensor):
            continue
        info = {entry.key: entry.value for entry in tensor.external_data}
        location = info.get("location", "")
        target = (folder / location).resolve()
        if Path(location).is_absolute() or folder not in target.parents:
            raise FrontendError(
                f"tensor {tensor.name!r} points to external data {location!r} outside the model's folder; "
                "external data is only read from files beside the model")
        if not target.is_file():
            raise FrontendError(f"tensor {tensor.name!r}: external data file {location!r} is missing")
        external_data_helper.load_external_data_for_tensor(tensor, str(folder))
        tensor.data_location = onnx.TensorProto.DEFAULT
        del tensor.external_data[:]


def _opsets(model: onnx.ModelProto) -> tuple[int, int]:
    opset, qonnx_opset = None, 1
    for entry in model.opset_import:
        if entry.domain in ("", "ai.onnx"):
            opset = entry.version
        elif entry.domain in QONNX_DOMAINS:
            qonnx_opset = max(qonnx_opset, entry.version)
    if opset is None:
        raise FrontendError("the model imports no default ONNX opset")
    if not MIN_OPSET <= opset <= MAX_OPSET:
        raise FrontendError(f"ONNX opset {opset} is not supported; supported opsets are {MIN_OPSET} to {MAX_OPSET}")
    return opset, qonnx_opset


def _shape(value_info: onnx.ValueInfoProto) -> tuple[int, ...]:
    dims = value_info.type.tensor_type.shape.dim
    # A symbolic or missing dimension is the batch: streamc compiles one frame at a time.
    return tuple(d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else 1 for d in dims)


def _attributes(node: onnx.NodeProto) -> dict:
    attrs = {}
    for attr in node.attribute:
        value = helper.get_attribute_value(attr)
        if isinstance(value, bytes):
            value = value.decode()
        elif isinstance(value, onnx.TensorProto):
            value = numpy_helper.to_array(value)
        elif isinstance(value, (onnx.GraphProto, list)) and value and isinstance(value[0], onnx.GraphProto):
            raise FrontendError(f"node {node.name!r} ({node.op_type}) has a subgraph; control flow is not supported")
        elif isinstance(value, list):
            value = [v.decode() if isinstance(v, bytes) else v for v in value]
        attrs[attr.name] = value
    return attrs


def graph_from_model(model: onnx.ModelProto) -> Graph:
    """Convert an in-memory ONNX model (external data already loaded)."""
    if model.ir_version > MAX_IR_VERSION:
        raise FrontendError(f"ONNX IR version {model.ir_version} is newer than supported (up to {MAX_IR_VERSION})")
    opset, qonnx_opset = _opsets(model)
    g = model.graph
    constants = {t.name: numpy_helper.to_array(t) for t in g.initializer}
    inputs = [TensorInfo(i.name, _shape(i)) for i in g.input if i.name not in constants]
    if not inputs:
        raise FrontendError("the model has no graph input that is not an initializer")
    outputs = [TensorInfo(o.name, _shape(o)) for o in g.output]

    nodes: list[Node] = []
    used_names: set[str] = set()
    for index, proto in enumerate(g.node):
        name = proto.name or f"{proto.op_type}_{index}"
        while name in used_names:
            name += "_"
        used_names.add(name)
        if proto.domain in QONNX_DOMAINS:
            if proto.op_type not in QONNX_OPS:
                raise FrontendError(
                    f"node {name!r} ({proto.op_type}, domain {proto.domain}) is not a supported QONNX op; "
                    f"supported: {', '.join(sorted(QONNX_OPS))}")
        elif proto.domain not in ("", "ai.onnx"):
            raise FrontendError(f"node {name!r} ({proto.op_type}) is in domain {proto.domain!r}, which streamc does not know")
        elif proto.op_type not in SUPPORTED_OPS:
            raise FrontendError(
                f"node {name!r} has op {proto.op_type!r}, which streamc does not support; "
                f"supported ops: {', '.join(sorted(SUPPORTED_OPS))}")
        node = Node(proto.op_type, name, list(proto.input), list(proto.output), _attributes(proto))
        if node.op_type == "Constant":
            constants[node.outputs[0]] = _constant_value(node)
            continue
        nodes.append(node)

    graph = Graph(nodes=nodes, constants=constants, inputs=inputs, outputs=outputs,
                  opset=opset, qonnx_opset=qonnx_opset, name=g.name or "model")
    _check_topological(graph)
    return graph


def _constant_value(node: Node) -> np.ndarray:
    attrs = node.attrs
    if "value" in attrs:
        return np.asarray(attrs["value"])
    for key, dtype in (("value_float", np.float32), ("value_floats", np.float32),
                       ("value_int", np.int64), ("value_ints", np.int64)):
        if key in attrs:
            return np.asarray(attrs[key], dtype=dtype)
    raise FrontendError(f"{node.describe()} has none of the attributes value, value_float(s), value_int(s)")


def _check_topological(graph: Graph) -> None:
    known = set(graph.constants) | {i.name for i in graph.inputs} | {""}
    for node in graph.nodes:
        missing = [t for t in node.inputs if t not in known]
        if missing:
            raise FrontendError(f"{node.describe()} reads {missing[0]!r}, which no earlier node produces "
                                "(the graph is not in topological order, or the tensor is missing)")
        known.update(node.outputs)
    for output in graph.outputs:
        if output.name not in known:
            raise FrontendError(f"graph output {output.name!r} is produced by no node")
