"""Turn a tidied QONNX MLP into integer MatMuls and MultiThresholds.

Between two activation quantizers an MLP computes ``Q(f(x @ W))``: ``x`` and ``W`` are integer
codes times scales, and ``f`` is the chain of float ops the exporter wrote (bias Add, Mul, Div,
BatchNormalization, Relu, ...). With ``acc = codes_x @ codes_W`` (an integer), each output channel's
code is a monotonic step function of ``acc``. Instead of absorbing ``f`` into thresholds by exact
algebra (FINN's streamlining), streamc evaluates the exporter's own float32 chain with the
reference executor and binary-searches every step point over the reachable accumulator range. The
thresholds therefore reproduce the reference's float32 rounding, ties and all, by construction.

The result keeps the graph's front (everything up to the first activation quantizer, which turns
float inputs into integer codes: the host "head") and the float ops after the last MatMul (the
host "tail"), and puts ``MatMul`` (integer weights) and ``MultiThreshold`` nodes between them.
``graph.meta`` records what :mod:`streamc.transforms.to_hw` and verification need.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..datatypes import BIPOLAR, DataType, datatype_of_values, smallest_datatype
from ..errors import LoweringError
from ..execute import execute
from ..ir import Graph, Node, TensorInfo
from .tidy import SHAPE_OPS, quant_datatype

ACT_QUANTS = frozenset({"Quant", "BipolarQuant"})
#: Ops allowed between a MatMul and the next quantizer: each is monotonic in its dynamic input.
MONOTONIC_OPS = frozenset({"Add", "Sub", "Mul", "Div", "BatchNormalization", "Relu", "Clip", "Max", "Min",
                           "Neg", "Identity", "Reshape", "Flatten", "Squeeze", "Unsqueeze"})
#: Accumulator values tried at random per channel to confirm the thresholds.
CHECK_SAMPLES = 2048


@dataclass
class _Codes:
    """Integer codes on a stream: the tensor, their value range, and the scale/zero point they stand for."""

    tensor: str
    lo: int
    hi: int
    dtype: DataType
    scale: float
    zero_point: float


def streamline(graph: Graph) -> Graph:
    graph = graph.copy()
    chain = _dynamic_chain(graph)
    first_mm = next((i for i, n in enumerate(chain) if n.op_type == "MatMul"), None)
    if first_mm is None:
        raise LoweringError("the model has no MatMul/Gemm: nothing to put in hardware")
    quant_before = [i for i, n in enumerate(chain[:first_mm]) if n.op_type in ACT_QUANTS]
    if not quant_before:
        raise LoweringError(f"{chain[first_mm].describe()} reads an unquantized input; put an activation quantizer "
                            "(Quant or BipolarQuant) before the first linear layer")
    head, body = chain[:quant_before[-1] + 1], chain[quant_before[-1] + 1:]

    new_nodes = list(head)
    codes, head_nodes = _codes_of_quantizer(graph, head[-1])
    new_nodes += head_nodes
    hw_input = codes.tensor
    layers: list[dict] = []
    position = 0
    while position < len(body):
        position = _skip_shape_ops(body, position, what="an activation quantizer and a MatMul")
        matmul = body[position]
        if matmul.op_type != "MatMul":
            raise LoweringError(f"{matmul.describe()} follows an activation quantizer; streamc expects a MatMul/Gemm "
                                "there (elementwise ops between a quantizer and a MatMul are not supported yet)")
        end = position + 1
        while end < len(body) and body[end].op_type not in ACT_QUANTS:
            if body[end].op_type == "MatMul":
                raise LoweringError(f"{body[end].describe()} follows {matmul.describe()} with no activation "
                                    "quantizer between them; streamc needs quantized activations between linear layers")
            end += 1
        following = body[position + 1:end]
        quantizer = body[end] if end < len(body) else None
        if quantizer is None:
            new_nodes += _lower_last_layer(graph, matmul, codes, following, layers)
            break
        bad = [n for n in following if n.op_type not in MONOTONIC_OPS]
        if bad:
            raise LoweringError(
                f"{bad[0].describe()} lies between {matmul.describe()} and quantizer {quantizer.name!r}; supported "
                f"there: {', '.join(sorted(MONOTONIC_OPS))} (lookup-table activations are not supported yet)")
        layer_nodes, codes = _lower_thresholded_layer(graph, matmul, codes, following, quantizer, layers)
        new_nodes += layer_nodes
        position = end + 1
        rest = body[position:]
        if not any(n.op_type == "MatMul" for n in rest):
            new_nodes += _dequantize_tail(graph, codes, quantizer, rest)
            break
    else:
        raise AssertionError("the body ended without a layer")

    graph.nodes = new_nodes
    graph.remove_unused_constants()
    graph.meta.update(hw_input=hw_input, layers=layers)
    return graph


def _dynamic_chain(graph: Graph) -> list[Node]:
    """The graph's nodes as one chain from the input to the output; branching is not supported yet."""
    if len(graph.inputs) != 1 or len(graph.outputs) != 1:
        raise LoweringError(f"streamc compiles models with one input and one output; this one has "
                            f"{len(graph.inputs)} inputs and {len(graph.outputs)} outputs")
    current = graph.inputs[0].name
    chain = []
    for node in graph.nodes:
        dynamic = [t for t in node.inputs if t and not graph.is_constant(t)]
        if dynamic != [current]:
            raise LoweringError(f"{node.describe()} does not continue a single chain from the input (it reads "
                                f"{dynamic}); branching and residual graphs are not supported yet")
        if len(graph.consumers(current)) > 1:
            names = ", ".join(repr(n.name) for n in graph.consumers(current))
            raise LoweringError(f"tensor {current!r} is read by several nodes ({names}); "
                                "branching and residual graphs are not supported yet")
        chain.append(node)
        current = node.outputs[0]
    return chain


