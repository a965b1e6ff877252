"""Turn a tidied quantized MLP into integer MatMuls, MultiThresholds and lookup tables.

Between two activation quantizers an MLP computes ``Q(f(x @ W))``: ``x`` and ``W`` are integer
codes (times scales), and ``f`` is the chain of ops the exporter wrote (bias Add, Mul, Div,
BatchNormalization, Relu, Cast, ...). With ``acc = codes_x @ codes_W`` an integer, each output
channel's code is a monotonic step function of ``acc``. Instead of absorbing ``f`` into thresholds
by exact algebra (FINN's streamlining), streamc evaluates the exporter's own ops with the reference
executor and binary-searches every step point over the reachable accumulator range. The thresholds
therefore reproduce the reference's float32 rounding, ties and all, by construction.

Quantizers are recognized as each dialect writes them (see :class:`_Quantizer`); linear layers are
``MatMul`` on dequantized values (QONNX, QDQ) or ``MatMulInteger`` on codes (integer-operator
ONNX). Elementwise ops between two quantizers with no linear layer between them (tanh, sigmoid, any
chain) become a ``LookupTable`` node whose table is the model's own subgraph run on every input code.

The result keeps the graph's front up to the first quantizer (the host "head", float input to
integer codes) and the ops after the last hardware layer (the host "tail"), with ``MatMul``
(integer weights), ``MultiThreshold`` and ``LookupTable`` nodes between them. ``graph.meta``
records what :mod:`streamc.hw` and verification need.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from onnx import TensorProto

from ..datatypes import BIPOLAR, DataType, datatype_of_values, smallest_datatype
from ..errors import LoweringError
from ..execute import execute
from ..ir import Graph, Node, TensorInfo
from .tidy import SHAPE_OPS, quant_datatype

QUANTIZER_OPS = frozenset({"Quant", "BipolarQuant", "QuantizeLinear"})
LINEAR_OPS = frozenset({"MatMul", "MatMulInteger"})
#: Ops allowed between a linear layer and its quantizer: each is monotonic in its dynamic input.
MONOTONIC_OPS = frozenset({"Add", "Sub", "Mul", "Div", "BatchNormalization", "Relu", "Clip", "Max", "Min",
                           "Neg", "Identity", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Cast"})
#: Accumulator values tried at random per channel to confirm the thresholds.
CHECK_SAMPLES = 2048
#: Beyond this float32 cannot hold every accumulator value exactly.
FLOAT_EXACT = 1 << 24


@dataclass
class _Quantizer:
    """An activation quantizer as a dialect writes it.

    ``Quant`` / ``BipolarQuant`` (QONNX: the output is the dequantized float), or ``QuantizeLinear``
    followed by an optional integer ``Clip`` (QCDQ) and an optional ``DequantizeLinear`` (QDQ). The
    codes are the integers the hardware carries; ``codes_tensor`` names them where the model has
    them as a tensor (QuantizeLinear/Clip), ``None`` for QONNX (codes = round(y / scale + zero point)).
    """

    nodes: list[Node]
    n_coding: int            # nodes[:n_coding] compute the codes, the rest only dequantize
    codes_tensor: str | None
    scale: np.ndarray
    zero_point: np.ndarray
    dtype: DataType
    storage: type = np.float32  # numpy type of the codes tensor, where the model has one

    @property
    def output(self) -> str:
        return self.nodes[-1].outputs[0]

    @property
    def float_output(self) -> str | None:
        """The dequantized float tensor a MatMul may read, if the model has one."""
        return None if self.codes_tensor is not None and len(self.nodes) == self.n_coding else self.output

    @property
    def name(self) -> str:
        return self.nodes[0].name

    def codes_from_output(self, value: np.ndarray) -> np.ndarray:
        """Codes from the value of the last coding node's output."""
        if self.codes_tensor is not None:
            return value.astype(np.float64)
        return np.rint(value.astype(np.float64) / self.scale + self.zero_point)

    def output_from_codes(self, codes: np.ndarray) -> np.ndarray:
        """The value the coding nodes' output has for given codes (the model's own dtype and formula)."""
        if self.codes_tensor is not None:
            return codes.astype(self.storage)
        return ((codes.astype(np.float32) - np.float32(self.zero_point)) * np.float32(self.scale)).astype(np.float32)

    def levels(self) -> np.ndarray:
        return np.array([-1, 1]) if self.dtype == BIPOLAR else np.arange(self.dtype.min, self.dtype.max + 1)


