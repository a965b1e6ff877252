"""Read an ONNX file as real exporters write it into a :class:`~streamc.ir.Graph`.

Accepts IR versions up to 14 and default-domain opsets 9 to 21, external data files (only from
the model's own folder), initializers that are also listed as graph inputs, ``Constant`` nodes,
and the three domains QONNX ops are written in. Everything else is refused with a
:class:`~streamc.errors.FrontendError` that names the node, tensor or field and says what is supported.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import onnx
from google.protobuf.message import DecodeError
from onnx import helper, numpy_helper

from ..errors import FrontendError
from ..ir import MICROSOFT_DOMAIN, MICROSOFT_OPS, QONNX_OPS, Graph, Node, TensorInfo
from ..reference import SUPPORTED_OPS

QONNX_DOMAINS = frozenset({"qonnx.custom_op.general", "finn.custom_op.general", "onnx.brevitas"})
DEFAULT_DOMAINS = frozenset({"", "ai.onnx"})
MIN_OPSET, MAX_OPSET = 9, 21
MAX_IR_VERSION = 14
#: Larger frames are surely a mistake (or a declared shape meant to exhaust memory).
MAX_FRAME_ELEMENTS = 1 << 26
CONSTANT_ATTRIBUTES = {"value": None, "value_float": np.float32, "value_floats": np.float32,
                       "value_int": np.int64, "value_ints": np.int64}
# Element types stored in fewer than 8 bits: their raw byte count is not size * itemsize.
_PACKED_TYPES = frozenset(getattr(onnx.TensorProto, name) for name in
                          ("INT4", "UINT4", "FLOAT4E2M1", "INT2", "UINT2") if hasattr(onnx.TensorProto, name))


def load_onnx(path: Path) -> Graph:
    """Load, check and convert the model at ``path``.

    External data is read only from files inside the model's folder.

    Raises
    ------
    FrontendError
        If the file is missing or not ONNX, or the model uses something streamc does not support.
    """
    path = Path(path)
    if not path.exists():
        raise FrontendError(f"model file {str(path)!r} does not exist")
    if not path.is_file():
        raise FrontendError(f"model path {str(path)!r} is not a file")
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise FrontendError(f"model file {str(path)!r} cannot be read: {exc.strerror}") from None
    model = _parse_model(data, source=str(path))
    _load_external_data(model, path.parent)
    return graph_from_model(model)


def _parse_model(data: bytes, *, source: str) -> onnx.ModelProto:
    if not data:
        raise FrontendError(f"{source!r} is empty, not an ONNX model")
    model = onnx.ModelProto()
    try:
        model.ParseFromString(data)
    except DecodeError as exc:
        raise FrontendError(f"{source!r} is not an ONNX model (truncated or not protobuf: {exc})") from None
    # Protobuf parses some unrelated bytes without complaint; a real model always has both.
    if model.ir_version == 0 or not model.HasField("graph"):
        raise FrontendError(f"{source!r} is not an ONNX model (it has no IR version or no graph)")
    return model


def _tensors(model: onnx.ModelProto) -> Iterator[onnx.TensorProto]:
    """Every dense tensor stored in the main graph: initializers and tensor-valued node attributes."""
    yield from model.graph.initializer
    for node in model.graph.node:
        for attr in node.attribute:
            if attr.HasField("t"):
                yield attr.t
            yield from attr.tensors


def _load_external_data(model: onnx.ModelProto, folder: Path) -> None:
    """Read external tensor data into the model, only from regular files inside ``folder``.

    onnx's own loader is not used: the bytes are read here, from the path just checked, so
    nothing outside the folder (an absolute path, ``..``, a symlink leading out) is ever opened.
    """
    root = folder.resolve()
    for tensor in _tensors(model):
        if tensor.data_location != onnx.TensorProto.EXTERNAL:
            continue
        info = {entry.key: entry.value for entry in tensor.external_data}
        location = info.get("location", "")
        where = f"tensor {tensor.name!r}: external data {location!r}"
        if not location:
            raise FrontendError(f"tensor {tensor.name!r} is stored as external data but names no location")
        target = (root / location).resolve()
        if Path(location).is_absolute() or not target.is_relative_to(root) or target == root:
            raise FrontendError(f"{where} lies outside the model's folder {str(folder)!r}; "
                                "external data is only read from files beside the model (a relative path, "
                                "no '..', no symlink leading out)")
        if not target.is_file():
            raise FrontendError(f"{where} is missing: no such file in the model's folder {str(folder)!r}")
        offset, length = (_external_int(info, key, where) for key in ("offset", "length"))
        offset = offset or 0
        size = target.stat().st_size
        end = size if length is None else offset + length
        if end > size or offset > size:
            raise FrontendError(f"{where} is too short: it holds {size} bytes, the tensor needs bytes "
                                f"{offset} to {end}")
        with target.open("rb") as file:
            file.seek(offset)
            tensor.raw_data = file.read(end - offset)
        tensor.data_location = onnx.TensorProto.DEFAULT
        del tensor.external_data[:]


def _external_int(info: dict[str, str], key: str, where: str) -> int | None:
    if key not in info:
        return None
    text = info[key]
    if not text.isdigit():
        raise FrontendError(f"{where}: {key} must be a non-negative integer, not {text!r}")
    return int(text)


def tensor_array(tensor: onnx.TensorProto, *, what: str) -> np.ndarray:
    """The tensor's value as numpy, or a :class:`FrontendError` saying why its stored bytes do not fit."""
    shape = tuple(tensor.dims)
    if tensor.data_location == onnx.TensorProto.EXTERNAL:
        raise FrontendError(f"{what} is stored as external data, which is not loaded here; "
                            "load the model with load_onnx")
    try:
        dtype = helper.tensor_dtype_to_np_dtype(tensor.data_type)
    except KeyError:
        raise FrontendError(f"{what}: element type {tensor.data_type} is not an ONNX tensor type") from None
    if tensor.HasField("raw_data") and tensor.data_type not in _PACKED_TYPES and dtype.kind != "O":
        needed = math.prod(shape) * dtype.itemsize
        if len(tensor.raw_data) != needed:
            raise FrontendError(f"{what} holds {len(tensor.raw_data)} bytes of data; its shape {shape} of "
                                f"{onnx.TensorProto.DataType.Name(tensor.data_type)} needs {needed}")
    try:
        return numpy_helper.to_array(tensor)
    except (ValueError, TypeError) as exc:
        raise FrontendError(f"{what} has data that does not fit its shape {shape}: {exc}") from None


