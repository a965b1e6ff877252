"""Clean an exported graph into the form the lowering expects.

``Gemm`` becomes ``MatMul`` (+ ``Mul`` for alpha, + ``Add`` for the bias), ``Identity`` and
inference-time ``Dropout`` disappear, and every node whose inputs are all constant is folded.
Folding a weight quantizer keeps its integer codes and scale (:class:`QuantizedConstant`), and
shape ops applied to such a constant (the ``Transpose`` of ``transB``, a ``Reshape``) keep them too.
"""

from __future__ import annotations

import numpy as np
import onnx

from ..datatypes import BIPOLAR, TERNARY, DataType, datatype_of_values, smallest_datatype
from ..errors import FrontendError
from ..ir import Graph, Node, QuantizedConstant
from ..reference import run_node

SHAPE_OPS = frozenset({"Transpose", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity"})


def tidy(graph: Graph) -> Graph:
    graph = graph.copy()
    check_quantizer_constants(graph)
    lower_qlinear_ops(graph)
    lower_gemm_to_matmul(graph)
    remove_identities(graph)
    fold_constants(graph)
    graph.remove_unused_constants()
    return graph


def lower_gemm_to_matmul(graph: Graph) -> bool:
    changed = False
    for gemm in [n for n in graph.nodes if n.op_type == "Gemm"]:
        if gemm.attrs.get("transA", 0):
            raise FrontendError(f"{gemm.describe()} has transA=1; only transA=0 is supported")
        index = graph.nodes.index(gemm)
        a, b = gemm.inputs[0], gemm.inputs[1]
        c = gemm.inputs[2] if len(gemm.inputs) > 2 else ""
        replacement: list[Node] = []
        if gemm.attrs.get("transB", 0):
            b_t = graph.fresh_name(f"{b}_transposed")
            replacement.append(Node("Transpose", graph.fresh_name(f"{gemm.name}_transB"), [b], [b_t], {"perm": [1, 0]}))
            b = b_t
        out = graph.fresh_name(f"{gemm.name}_matmul")
        replacement.append(Node("MatMul", gemm.name, [a, b], [out]))
        alpha, beta = float(gemm.attrs.get("alpha", 1.0)), float(gemm.attrs.get("beta", 1.0))
        if alpha != 1.0:
            scaled = graph.fresh_name(f"{gemm.name}_alpha")
            replacement.append(Node("Mul", graph.fresh_name(f"{gemm.name}_alpha"),
                                    [out, graph.add_constant(f"{gemm.name}_alpha", np.float32(alpha))], [scaled]))
            out = scaled
        if c:
            bias = c
            if beta != 1.0:
                bias = graph.fresh_name(f"{gemm.name}_beta_c")
                replacement.append(Node("Mul", graph.fresh_name(f"{gemm.name}_beta"),
                                        [c, graph.add_constant(f"{gemm.name}_beta", np.float32(beta))], [bias]))
            replacement.append(Node("Add", graph.fresh_name(f"{gemm.name}_bias"), [out, bias], [gemm.outputs[0]]))
        else:
            replacement[-1].outputs = [gemm.outputs[0]]
        graph.nodes[index:index + 1] = replacement
        changed = True
    return changed


def check_quantizer_constants(graph: Graph) -> None:
    """Constant quantizer scales must be finite and positive, and the tensors they quantize finite."""
    for node in graph.nodes:
        if node.op_type not in ("Quant", "BipolarQuant", "QuantizeLinear", "DequantizeLinear", "Trunc"):
            continue
        scale = graph.constants.get(node.inputs[1]) if len(node.inputs) > 1 else None
        if scale is not None:
            bad = np.asarray(scale, np.float64).reshape(-1)
            bad = bad[~(np.isfinite(bad) & (bad > 0))]
            if bad.size:
                raise FrontendError(f"{node.describe()}: scale must be finite and positive, not {bad[0]:g}")
        value = graph.constants.get(node.inputs[0])
        if value is not None and np.issubdtype(np.asarray(value).dtype, np.floating) and not np.all(np.isfinite(value)):
            index = tuple(int(i) for i in np.argwhere(~np.isfinite(value))[0])
            what = "NaN" if np.isnan(value[index]) else f"{value[index]:g}"
            raise FrontendError(f"initializer {node.inputs[0]!r} holds {what} at index {index}; quantized "
                                "tensors must be finite")


def lower_qlinear_ops(graph: Graph) -> bool:
    """``QLinearMatMul``, ``QLinearConv`` and ``QGemm`` become their integer op (MatMulInteger, ConvInteger)
    -> [Add the int32 bias] -> Cast -> Mul(multiplier) [-> QuantizeLinear(1, y_zp)].

    This is how onnxruntime's kernels compute them: the int32 accumulator (plus the bias) times the
    float32 multiplier ``x_scale * w_scale / y_scale`` (``QGemm``: ``alpha * a_scale * b_scale``, over
    ``y_scale`` where it has one), per output channel where the weight scale is, rounded half to even,
    plus the zero point, saturated; a ``QGemm`` without ``y_scale`` outputs the float product. The
    equality is pinned by tests against onnxruntime (tests/test_reference_ops.py).
    """
    changed = False
    for node in [n for n in graph.nodes if n.op_type in ("QLinearMatMul", "QLinearConv", "QGemm")]:
        c = graph.constants
        if node.op_type == "QGemm":
            x, x_s, x_z, w, w_s, w_z = node.inputs[:6]
            bias, y_s, y_z = (node.inputs[i] if len(node.inputs) > i and node.inputs[i] else None for i in (6, 7, 8))
            if node.attrs.get("transA", 0):
                raise FrontendError(f"{node.describe()}: transA=1 is not supported")
            if (y_s is None) != (y_z is None):
                raise FrontendError(f"{node.describe()}: needs both y_scale and y_zero_point, or neither")
        else:
            x, x_s, x_z, w, w_s, w_z, y_s, y_z = node.inputs[:8]
            bias = node.inputs[8] if len(node.inputs) > 8 and node.inputs[8] else None
        for tensor in (x_s, x_z, w, w_s, w_z, *[t for t in (bias, y_s, y_z) if t]):
            if not graph.is_constant(tensor):
                raise FrontendError(f"{node.describe()}: weights, scales, zero points and bias must be constants")
        conv = node.op_type == "QLinearConv"
        if node.op_type == "QGemm":
            multiplier = (np.float32(node.attrs.get("alpha", 1.0)) * c[x_s].astype(np.float32).reshape(-1)[0]
                          * c[w_s].astype(np.float32).reshape(-1))
            if node.attrs.get("transB", 0):
                w = graph.add_constant(f"{w}_transposed", c[w].T.copy())
        else:
            multiplier = (c[x_s].astype(np.float32) * c[w_s].astype(np.float32)).reshape(-1)
        if y_s:
            multiplier = multiplier / c[y_s].astype(np.float32).reshape(-1)[0]
        # A convolution's per-channel constants broadcast over (N, C, *spatial).
        channel_shape = (1, -1) + (1,) * (c[w].ndim - 2) if conv else (-1,)
        acc, summed, scaled, rescaled = (graph.fresh_name(f"{node.name}_{what}")
                                         for what in ("acc", "biased", "float", "rescaled"))
        integer = (Node("ConvInteger", node.name, [x, w, x_z, w_z], [acc], dict(node.attrs)) if conv
                   else Node("MatMulInteger", node.name, [x, w, x_z, w_z], [acc]))
        nodes = [integer]
        if bias:
            nodes.append(Node("Add", graph.fresh_name(f"{node.name}_bias"),
                              [acc, graph.add_constant(f"{node.name}_bias_int32",
                                                       c[bias].astype(np.int32).reshape(channel_shape))], [summed]))
            acc = summed
        product = rescaled if y_z else node.outputs[0]
        nodes += [
            Node("Cast", graph.fresh_name(f"{node.name}_cast"), [acc], [scaled], {"to": onnx.TensorProto.FLOAT}),
            Node("Mul", graph.fresh_name(f"{node.name}_rescale"),
                 [scaled, graph.add_constant(f"{node.name}_multiplier", multiplier.reshape(channel_shape))], [product]),
        ]
        if y_z:
            nodes.append(Node("QuantizeLinear", graph.fresh_name(f"{node.name}_requantize"),
                              [rescaled, graph.add_constant(f"{node.name}_unit_scale", np.float32(1)), y_z],
                              node.outputs))
        index = graph.nodes.index(node)
        graph.nodes[index:index + 1] = nodes
        changed = True
    return changed


def remove_identities(graph: Graph) -> bool:
    """Bypass ``Identity`` and ``Dropout``, except where they name a graph output (harmless there)."""
    changed = False
    outputs = {o.name for o in graph.outputs}
    for node in [n for n in graph.nodes if n.op_type in ("Identity", "Dropout")]:
        if any(o and graph.consumers(o) for o in node.outputs[1:]):
            raise FrontendError(f"{node.describe()}: its mask output is used; only inference-mode Dropout is supported")
        src, dst = node.inputs[0], node.outputs[0]
        if dst in outputs:
            continue
        graph.nodes.remove(node)
        for consumer in graph.consumers(dst):
            consumer.inputs = [src if t == dst else t for t in consumer.inputs]
        changed = True
    return changed


def quant_datatype(node: Node, bit_width: np.ndarray | None) -> DataType:
    """The exact integer range a ``Quant``/``BipolarQuant`` node's codes take.

    Taken from the reference semantics themselves (codes at both saturation ends), so that narrow
    ranges, 1-bit signed Quant (which qonnx makes bipolar) and non-integer bit widths (7.5 bits clip
    at +-89.51, which then rounds to 90) all come out as they execute.
    """
    if node.op_type == "BipolarQuant":
        return BIPOLAR
    bits = np.unique(np.asarray(bit_width, np.float64))
    if bits.size != 1 or not 1 <= bits[0] <= 32:
        raise FrontendError(f"{node.describe()}: bit_width must be one value from 1 to 32, not {bits.tolist()}")
    ends = np.array([-1e30, 1e30], np.float32)
    one, zero = np.float32(1), np.float32(0)
    lo, hi = run_node("Quant", node.attrs, [ends, one, zero, np.asarray(bits[0], np.float32)])[0].astype(np.int64)
    if lo == -1 and hi == 1 and bits[0] == 1:
        return BIPOLAR
    if node.attrs.get("signed", 1) and node.attrs.get("narrow", 0) and (lo, hi) == (-1, 1):
        return TERNARY
    base = smallest_datatype(lo, hi)
    return base if (base.min, base.max) == (lo, hi) else DataType(base.name, int(lo), int(hi))


def fold_constants(graph: Graph) -> bool:
    changed = False
    for node in list(graph.nodes):
        present = [t for t in node.inputs if t]
        if not present or not all(graph.is_constant(t) for t in present):
            continue
        inputs = [graph.constants[t] if t else None for t in node.inputs]
        results = run_node(node.op_type, node.attrs, inputs, opset=graph.opset, qonnx_opset=graph.qonnx_opset)
        for name, value in zip(node.outputs, results):
            graph.constants[name] = value
        _track_quantized(graph, node, results[0])
        graph.nodes.remove(node)
        changed = True
    return changed


def _track_quantized(graph: Graph, node: Node, value: np.ndarray) -> None:
    out = node.outputs[0]
    if node.op_type in ("Quant", "BipolarQuant"):
        scale = np.broadcast_to(graph.constants[node.inputs[1]], value.shape).astype(np.float64)
        zero = (np.broadcast_to(graph.constants[node.inputs[2]], value.shape).astype(np.float64)
                if node.op_type == "Quant" else np.zeros(value.shape))
        bits = graph.constants[node.inputs[3]] if node.op_type == "Quant" else None
        codes = value.astype(np.float64) / scale + zero
        graph.quantized[out] = QuantizedConstant(np.rint(codes), scale, zero, quant_datatype(node, bits))
        if not np.allclose(codes, np.rint(codes), atol=1e-3):
            del graph.quantized[out]  # fractional codes (e.g. a non-integer bit width): not an integer tensor
    elif node.op_type == "DequantizeLinear":
        codes = graph.constants[node.inputs[0]].astype(np.float64)
        axis = node.attrs.get("axis", 1) % max(codes.ndim, 1)

        def along_axis(param: np.ndarray) -> np.ndarray:
            param = np.asarray(param, np.float64)
            if param.size > 1:
                shape = [1] * codes.ndim
                shape[axis] = -1
                param = param.reshape(shape)
            return np.broadcast_to(param, codes.shape)

        zero = along_axis(graph.constants[node.inputs[2]]) if len(node.inputs) > 2 and node.inputs[2] else np.zeros(codes.shape)
        graph.quantized[out] = QuantizedConstant(codes, along_axis(graph.constants[node.inputs[1]]), zero,
                                                 datatype_of_values(codes))
    elif node.op_type in SHAPE_OPS and node.inputs[0] in graph.quantized:
        q = graph.quantized[node.inputs[0]]
        rest = [graph.constants[t] if t else None for t in node.inputs[1:]]

        def apply(array: np.ndarray) -> np.ndarray:
            return run_node(node.op_type, node.attrs, [array, *rest], opset=graph.opset)[0]

        graph.quantized[out] = QuantizedConstant(apply(q.codes), apply(q.scale), apply(q.zero_point), q.dtype)