@dataclass
class _Codes:
    """Integer codes on a stream: the tensor, their value range, and the scale/zero point they stand for."""

    tensor: str
    lo: int
    hi: int
    dtype: DataType
    quantizer: _Quantizer


def streamline(graph: Graph) -> Graph:
    graph = graph.copy()
    chain = _dynamic_chain(graph)
    first_linear = next((i for i, n in enumerate(chain) if n.op_type in LINEAR_OPS), None)
    if first_linear is None:
        raise LoweringError("the model has no MatMul/Gemm/MatMulInteger: nothing to put in hardware")
    starts = [i for i, n in enumerate(chain[:first_linear]) if n.op_type in QUANTIZER_OPS]
    if not starts:
        raise LoweringError(f"{chain[first_linear].describe()} reads an unquantized input; put an activation "
                            "quantizer (Quant, BipolarQuant or QuantizeLinear) before the first linear layer")
    first_quantizer = _quantizer_at(graph, chain, starts[-1])
    head_end = starts[-1] + first_quantizer.n_coding
    new_nodes = chain[:head_end]
    codes, coding_nodes = _head_codes(graph, first_quantizer)
    new_nodes += coding_nodes
    hw_input = codes.tensor
    stages: list[dict] = []
    body = chain[starts[-1] + len(first_quantizer.nodes):]
    position = 0
    while True:
        position = _skip_shape_ops(body, position)
        node = body[position]
        if node.op_type not in LINEAR_OPS:
            raise LoweringError(f"{node.describe()} follows quantizer {codes.quantizer.name!r}; streamc expects a "
                                "MatMul/Gemm/MatMulInteger there, or a quantizer after elementwise ops")
        _check_linear_input(graph, node, codes)
        end = position + 1
        while end < len(body) and body[end].op_type not in QUANTIZER_OPS:
            if body[end].op_type in LINEAR_OPS:
                raise LoweringError(f"{body[end].describe()} follows {node.describe()} with no activation quantizer "
                                    "between them; streamc needs quantized activations between linear layers")
            end += 1
        following = body[position + 1:end]
        if end == len(body):
            new_nodes += _lower_last_layer(graph, node, codes, following, stages)
            break
        quantizer = _quantizer_at(graph, body, end)
        bad = [n for n in following if n.op_type not in MONOTONIC_OPS]
        if bad:
            raise LoweringError(
                f"{bad[0].describe()} lies between {node.describe()} and quantizer {quantizer.name!r}; supported "
                f"there: {', '.join(sorted(MONOTONIC_OPS))} (any elementwise op is supported between two quantizers)")
        layer_nodes, codes = _lower_thresholded_layer(graph, node, codes, following, quantizer, stages)
        new_nodes += layer_nodes
        position = end + len(quantizer.nodes)
        # Elementwise ops up to another quantizer, with no linear layer between: a lookup table.
        while True:
            table_end = _table_end(body, position)
            if table_end is None:
                break
            table_nodes, codes = _lower_lookup_table(graph, codes, body[position:table_end], body, table_end, stages)
            new_nodes += table_nodes
            position = table_end + len(codes.quantizer.nodes)
        rest = body[position:]
        if not any(n.op_type in LINEAR_OPS for n in rest):
            new_nodes += _dequantize_tail(graph, codes, rest)
            break

    graph.nodes = new_nodes
    graph.remove_unused_constants()
    graph.meta.update(hw_input=hw_input, stages=stages)
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