def _opsets(model: onnx.ModelProto) -> tuple[int, int]:
    opset, qonnx_opset = None, 1
    for entry in model.opset_import:
        if entry.domain in DEFAULT_DOMAINS:
            opset = entry.version
        elif entry.domain in QONNX_DOMAINS:
            qonnx_opset = max(qonnx_opset, entry.version)
    if opset is None:
        raise FrontendError(f"the model imports no default ONNX opset; supported opsets are {MIN_OPSET} to {MAX_OPSET}")
    if not MIN_OPSET <= opset <= MAX_OPSET:
        raise FrontendError(f"ONNX opset {opset} is not supported; supported opsets are {MIN_OPSET} to {MAX_OPSET}")
    return opset, qonnx_opset


def _shape(value_info: onnx.ValueInfoProto, role: str) -> tuple[int, ...]:
    kind = value_info.type.WhichOneof("value")
    if kind != "tensor_type":
        raise FrontendError(f"{role} {value_info.name!r} is a {kind or 'value without a type'}; "
                            "streamc supports tensor inputs and outputs only")
    tensor_type = value_info.type.tensor_type
    if role == "graph input" and not tensor_type.HasField("shape"):
        raise FrontendError(f"graph input {value_info.name!r} has no shape; export the model with a fixed "
                            "input shape")
    # A symbolic or missing first dimension is the batch: streamc compiles one frame at a time.
    dims = []
    for axis, d in enumerate(tensor_type.shape.dim):
        if d.HasField("dim_value") and d.dim_value > 0:
            dims.append(d.dim_value)
        elif axis == 0 or role != "graph input":
            dims.append(1)
        else:
            raise FrontendError(f"graph input {value_info.name!r} has a symbolic dimension {d.dim_param!r} at axis "
                                f"{axis}; streamc needs every dimension but the batch fixed (export with a fixed shape)")
    elements = int(np.prod(dims, dtype=object))
    if role == "graph input" and elements > MAX_FRAME_ELEMENTS:
        raise FrontendError(f"graph input {value_info.name!r} has shape {tuple(dims)}; streamc takes frames of at "
                            f"most {MAX_FRAME_ELEMENTS} elements")
    return tuple(dims)


