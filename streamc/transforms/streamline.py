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

from dataclasses import dataclass, replace
from fractions import Fraction

import numpy as np
from onnx import TensorProto

from ..datatypes import BIPOLAR, DataType, datatype_of_values, smallest_datatype
from ..errors import FrontendError, LoweringError
from ..execute import execute, tensor_shapes
from ..reference import run_node, window_geometry
from ..requant_fit import fit_requant
from ..rtl.requant import Requant
from ..ir import Graph, Node, TensorInfo
from .tidy import SHAPE_OPS, quant_datatype

QUANTIZER_OPS = frozenset({"Quant", "BipolarQuant", "QuantizeLinear", "Trunc"})
LINEAR_OPS = frozenset({"MatMul", "MatMulInteger", "Conv", "ConvInteger"})
#: Linear ops on integer codes (the integer-operator dialect): their output is the int32 accumulator.
INTEGER_LINEAR_OPS = frozenset({"MatMulInteger", "ConvInteger"})
CONV_OPS = frozenset({"Conv", "ConvInteger"})
#: Ops between a quantizer and the next linear layer that act on codes as on values: shape ops, and
#: max pooling (the quantizer is monotonic, so the max of codes is the code of the max; a ReduceMax
#: over the spatial axes is a global max pool, as the dynamo exporter writes AdaptiveMaxPool2d(1)).
CODE_OPS = SHAPE_OPS | {"MaxPool", "ReduceMax"}
#: Ops allowed between a linear layer and its quantizer: each is monotonic in its dynamic input.
MONOTONIC_OPS = frozenset({"Add", "Sub", "Mul", "Div", "BatchNormalization", "Relu", "Clip", "Max", "Min",
                           "Neg", "Identity", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Cast",
                           "Tanh", "Sigmoid", "Erf"})
#: Averages mix a window of codes: a linear op of their own, not lowered yet.
AVERAGING_OPS = frozenset({"AveragePool", "GlobalAveragePool", "ReduceMean"})
#: Quantizers may sit inside a monotonic chain too: thresholds absorb all of it.
ABSORBABLE_OPS = MONOTONIC_OPS | QUANTIZER_OPS | {"DequantizeLinear", "Round"}
#: Up to this many thresholds per channel (a 4-bit output) comparators are cheaper than a multiplier.
MAX_THRESHOLDS = 15
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
    dtype: DataType | None    # None: the codes are not clipped (Trunc version 1)
    storage: type = np.float32  # numpy type of the codes tensor, where the model has one
    label: str | None = None  # what messages call codes that several quantizers made (a Concat of them)

    @property
    def output(self) -> str:
        return self.nodes[-1].outputs[0] if self.nodes else self.codes_tensor

    @property
    def float_output(self) -> str | None:
        """The dequantized float tensor a MatMul may read, if the model has one."""
        return None if self.codes_tensor is not None and len(self.nodes) == self.n_coding else self.output

    @property
    def name(self) -> str:
        if self.label is not None:
            return self.label
        return self.nodes[0].name if self.nodes else self.codes_tensor

    @property
    def per_channel(self) -> bool:
        """Whether scale or zero point differ between channels (they are then shaped (1, C, 1, ...))."""
        return self.scale.ndim > 0 or self.zero_point.ndim > 0

    def codes_from_output(self, value: np.ndarray) -> np.ndarray:
        """Codes from the value of the last coding node's output."""
        if self.codes_tensor is not None:
            return value.astype(np.float64)
        return np.rint(value.astype(np.float64) / self.scale + self.zero_point)

    def output_from_codes(self, codes: np.ndarray) -> np.ndarray:
        """The value the coding nodes' output has for given codes (the model's own dtype and formula)."""
        if self.codes_tensor is not None:
            return codes.astype(self.storage)
        zero, scale = self.zero_point.astype(np.float32), self.scale.astype(np.float32)
        return ((codes.astype(np.float32) - zero) * scale).astype(np.float32)

    def levels(self, reached: np.ndarray) -> np.ndarray:
        """Every code the quantizer can output; ``reached`` are codes seen at the accumulator range ends,
        which bound a quantizer that does not clip (``Trunc`` version 1)."""
        if self.dtype is None:
            return np.arange(int(reached.min()), int(reached.max()) + 1)
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
    if len(graph.inputs) != 1 or len(graph.outputs) != 1:
        raise LoweringError(f"streamc compiles models with one input and one output; this one has "
                            f"{len(graph.inputs)} inputs and {len(graph.outputs)} outputs")
    graph.meta["shapes"] = tensor_shapes(graph)
    _explicit_pads(graph)
    lowering = _Lowering(graph)
    lowering.run()
    graph.nodes = lowering.head + lowering.body + lowering.tail
    graph.remove_unused_constants()
    del graph.meta["shapes"]  # of the graph before streamlining
    graph.meta.update(hw_input=lowering.hw_input, hw_output=lowering.hw_output, stages=lowering.stages,
                      head_count=len(lowering.head), tail_count=len(lowering.tail))
    return graph