def _skip_shape_ops(body: list[Node], position: int) -> int:
    while position < len(body) and body[position].op_type in SHAPE_OPS:
        position += 1
    if position >= len(body):
        raise LoweringError("the model ends with shape ops after its last quantizer")
    return position


def _table_end(body: list[Node], position: int) -> int | None:
    """Index of the next quantizer if only non-linear elementwise ops come before it, else None."""
    for index in range(position, len(body)):
        if body[index].op_type in LINEAR_OPS:
            return None
        if body[index].op_type in QUANTIZER_OPS:
            return index
    return None


def _constant(graph: Graph, tensor: str, node: Node, what: str) -> np.ndarray:
    if not tensor:
        return None
    if not graph.is_constant(tensor):
        raise LoweringError(f"{node.describe()}: its {what} must be a constant")
    return graph.constants[tensor]


def _quantizer_at(graph: Graph, chain: list[Node], index: int) -> _Quantizer:
    node = chain[index]
    if node.op_type in ("Quant", "BipolarQuant"):
        scale = _constant(graph, node.inputs[1], node, "scale").astype(np.float64)
        zero = _constant(graph, node.inputs[2], node, "zero point").astype(np.float64) if node.op_type == "Quant" else 0.0
        bits = _constant(graph, node.inputs[3], node, "bit width") if node.op_type == "Quant" else None
        return _Quantizer([node], 1, None, np.asarray(scale), np.asarray(zero), quant_datatype(node, bits))
    # QuantizeLinear [Clip] [DequantizeLinear]
    scale = _constant(graph, node.inputs[1], node, "scale")
    zero = _constant(graph, node.inputs[2] if len(node.inputs) > 2 else "", node, "zero point")
    storage = np.int8 if zero is not None and zero.dtype == np.int8 else np.uint8
    if zero is None:
        storage = {TensorProto.INT8: np.int8, TensorProto.UINT8: np.uint8}.get(node.attrs.get("output_dtype", 2))
        if storage is None:
            raise LoweringError(f"{node.describe()}: only int8 and uint8 outputs are supported")
        zero = np.zeros((), storage)
    if zero.dtype not in (np.int8, np.uint8):
        raise LoweringError(f"{node.describe()}: zero point of type {zero.dtype} is not supported; int8 and uint8 are")
    info = np.iinfo(storage)
    lo, hi = info.min, info.max
    nodes = [node]
    following = chain[index + 1] if index + 1 < len(chain) else None
    if following is not None and following.op_type == "Clip":
        bounds = [_constant(graph, t, following, "bound") if t else None for t in following.inputs[1:3]]
        if following.attrs:
            bounds = [following.attrs.get("min"), following.attrs.get("max")]
        lo = max(lo, int(np.ceil(bounds[0]))) if bounds[0] is not None else lo
        hi = min(hi, int(np.floor(bounds[1]))) if len(bounds) > 1 and bounds[1] is not None else hi
        nodes.append(following)
    n_coding = len(nodes)
    after = chain[index + n_coding] if index + n_coding < len(chain) else None
    if after is not None and after.op_type == "DequantizeLinear":
        dq_scale = _constant(graph, after.inputs[1], after, "scale")
        dq_zero = _constant(graph, after.inputs[2] if len(after.inputs) > 2 else "", after, "zero point")
        if not (np.array_equal(dq_scale, scale) and np.array_equal(dq_zero if dq_zero is not None else 0, zero)):
            raise LoweringError(f"{after.describe()} dequantizes with another scale or zero point than "
                                f"{node.describe()} quantized with; streamc needs them equal")
        nodes.append(after)
    dtype = smallest_datatype(lo, hi)
    dtype = dtype if (dtype.min, dtype.max) == (lo, hi) else DataType(dtype.name, lo, hi)
    return _Quantizer(nodes, n_coding, nodes[n_coding - 1].outputs[0], np.asarray(scale, np.float64),
                      np.asarray(zero, np.float64), dtype, storage)


