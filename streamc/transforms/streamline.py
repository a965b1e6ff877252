"""Turn a tidied quantized MLP into integer MatMuls, MultiThresholds and lookup tables.

Between two activation quantizers an MLP computes ``Q(f(x @ W))``: ``x`` and ``W`` are integer
codes (times scales), and ``f`` is the chain of ops the exporter wrote (bias Add, Mul, Div,
BatchNormalization, Relu, Cast, ...). With ``acc = codes_x @ codes_W`` an integer, each output
channel's code is a monotonic step function of ``acc``. Instead of absorbing ``f`` into thresholds
by exact algebra (FINN's streamlining), streamc evaluates the exporter's own ops with the reference
executor and binary-searches every step point over the reachable accumulator range. The thresholds
therefore reproduce the reference's float32 rounding, ties and all, by construction.

Quantizers are recognized as each dialect writes them (see :mod:`.quantizers`); linear layers are
``MatMul`` on dequantized values (QONNX, QDQ) or ``MatMulInteger`` on codes (integer-operator
ONNX). Elementwise ops between two quantizers with no linear layer between them (tanh, sigmoid, any
chain) become a ``LookupTable`` node whose table is the model's own subgraph run on every input code.

The result keeps the graph's front up to the first quantizer (the host "head", float input to
integer codes) and the ops after the last hardware layer (the host "tail"), with ``MatMul``
(integer weights), ``MultiThreshold`` and ``LookupTable`` nodes between them. ``graph.meta``
records what :mod:`streamc.hw` and verification need.

This module is the driver: the walk over the graph, the host head and tail, and for each linear layer
the choice between thresholds alone and thresholds followed by a lookup table.
The parts it drives: :mod:`.quantizers` (recognizing quantizers, the codes on a stream),
:mod:`.linear_layers` (integer weights, windows), :mod:`.thresholds` (the search), :mod:`.tables` (lookup
tables), :mod:`.residual` (adds); :mod:`.op_kinds` names the ops each part takes.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from onnx import TensorProto

from ..datatypes import BIPOLAR, smallest_datatype
from ..errors import LoweringError
from ..execute import tensor_shapes
from ..ir import Graph, Node
from .linear_layers import (acc_range, add_matmul, check_global, check_linear_input, conv_geometry, explicit_pads,
                            linear_layer)
from .op_kinds import (ABSORBABLE_OPS, AVERAGING_OPS, CODE_OPS, INTEGER_LINEAR_OPS, LINEAR_OPS, MONOTONIC_OPS,
                       QUANTIZER_OPS)
from .quantizers import Codes, Quantizer, channel_values, integer_input, quantizer_at, quantizers_in
from .residual import lower_add
from .tables import code_table, lower_lookup_table
from .thresholds import MAX_THRESHOLDS, emit_thresholded_layer, thresholded
from .tidy import SHAPE_OPS

#: MAX_THRESHOLDS lives with the threshold search; it is named here too, where tests that check a
#: layer's threshold count against it import it with streamline.
__all__ = ["MAX_THRESHOLDS", "streamline"]


def streamline(graph: Graph) -> Graph:
    graph = graph.copy()
    if len(graph.inputs) != 1 or len(graph.outputs) != 1:
        raise LoweringError(f"streamc compiles models with one input and one output; this one has "
                            f"{len(graph.inputs)} inputs and {len(graph.outputs)} outputs")
    graph.meta["shapes"] = tensor_shapes(graph)
    explicit_pads(graph)
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
        self.available: dict[str, tuple[Codes, bool]] = {}   # model tensor -> (codes, holds floats)
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
            quantizer = quantizer_at(graph, prefix, starts[-1])
            self.head = prefix[:starts[-1] + quantizer.n_coding]
            consumed = prefix[:starts[-1] + len(quantizer.nodes)]
        elif first_hw is not None:
            quantizer = integer_input(graph, prefix[first_hw])
            consumed = []
        else:
            raise LoweringError("the model has no MatMul/Gemm/MatMulInteger/Conv/ConvInteger after its input quantizer: "
                                "nothing to put in hardware")
        codes, coding_nodes = _head_codes(graph, quantizer)
        self.head += coding_nodes
        self.hw_input = codes.tensor
        self.done |= {id(n) for n in consumed}
        self._publish(codes)

    def _publish(self, codes: Codes) -> None:
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
    def _lower_code_op(self, node: Node, codes: Codes, floats: bool) -> None:
        """Copy a shape op or max pool onto the codes; record what hardware needs of it."""
        graph = self.graph
        codes = Codes(codes.tensor, codes.lo, codes.hi, codes.dtype, _through_code_op(graph, node, codes.quantizer))
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
            self.available[node.outputs[0]] = (Codes(out, codes.lo, codes.hi, codes.dtype, codes.quantizer), floats)
            return
        self.body.append(copy)
        shape, out_shape = graph.meta["shapes"][node.inputs[0]], graph.meta["shapes"][node.outputs[0]]
        if node.op_type == "ReduceMax":
            check_global(graph, node, shape, "a global max pool")
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
        self.available[node.outputs[0]] = (Codes(out, codes.lo, codes.hi, codes.dtype, codes.quantizer), floats)

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
        scales = np.concatenate([channel_values(c.quantizer.scale, s[1]) for (c, _), s in zip(parts, shapes)])
        zeros = np.concatenate([channel_values(c.quantizer.zero_point, s[1]) for (c, _), s in zip(parts, shapes)])
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
        self.available[node.outputs[0]] = (Codes(out, lo, hi, dtype, first), parts[0][1])

    def _lower_requantization(self, node: Node, tensor: str) -> None:
        """Elementwise ops and a quantizer on codes, with no linear layer before them: a lookup table, or
        nothing where the quantizer gives the codes back. Shape ops and max pools among the elementwise
        ops act on the table's output codes (elementwise ops commute with shape ops, and with a max
        where the table does not decrease)."""
        graph = self.graph
        codes, floats = self.available[tensor]
        body = _segment(graph, node)
        start, quantizer = quantizers_in(graph, body, 0, len(body))[0]
        between = body[:start]
        moved = [n for n in between if n.op_type in CODE_OPS]
        source = codes.quantizer
        same = (not between and quantizer.dtype is not None and quantizer.dtype.min <= codes.lo
                and codes.hi <= quantizer.dtype.max
                and np.array_equal(quantizer.scale, source.scale)
                and np.array_equal(quantizer.zero_point, source.zero_point))
        if same:
            result = Codes(codes.tensor, codes.lo, codes.hi, codes.dtype, quantizer)
        else:
            if codes.dtype != BIPOLAR:  # a table has an entry for every code the stream's type holds
                codes = Codes(codes.tensor, codes.dtype.min, codes.dtype.max, codes.dtype, source)
            table = code_table(graph, codes, between, quantizer, graph.meta["shapes"][tensor], reads=(tensor, floats))
            if table is None:
                raise LoweringError(f"the elementwise ops from {node.describe()} to quantizer {quantizer.name!r} "
                                    "differ within a channel (a constant per pixel); streamc builds a lookup table "
                                    "for every channel, or one for all")
            pools = [n for n in moved if n.op_type == "MaxPool"]
            if pools and np.any(np.diff(table, axis=-1) < 0):
                raise LoweringError(f"{pools[0].describe()} lies among elementwise ops that decrease before quantizer "
                                    f"{quantizer.name!r}; streamc takes a max pool there only where they do not")
            nodes, result = lower_lookup_table(graph, codes, table, quantizer, self.stages)
            self.body += nodes
        for op in moved:
            self._lower_code_op(op, result, floats)
            result = self.available[op.outputs[0]][0]
        self.done |= {id(n) for n in body[:start + len(quantizer.nodes)]}
        self._publish(Codes(result.tensor, result.lo, result.hi, result.dtype, quantizer))

    # -- segments: a linear layer, an average or a residual Add, up to its quantizer ----------------------------
    def _lower_segment(self, node: Node, inputs: list[tuple[Codes, bool]]) -> None:
        graph = self.graph
        body = _segment(graph, node)
        units = quantizers_in(graph, body, 1, len(body))
        join = node.op_type == "Add"
        if not join:
            codes, floats = inputs[0]
            check_linear_input(node, floats)
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
            layer_nodes, codes = lower_add(graph, node, inputs, body[1:last_start], last_quantizer, self.stages)
        else:
            layer_nodes, codes = _lower_linear(graph, node, codes, body, units, self.stages)
        self.body += layer_nodes
        position = last_start + len(last_quantizer.nodes)
        self.done |= {id(n) for n in body[:position]}
        self._publish(codes)


def _through_code_op(graph: Graph, node: Node, quantizer: Quantizer) -> Quantizer:
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
    return bool(quantizers_in(graph, body, 0, len(body)))


def _lower_linear(graph, node, codes, body, units, stages) -> tuple[list[Node], Codes]:
    """A linear layer or average up to its last quantizer: thresholds, or thresholds and a lookup table."""
    first_start, first_quantizer = units[0]
    last_start, last_quantizer = units[-1]
    after_first = body[first_start + len(first_quantizer.nodes):last_start]
    # Thresholds absorb a monotonic chain up to the last quantizer; a lookup table after the first
    # quantizer takes any elementwise function. The first is exact for monotonic chains, the
    # second is cheaper where only the first quantizer's thresholds fit a requantization.
    whole = (thresholded(graph, node, codes, body[1:last_start], last_quantizer)
             if all(n.op_type in ABSORBABLE_OPS for n in after_first) else None)
    split, table = None, None
    if len(units) > 1 and (whole is None or not whole.cheap):
        split = thresholded(graph, node, codes, body[1:first_start], first_quantizer)
        # A table has an entry for every code the stream's type holds, reached or not.
        split_codes = Codes("", split.out_dtype.min, split.out_dtype.max, split.out_dtype, first_quantizer)
        # A table per channel where the ops differ per channel (a bias after the product's quantizer).
        table = code_table(graph, split_codes, after_first, last_quantizer,
                           (1, split.weights.shape[0]) + (1,) * split.linear.spatial)
        if table is None and whole is None:
            raise LoweringError(
                f"the elementwise ops between quantizers {first_quantizer.name!r} and {last_quantizer.name!r} differ "
                "within a channel (a constant per pixel) and are not monotonic; streamc builds a lookup table for "
                "every channel, or one for all")
        if table is None or (whole is not None and not split.cheap):
            split = None
    if split is None:
        return emit_thresholded_layer(graph, node, codes, whole, stages)
    layer_nodes, codes = emit_thresholded_layer(graph, node, codes, split, stages)
    table_nodes, codes = lower_lookup_table(graph, codes, table, last_quantizer, stages)
    return layer_nodes + table_nodes, codes


def _head_codes(graph: Graph, quantizer: Quantizer) -> tuple[Codes, list[Node]]:
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
    return Codes(codes, quantizer.dtype.min, quantizer.dtype.max, quantizer.dtype, quantizer), nodes


def _lower_last_layer(graph, node, codes, following, stages) -> tuple[list[Node], list[Node]]:
    """The last layer's accumulator leaves the hardware; the host rescales it. Returns hardware and host nodes."""
    linear = linear_layer(graph, node, codes)
    lo, hi = acc_range(linear.weights, *linear.code_range(codes))
    # The unit's accumulator holds whatever its input type allows, codes the model cannot reach included.
    wide_lo, wide_hi = acc_range(linear.weights, codes.dtype.min, codes.dtype.max)
    acc_dtype = smallest_datatype(wide_lo.min(), wide_hi.max())
    mm_nodes, acc = add_matmul(graph, node, codes, linear, linear.weights, lo, hi)
    stages.append(dict(kind="vvau" if linear.depthwise else "mvau", name=node.name, inputs=[codes.tensor], output=acc,
                       weights=linear.weights, in_dtype=codes.dtype,
                       weight_dtype=linear.weight_dtype, thresholds=None, out_dtype=acc_dtype, out_bias=0,
                       acc_lo=lo, acc_hi=hi, conv=conv_geometry(graph, node, linear.pad)))
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


def _dequantize_tail(graph: Graph, codes: Codes, rest: list[Node]) -> list[Node]:
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