class _Lowering:
    """One walk over the graph in topological order, from the first activation quantizer on.

    Every tensor that carries integer codes is kept in ``available`` with its codes and whether the
    model holds it as dequantized floats or as the codes themselves. A linear layer, an average or a
    residual ``Add`` starts a *segment*: itself and the ops after it up to the next hardware op, join
    or branch; the quantizers in the segment give its output codes. Shape ops, max pools and
    ``Concat`` act on codes directly. Ops that feed no hardware form the host tail.
    """

    def __init__(self, graph: Graph):
        self.graph = graph
        self.head: list[Node] = []
        self.body: list[Node] = []
        self.tail: list[Node] = []
        self.stages: list[dict] = []
        self.available: dict[str, tuple[_Codes, bool]] = {}   # model tensor -> (codes, holds floats)
        self.done: set[int] = set()
        self.hw_input = self.hw_output = None
        self.feeds_hardware = _feeding_hardware(graph)

    def run(self) -> None:
        self._lower_head()
        for node in self.graph.nodes:
            if id(node) in self.done:
                continue
            if not self.feeds_hardware[id(node)] and self.hw_output is not None:
                self.tail.append(node)
                continue
            dynamic = [t for t in node.inputs if t and not self.graph.is_constant(t)]
            missing = [t for t in dynamic if t not in self.available]
            if missing:
                raise LoweringError(f"{node.describe()} reads {missing[0]!r}, which is not the output of an activation "
                                    "quantizer; streamc needs quantized activations between hardware layers")
            if node.op_type in LINEAR_OPS | AVERAGING_OPS:
                if len(dynamic) > 1:
                    raise LoweringError(f"{node.describe()}: its weight {dynamic[1]!r} is computed by the network; "
                                        "streamc needs constant weights (initializers, possibly quantized)")
                self._lower_segment(node, [self.available[dynamic[0]]])
            elif node.op_type == "Add" and len(dynamic) == 2:
                self._lower_segment(node, [self.available[t] for t in dynamic])
            elif node.op_type == "Concat":
                self._lower_concat(node, dynamic)
            elif node.op_type in CODE_OPS and len(dynamic) == 1:
                self._lower_code_op(node, *self.available[dynamic[0]])
            elif len(dynamic) == 1 and _reaches_quantizer(self.graph, node):
                self._lower_requantization(node, dynamic[0])
            else:
                raise LoweringError(f"{node.describe()} follows quantizer "
                                    f"{self.available[dynamic[0]][0].quantizer.name!r}; streamc expects a MatMul, Gemm, "
                                    "MatMulInteger, Conv, ConvInteger, average pool, residual Add, Concat, a shape op "
                                    "or MaxPool there, or a quantizer after elementwise ops")
        if self.hw_output is None:
            raise LoweringError("the model ends with shape or pooling ops after its last quantizer")
        if all(stage["kind"] == "alias" for stage in self.stages):
            floats = [n for n in self.graph.nodes if n.op_type in LINEAR_OPS - INTEGER_LINEAR_OPS]
            detail = (f"{floats[0].describe()} has float weights; quantize them (a Quant, BipolarQuant or "
                      "DequantizeLinear on the weight tensor)" if floats else "there is no linear layer after it")
            raise LoweringError(f"nothing to put in hardware after the input quantizer: {detail}")

    # -- the head: float input to the first codes --------------------------------------------------------------
    def _lower_head(self) -> None:
        graph = self.graph
        prefix = _prefix(graph)
        stop = len(prefix)
        first_hw = next((i for i, n in enumerate(prefix) if n.op_type in LINEAR_OPS | AVERAGING_OPS), None)
        if first_hw is not None:
            stop = first_hw
        starts = [i for i, n in enumerate(prefix[:stop]) if n.op_type in QUANTIZER_OPS]
        if starts:
            quantizer = _quantizer_at(graph, prefix, starts[-1])
            self.head = prefix[:starts[-1] + quantizer.n_coding]
            consumed = prefix[:starts[-1] + len(quantizer.nodes)]
        elif first_hw is not None:
            quantizer = _integer_input(graph, prefix[first_hw])
            consumed = []
        else:
            raise LoweringError("the model has no MatMul/Gemm/MatMulInteger/Conv/ConvInteger after its input quantizer: "
                                "nothing to put in hardware")
        codes, coding_nodes = _head_codes(graph, quantizer)
        self.head += coding_nodes
        self.hw_input = codes.tensor
        self.done |= {id(n) for n in consumed}
        self._publish(codes)

    def _publish(self, codes: _Codes) -> None:
        """Make a quantizer's outputs available; a quantizer that feeds no hardware ends it."""
        quantizer = codes.quantizer
        if quantizer.float_output is not None:
            self.available[quantizer.float_output] = (codes, True)
        if quantizer.codes_tensor is not None:
            self.available[quantizer.codes_tensor] = (codes, False)
        outputs = {quantizer.output, quantizer.codes_tensor} - {None}
        if quantizer.nodes and not any(self._tensor_feeds_hardware(t) for t in outputs):
            self._end_hardware(codes.tensor, _dequantize_tail(self.graph, codes, []))

    def _tensor_feeds_hardware(self, tensor: str) -> bool:
        return any(self.feeds_hardware[id(c)] for c in self.graph.consumers(tensor))

    def _end_hardware(self, tensor: str, tail_nodes: list[Node]) -> None:
        if self.hw_output is not None:
            raise LoweringError(f"the hardware would end twice, at {self.hw_output!r} and at {tensor!r}; streamc "
                                "compiles networks whose branches join again before the output")
        self.hw_output = tensor
        self.tail += tail_nodes

    # -- ops on codes --------------------------------------------------------------------------------------------
    def _lower_code_op(self, node: Node, codes: _Codes, floats: bool) -> None:
        """Copy a shape op or max pool onto the codes; record what hardware needs of it."""
        graph = self.graph
        codes = _Codes(codes.tensor, codes.lo, codes.hi, codes.dtype, _through_code_op(graph, node, codes.quantizer))
        out = graph.fresh_name(f"{node.outputs[0]}_codes")
        copy = Node(node.op_type, graph.fresh_name(f"{node.name}_codes"), [codes.tensor, *node.inputs[1:]], [out],
                    dict(node.attrs))
        graph.datatypes[out] = codes.dtype
        if (node.op_type in SHAPE_OPS and codes.tensor == self.hw_input and len(graph.consumers(node.inputs[0])) == 1
                and not any(self.hw_input in stage["inputs"] for stage in self.stages)):
            # A shape op on the input's codes (an NHWC model's Transpose) runs on the host, last in the head: the
            # stream then starts in the order the first layer reads.
            self.head.append(copy)
            self.hw_input = out
            self.done.add(id(node))
            self.available[node.outputs[0]] = (_Codes(out, codes.lo, codes.hi, codes.dtype, codes.quantizer), floats)
            return
        self.body.append(copy)
        shape, out_shape = graph.meta["shapes"][node.inputs[0]], graph.meta["shapes"][node.outputs[0]]
        if node.op_type == "ReduceMax":
            _check_global(graph, node, shape, "a global max pool")
            spatial = len(shape) - 2
            self.stages.append(dict(kind="maxpool", name=node.name, inputs=[codes.tensor], output=out,
                                    in_shape=shape[1:], attrs={"kernel_shape": list(shape[2:])}, dtype=codes.dtype,
                                    out_shape=(shape[1], *[1] * spatial)))
        elif node.op_type == "MaxPool":
            self.stages.append(dict(kind="maxpool", name=node.name, inputs=[codes.tensor], output=out,
                                    in_shape=shape[1:], attrs=dict(node.attrs), dtype=codes.dtype,
                                    out_shape=out_shape[1:]))
        else:
            perm = None
            if node.op_type == "Transpose":
                perm = list(node.attrs.get("perm", range(len(shape) - 1, -1, -1)))
                if perm[0] != 0:
                    raise LoweringError(f"{node.describe()}: it moves the batch axis (perm {perm}); streamc streams "
                                        "one frame at a time")
            self.stages.append(dict(kind="alias", name=node.name, inputs=[codes.tensor], output=out, perm=perm))
        self.done.add(id(node))
        self.available[node.outputs[0]] = (_Codes(out, codes.lo, codes.hi, codes.dtype, codes.quantizer), floats)

    def _lower_concat(self, node: Node, tensors: list[str]) -> None:
        graph = self.graph
        parts = [self.available[t] for t in tensors]
        shapes = [graph.meta["shapes"][t] for t in tensors]
        axis = node.attrs.get("axis")
        if axis is None or axis % len(shapes[0]) != 1:
            raise LoweringError(f"{node.describe()}: Concat on axis {axis} is not supported; on channels (axis 1) it is")
        first = parts[0][0].quantizer
        for codes, floats in parts:
            if floats != parts[0][1]:
                raise LoweringError(f"{node.describe()}: it joins the dequantized values of quantizer {first.name!r} "
                                    f"with the codes of {codes.quantizer.name!r}; streamc concatenates one or the other")
        # Each input keeps its own scales: the concatenated codes have those of their channels, one per channel
        # where they differ.
        scales = np.concatenate([_channel_values(c.quantizer.scale, s[1]) for (c, _), s in zip(parts, shapes)])
        zeros = np.concatenate([_channel_values(c.quantizer.zero_point, s[1]) for (c, _), s in zip(parts, shapes)])
        if np.unique(scales).size > 1 or np.unique(zeros).size > 1:
            dequantizing = [c.quantizer.name for c, _ in parts if c.quantizer.codes_tensor is not None]
            if dequantizing:
                # Values are read through the first input's DequantizeLinear, with its one scale.
                raise LoweringError(f"{node.describe()}: its inputs come from quantizers with different scales or zero "
                                    f"points, {dequantizing[0]!r} among them a QuantizeLinear; streamc concatenates "
                                    "QuantizeLinear codes of one scale (per-channel scales from QONNX quantizers)")
            rank = len(graph.meta["shapes"][node.outputs[0]])
            channel_shape = (1, len(scales)) + (1,) * (rank - 2)
            names = ", ".join(repr(c.quantizer.name) for c, _ in parts)
            first = replace(first, scale=scales.reshape(channel_shape), zero_point=zeros.reshape(channel_shape),
                            label=f"{names} (joined by {node.name!r})")
        lo, hi = min(c.lo for c, _ in parts), max(c.hi for c, _ in parts)
        dtype = parts[0][0].dtype if all(c.dtype == parts[0][0].dtype for c, _ in parts) else smallest_datatype(lo, hi)
        out = graph.fresh_name(f"{node.outputs[0]}_codes")
        graph.datatypes[out] = dtype
        self.body.append(Node("Concat", graph.fresh_name(f"{node.name}_codes"), [c.tensor for c, _ in parts], [out],
                              dict(node.attrs)))
        self.stages.append(dict(kind="concat", name=node.name, inputs=[c.tensor for c, _ in parts], output=out,
                                channels=tuple(s[1] for s in shapes), pixels=int(np.prod(shapes[0][2:], dtype=int)),
                                dtype=dtype, in_dtypes=[c.dtype for c, _ in parts]))
        self.done.add(id(node))
        self.available[node.outputs[0]] = (_Codes(out, lo, hi, dtype, first), parts[0][1])

    def _lower_requantization(self, node: Node, tensor: str) -> None:
        """Elementwise ops and a quantizer on codes, with no linear layer before them: a lookup table, or
        nothing where the quantizer gives the codes back. Shape ops and max pools among the elementwise
        ops act on the table's output codes (elementwise ops commute with shape ops, and with a max
        where the table does not decrease)."""
        graph = self.graph
        codes, floats = self.available[tensor]
        body = _segment(graph, node)
        start, quantizer = _units(graph, body, 0, len(body))[0]
        between = body[:start]
        moved = [n for n in between if n.op_type in CODE_OPS]
        source = codes.quantizer
        same = (not between and quantizer.dtype is not None and quantizer.dtype.min <= codes.lo
                and codes.hi <= quantizer.dtype.max
                and np.array_equal(quantizer.scale, source.scale)
                and np.array_equal(quantizer.zero_point, source.zero_point))
        if same:
            result = _Codes(codes.tensor, codes.lo, codes.hi, codes.dtype, quantizer)
        else:
            if codes.dtype != BIPOLAR:  # a table has an entry for every code the stream's type holds
                codes = _Codes(codes.tensor, codes.dtype.min, codes.dtype.max, codes.dtype, source)
            table = _table(graph, codes, between, quantizer, graph.meta["shapes"][tensor], reads=(tensor, floats))
            if table is None:
                raise LoweringError(f"the elementwise ops from {node.describe()} to quantizer {quantizer.name!r} "
                                    "differ within a channel (a constant per pixel); streamc builds a lookup table "
                                    "for every channel, or one for all")
            pools = [n for n in moved if n.op_type == "MaxPool"]
            if pools and np.any(np.diff(table, axis=-1) < 0):
                raise LoweringError(f"{pools[0].describe()} lies among elementwise ops that decrease before quantizer "
                                    f"{quantizer.name!r}; streamc takes a max pool there only where they do not")
            nodes, result = _lower_lookup_table(graph, codes, table, quantizer, self.stages)
            self.body += nodes
        for op in moved:
            self._lower_code_op(op, result, floats)
            result = self.available[op.outputs[0]][0]
        self.done |= {id(n) for n in body[:start + len(quantizer.nodes)]}
        self._publish(_Codes(result.tensor, result.lo, result.hi, result.dtype, quantizer))

    # -- segments: a linear layer, an average or a residual Add, up to its quantizer ----------------------------
    def _lower_segment(self, node: Node, inputs: list[tuple[_Codes, bool]]) -> None:
        graph = self.graph
        body = _segment(graph, node)
        units = _units(graph, body, 1, len(body))
        join = node.op_type == "Add"
        if not join:
            codes, floats = inputs[0]
            _check_linear_input(node, floats)
        if not units:
            following = [c for c in graph.consumers(body[-1].outputs[0]) if self.feeds_hardware[id(c)]]
            if join or following:
                after = following[0] if following else body[-1]
                raise LoweringError(f"{after.describe()} follows {node.describe()} with no activation quantizer "
                                    "between them; streamc needs quantized activations between linear layers")
            hw_nodes, tail_nodes = _lower_last_layer(graph, node, codes, body[1:], self.stages)
            self.done |= {id(n) for n in body}
            self.body += hw_nodes
            self._end_hardware(hw_nodes[-1].outputs[0], tail_nodes)
            return
        first_start = units[0][0]
        bad = [n for n in body[1:first_start] if n.op_type not in MONOTONIC_OPS]
        if bad:
            raise LoweringError(
                f"{bad[0].describe()} lies between {node.describe()} and quantizer {units[0][1].name!r}; supported "
                f"there: {', '.join(sorted(MONOTONIC_OPS))} (any elementwise op is supported between two quantizers)")
        last_start, last_quantizer = units[-1]
        if join:
            layer_nodes, codes = _lower_add(graph, node, inputs, body[1:last_start], last_quantizer, self.stages)
        else:
            layer_nodes, codes = _lower_linear(graph, node, codes, body, units, self.stages)
        self.body += layer_nodes
        position = last_start + len(last_quantizer.nodes)
        self.done |= {id(n) for n in body[:position]}
        self._publish(codes)