def _scalar(value: np.ndarray, what: str, quantizer: _Quantizer) -> float:
    unique = np.unique(value)
    if unique.size != 1:
        raise LoweringError(f"quantizer {quantizer.name!r}: its {what} must be one value per tensor here (per-tensor "
                            f"quantization of activations feeding a linear layer); it has {unique.size} values")
    return float(unique[0])


def _head_codes(graph: Graph, quantizer: _Quantizer) -> tuple[_Codes, list[Node]]:
    """Nodes turning the first quantizer's output into float32 codes, the hardware's input."""
    nodes = []
    if quantizer.codes_tensor is None:
        scale = _scalar(quantizer.scale, "scale", quantizer)
        zero = _scalar(quantizer.zero_point, "zero point", quantizer)
        y = quantizer.output
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
    else:
        codes = graph.fresh_name(f"{quantizer.codes_tensor}_float")
        nodes.append(Node("Cast", graph.fresh_name(f"{quantizer.name}_codes_cast"), [quantizer.codes_tensor], [codes],
                          {"to": TensorProto.FLOAT}))
    graph.datatypes[codes] = quantizer.dtype
    return _Codes(codes, quantizer.dtype.min, quantizer.dtype.max, quantizer.dtype, quantizer), nodes


def _check_linear_input(graph: Graph, node: Node, codes: _Codes) -> None:
    """A MatMul must read the dequantized output of the quantizer, a MatMulInteger its codes."""
    source = node.inputs[0]
    producer = graph.producer(source)
    while producer is not None and producer.op_type in SHAPE_OPS:
        source = producer.inputs[0]
        producer = graph.producer(source)
    quantizer = codes.quantizer
    wanted = quantizer.float_output if node.op_type == "MatMul" else quantizer.codes_tensor
    if wanted is None or source != wanted:
        kind = "dequantized values" if node.op_type == "MatMul" else "integer codes"
        raise LoweringError(f"{node.describe()} must read the {kind} of quantizer {quantizer.name!r}")


@dataclass
class _Linear:
    """A linear layer's integer weights and how its output follows from the accumulator."""

    weights: np.ndarray      # (MH, MW) integer, rows are output channels
    weight_dtype: DataType
    scale: np.ndarray        # MatMul: per-channel float factor acc -> output; MatMulInteger: unused
    offset: np.ndarray       # subtracted from acc: input zero point times the row sums

    def output(self, node: Node, acc: np.ndarray) -> np.ndarray:
        """What the model's linear node outputs for accumulator values ``acc`` (..., MH)."""
        if node.op_type == "MatMulInteger":
            return (acc - self.offset).astype(np.int32)
        return np.float32(acc - self.offset) * np.float32(self.scale)