def _attributes(node: onnx.NodeProto, name: str) -> dict:
    attrs = {}
    for attr in node.attribute:
        if attr.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS):
            raise FrontendError(f"node {name!r} ({node.op_type}) has a subgraph in attribute {attr.name!r}; "
                                "control flow is not supported")
        if attr.type in (onnx.AttributeProto.SPARSE_TENSOR, onnx.AttributeProto.SPARSE_TENSORS):
            raise FrontendError(f"node {name!r} ({node.op_type}) has a sparse tensor in attribute {attr.name!r}; "
                                "only dense tensors are supported")
        what = f"attribute {attr.name!r} of node {name!r} ({node.op_type})"
        if attr.type == onnx.AttributeProto.TENSOR:
            value = tensor_array(attr.t, what=what)
        elif attr.type == onnx.AttributeProto.TENSORS:
            value = [tensor_array(t, what=what) for t in attr.tensors]
        else:
            value = helper.get_attribute_value(attr)
        if isinstance(value, bytes):
            value = value.decode(errors="replace")
        elif isinstance(value, list):
            value = [v.decode(errors="replace") if isinstance(v, bytes) else v for v in value]
        attrs[attr.name] = value
    return attrs


def _check_op(proto: onnx.NodeProto, name: str) -> None:
    if proto.domain in QONNX_DOMAINS:
        if proto.op_type not in QONNX_OPS:
            raise FrontendError(
                f"node {name!r} ({proto.op_type}, domain {proto.domain}) is not a supported QONNX op; "
                f"supported: {', '.join(sorted(QONNX_OPS))}")
    elif proto.domain == MICROSOFT_DOMAIN:
        if proto.op_type not in MICROSOFT_OPS:
            raise FrontendError(
                f"node {name!r} ({proto.op_type}, domain {proto.domain}) is not supported; from onnxruntime's "
                f"contrib ops streamc reads {', '.join(sorted(MICROSOFT_OPS))}")
    elif proto.domain not in DEFAULT_DOMAINS:
        raise FrontendError(
            f"node {name!r} ({proto.op_type}) is in domain {proto.domain!r}, which streamc does not know; "
            f"supported domains: the default ONNX domain, {', '.join(sorted(QONNX_DOMAINS))}, {MICROSOFT_DOMAIN} "
            f"({', '.join(sorted(MICROSOFT_OPS))})")
    elif proto.op_type not in SUPPORTED_OPS:
        close = difflib.get_close_matches(proto.op_type, SUPPORTED_OPS, n=1)
        guess = f" (did you mean {close[0]!r}?)" if close else ""
        raise FrontendError(f"node {name!r} has op {proto.op_type!r}, which streamc does not support{guess}; "
                            "`streamc ops` lists the supported ops")