def _skip_shape_ops(body: list[Node], position: int, *, what: str) -> int:
    while position < len(body) and body[position].op_type in SHAPE_OPS:
        position += 1
    if position >= len(body):
        raise LoweringError(f"the model ends with shape ops after {what}")
    return position


def _scalar(graph: Graph, tensor: str, what: str, node: Node) -> float:
    value = np.unique(graph.constants[tensor])
    if value.size != 1:
        raise LoweringError(f"{node.describe()}: its {what} must be one value per tensor here (per-tensor "
                            f"quantization of activations feeding a MatMul); it has {value.size} distinct values")
    return float(value[0])


def _quantizer_params(graph: Graph, quantizer: Node) -> tuple[float, float, DataType]:
    """Scale, zero point and code datatype of an activation quantizer."""
    for t in quantizer.inputs[1:]:
        if t and not graph.is_constant(t):
            raise LoweringError(f"{quantizer.describe()}: scale, zero point and bit width must be constants")
    scale = _scalar(graph, quantizer.inputs[1], "scale", quantizer)
    zero = _scalar(graph, quantizer.inputs[2], "zero point", quantizer) if quantizer.op_type == "Quant" else 0.0
    bits = graph.constants[quantizer.inputs[3]] if quantizer.op_type == "Quant" else None
    return scale, zero, quant_datatype(quantizer, bits)


def _codes_of_quantizer(graph: Graph, quantizer: Node) -> tuple[_Codes, list[Node]]:
    """Nodes computing the integer codes of a quantizer's output: round(y / scale + zero_point)."""
    scale, zero, dtype = _quantizer_params(graph, quantizer)
    y = quantizer.outputs[0]
    nodes = []
    scaled = graph.fresh_name(f"{y}_scaled")
    nodes.append(Node("Div", graph.fresh_name(f"{quantizer.name}_codes_div"),
                      [y, graph.add_constant(f"{quantizer.name}_scale", np.float32(scale))], [scaled]))
    if zero:
        shifted = graph.fresh_name(f"{y}_shifted")
        nodes.append(Node("Add", graph.fresh_name(f"{quantizer.name}_codes_zp"),
                          [scaled, graph.add_constant(f"{quantizer.name}_zero_point", np.float32(zero))], [shifted]))
        scaled = shifted
    codes = graph.fresh_name(f"{y}_codes")
    nodes.append(Node("Round", graph.fresh_name(f"{quantizer.name}_codes_round"), [scaled], [codes]))
    graph.datatypes[codes] = dtype
    return _Codes(codes, dtype.min, dtype.max, dtype, scale, zero), nodes


def _integer_weights(graph: Graph, matmul: Node) -> tuple[np.ndarray, np.ndarray, DataType]:
    """Integer weights as (MH, MW) rows = output channels, and the per-channel weight scale."""
    weight = matmul.inputs[1]
    if weight not in graph.quantized:
        raise LoweringError(f"{matmul.describe()}: its weight {weight!r} is not quantized; streamc needs integer "
                            "weights (a Quant or BipolarQuant on the weight tensor)")
    q = graph.quantized[weight]
    if q.codes.ndim != 2:
        raise LoweringError(f"{matmul.describe()}: weight must be 2-D, not of shape {q.codes.shape}")
    if not np.all(q.scale == q.scale[:1]):
        raise LoweringError(f"{matmul.describe()}: weight scale varies along the input dimension; "
                            "per-tensor or per-output-channel weight scales are supported")
    integer = q.codes - q.zero_point
    if not np.all(integer == np.rint(integer)):
        raise LoweringError(f"{matmul.describe()}: weight zero point is not an integer")
    return np.rint(integer).astype(np.int64).T, q.scale[0].astype(np.float64), q.dtype