def _through_code_op(graph: Graph, node: Node, quantizer: _Quantizer) -> _Quantizer:
    """What the codes stand for after a shape op or max pool.

    A max of codes is the code of the max where the scale is positive, channel by channel. A shape op keeps
    per-channel scales where channels stay on axis 1 (a Flatten after a global pool): they are reshaped to the
    output's rank. Elsewhere (a Flatten of an image into a dense layer) the channels mix."""
    if node.op_type in ("MaxPool", "ReduceMax"):
        if not np.all(quantizer.scale > 0):
            raise LoweringError(f"{node.describe()}: quantizer {quantizer.name!r} has a scale that is not positive in "
                                "every channel, so the max of its codes is not the code of the max; streamc takes a "
                                "max pool of codes with positive scales")
        return quantizer
    if not quantizer.per_channel:
        return quantizer
    in_shape, out_shape = graph.meta["shapes"][node.inputs[0]], graph.meta["shapes"][node.outputs[0]]
    moves = node.op_type == "Transpose" and list(node.attrs.get("perm", []))[:2] != [0, 1]
    if moves or len(out_shape) < 2 or out_shape[1] != in_shape[1] or int(np.prod(out_shape[2:], dtype=int)) != int(
            np.prod(in_shape[2:], dtype=int)):
        raise LoweringError(
            f"{node.describe()}: it moves the channels of codes with per-channel scales (quantizer {quantizer.name!r}) "
            "where the next layer would mix them; per-channel activation scales are supported into depthwise "
            "convolutions, pools, adds and concats, not into layers that mix channels")
    shape = (1, out_shape[1]) + (1,) * (len(out_shape) - 2)
    return replace(quantizer, scale=quantizer.scale.reshape(shape) if quantizer.scale.ndim else quantizer.scale,
                   zero_point=quantizer.zero_point.reshape(shape) if quantizer.zero_point.ndim else quantizer.zero_point)


def _feeding_hardware(graph: Graph) -> dict[int, bool]:
    """For each node: is it, or does it feed, a linear layer, an average or a residual Add?

    A MatMul or Conv with float (unquantized) weights after the last quantized layer, such as a
    classifier head left in float, is not hardware: it stays on the host with the tail."""
    feeds: dict[int, bool] = {}
    for node in reversed(graph.nodes):
        dynamic = [t for t in node.inputs if t and not graph.is_constant(t)]
        later = any(feeds[id(c)] for t in node.outputs for c in graph.consumers(t))
        if node.op_type in LINEAR_OPS - INTEGER_LINEAR_OPS and node.inputs[1] not in graph.quantized and not later:
            feeds[id(node)] = False
            continue
        hardware = node.op_type in LINEAR_OPS | AVERAGING_OPS or (node.op_type == "Add" and len(dynamic) == 2)
        feeds[id(node)] = hardware or later
    return feeds


def _prefix(graph: Graph) -> list[Node]:
    """The chain of nodes from the input, up to its first branch or join."""
    chain, current = [], graph.inputs[0].name
    while True:
        consumers = graph.consumers(current)
        if len(consumers) != 1:
            break
        node = consumers[0]
        if [t for t in node.inputs if t and not graph.is_constant(t)] != [current] or not node.outputs:
            break
        chain.append(node)
        current = node.outputs[0]
    return chain


def _segment(graph: Graph, node: Node) -> list[Node]:
    """``node`` and the chain after it, up to the next hardware op, join or branch, or up to a shape op
    or max pool after a quantizer: those act on its codes."""
    chain, current = [node], node.outputs[0]
    quantized = node.op_type in QUANTIZER_OPS
    while True:
        consumers = graph.consumers(current)
        if len(consumers) != 1:
            break
        after = consumers[0]
        dynamic = [t for t in after.inputs if t and not graph.is_constant(t)]
        if dynamic != [current] or after.op_type in LINEAR_OPS | AVERAGING_OPS | {"Concat"}:
            break
        if quantized and after.op_type in CODE_OPS:
            break
        quantized = quantized or after.op_type in QUANTIZER_OPS
        chain.append(after)
        current = after.outputs[0]
    return chain


def _reaches_quantizer(graph: Graph, node: Node) -> bool:
    """Whether the chain from ``node`` meets a quantizer before the next hardware op, join or branch."""
    body = _segment(graph, node)
    return bool(_units(graph, body, 0, len(body)))


def _lower_linear(graph, node, codes, body, units, stages) -> tuple[list[Node], _Codes]:
    """A linear layer or average up to its last quantizer: thresholds, or thresholds and a lookup table."""
    first_start, first_quantizer = units[0]
    last_start, last_quantizer = units[-1]
    after_first = body[first_start + len(first_quantizer.nodes):last_start]
    # Thresholds absorb a monotonic chain up to the last quantizer; a lookup table after the first
    # quantizer takes any elementwise function. The first is exact for monotonic chains, the
    # second is cheaper where only the first quantizer's thresholds fit a requantization.
    whole = (_thresholded(graph, node, codes, body[1:last_start], last_quantizer)
             if all(n.op_type in ABSORBABLE_OPS for n in after_first) else None)
    split, table = None, None
    if len(units) > 1 and (whole is None or not whole.cheap):
        split = _thresholded(graph, node, codes, body[1:first_start], first_quantizer)
        # A table has an entry for every code the stream's type holds, reached or not.
        split_codes = _Codes("", split.out_dtype.min, split.out_dtype.max, split.out_dtype, first_quantizer)
        # A table per channel where the ops differ per channel (a bias after the product's quantizer).
        table = _table(graph, split_codes, after_first, last_quantizer,
                       (1, split.weights.shape[0]) + (1,) * split.linear.spatial)
        if table is None and whole is None:
            raise LoweringError(
                f"the elementwise ops between quantizers {first_quantizer.name!r} and {last_quantizer.name!r} differ "
                "within a channel (a constant per pixel) and are not monotonic; streamc builds a lookup table for "
                "every channel, or one for all")
        if table is None or (whole is not None and not split.cheap):
            split = None
    if split is None:
        return _emit_thresholded_layer(graph, node, codes, whole, stages)
    layer_nodes, codes = _emit_thresholded_layer(graph, node, codes, split, stages)
    table_nodes, codes = _lower_lookup_table(graph, codes, table, last_quantizer, stages)
    return layer_nodes + table_nodes, codes