def _linear(graph: Graph, node: Node, codes: _Codes) -> _Linear:
    weight = node.inputs[1]
    if node.op_type == "MatMul":
        if weight not in graph.quantized:
            raise LoweringError(f"{node.describe()}: its weight {weight!r} is not quantized; streamc needs integer "
                                "weights (a Quant, BipolarQuant or DequantizeLinear on the weight tensor)")
        q = graph.quantized[weight]
        codes_w, zero_w = q.codes, q.zero_point
        if codes_w.ndim != 2 or not np.all(q.scale == q.scale[:1]):
            raise LoweringError(f"{node.describe()}: weight scales must be per tensor or per output channel")
        w_scale = q.scale[0]
        in_scale = _scalar(codes.quantizer.scale, "scale", codes.quantizer)
        in_zero = _scalar(codes.quantizer.zero_point, "zero point", codes.quantizer)
    else:
        codes_w = _constant(graph, weight, node, "weight (B)")
        zero_w = _constant(graph, node.inputs[3] if len(node.inputs) > 3 else "", node, "B zero point")
        zero_w = np.zeros(()) if zero_w is None else zero_w
        a_zero = _constant(graph, node.inputs[2] if len(node.inputs) > 2 else "", node, "A zero point")
        in_zero = 0.0 if a_zero is None else float(np.unique(a_zero)[0])
        if a_zero is not None and np.unique(a_zero).size != 1:
            raise LoweringError(f"{node.describe()}: a per-row A zero point is not supported")
        w_scale = in_scale = np.float64(1)
        if codes_w.ndim != 2:
            raise LoweringError(f"{node.describe()}: weight must be 2-D, not of shape {codes_w.shape}")
    integer = codes_w.astype(np.float64) - zero_w
    if not np.all(integer == np.rint(integer)):
        raise LoweringError(f"{node.describe()}: weight zero point is not an integer")
    weights = np.rint(integer).astype(np.int64).T
    return _Linear(weights, datatype_of_values(weights), np.float64(in_scale) * np.asarray(w_scale, np.float64),
                   in_zero * weights.sum(axis=1))


