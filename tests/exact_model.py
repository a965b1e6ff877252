"""Run an ONNX model node by node with exact integer kernels: the reference streamc's tests compare with.

The quantized ops of :mod:`exact_ops` (QuantizeLinear, DequantizeLinear, MatMulInteger, ConvInteger,
QLinearMatMul, QLinearConv, com.microsoft QGemm) run there, in exact integer arithmetic, and so do
average pools (summed exactly, rounded once: onnxruntime's float32 sum breaks ties either way). Every other
node runs alone in onnxruntime with graph optimizations off, as qonnx's executor runs nodes: its float
kernels give the same bits on every x86 CPU, while its u8 x s8 integer kernels saturate pairs of
products on CPUs without VNNI (so a whole-model onnxruntime session is not an exact reference there).
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import onnx
import onnxruntime
from onnx import helper, numpy_helper

import exact_ops

#: onnxruntime 1.31+ refuses IR versions beyond what it knows; the node models need no newer one.
_NODE_IR_VERSION = 10


def cpu_has_vnni() -> bool:
    """True where onnxruntime's u8 x s8 kernels are exact: an x86 CPU with AVX512-VNNI or AVX-VNNI."""
    try:
        flags = Path("/proc/cpuinfo").read_text().split()
    except OSError:
        return False
    return "avx512_vnni" in flags or "avx_vnni" in flags


def _attributes(node: onnx.NodeProto) -> dict:
    values = {}
    for attribute in node.attribute:
        value = helper.get_attribute_value(attribute)
        values[attribute.name] = value.decode() if isinstance(value, bytes) else value
    return values


def _topological(graph: onnx.GraphProto, known: set[str]) -> list[onnx.NodeProto]:
    """The graph's nodes, each after the nodes that make its inputs (Kahn's order, stable)."""
    pending, ordered, known = list(graph.node), [], set(known) | {""}
    while pending:
        ready = [node for node in pending if all(name in known for name in node.input)]
        if not ready:
            names = sorted({n for node in pending for n in node.input} - known)
            raise ValueError(f"the graph reads tensors nothing produces: {names}")
        for node in ready:
            ordered.append(node)
            known.update(node.output)
        pending = [node for node in pending if node not in ready]
    return ordered


@functools.lru_cache(maxsize=512)
def _session(model_bytes: bytes) -> onnxruntime.InferenceSession:
    options = onnxruntime.SessionOptions()
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
    return onnxruntime.InferenceSession(model_bytes, options, providers=["CPUExecutionProvider"])


def _run_in_onnxruntime(node: onnx.NodeProto, values: dict, opsets) -> list[np.ndarray]:
    """One node as a model of its own; its inputs are graph inputs typed from the values they get."""
    names = list(dict.fromkeys(name for name in node.input if name))
    inputs = [helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(values[name].dtype),
                                            values[name].shape) for name in names]
    # outputs without a type: onnxruntime infers it from the node
    outputs = [onnx.ValueInfoProto(name=name) for name in node.output if name]
    graph = helper.make_graph([node], "node", inputs, outputs)
    model = helper.make_model(graph, opset_imports=opsets)
    model.ir_version = _NODE_IR_VERSION
    results = _session(model.SerializeToString()).run(None, {name: values[name] for name in names})
    return results


def run_model(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    """Execute ``model`` on ``feeds`` and return its outputs in the graph's order.

    Parameters
    ----------
    model : onnx.ModelProto
        A model of standard ops (and com.microsoft's QGemm), no subgraphs.
    feeds : dict of str to numpy.ndarray
        A value for every graph input that is not an initializer, shaped as the nodes accept it
        (a batch of frames where the model's ops allow one).

    Returns
    -------
    list of numpy.ndarray
        The graph outputs, in the order the graph lists them.
    """
    values = {tensor.name: numpy_helper.to_array(tensor) for tensor in model.graph.initializer}
    values.update({name: np.asarray(value) for name, value in feeds.items()})
    opsets = list(model.opset_import)
    for node in _topological(model.graph, set(values)):
        domain = "" if node.domain == "ai.onnx" else node.domain
        exact = exact_ops.OPS.get((domain, node.op_type))
        if exact is not None:
            inputs = [values[name] if name else None for name in node.input]
            results = [exact(*inputs, **_attributes(node))]
        else:
            results = _run_in_onnxruntime(node, values, opsets)
        values.update((name, np.asarray(result)) for name, result in zip(node.output, results) if name)
    return [values[output.name] for output in model.graph.output]


def run_frames(model: onnx.ModelProto, frames: np.ndarray) -> np.ndarray:
    """The first output of a one-input model for each frame, stacked along axis 0.

    Frames run as one batch where the model's input declares a batch dimension other than a fixed 1
    (then its ops take any batch); a model made for one frame runs them one at a time, as it is
    recorded: onnxruntime's float MatMul and Gemm may sum in another order for a batch of frames.
    """
    graph_input = next(i for i in model.graph.input if i.name not in {t.name for t in model.graph.initializer})
    dims = graph_input.type.tensor_type.shape.dim
    if not dims or dims[0].HasField("dim_param") or dims[0].dim_value != 1:
        return run_model(model, {graph_input.name: frames})[0]
    return np.concatenate([run_model(model, {graph_input.name: frames[i:i + 1]})[0] for i in range(len(frames))])