def _lower_add(graph, node, reads: list[tuple[_Codes, bool]], following, quantizer, stages) -> tuple[list[Node], _Codes]:
    """A residual ``Add`` of two quantized branches up to its quantizer: ``t = ka*a + kb*b`` on the codes, then
    thresholds on ``t``. ``ka : kb`` is the ratio of the branches' scales, or the nearest small-integer ratio
    that gives the model's output for every pair of input codes (checked on all pairs). ``reads`` are the
    codes of each input and whether the model holds them as dequantized floats there."""
    inputs = [codes for codes, _ in reads]
    a, b = inputs
    shape = graph.meta["shapes"][node.outputs[0]]
    channels, spatial = shape[1], len(shape) - 2
    # One value per channel (the same in each where a branch is quantized per tensor): the add's integer
    # weighting is one pair for all channels, its thresholds are per channel.
    scales = [_channel_values(c.quantizer.scale, channels) for c in inputs]
    zeros = [_channel_values(c.quantizer.zero_point, channels) for c in inputs]
    for ka, kb in _scale_ratios(scales[0] / scales[1]):
        linear = _Linear(np.tile([ka, kb], (channels, 1)), datatype_of_values(np.array([ka, kb])),
                         scales[1] / kb, ka * zeros[0] + kb * zeros[1], spatial)
        lo, hi = np.full(channels, ka * a.lo + kb * b.lo), np.full(channels, ka * a.hi + kb * b.hi)
        try:
            layer = _threshold_layer(graph, node, linear, lo, hi, following, quantizer)
        except LoweringError:
            continue
        if np.any(layer.weights != linear.weights):
            raise LoweringError(f"{node.describe()}: the code of quantizer {quantizer.name!r} falls as the sum grows in "
                                "some channel; streamc supports residual Adds followed by rising functions")
        if _add_matches(graph, node, reads, (ka, kb), layer, following):
            break
    else:
        ratios = np.unique(scales[0] / scales[1])
        detail = (f"scales {scales[0][0]:g} and {scales[1][0]:g}" if ratios.size == 1 else
                  f"per-channel scale ratios from {ratios.min():g} to {ratios.max():g}; the hardware add weights its "
                  "inputs alike in every channel")
        raise LoweringError(f"{node.describe()}: no integer weighting of its inputs ({detail}) reproduces quantizer "
                            f"{quantizer.name!r} on every pair of input codes in every channel")
    kept, out_dtype = layer.thresholds, layer.out_dtype
    bipolar = out_dtype == BIPOLAR
    weighted = []
    for codes, weight in zip(inputs, (ka, kb)):
        out = graph.fresh_name(f"{node.name}_weighted")
        weighted.append(out)
        graph.datatypes[out] = smallest_datatype(min(codes.lo * weight, codes.hi * weight), max(codes.lo * weight, codes.hi * weight))
    total = graph.fresh_name(f"{node.name}_sum")
    graph.datatypes[total] = smallest_datatype(int(lo[0]), int(hi[0]))
    mt_out = graph.fresh_name(f"{quantizer.name}_codes")
    graph.datatypes[mt_out] = out_dtype
    attrs = {"out_dtype": out_dtype.name, "out_scale": 2.0 if bipolar else 1.0, "out_bias": float(layer.out_bias)}
    if spatial:
        attrs["data_layout"] = "NC" + "DHW"[3 - spatial:]
    nodes = [Node("Mul", graph.fresh_name(f"{node.name}_weight"),
                  [codes.tensor, graph.add_constant(f"{node.name}_weight", np.float32(weight))], [out])
             for codes, weight, out in zip(inputs, (ka, kb), weighted)]
    nodes.append(Node("Add", node.name, weighted, [total]))
    nodes.append(Node("MultiThreshold", graph.fresh_name(f"{quantizer.name}_thresholds"),
                      [total, graph.add_constant(f"{quantizer.name}_thresholds", kept.astype(np.float32))], [mt_out],
                      attrs))
    stages.append(dict(kind="add", name=node.name, inputs=[a.tensor, b.tensor], output=mt_out, weights=(ka, kb),
                       in_dtypes=[a.dtype, b.dtype], thresholds=kept, out_bias=layer.out_bias, out_dtype=out_dtype,
                       channels=channels, count=int(np.prod(shape[1:]))))
    out_hi = 1 if bipolar else layer.out_bias + kept.shape[1]
    return nodes, _Codes(mt_out, layer.out_bias, out_hi, out_dtype, quantizer)


#: Integer weightings an add with per-channel scale ratios tries: each is checked on every pair of codes.
MAX_ADD_WEIGHTINGS = 32


def _scale_ratios(ratios: np.ndarray):
    """Integer pairs ``(ka, kb)`` with ``ka / kb`` near the ratios ``scale_a / scale_b`` (one per channel),
    simplest first; where the channels' ratios differ, the best fractions for each channel in turn."""
    seen = set()
    for limit in (2 ** k for k in range(13)):
        for value in np.unique(ratios):
            ratio = Fraction(float(value)).limit_denominator(limit)
            pair = (ratio.numerator, ratio.denominator)
            if pair[0] > 0 and pair not in seen:
                seen.add(pair)
                yield pair
                if len(seen) >= MAX_ADD_WEIGHTINGS:
                    return


def _add_matches(graph, node, reads: list[tuple[_Codes, bool]], weights, layer: _Thresholded, following) -> bool:
    """Whether the thresholds on ``ka*a + kb*b`` give the model's codes for every pair of input codes
    (a random 2**20 of them where there are more)."""
    quantizer = layer.quantizer
    values = [_code_values(codes) for codes, _ in reads]
    pairs = np.stack(np.meshgrid(*values, indexing="ij"), axis=-1).reshape(-1, 2)
    if len(pairs) > 1 << 20:
        pairs = pairs[np.random.default_rng(0).choice(len(pairs), 1 << 20, replace=False)]
    channels = layer.thresholds.shape[0]
    spatial = len(graph.meta["shapes"][node.outputs[0]]) - 2
    feeds, fronts = {}, []
    for k, (tensor, (codes, floats)) in enumerate(zip(node.inputs, reads)):
        start, front = _reading(codes.quantizer, tensor, floats)
        fronts += front
        # Every channel gets the pair, turned into values with that channel's scale and zero point.
        feeds[start] = codes.quantizer.output_from_codes(
            np.repeat(pairs[:, k][:, None], channels, axis=1).reshape(len(pairs), channels, *[1] * spatial))
    coding = quantizer.nodes[:quantizer.n_coding]
    last = coding[-1].outputs[0]
    sub = Graph(nodes=[*fronts, node, *following, *coding], constants=graph.constants,
                inputs=[TensorInfo(t, (1, channels)) for t in feeds], outputs=[TensorInfo(last, (1, channels))],
                opset=graph.opset, qonnx_opset=graph.qonnx_opset)
    model = quantizer.codes_from_output(execute(sub, feeds)[last]).reshape(len(pairs), channels)
    total = pairs @ np.asarray(weights)
    counts = (total[:, None, None] >= layer.thresholds[None]).sum(axis=2)
    ours = np.where(counts > 0, 1, -1) if layer.out_dtype == BIPOLAR else counts + layer.out_bias
    return np.array_equal(model, ours)


def _units(graph: Graph, body: list[Node], start: int, end: int) -> list[tuple[int, _Quantizer]]:
    """The quantizers in ``body[start:end]``, each with the index it starts at."""
    units = []
    index = start
    while index < end:
        if body[index].op_type in QUANTIZER_OPS:
            quantizer = _quantizer_at(graph, body[:end], index)
            units.append((index, quantizer))
            index += len(quantizer.nodes)
        else:
            index += 1
    return units


def _integer_input(graph: Graph, linear: Node) -> _Quantizer:
    """An integer graph input read by a MatMulInteger or ConvInteger is the hardware's input as it is."""
    given = graph.inputs[0]
    storage = {TensorProto.INT8: np.int8, TensorProto.UINT8: np.uint8}.get(given.elem_type)
    if linear.op_type not in INTEGER_LINEAR_OPS or storage is None:
        raise LoweringError(f"{linear.describe()} reads an unquantized input; put an activation quantizer (Quant, "
                            "BipolarQuant or QuantizeLinear) before the first linear layer, or give an int8/uint8 "
                            "input to a MatMulInteger or ConvInteger")
    info = np.iinfo(storage)
    dtype = smallest_datatype(info.min, info.max)
    return _Quantizer([], 0, given.name, np.asarray(1.0), np.asarray(0.0), dtype, storage)


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
        quantizer = _Quantizer([node], 1, None, _channelwise(graph, node, scale, "scale"),
                               _channelwise(graph, node, zero, "zero point"), quant_datatype(node, bits))
        return quantizer if node.op_type == "BipolarQuant" else _with_relu(chain, index, quantizer)
    if node.op_type == "Trunc":
        quantizer = _trunc_quantizer(graph, node)
        quantizer = replace(quantizer, scale=_channelwise(graph, node, quantizer.scale, "scale"),
                            zero_point=_channelwise(graph, node, quantizer.zero_point, "zero point"))
        return _with_relu(chain, index, quantizer)
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
        # Its scale is what the codes stand for, whatever scale made them: onnxruntime's operator format
        # requantizes with its own multiplier and dequantizes with the output scale. With another zero
        # point it is an op on the codes.
        if np.array_equal(dq_zero if dq_zero is not None else 0, zero):
            nodes.append(after)
            scale = dq_scale
    # Per-axis parameters lie along the node's axis (1 by default), not where numpy would broadcast them.
    axis = nodes[-1].attrs.get("axis", 1)
    return _Quantizer(nodes, n_coding, nodes[n_coding - 1].outputs[0],
                      _channelwise(graph, node, scale, "scale", axis), _channelwise(graph, node, zero, "zero point", axis),
                      _clipped_datatype(lo, hi), storage)


def _with_relu(chain: list[Node], index: int, quantizer: _Quantizer) -> _Quantizer:
    """A QONNX quantizer and the ``Relu`` right after it, as one quantizer: with a positive scale and an
    integer zero point ``z``, the Relu of a value on the grid is on the grid too, its code ``max(c, z)``
    (Brevitas' ``Trunc`` then ``Relu`` before the next layer)."""
    following = chain[index + 1] if index + 1 < len(chain) else None
    zero = quantizer.zero_point
    if (following is None or following.op_type != "Relu" or following.inputs[0] != quantizer.output
            or not (quantizer.scale > 0).all() or not np.array_equal(zero, np.round(zero))):
        return quantizer
    dtype = quantizer.dtype
    if dtype is not None:
        lo, hi = max(dtype.min, int(zero.min())), dtype.max
        if lo >= hi:
            return quantizer
        dtype = _clipped_datatype(lo, hi)
    return replace(quantizer, nodes=[*quantizer.nodes, following], n_coding=2, dtype=dtype)