def _weight_datatype(declared: DataType, weights: np.ndarray) -> DataType:
    """The quantizer's type, unless negating rows for a decreasing channel pushed values out of it."""
    return declared if declared.contains(weights) else datatype_of_values(weights)


def _acc_range(weights: np.ndarray, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
    low = np.minimum(weights * lo, weights * hi).sum(axis=1)
    high = np.maximum(weights * lo, weights * hi).sum(axis=1)
    return low, high


def _matmul_output(acc: np.ndarray, codes: _Codes, weights: np.ndarray, w_scale: np.ndarray) -> np.ndarray:
    """The float32 value the reference's MatMul yields for integer accumulator values ``acc`` (..., MH)."""
    offset = codes.zero_point * weights.sum(axis=1)
    scale = np.float32(codes.scale * w_scale)
    return np.float32(acc - offset) * scale


def _add_matmul(graph: Graph, matmul: Node, codes: _Codes, weights: np.ndarray, w_dtype: DataType,
                acc_dtype: DataType) -> tuple[Node, str]:
    w_name = graph.add_constant(f"{matmul.name}_weight_int", weights.T.astype(np.float32))
    graph.datatypes[w_name] = w_dtype
    acc = graph.fresh_name(f"{matmul.name}_acc")
    graph.datatypes[acc] = acc_dtype
    return Node("MatMul", matmul.name, [codes.tensor, w_name], [acc]), acc


def _lower_thresholded_layer(graph, matmul, codes, following, quantizer, layers):
    weights, w_scale, w_dtype = _integer_weights(graph, matmul)
    lo, hi = _acc_range(weights, codes.lo, codes.hi)
    sub = Graph(nodes=[*following, quantizer], constants=graph.constants,
                inputs=[TensorInfo(matmul.outputs[0], (1, weights.shape[0]))],
                outputs=[TensorInfo(quantizer.outputs[0], (1, weights.shape[0]))],
                opset=graph.opset, qonnx_opset=graph.qonnx_opset)
    out_scale, out_zero, out_quant_dtype = _quantizer_params(graph, quantizer)
    levels = np.array([-1, 1]) if out_quant_dtype == BIPOLAR else np.arange(out_quant_dtype.min, out_quant_dtype.max + 1)

    def code_of(acc: np.ndarray) -> np.ndarray:
        y = execute(sub, {matmul.outputs[0]: _matmul_output(acc, codes, weights, w_scale)})[quantizer.outputs[0]]
        return np.rint(y.reshape(acc.shape).astype(np.float64) / out_scale + out_zero)

    at_ends = code_of(np.stack([hi, lo]))
    # A channel whose code falls as acc grows (e.g. a negative BatchNorm scale) gets its weights negated.
    sign = np.where(at_ends[0] >= at_ends[1], 1, -1)
    weights = weights * sign[:, None]
    w_dtype = _weight_datatype(w_dtype, weights)
    lo, hi = np.where(sign > 0, lo, -hi), np.where(sign > 0, hi, -lo)

    def code_of_signed(acc):
        return code_of(acc * sign)

    thresholds = _search_thresholds(code_of_signed, lo, hi, levels[1:])
    _check_thresholds(code_of_signed, thresholds, lo, hi, levels, matmul, quantizer)
    # Drop levels no channel can miss, or none can reach: they cost comparators and output bits.
    always = np.all(thresholds <= lo[:, None], axis=0)
    never = np.all(thresholds > hi[:, None], axis=0)
    first = int(np.argmin(always)) if not always.all() else len(always)
    last = len(never) - int(np.argmin(never[::-1])) if not never.all() else 0
    if out_quant_dtype == BIPOLAR:
        first, last = 0, 1
    else:  # keep one level at least, so that the unit still has an output
        first = min(first, len(levels) - 2)
        last = max(last, first + 1)
    kept = thresholds[:, first:last]
    out_bias = int(levels[first])
    bipolar = out_quant_dtype == BIPOLAR
    out_dtype = BIPOLAR if bipolar else smallest_datatype(out_bias, out_bias + kept.shape[1])

    mm_node, acc = _add_matmul(graph, matmul, codes, weights, w_dtype, smallest_datatype(lo.min(), hi.max()))
    mt_out = graph.fresh_name(f"{quantizer.name}_codes")
    graph.datatypes[mt_out] = out_dtype
    mt = Node("MultiThreshold", graph.fresh_name(f"{quantizer.name}_thresholds"),
              [acc, graph.add_constant(f"{quantizer.name}_thresholds", kept.astype(np.float32))], [mt_out],
              {"out_dtype": out_dtype.name, "out_scale": 2.0 if bipolar else 1.0,
               "out_bias": float(out_bias)})
    layers.append(dict(name=matmul.name, weights=weights, in_dtype=codes.dtype, weight_dtype=w_dtype,
                       thresholds=kept.astype(np.int64), out_dtype=out_dtype, out_bias=out_bias,
                       matmul=mm_node.name))
    out_hi = 1 if bipolar else out_bias + kept.shape[1]
    return [mm_node, mt], _Codes(mt_out, out_bias, out_hi, out_dtype, out_scale, out_zero)


def _search_thresholds(code_of, lo: np.ndarray, hi: np.ndarray, levels: np.ndarray) -> np.ndarray:
    """Per channel and level, the least accumulator value in [lo, hi] whose code reaches the level (hi + 1 if none)."""
    channels = len(lo)
    low = np.broadcast_to(lo[:, None], (channels, len(levels))).copy()
    high = np.broadcast_to(hi[:, None] + 1, (channels, len(levels))).copy()
    while np.any(low < high):
        mid = (low + high) // 2
        reached = code_of(mid.T).T >= levels[None, :]
        high = np.where(reached & (low < high), mid, high)
        low = np.where(~reached & (low < high), mid + 1, low)
    return low


def _check_thresholds(code_of, thresholds, lo, hi, levels, matmul, quantizer) -> None:
    """Compare the thresholds with the float chain at the range ends and random accumulator values."""
    rng = np.random.default_rng(0)
    span = (hi - lo + 1).astype(np.float64)
    samples = lo[None, :] + np.floor(rng.random((CHECK_SAMPLES, len(lo))) * span[None, :]).astype(np.int64)
    samples = np.concatenate([lo[None, :], hi[None, :], thresholds.T, thresholds.T - 1, samples])
    samples = np.clip(samples, lo[None, :], hi[None, :])
    counts = (samples[:, :, None] >= thresholds[None, :, :]).sum(axis=2)
    if not np.array_equal(levels[counts], code_of(samples)):
        raise LoweringError(f"the function from {matmul.describe()} to quantizer {quantizer.name!r} is not monotonic "
                            "in the accumulator; it cannot be expressed as thresholds")


def _lower_last_layer(graph, matmul, codes, following, layers) -> list[Node]:
    weights, w_scale, w_dtype = _integer_weights(graph, matmul)
    lo, hi = _acc_range(weights, codes.lo, codes.hi)
    acc_dtype = smallest_datatype(lo.min(), hi.max())
    mm_node, acc = _add_matmul(graph, matmul, codes, weights, w_dtype, acc_dtype)
    layers.append(dict(name=matmul.name, weights=weights, in_dtype=codes.dtype, weight_dtype=w_dtype,
                       thresholds=None, out_dtype=acc_dtype, out_bias=0, matmul=mm_node.name))
    nodes = [mm_node]
    offset = codes.zero_point * weights.sum(axis=1)
    if np.any(offset):
        centered = graph.fresh_name(f"{acc}_centered")
        nodes.append(Node("Sub", graph.fresh_name(f"{matmul.name}_zero_point"),
                          [acc, graph.add_constant(f"{matmul.name}_offset", offset.astype(np.float32))], [centered]))
        acc = centered
    scale = np.float32(codes.scale * w_scale)
    nodes.append(Node("Mul", graph.fresh_name(f"{matmul.name}_rescale"),
                      [acc, graph.add_constant(f"{matmul.name}_scale", scale)], [matmul.outputs[0]]))
    graph.meta["boundary"] = dict(tensor=matmul.outputs[0], scale=scale.astype(np.float64), offset=offset)
    return nodes + list(following)


def _dequantize_tail(graph: Graph, codes: _Codes, quantizer: Node, rest: list[Node]) -> list[Node]:
    """The network's last layer ends in an activation quantizer: the host turns its codes back into floats."""
    nodes = []
    value = codes.tensor
    if codes.zero_point:
        centered = graph.fresh_name(f"{value}_centered")
        nodes.append(Node("Sub", graph.fresh_name(f"{quantizer.name}_zero_point"),
                          [value, graph.add_constant(f"{quantizer.name}_zp", np.float32(codes.zero_point))], [centered]))
        value = centered
    nodes.append(Node("Mul", graph.fresh_name(f"{quantizer.name}_dequant"),
                      [value, graph.add_constant(f"{quantizer.name}_out_scale", np.float32(codes.scale))],
                      [quantizer.outputs[0]]))
    graph.meta["boundary"] = dict(tensor=quantizer.outputs[0], scale=np.float64(codes.scale),
                                  offset=np.float64(codes.zero_point))
    return nodes + rest