def graph_from_model(model: onnx.ModelProto) -> Graph:
    """Convert an in-memory ONNX model (external data already loaded).

    Raises
    ------
    FrontendError
        If the model uses something streamc does not support, or is not a well-formed graph.
    """
    if model.ir_version > MAX_IR_VERSION:
        raise FrontendError(f"ONNX IR version {model.ir_version} is newer than supported (up to {MAX_IR_VERSION})")
    opset, qonnx_opset = _opsets(model)
    g = model.graph
    if g.sparse_initializer:
        raise FrontendError(f"initializer {g.sparse_initializer[0].values.name!r} is sparse; "
                            "only dense initializers are supported")
    constants: dict[str, np.ndarray] = {}
    for tensor in g.initializer:
        if tensor.name in constants:
            raise FrontendError(f"two initializers are named {tensor.name!r}; tensor names must be unique")
        constants[tensor.name] = tensor_array(tensor, what=f"initializer {tensor.name!r}")
    inputs = [TensorInfo(i.name, _shape(i, "graph input"), i.type.tensor_type.elem_type)
              for i in g.input if i.name not in constants]
    if len(inputs) != 1:
        listed = f" ({', '.join(repr(i.name) for i in inputs)})" if inputs else ""
        raise FrontendError(f"the model has {len(inputs)} graph inputs{listed}; streamc compiles models with "
                            "exactly one input (initializers listed as inputs do not count)")
    outputs = [TensorInfo(o.name, _shape(o, "graph output"), o.type.tensor_type.elem_type) for o in g.output]
    if len(outputs) != 1:
        listed = f" ({', '.join(repr(o.name) for o in outputs)})" if outputs else ""
        raise FrontendError(f"the model has {len(outputs)} graph outputs{listed}; streamc compiles models "
                            "with exactly one output")
    if not g.node:
        raise FrontendError("the model has no nodes; there is nothing to compile")

    written_by = {name: "an initializer" for name in constants}
    written_by[inputs[0].name] = "the graph input"
    nodes: list[Node] = []
    used_names: set[str] = set()
    for index, proto in enumerate(g.node):
        name = proto.name or f"{proto.op_type}_{index}"
        while name in used_names:
            name += "_"
        used_names.add(name)
        _check_op(proto, name)
        node = Node(proto.op_type, name, list(proto.input), list(proto.output), _attributes(proto, name))
        for tensor in filter(None, node.outputs):
            if tensor in written_by:
                raise FrontendError(f"{node.describe()} writes tensor {tensor!r}, which {written_by[tensor]} "
                                    "already writes; every tensor must have exactly one producer")
            written_by[tensor] = node.describe()
        if node.op_type == "Constant":
            constants[node.outputs[0]] = _constant_value(node)
            continue
        nodes.append(node)

    graph = Graph(nodes=nodes, constants=constants, inputs=inputs, outputs=outputs,
                  opset=opset, qonnx_opset=qonnx_opset, name=g.name or "model")
    _check_topological(graph)
    return graph


def _constant_value(node: Node) -> np.ndarray:
    given = sorted(node.attrs)
    if len(given) != 1 or given[0] not in CONSTANT_ATTRIBUTES:
        raise FrontendError(f"{node.describe()} has attributes {given}; supported: exactly one of "
                            f"{', '.join(CONSTANT_ATTRIBUTES)}")
    key = given[0]
    return np.asarray(node.attrs[key], dtype=CONSTANT_ATTRIBUTES[key])


def _check_topological(graph: Graph) -> None:
    """Every tensor a node reads exists; nodes out of order are sorted, a cycle is named."""
    known = set(graph.constants) | {i.name for i in graph.inputs} | {""}
    producers = {t: node for node in graph.nodes for t in node.outputs}
    for node in graph.nodes:
        missing = [t for t in node.inputs if t not in known and t not in producers]
        if missing:
            raise FrontendError(f"{node.describe()} reads {missing[0]!r}, which no earlier node produces "
                                "(the graph is not in topological order, or the tensor is missing)")
    ordered: list[Node] = []
    pending = list(graph.nodes)
    while pending:
        ready = [n for n in pending if all(t in known for t in n.inputs)]
        if not ready:
            raise FrontendError(f"the graph has a cycle: {_cycle(pending, producers)}; ONNX graphs must be acyclic")
        for node in ready:
            known.update(node.outputs)
        ordered += ready
        pending = [n for n in pending if n not in ready]
    graph.nodes = ordered
    for output in graph.outputs:
        if output.name not in known:
            raise FrontendError(f"graph output {output.name!r} is produced by no node")


def _cycle(pending: list[Node], producers: dict[str, Node]) -> str:
    """One cycle among nodes that wait on each other, as 'A' -> 'B' -> 'A'."""
    waiting = {id(n) for n in pending}
    path: list[Node] = []
    node = pending[0]
    while node not in path:
        path.append(node)
        node = next(producers[t] for t in node.inputs if t in producers and id(producers[t]) in waiting)
    loop = path[path.index(node):] + [node]
    return " -> ".join(repr(n.name) for n in loop)