def _trunc_quantizer(graph: Graph, node: Node) -> _Quantizer:
    """``Trunc`` drops low bits of codes: version 1 keeps the input scale and does not clip, version 2
    (qonnx domain opset 2) has an output scale and clips to its output bit width."""
    values = [_constant(graph, t, node, "parameter") for t in node.inputs[1:]]
    if graph.qonnx_opset < 2:
        scale, zero = values[0], values[1]
        return _Quantizer([node], 1, None, np.asarray(scale, np.float64), np.asarray(zero, np.float64), None)
    scale, zero, _, out_scale, out_bits = values
    step = 2.0 ** np.round(np.log2(np.asarray(out_scale, np.float64) / scale))
    ends = np.array([-1e30, 1e30], np.float32)
    lo, hi = run_node("Quant", {"signed": node.attrs.get("signed", 1), "narrow": node.attrs.get("narrow", 0)},
                      [ends, np.float32(1), np.float32(0), np.asarray(out_bits, np.float32)])[0].astype(np.int64)
    return _Quantizer([node], 1, None, np.asarray(out_scale, np.float64), np.asarray(zero / step, np.float64),
                      _clipped_datatype(int(lo), int(hi)))


def _clipped_datatype(lo: int, hi: int) -> DataType:
    """The narrowest type holding ``[lo, hi]``, narrowed to exactly that range where it is not a whole type."""
    dtype = smallest_datatype(lo, hi)
    return dtype if (dtype.min, dtype.max) == (lo, hi) else DataType(dtype.name, lo, hi)


def _channelwise(graph: Graph, node: Node, value, what: str, axis: int | None = None) -> np.ndarray:
    """A quantizer's scale or zero point as one value (0-d), or one per channel shaped ``(1, C, 1, ...)`` like the
    tensor it quantizes, so that it broadcasts over codes laid out as the model's tensor. ``axis``: where a
    QuantizeLinear's 1-D per-axis parameter lies (ONNX does not broadcast it the numpy way)."""
    value = np.asarray(value, np.float64)
    unique = np.unique(value)
    if unique.size == 1:
        return np.asarray(unique[0])
    shape = tuple(graph.meta["shapes"][node.outputs[0]])
    rank = len(shape)
    if axis is not None and value.ndim == 1 and rank >= 2:
        value = value.reshape([-1 if k == axis % rank else 1 for k in range(rank)])
    try:
        full = np.broadcast_to(value, shape) if rank >= 2 else None
    except ValueError:
        full = None
    rows = None if full is None else np.moveaxis(full, 1, 0).reshape(shape[1], -1)
    if rows is None or not np.all(rows == rows[:, :1]):
        raise LoweringError(f"quantizer {node.name!r}: its {what} (shape {value.shape}) differs within a channel of its "
                            f"{shape} output; streamc supports one {what} per tensor or one per channel (axis 1)")
    return rows[:, 0].reshape((1, shape[1]) + (1,) * (rank - 2))


def _channel_values(value: np.ndarray, channels: int) -> np.ndarray:
    """A scale or zero point (0-d, or shaped (1, C, 1, ...)) as one value per channel, shape (C,)."""
    if value.ndim == 0:
        return np.full(channels, float(value))
    return value.reshape(-1).astype(np.float64)


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
        # One value, or one per channel shaped (1, C, 1, ...): either broadcasts over the quantizer's output.
        scale, zero = quantizer.scale.astype(np.float32), quantizer.zero_point.astype(np.float32)
        y = quantizer.output
        scaled = graph.fresh_name(f"{y}_scaled")
        nodes.append(Node("Div", graph.fresh_name(f"{quantizer.name}_codes_div"),
                          [y, graph.add_constant(f"{quantizer.name}_scale", scale)], [scaled]))
        if np.any(zero):
            shifted = graph.fresh_name(f"{y}_shifted")
            nodes.append(Node("Add", graph.fresh_name(f"{quantizer.name}_codes_zp"),
                              [scaled, graph.add_constant(f"{quantizer.name}_zero_point", zero)], [shifted]))
            scaled = shifted
        codes = graph.fresh_name(f"{y}_codes")
        nodes.append(Node("Round", graph.fresh_name(f"{quantizer.name}_codes_round"), [scaled], [codes]))
    else:
        codes = graph.fresh_name(f"{quantizer.codes_tensor}_float")
        nodes.append(Node("Cast", graph.fresh_name(f"{quantizer.name}_codes_cast"), [quantizer.codes_tensor], [codes],
                          {"to": TensorProto.FLOAT}))
    graph.datatypes[codes] = quantizer.dtype
    return _Codes(codes, quantizer.dtype.min, quantizer.dtype.max, quantizer.dtype, quantizer), nodes


def _check_linear_input(node: Node, floats: bool) -> None:
    """A MatMul, Conv or average must read dequantized values, a MatMulInteger or ConvInteger integer codes."""
    wants_floats = node.op_type not in INTEGER_LINEAR_OPS
    if floats != wants_floats:
        kind = "dequantized values" if wants_floats else "integer codes"
        raise LoweringError(f"{node.describe()} must read the {kind} of its input quantizer")


@dataclass
class _Linear:
    """A linear layer's integer weights and how its output follows from the accumulator."""

    weights: np.ndarray      # (MH, MW) integer, rows are output channels; a Conv's columns in (kh, kw, c) order
    weight_dtype: DataType
    scale: np.ndarray        # MatMul/Conv: per-channel float factor acc -> output; integer ops: unused
    offset: np.ndarray       # subtracted from acc: input zero point times the row sums
    spatial: int = 0         # a Conv's number of spatial dimensions
    depthwise: bool = False  # weights are (C, K): channel c's taps over its own input channel
    divisor: int = 0         # an average: the sum of float32 values, divided by the window size
    bias: np.ndarray | None = None   # a Conv's bias input, per output channel
    pad: int | None = None   # a padded window's pad code: the input zero point, which stands for 0.0

    def code_range(self, codes: "_Codes") -> tuple[int, int]:
        """The input codes the accumulator sums: the stream's, and the pad code where the window pads."""
        if self.pad is None:
            return codes.lo, codes.hi
        return min(codes.lo, self.pad), max(codes.hi, self.pad)

    def output(self, node: Node, acc: np.ndarray) -> np.ndarray:
        """What the model's linear node outputs for accumulator values ``acc`` (N, MH), in its layout."""
        if node.op_type in INTEGER_LINEAR_OPS:
            value = (acc - self.offset).astype(np.int32)
        elif self.bias is not None:  # as the reference convolves: in float64, bias added, rounded once
            value = ((acc - self.offset) * self.scale + self.bias).astype(np.float32)
        elif self.divisor:  # as the reference averages: in float64, rounded once to float32
            value = ((acc - self.offset) * self.scale.astype(np.float32).astype(np.float64) / self.divisor)
            value = value.astype(np.float32)
        else:
            value = np.float32(acc - self.offset) * np.float32(self.scale)
        return value.reshape(value.shape + (1,) * self.spatial)

    def channel_shape(self) -> tuple[int, ...]:
        """How a per-channel constant broadcasts against the node's output."""
        return (-1,) + (1,) * self.spatial


def _dense_kernel(kernel: np.ndarray, group: int) -> np.ndarray:
    """A grouped kernel (OC, C/group, *K) as the equal dense one (OC, C, *K), zero across groups.

    Exact, but a depthwise layer then multiplies C times more zeros than a vector unit would.
    """
    if group == 1:
        return kernel
    out_channels, per_group = kernel.shape[:2]
    dense = np.zeros((out_channels, per_group * group, *kernel.shape[2:]), dtype=kernel.dtype)
    for o in range(out_channels):
        g = o // (out_channels // group)
        dense[o, g * per_group:(g + 1) * per_group] = kernel[o]
    return dense


def _conv_linear(graph: Graph, node: Node, codes: _Codes) -> _Linear:
    weight = node.inputs[1]
    padded = any(node.attrs.get("pads", []))
    if node.op_type == "ConvInteger":
        # Codes in, the int32 accumulator of (x - x_zero_point) and (w - w_zero_point) out; it pads with x's
        # zero point.
        integer = _constant(graph, weight, node, "weight (w)").astype(np.float64)
        channels = integer.shape[0]
        zero_w = _constant(graph, node.inputs[3] if len(node.inputs) > 3 else "", node, "w zero point")
        if zero_w is not None:
            integer = integer - np.asarray(zero_w, np.float64).reshape(-1, *[1] * (integer.ndim - 1))
        x_zero = _constant(graph, node.inputs[2] if len(node.inputs) > 2 else "", node, "x zero point")
        if x_zero is not None and np.unique(x_zero).size != 1:
            raise LoweringError(f"{node.describe()}: a per-channel x zero point is not supported")
        in_zero = 0.0 if x_zero is None else float(np.unique(x_zero)[0])
        pad = int(in_zero) if padded else None
        channel_scale, in_scale, bias = np.ones(channels), 1.0, None
    else:
        if weight not in graph.quantized:
            raise LoweringError(f"{node.describe()}: its weight {weight!r} is not quantized; streamc needs integer "
                                "weights (a Quant, BipolarQuant or DequantizeLinear on the weight tensor)")
        q = graph.quantized[weight]
        channels = q.codes.shape[0]
        scale = q.scale.reshape(channels, -1)
        if not np.all(scale == scale[:, :1]):
            raise LoweringError(f"{node.describe()}: weight scales must be per tensor or per output channel")
        channel_scale = scale[:, 0]
        pad = _pad_code(node, codes, padded)
        # Each output channel sums the codes of its group's input channels, with their one scale and zero point.
        group, in_channels = node.attrs.get("group", 1), q.codes.shape[1] * node.attrs.get("group", 1)
        in_zero = _per_output(codes.quantizer, "zero_point", in_channels, group, channels, node)
        in_scale = _per_output(codes.quantizer, "scale", in_channels, group, channels, node)
        bias = _constant(graph, node.inputs[2], node, "bias") if len(node.inputs) > 2 and node.inputs[2] else None
        bias = None if bias is None else bias.astype(np.float64).reshape(channels)
        integer = q.codes.astype(np.float64) - q.zero_point
    if codes.dtype == BIPOLAR and pad is not None:
        raise LoweringError(f"{node.describe()}: a padded convolution of bipolar inputs pads with 0, which is not a "
                            "bipolar value; streamc supports unpadded convolutions of bipolar inputs")
    if not np.all(integer == np.rint(integer)):
        raise LoweringError(f"{node.describe()}: weight zero point is not an integer")
    group = node.attrs.get("group", 1)
    kernel = np.rint(integer).astype(np.int64)
    spatial = kernel.ndim - 2
    if group > 1 and group == channels and kernel.shape[1] == 1:
        # Depthwise: each channel its own taps, for a vector-vector unit.
        weights = kernel.reshape(channels, -1)
        return _Linear(weights, datatype_of_values(weights), in_scale * channel_scale, in_zero * weights.sum(axis=1),
                       spatial=spatial, depthwise=True, bias=bias, pad=pad)
    kernel = _dense_kernel(kernel, group)
    # (OC, C, *K) -> (OC, *K, C): the sliding window emits patches channel-fastest.
    weights = np.moveaxis(kernel, 1, -1).reshape(channels, -1)
    return _Linear(weights, datatype_of_values(weights), in_scale * channel_scale, in_zero * weights.sum(axis=1),
                   spatial=spatial, bias=bias, pad=pad)