def _acc_range(weights: np.ndarray, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
    low = np.minimum(weights * lo, weights * hi).sum(axis=1)
    high = np.maximum(weights * lo, weights * hi).sum(axis=1)
    if max(-low.min(), high.max()) >= FLOAT_EXACT:
        raise LoweringError(f"accumulators reach {max(-low.min(), high.max())}, beyond 2**24 where float32 "
                            "intermediate models lose exactness")
    return low, high


def _add_matmul(graph: Graph, node: Node, codes: _Codes, linear: _Linear, weights: np.ndarray,
                lo: np.ndarray, hi: np.ndarray) -> tuple[Node, str]:
    w_name = graph.add_constant(f"{node.name}_weight_int", weights.T.astype(np.float32))
    graph.datatypes[w_name] = datatype_of_values(weights)
    acc = graph.fresh_name(f"{node.name}_acc")
    graph.datatypes[acc] = smallest_datatype(lo.min(), hi.max())
    return Node("MatMul", node.name, [codes.tensor, w_name], [acc]), acc


def _lower_thresholded_layer(graph, node, codes, following, quantizer, stages):
    linear = _linear(graph, node, codes)
    weights = linear.weights
    lo, hi = _acc_range(weights, codes.lo, codes.hi)
    coding = quantizer.nodes[:quantizer.n_coding]
    last = coding[-1].outputs[0]
    sub = Graph(nodes=[*following, *coding], constants=graph.constants,
                inputs=[TensorInfo(node.outputs[0], (1, weights.shape[0]))],
                outputs=[TensorInfo(last, (1, weights.shape[0]))], opset=graph.opset, qonnx_opset=graph.qonnx_opset)
    levels = quantizer.levels()

    def code_of(acc: np.ndarray) -> np.ndarray:
        y = execute(sub, {node.outputs[0]: linear.output(node, acc)})[last]
        return quantizer.codes_from_output(y.reshape(acc.shape))

    at_ends = code_of(np.stack([hi, lo]))
    # A channel whose code falls as acc grows (e.g. a negative BatchNorm scale) gets its weights negated.
    sign = np.where(at_ends[0] >= at_ends[1], 1, -1)
    weights = weights * sign[:, None]
    lo, hi = np.where(sign > 0, lo, -hi), np.where(sign > 0, hi, -lo)

    def code_of_signed(acc):
        return code_of(acc * sign)

    thresholds = _search_thresholds(code_of_signed, lo, hi, levels[1:])
    _check_thresholds(code_of_signed, thresholds, lo, hi, levels, node, quantizer)
    # Drop levels no channel can miss, or none can reach: they cost comparators and output bits.
    always = np.all(thresholds <= lo[:, None], axis=0)
    never = np.all(thresholds > hi[:, None], axis=0)
    first = int(np.argmin(always)) if not always.all() else len(always)
    last_kept = len(never) - int(np.argmin(never[::-1])) if not never.all() else 0
    bipolar = quantizer.dtype == BIPOLAR
    if bipolar:
        first, last_kept = 0, 1
    else:  # keep one level at least, so that the unit still has an output
        first = min(first, len(levels) - 2)
        last_kept = max(last_kept, first + 1)
    kept = thresholds[:, first:last_kept]
    out_bias = int(levels[first])
    out_dtype = BIPOLAR if bipolar else smallest_datatype(out_bias, out_bias + kept.shape[1])

    mm_node, acc = _add_matmul(graph, node, codes, linear, weights, lo, hi)
    mt_out = graph.fresh_name(f"{quantizer.name}_codes")
    graph.datatypes[mt_out] = out_dtype
    mt = Node("MultiThreshold", graph.fresh_name(f"{quantizer.name}_thresholds"),
              [acc, graph.add_constant(f"{quantizer.name}_thresholds", kept.astype(np.float32))], [mt_out],
              {"out_dtype": out_dtype.name, "out_scale": 2.0 if bipolar else 1.0, "out_bias": float(out_bias)})
    stages.append(dict(kind="mvau", name=node.name, weights=weights, in_dtype=codes.dtype,
                       weight_dtype=datatype_of_values(weights), thresholds=kept.astype(np.int64),
                       out_dtype=out_dtype, out_bias=out_bias, acc_lo=lo, acc_hi=hi))
    out_hi = 1 if bipolar else out_bias + kept.shape[1]
    return [mm_node, mt], _Codes(mt_out, out_bias, out_hi, out_dtype, quantizer)


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


def _check_thresholds(code_of, thresholds, lo, hi, levels, node, quantizer) -> None:
    """Compare the thresholds with the model's ops at the range ends and random accumulator values."""
    rng = np.random.default_rng(0)
    span = (hi - lo + 1).astype(np.float64)
    samples = lo[None, :] + np.floor(rng.random((CHECK_SAMPLES, len(lo))) * span[None, :]).astype(np.int64)
    samples = np.concatenate([lo[None, :], hi[None, :], thresholds.T, thresholds.T - 1, samples])
    samples = np.clip(samples, lo[None, :], hi[None, :])
    counts = (samples[:, :, None] >= thresholds[None, :, :]).sum(axis=2)
    if not np.array_equal(levels[counts], code_of(samples)):
        raise LoweringError(f"the function from {node.describe()} to quantizer {quantizer.name!r} is not monotonic "
                            "in the accumulator; it cannot be expressed as thresholds")


def _lower_lookup_table(graph, codes: _Codes, between: list[Node], body, end, stages):
    """Elementwise ops from one quantizer's codes to the next quantizer's: a table over every input code."""
    quantizer = _quantizer_at(graph, body, end)
    source = codes.quantizer
    coding = quantizer.nodes[:quantizer.n_coding]
    start = source.nodes[source.n_coding - 1].outputs[0]
    nodes = [*source.nodes[source.n_coding:], *between, *coding]
    last = coding[-1].outputs[0]
    sub = Graph(nodes=nodes, constants=graph.constants, inputs=[TensorInfo(start, (1, 1))],
                outputs=[TensorInfo(last, (1, 1))], opset=graph.opset, qonnx_opset=graph.qonnx_opset)
    inputs = np.array([-1, 1]) if codes.dtype == BIPOLAR else np.arange(codes.lo, codes.hi + 1)
    table = quantizer.codes_from_output(
        execute(sub, {start: source.output_from_codes(inputs).reshape(-1, 1)})[last]).reshape(-1).astype(np.int64)
    out_dtype = BIPOLAR if quantizer.dtype == BIPOLAR else smallest_datatype(table.min(), table.max())
    out = graph.fresh_name(f"{quantizer.name}_codes")
    graph.datatypes[out] = out_dtype
    lut = Node("LookupTable", graph.fresh_name(f"{quantizer.name}_table"), [codes.tensor], [out],
               {"table": table.tolist(), "in_min": int(inputs[0]), "in_bipolar": int(codes.dtype == BIPOLAR)})
    stages.append(dict(kind="lut", name=lut.name, table=table, in_dtype=codes.dtype, out_dtype=out_dtype,
                       source=[n.name for n in nodes]))
    return [lut], _Codes(out, int(table.min()), int(table.max()), out_dtype, quantizer)


def _lower_last_layer(graph, node, codes, following, stages) -> list[Node]:
    linear = _linear(graph, node, codes)
    lo, hi = _acc_range(linear.weights, codes.lo, codes.hi)
    acc_dtype = smallest_datatype(lo.min(), hi.max())
    mm_node, acc = _add_matmul(graph, node, codes, linear, linear.weights, lo, hi)
    stages.append(dict(kind="mvau", name=node.name, weights=linear.weights, in_dtype=codes.dtype,
                       weight_dtype=linear.weight_dtype, thresholds=None, out_dtype=acc_dtype, out_bias=0,
                       acc_lo=lo, acc_hi=hi))
    nodes = [mm_node]
    if np.any(linear.offset):
        centered = graph.fresh_name(f"{acc}_centered")
        nodes.append(Node("Sub", graph.fresh_name(f"{node.name}_zero_point"),
                          [acc, graph.add_constant(f"{node.name}_offset", linear.offset.astype(np.float32))], [centered]))
        acc = centered
    if node.op_type == "MatMulInteger":
        nodes.append(Node("Cast", graph.fresh_name(f"{node.name}_to_int32"), [acc], [node.outputs[0]],
                          {"to": TensorProto.INT32}))
        scale = np.ones(linear.weights.shape[0])
    else:
        scale = np.float32(linear.scale)
        nodes.append(Node("Mul", graph.fresh_name(f"{node.name}_rescale"),
                          [acc, graph.add_constant(f"{node.name}_scale", scale)], [node.outputs[0]]))
    graph.meta["boundary"] = dict(tensor=node.outputs[0], scale=np.asarray(scale, np.float64), offset=linear.offset)
    return nodes + list(following)


def _dequantize_tail(graph: Graph, codes: _Codes, rest: list[Node]) -> list[Node]:
    """The hardware ends in a quantizer: the host turns its codes into the quantizer's output."""
    quantizer = codes.quantizer
    nodes = []
    if quantizer.codes_tensor is None:
        value = codes.tensor
        zero = _scalar(quantizer.zero_point, "zero point", quantizer)
        if zero:
            centered = graph.fresh_name(f"{value}_centered")
            nodes.append(Node("Sub", graph.fresh_name(f"{quantizer.name}_zero_point"),
                              [value, graph.add_constant(f"{quantizer.name}_zp", np.float32(zero))], [centered]))
            value = centered
        nodes.append(Node("Mul", graph.fresh_name(f"{quantizer.name}_dequant"),
                          [value, graph.add_constant(f"{quantizer.name}_out_scale",
                                                     np.float32(_scalar(quantizer.scale, "scale", quantizer)))],
                          [quantizer.output]))
        graph.meta["boundary"] = dict(tensor=quantizer.output, scale=quantizer.scale, offset=quantizer.zero_point)
    else:
        to = {np.int8: TensorProto.INT8, np.uint8: TensorProto.UINT8}[quantizer.storage]
        nodes.append(Node("Cast", graph.fresh_name(f"{quantizer.name}_to_storage"), [codes.tensor],
                          [quantizer.codes_tensor], {"to": to}))
        nodes += quantizer.nodes[quantizer.n_coding:]
        graph.meta["boundary"] = dict(tensor=quantizer.codes_tensor, scale=np.float64(1), offset=np.float64(0))
    return nodes + rest