#: Ops whose ``auto_pad`` :func:`_explicit_pads` writes out, and whether they pool.
_WINDOW_OPS = {"Conv": False, "ConvInteger": False, "MaxPool": True, "AveragePool": True}


def _explicit_pads(graph: Graph) -> None:
    """Write each window op's ``auto_pad`` as the pads onnxruntime applies for it (the odd one at the
    end for ``SAME_UPPER``, at the start for ``SAME_LOWER``), and a max pool's ``ceil_mode`` as the end
    padding its last windows reach into (a max ignores padding, which holds the smallest code): the
    lowering reads ``pads`` only."""
    for node in graph.nodes:
        ceil = node.op_type == "MaxPool" and bool(node.attrs.get("ceil_mode", 0))
        if node.op_type not in _WINDOW_OPS or (node.attrs.get("auto_pad", "NOTSET") == "NOTSET" and not ceil):
            continue
        shapes = graph.meta["shapes"]
        kernel = node.attrs.get("kernel_shape") or shapes[node.inputs[1]][2:]
        shape = shapes[node.inputs[0]]
        try:
            windows = window_geometry(node.attrs, np.zeros(shape), kernel, node.op_type,
                                      pooling=_WINDOW_OPS[node.op_type])
        except FrontendError as error:
            raise LoweringError(f"{node.describe()}: {error}") from error
        ends = windows.pads_end
        if ceil:
            # Just what the last window reaches (none past the image where a stride skips its end).
            ends = tuple(max(0, (count - 1) * stride + dilation * (k - 1) + 1 - size - begin)
                         for count, stride, dilation, k, size, begin in zip(windows.output, windows.strides,
                                                                             windows.dilations, windows.kernel,
                                                                             windows.input, windows.pads_begin))
        pads = [*windows.pads_begin, *ends]
        if min(pads) < 0:
            raise LoweringError(f"{node.describe()}: auto_pad {node.attrs['auto_pad']} with strides "
                                f"{list(windows.strides)} past the kernel {list(windows.kernel)} pads by {pads}, "
                                "cutting the input; streamc supports pads >= 0")
        node.attrs = {key: value for key, value in node.attrs.items()
                      if key not in ("auto_pad", "ceil_mode")} | {"pads": pads}


def _kernel_shape(graph: Graph, node: Node) -> tuple[int, ...]:
    """A Conv's or ConvInteger's kernel shape (OC, C/group, *K)."""
    weight = node.inputs[1]
    return graph.quantized[weight].codes.shape if node.op_type == "Conv" else graph.constants[weight].shape


def _per_output(quantizer: _Quantizer, what: str, in_channels: int, groups: int, out_channels: int,
                node: Node) -> np.ndarray:
    """The input scale or zero point each output channel's accumulator sums codes of, shape (OC,).

    Output channel ``o`` of a layer in ``groups`` groups reads the input channels of group ``o // (OC / groups)``
    (a dense layer: one group; depthwise and averages: one channel per group). That is exact where those channels
    share one value: the value then multiplies the channel's weight scale. A layer summing codes of different
    scales has no integer form."""
    value = getattr(quantizer, what)
    per_channel = _channel_values(value, in_channels)
    if per_channel.size != in_channels or in_channels % groups or out_channels % groups:
        raise LoweringError(f"{node.describe()}: quantizer {quantizer.name!r} has {per_channel.size} {what}s for "
                            f"{in_channels} input channels; streamc cannot tell which channel each belongs to")
    rows = per_channel.reshape(groups, -1)
    if not np.all(rows == rows[:, :1]):
        within = "" if groups == 1 else f" within each of its {groups} groups"
        raise LoweringError(
            f"quantizer {quantizer.name!r}: its {what.replace('_', ' ')} must be one value per tensor here "
            f"({node.describe()} mixes its input channels{within}, so its accumulator would sum codes of different "
            f"scales); it has {np.unique(per_channel).size} values; per-channel activation scales are supported into "
            "depthwise convolutions, pools, adds and concats (and grouped convolutions whose groups each have one "
            "scale), not into layers that mix channels")
    return np.repeat(rows[:, 0], out_channels // groups)


def _pad_code(node: Node, codes: _Codes, padded: bool) -> int | None:
    """The code a padded window fills in, the one for 0.0: the input's zero point; None without padding."""
    if not padded:
        return None
    zeros = np.unique(codes.quantizer.zero_point)
    if zeros.size != 1:
        raise LoweringError(f"{node.describe()}: it pads inputs whose zero points differ per channel (quantizer "
                            f"{codes.quantizer.name!r}), so 0.0 has a different code in each channel; streamc's "
                            "window pads every channel with one code (per-channel scales with one zero point work)")
    zero = float(zeros[0])
    if zero != round(zero):
        raise LoweringError(f"{node.describe()}: it pads inputs whose zero point ({zero:g}) is not an integer, so no "
                            "code stands for 0.0")
    return int(zero)


def _pool_window(graph: Graph, node: Node) -> dict:
    """An average's window: kernel, strides and pads, a global average's the whole image."""
    shape = graph.meta["shapes"][node.inputs[0]]
    spatial = len(shape) - 2
    if node.op_type == "AveragePool":
        if node.attrs.get("ceil_mode", 0):
            raise LoweringError(f"{node.describe()}: ceil_mode is not supported for an average pool (its last window "
                                "would divide by fewer inputs); streamc supports ceil_mode=0")
        pads = list(node.attrs.get("pads", [0] * 2 * spatial))
        if any(pads) and not node.attrs.get("count_include_pad", 0):
            raise LoweringError(f"{node.describe()}: a padded average pool that does not count the padding divides "
                                "by a different number at the borders; streamc supports count_include_pad=1 or no pads")
        return dict(kernel=tuple(node.attrs["kernel_shape"]), strides=tuple(node.attrs.get("strides", [1] * spatial)),
                    pads=pads, dilations=tuple(node.attrs.get("dilations", [1] * spatial)))
    if node.op_type == "ReduceMean":
        _check_global(graph, node, shape, "a global average pool")
    return dict(kernel=tuple(shape[2:]), strides=(1,) * spatial, pads=[0] * 2 * spatial, dilations=(1,) * spatial)


def _check_global(graph: Graph, node: Node, shape, meaning: str) -> None:
    """A reduction (ReduceMean, ReduceMax) must be over every spatial axis of its (N, C, *spatial) input."""
    axes = node.attrs.get("axes")
    if axes is None and len(node.inputs) > 1 and node.inputs[1]:
        axes = _constant(graph, node.inputs[1], node, "axes").tolist()
    if axes is None or sorted(a % len(shape) for a in axes) != list(range(2, len(shape))):
        raise LoweringError(f"{node.describe()}: {node.op_type} over axes {axes} is not supported; over every "
                            f"spatial axis ({meaning}) it is")


def _average_linear(graph: Graph, node: Node, codes: _Codes) -> _Linear:
    """An average pool as a depthwise layer of ones, whose output is the window's sum times scale / K."""
    channels = graph.meta["shapes"][node.inputs[0]][1]
    taps = int(np.prod(_pool_window(graph, node)["kernel"]))
    weights = np.ones((channels, taps), np.int64)
    # Each channel's sum times its own scale: exact with a scale per channel.
    in_scale = _per_output(codes.quantizer, "scale", channels, channels, channels, node)
    in_zero = _per_output(codes.quantizer, "zero_point", channels, channels, channels, node)
    pad = _pad_code(node, codes, any(_pool_window(graph, node)["pads"]))
    return _Linear(weights, datatype_of_values(weights), in_scale, in_zero * taps,
                   spatial=len(graph.meta["shapes"][node.outputs[0]]) - 2, depthwise=True, divisor=taps, pad=pad)


def _linear(graph: Graph, node: Node, codes: _Codes) -> _Linear:
    if node.op_type in AVERAGING_OPS:
        return _average_linear(graph, node, codes)
    weight = node.inputs[1]
    if node.op_type in CONV_OPS:
        return _conv_linear(graph, node, codes)
    shape = graph.meta["shapes"][node.inputs[0]]
    if len(shape) != 2:
        # The unit reads one vector per frame; the rows of a (N, R, K) input would each need one.
        raise LoweringError(f"{node.describe()}: its input has shape {tuple(shape)}; streamc maps a MatMul on "
                            "(batch, features) inputs, not on the last axis of a larger tensor (flatten before it, "
                            "or write it as a 1x1 Conv)")
    if node.op_type == "MatMul":
        if weight not in graph.quantized:
            raise LoweringError(f"{node.describe()}: its weight {weight!r} is not quantized; streamc needs integer "
                                "weights (a Quant, BipolarQuant or DequantizeLinear on the weight tensor)")
        q = graph.quantized[weight]
        codes_w, zero_w = q.codes, q.zero_point
        if codes_w.ndim != 2 or not np.all(q.scale == q.scale[:1]):
            raise LoweringError(f"{node.describe()}: weight scales must be per tensor or per output channel")
        w_scale = q.scale[0]
        in_scale = _per_output(codes.quantizer, "scale", codes_w.shape[0], 1, codes_w.shape[1], node)
        in_zero = _per_output(codes.quantizer, "zero_point", codes_w.shape[0], 1, codes_w.shape[1], node)
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
                lo: np.ndarray, hi: np.ndarray) -> tuple[list[Node], str]:
    """The integer linear node: MatMul on codes, or Conv on codes with the kernel restored to (OC, C, *K)
    (grouped per channel for depthwise layers and averages)."""
    acc = graph.fresh_name(f"{node.name}_acc")
    graph.datatypes[acc] = smallest_datatype(lo.min(), hi.max())
    front, codes_in = [], codes.tensor
    if linear.pad:  # ONNX pads with 0.0; the window pads with the code for 0.0
        pads = (node.attrs.get("pads") if node.op_type in CONV_OPS else _pool_window(graph, node)["pads"])
        spatial = len(pads) // 2
        codes_in = graph.fresh_name(f"{codes.tensor}_padded")
        graph.datatypes[codes_in] = codes.dtype
        front = [Node("Pad", graph.fresh_name(f"{node.name}_pad"),
                      [codes.tensor, graph.add_constant(f"{node.name}_pads",
                                                        np.array([0, 0, *pads[:spatial], 0, 0, *pads[spatial:]])),
                       graph.add_constant(f"{node.name}_pad_code", np.float32(linear.pad))], [codes_in])]
    if linear.depthwise:
        if node.op_type in CONV_OPS:
            taps, attrs = _kernel_shape(graph, node)[2:], dict(node.attrs)
        else:
            window = _pool_window(graph, node)
            taps = window["kernel"]
            attrs = dict(kernel_shape=list(taps), strides=list(window["strides"]), pads=list(window["pads"]),
                         dilations=list(window["dilations"]))
        if front:
            attrs.pop("pads")
        channels = len(weights)
        w_name = graph.add_constant(f"{node.name}_weight_int", weights.reshape(channels, 1, *taps).astype(np.float32))
        graph.datatypes[w_name] = datatype_of_values(weights)
        conv_out = graph.fresh_name(f"{node.name}_sum") if linear.spatial == 0 else acc
        nodes = [*front, Node("Conv", node.name, [codes_in, w_name], [conv_out], {**attrs, "group": channels})]
        if linear.spatial == 0:  # ReduceMean without keepdims: the model's output has no spatial axes
            nodes.append(Node("Flatten", graph.fresh_name(f"{node.name}_flatten"), [conv_out], [acc]))
        return nodes, acc
    if node.op_type in CONV_OPS:
        kernel = _kernel_shape(graph, node)
        channels = kernel[1] * node.attrs.get("group", 1)
        restored = np.moveaxis(weights.reshape(kernel[0], *kernel[2:], channels), -1, 1)
        w_name = graph.add_constant(f"{node.name}_weight_int", restored.astype(np.float32))
        graph.datatypes[w_name] = datatype_of_values(weights)
        attrs = {**node.attrs, "group": 1}
        if front:
            attrs.pop("pads")
        return [*front, Node("Conv", node.name, [codes_in, w_name], [acc], attrs)], acc
    w_name = graph.add_constant(f"{node.name}_weight_int", weights.T.astype(np.float32))
    graph.datatypes[w_name] = datatype_of_values(weights)
    return [Node("MatMul", node.name, [codes.tensor, w_name], [acc])], acc


@dataclass
class _Thresholded:
    """A linear layer whose output is a step function of its accumulator, before it enters the graph."""

    linear: _Linear
    weights: np.ndarray       # rows negated where the function falls
    lo: np.ndarray
    hi: np.ndarray
    thresholds: np.ndarray    # only the levels some channel can both miss and reach
    out_bias: int
    out_dtype: DataType
    quantizer: _Quantizer
    requant: Requant | None = None

    @property
    def cheap(self) -> bool:
        """Few comparators, or one multiplier proven equal to them."""
        return self.thresholds.shape[1] <= MAX_THRESHOLDS or self.requant is not None


def _thresholded(graph, node, codes, following, quantizer) -> _Thresholded:
    linear = _linear(graph, node, codes)
    return _threshold_layer(graph, node, linear, *_acc_range(linear.weights, *linear.code_range(codes)), following,
                            quantizer)


def _threshold_layer(graph, node, linear: _Linear, lo, hi, following, quantizer) -> _Thresholded:
    """Thresholds on the accumulator of ``linear`` that give the codes of ``quantizer`` after ``following``."""
    weights = linear.weights
    coding = quantizer.nodes[:quantizer.n_coding]
    last = coding[-1].outputs[0]
    sub = Graph(nodes=[*following, *coding], constants=graph.constants,
                inputs=[TensorInfo(node.outputs[0], (1, weights.shape[0]))],
                outputs=[TensorInfo(last, (1, weights.shape[0]))], opset=graph.opset, qonnx_opset=graph.qonnx_opset)

    def code_of(acc: np.ndarray) -> np.ndarray:
        y = execute(sub, {node.outputs[0]: linear.output(node, acc)})[last]
        if y.size != acc.size:
            raise LoweringError(f"the elementwise ops from {node.describe()} to quantizer {quantizer.name!r} differ "
                                "within a channel (a constant per pixel); streamc takes ops that are the same for "
                                "every pixel of a channel there")
        return quantizer.codes_from_output(y).reshape(acc.shape)

    at_ends = code_of(np.stack([hi, lo]))
    levels = quantizer.levels(at_ends)
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
    kept = thresholds[:, first:last_kept].astype(np.int64)
    out_bias = int(levels[first])
    out_dtype = BIPOLAR if bipolar else smallest_datatype(out_bias, out_bias + kept.shape[1])
    result = _Thresholded(linear, weights, lo, hi, kept, out_bias, out_dtype, quantizer)
    if kept.shape[1] > MAX_THRESHOLDS:
        result.requant = fit_requant(kept, lo, hi, out_bias)
    return result


def _emit_thresholded_layer(graph, node, codes, layer: _Thresholded, stages) -> tuple[list[Node], _Codes]:
    quantizer, kept, out_bias, out_dtype = layer.quantizer, layer.thresholds, layer.out_bias, layer.out_dtype
    bipolar = out_dtype == BIPOLAR
    mm_nodes, acc = _add_matmul(graph, node, codes, layer.linear, layer.weights, layer.lo, layer.hi)
    mt_out = graph.fresh_name(f"{quantizer.name}_codes")
    graph.datatypes[mt_out] = out_dtype
    attrs = {"out_dtype": out_dtype.name, "out_scale": 2.0 if bipolar else 1.0, "out_bias": float(out_bias)}
    if layer.linear.spatial:  # qonnx takes a rank-3 input as channels-last unless told otherwise
        attrs["data_layout"] = "NC" + "DHW"[3 - layer.linear.spatial:]
    mt = Node("MultiThreshold", graph.fresh_name(f"{quantizer.name}_thresholds"),
              [acc, graph.add_constant(f"{quantizer.name}_thresholds", kept.astype(np.float32))], [mt_out], attrs)
    stages.append(dict(kind="vvau" if layer.linear.depthwise else "mvau", name=node.name, inputs=[codes.tensor],
                       output=mt_out, weights=layer.weights, in_dtype=codes.dtype,
                       weight_dtype=datatype_of_values(layer.weights), thresholds=kept, requant=layer.requant,
                       out_dtype=out_dtype, out_bias=out_bias, acc_lo=layer.lo, acc_hi=layer.hi,
                       conv=_conv_geometry(graph, node, layer.linear.pad)))
    out_hi = 1 if bipolar else out_bias + kept.shape[1]
    return [*mm_nodes, mt], _Codes(mt_out, out_bias, out_hi, out_dtype, quantizer)


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


def _table(graph, codes: _Codes, between: list[Node], quantizer: _Quantizer, shape: tuple[int, ...],
           reads: tuple[str, bool] | None = None) -> np.ndarray | None:
    """The model's ops from ``codes`` through ``quantizer``, run on every input code of a tensor of
    ``shape`` (N, C, *spatial). Where the result differs between channels (a per-channel constant among
    the ops, such as a bias): one row per channel. None where it differs within a channel (a constant
    per pixel): no table holds that.

    ``between`` reads the source quantizer's output, or ``reads``: a tensor that holds its
    dequantized values (True) or its codes (False). Shape ops and max pools in ``between`` are
    passed over: the table is elementwise. The ops run on one pixel of every channel per code, so a
    constant shaped per channel broadcasts as it does over the whole tensor."""
    source = codes.quantizer
    coding = quantizer.nodes[:quantizer.n_coding]
    last = coding[-1].outputs[0]
    start, front = _reading(source, *(reads or (source.output, True)))
    passed = [Node("Identity", n.name, [n.inputs[0]], [n.outputs[0]]) if n.op_type in CODE_OPS else n for n in between]
    channels, pixel = shape[1], (1, shape[1]) + (1,) * (len(shape) - 2)
    sub = Graph(nodes=[*front, *passed, *coding], constants=graph.constants,
                inputs=[TensorInfo(start, pixel)], outputs=[TensorInfo(last, pixel)],
                opset=graph.opset, qonnx_opset=graph.qonnx_opset)
    values = _code_values(codes)
    # Codes to values channel by channel: a per-channel scale broadcasts over the (N, C, 1, ...) grid.
    grid = source.output_from_codes(np.repeat(values[:, None], channels, axis=1).reshape((len(values),) + pixel[1:]))
    output = execute(sub, {start: grid})[last]
    if output.size != grid.size:
        return None
    tables = quantizer.codes_from_output(output).reshape(len(values), channels).astype(np.int64)
    if np.all(tables == tables[:, :1]):
        return tables[:, 0]
    return tables.T.copy()


def _reading(source: _Quantizer, tensor: str, floats: bool) -> tuple[str, list[Node]]:
    """Where a subgraph that reads ``tensor`` starts, fed the output of ``source``'s coding nodes, and
    the nodes from there to ``tensor``: the dequantization where it holds floats, and a rename where
    shape ops or max pools lie between."""
    start = source.nodes[source.n_coding - 1].outputs[0] if source.n_coding else source.codes_tensor
    front = list(source.nodes[source.n_coding:]) if floats else []
    given = source.output if floats else start
    if given != tensor:
        front.append(Node("Identity", f"{tensor}_read", [given], [tensor]))
    return start, front


def _code_values(codes: _Codes) -> np.ndarray:
    return np.array([-1, 1]) if codes.dtype == BIPOLAR else np.arange(codes.lo, codes.hi + 1)


def _lower_lookup_table(graph, codes: _Codes, table: np.ndarray, quantizer: _Quantizer, stages):
    """A ``LookupTable`` node from ``codes`` to the codes of ``quantizer``; ``table`` is 1-D, or one
    row per channel (held row after row, with the count of channels)."""
    out_dtype = BIPOLAR if quantizer.dtype == BIPOLAR else smallest_datatype(table.min(), table.max())
    out = graph.fresh_name(f"{quantizer.name}_codes")
    graph.datatypes[out] = out_dtype
    rows = {"channels": table.shape[0]} if table.ndim == 2 else {}
    lut = Node("LookupTable", graph.fresh_name(f"{quantizer.name}_table"), [codes.tensor], [out],
               {"table": table.ravel().tolist(), **rows, "in_min": int(_code_values(codes)[0]),
                "in_bipolar": int(codes.dtype == BIPOLAR)})
    stages.append(dict(kind="lut", name=lut.name, inputs=[codes.tensor], output=out, table=table, in_dtype=codes.dtype,
                       out_dtype=out_dtype))
    return [lut], _Codes(out, int(table.min()), int(table.max()), out_dtype, quantizer)


def _conv_geometry(graph: Graph, node: Node, pad: int | None) -> dict | None:
    """What the sliding window of a Conv or average needs: shapes channels-last, kernel, strides, pads, dilations,
    and the code it pads with."""
    if node.op_type not in AVERAGING_OPS | CONV_OPS:
        return None
    in_shape, out_shape = graph.meta["shapes"][node.inputs[0]][1:], graph.meta["shapes"][node.outputs[0]][1:]
    spatial = len(in_shape) - 1
    if node.op_type in CONV_OPS:
        pads = list(node.attrs.get("pads", [0] * 2 * spatial))
        window = dict(kernel=tuple(_kernel_shape(graph, node)[2:]),
                      strides=tuple(node.attrs.get("strides", [1] * spatial)),
                      dilations=tuple(node.attrs.get("dilations", [1] * spatial)), pads=pads)
    else:
        window = _pool_window(graph, node)
        out_shape = (out_shape[0], *[1] * spatial) if len(out_shape) == 1 else out_shape
    pads = window.pop("pads")
    return dict(in_shape=(*in_shape[1:], in_shape[0]), out_shape=(*out_shape[1:], out_shape[0]),
                pads_begin=tuple(pads[:spatial]), pads_end=tuple(pads[spatial:]), pad_value=pad or 0, **window)


def _lower_last_layer(graph, node, codes, following, stages) -> tuple[list[Node], list[Node]]:
    """The last layer's accumulator leaves the hardware; the host rescales it. Returns hardware and host nodes."""
    linear = _linear(graph, node, codes)
    lo, hi = _acc_range(linear.weights, *linear.code_range(codes))
    # The unit's accumulator holds whatever its input type allows, codes the model cannot reach included.
    wide_lo, wide_hi = _acc_range(linear.weights, codes.dtype.min, codes.dtype.max)
    acc_dtype = smallest_datatype(wide_lo.min(), wide_hi.max())
    mm_nodes, acc = _add_matmul(graph, node, codes, linear, linear.weights, lo, hi)
    stages.append(dict(kind="vvau" if linear.depthwise else "mvau", name=node.name, inputs=[codes.tensor], output=acc,
                       weights=linear.weights, in_dtype=codes.dtype,
                       weight_dtype=linear.weight_dtype, thresholds=None, out_dtype=acc_dtype, out_bias=0,
                       acc_lo=lo, acc_hi=hi, conv=_conv_geometry(graph, node, linear.pad)))
    if linear.divisor:
        raise LoweringError(f"{node.describe()}: an average as the last hardware layer needs a quantizer or Trunc after "
                            "it; streamc does not divide on the host")
    nodes = []
    if np.any(linear.offset):
        centered = graph.fresh_name(f"{acc}_centered")
        nodes.append(Node("Sub", graph.fresh_name(f"{node.name}_zero_point"),
                          [acc, graph.add_constant(f"{node.name}_offset",
                                                   linear.offset.astype(np.float32).reshape(linear.channel_shape()))],
                          [centered]))
        acc = centered
    if node.op_type in INTEGER_LINEAR_OPS:
        nodes.append(Node("Cast", graph.fresh_name(f"{node.name}_to_int32"), [acc], [node.outputs[0]],
                          {"to": TensorProto.INT32}))
        scale = np.ones(linear.weights.shape[0])
    else:
        scale = np.float32(linear.scale)
        scaled = node.outputs[0] if linear.bias is None else graph.fresh_name(f"{node.outputs[0]}_scaled")
        nodes.append(Node("Mul", graph.fresh_name(f"{node.name}_rescale"),
                          [acc, graph.add_constant(f"{node.name}_scale", scale.reshape(linear.channel_shape()))],
                          [scaled]))
        if linear.bias is not None:
            bias = linear.bias.astype(np.float32).reshape(linear.channel_shape())
            nodes.append(Node("Add", graph.fresh_name(f"{node.name}_bias"),
                              [scaled, graph.add_constant(f"{node.name}_bias", bias)], [node.outputs[0]]))
    boundary = node.outputs[0] if linear.bias is None or node.op_type in INTEGER_LINEAR_OPS else scaled
    graph.meta["boundary"] = dict(tensor=boundary, scale=np.asarray(scale, np.float64), offset=linear.offset)
    return mm_nodes, nodes + list(following)


def _dequantize_tail(graph: Graph, codes: _Codes, rest: list[Node]) -> list[Node]:
    """The hardware ends in a quantizer: the host turns its codes into the quantizer's output."""
    quantizer = codes.quantizer
    nodes = []
    if quantizer.codes_tensor is None:
        value = codes.tensor
        # One value, or one per channel shaped (1, C, 1, ...) like the quantizer's output.
        zero = quantizer.zero_point.astype(np.float32)
        if np.any(zero):
            centered = graph.fresh_name(f"{value}_centered")
            nodes.append(Node("Sub", graph.fresh_name(f"{quantizer.name}_zero_point"),
                              [value, graph.add_constant(f"{quantizer.name}_zp", zero)], [centered]))
            value = centered
        nodes.append(Node("Mul", graph.fresh_name(f"{quantizer.name}_dequant"),
                          [value, graph.add_constant(f"{quantizer.name}_out_scale", quantizer.scale.astype(np.float32))],
                          [quantizer.output]))
        graph.meta["boundary"] = dict(tensor=quantizer.output, scale=quantizer.scale.reshape(-1),
                                      offset=quantizer.zero_point.reshape(-1))
    else:
        to = {np.int8: TensorProto.INT8, np.uint8: TensorProto.UINT8}[quantizer.storage]
        nodes.append(Node("Cast", graph.fresh_name(f"{quantizer.name}_to_storage"), [codes.tensor],
                          [quantizer.codes_tensor], {"to": to}))
        nodes += quantizer.nodes[quantizer.n_coding:]
        graph.meta["boundary"] = dict(tensor=quantizer.codes_tensor, scale=np.float64(1), offset=np.float64(0))
    return nodes + rest

