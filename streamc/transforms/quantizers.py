"""Activation quantizers as each dialect writes them, and the integer codes they put on a stream.

A quantizer is recognized where it stands in the model (QONNX ``Quant``/``BipolarQuant``/``Trunc``, QCDQ,
QDQ), with its scale and zero point kept as one value or one per channel; the other parts of the
streamline step read a quantizer through :class:`Quantizer`, and a stream of codes through :class:`Codes`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
from onnx import TensorProto

from ..datatypes import BIPOLAR, DataType, smallest_datatype
from ..errors import LoweringError
from ..ir import Graph, Node
from ..reference import run_node
from .op_kinds import INTEGER_LINEAR_OPS, QUANTIZER_OPS
from .tidy import quant_datatype


@dataclass
class Quantizer:
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
class Codes:
    """Integer codes on a stream: the tensor, their value range, and the scale/zero point they stand for."""

    tensor: str
    lo: int
    hi: int
    dtype: DataType
    quantizer: Quantizer


def constant(graph: Graph, tensor: str, node: Node, what: str) -> np.ndarray:
    """The value of a node's input that must be a constant (None where the optional input is absent)."""
    if not tensor:
        return None
    if not graph.is_constant(tensor):
        raise LoweringError(f"{node.describe()}: its {what} must be a constant")
    return graph.constants[tensor]


def quantizer_at(graph: Graph, chain: list[Node], index: int) -> Quantizer:
    """The quantizer that starts at ``chain[index]``, with the nodes after it that belong to it (an integer
    ``Clip``, a ``DequantizeLinear``, a ``Relu``)."""
    node = chain[index]
    if node.op_type in ("Quant", "BipolarQuant"):
        scale = constant(graph, node.inputs[1], node, "scale").astype(np.float64)
        zero = constant(graph, node.inputs[2], node, "zero point").astype(np.float64) if node.op_type == "Quant" else 0.0
        bits = constant(graph, node.inputs[3], node, "bit width") if node.op_type == "Quant" else None
        quantizer = Quantizer([node], 1, None, _channelwise(graph, node, scale, "scale"),
                              _channelwise(graph, node, zero, "zero point"), quant_datatype(node, bits))
        return quantizer if node.op_type == "BipolarQuant" else _with_relu(chain, index, quantizer)
    if node.op_type == "Trunc":
        quantizer = _trunc_quantizer(graph, node)
        quantizer = replace(quantizer, scale=_channelwise(graph, node, quantizer.scale, "scale"),
                            zero_point=_channelwise(graph, node, quantizer.zero_point, "zero point"))
        return _with_relu(chain, index, quantizer)
    # QuantizeLinear [Clip] [DequantizeLinear]
    scale = constant(graph, node.inputs[1], node, "scale")
    zero = constant(graph, node.inputs[2] if len(node.inputs) > 2 else "", node, "zero point")
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
        bounds = [constant(graph, t, following, "bound") if t else None for t in following.inputs[1:3]]
        if following.attrs:
            bounds = [following.attrs.get("min"), following.attrs.get("max")]
        lo = max(lo, int(np.ceil(bounds[0]))) if bounds[0] is not None else lo
        hi = min(hi, int(np.floor(bounds[1]))) if len(bounds) > 1 and bounds[1] is not None else hi
        nodes.append(following)
    n_coding = len(nodes)
    after = chain[index + n_coding] if index + n_coding < len(chain) else None
    if after is not None and after.op_type == "DequantizeLinear":
        dq_scale = constant(graph, after.inputs[1], after, "scale")
        dq_zero = constant(graph, after.inputs[2] if len(after.inputs) > 2 else "", after, "zero point")
        # Its scale is what the codes stand for, whatever scale made them: onnxruntime's operator format
        # requantizes with its own multiplier and dequantizes with the output scale. With another zero
        # point it is an op on the codes.
        if np.array_equal(dq_zero if dq_zero is not None else 0, zero):
            nodes.append(after)
            scale = dq_scale
    # Per-axis parameters lie along the node's axis (1 by default), not where numpy would broadcast them.
    axis = nodes[-1].attrs.get("axis", 1)
    return Quantizer(nodes, n_coding, nodes[n_coding - 1].outputs[0],
                     _channelwise(graph, node, scale, "scale", axis), _channelwise(graph, node, zero, "zero point", axis),
                     _clipped_datatype(lo, hi), storage)


def _with_relu(chain: list[Node], index: int, quantizer: Quantizer) -> Quantizer:
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


def _trunc_quantizer(graph: Graph, node: Node) -> Quantizer:
    """``Trunc`` drops low bits of codes: version 1 keeps the input scale and does not clip, version 2
    (qonnx domain opset 2) has an output scale and clips to its output bit width."""
    values = [constant(graph, t, node, "parameter") for t in node.inputs[1:]]
    if graph.qonnx_opset < 2:
        scale, zero = values[0], values[1]
        return Quantizer([node], 1, None, np.asarray(scale, np.float64), np.asarray(zero, np.float64), None)
    scale, zero, _, out_scale, out_bits = values
    step = 2.0 ** np.round(np.log2(np.asarray(out_scale, np.float64) / scale))
    ends = np.array([-1e30, 1e30], np.float32)
    lo, hi = run_node("Quant", {"signed": node.attrs.get("signed", 1), "narrow": node.attrs.get("narrow", 0)},
                      [ends, np.float32(1), np.float32(0), np.asarray(out_bits, np.float32)])[0].astype(np.int64)
    return Quantizer([node], 1, None, np.asarray(out_scale, np.float64), np.asarray(zero / step, np.float64),
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


def channel_values(value: np.ndarray, channels: int) -> np.ndarray:
    """A scale or zero point (0-d, or shaped (1, C, 1, ...)) as one value per channel, shape (C,)."""
    if value.ndim == 0:
        return np.full(channels, float(value))
    return value.reshape(-1).astype(np.float64)


def integer_input(graph: Graph, linear: Node) -> Quantizer:
    """An integer graph input read by a MatMulInteger or ConvInteger is the hardware's input as it is."""
    given = graph.inputs[0]
    storage = {TensorProto.INT8: np.int8, TensorProto.UINT8: np.uint8}.get(given.elem_type)
    if linear.op_type not in INTEGER_LINEAR_OPS or storage is None:
        raise LoweringError(f"{linear.describe()} reads an unquantized input; put an activation quantizer (Quant, "
                            "BipolarQuant or QuantizeLinear) before the first linear layer, or give an int8/uint8 "
                            "input to a MatMulInteger or ConvInteger")
    info = np.iinfo(storage)
    dtype = smallest_datatype(info.min, info.max)
    return Quantizer([], 0, given.name, np.asarray(1.0), np.asarray(0.0), dtype, storage)


def quantizers_in(graph: Graph, body: list[Node], start: int, end: int) -> list[tuple[int, Quantizer]]:
    """The quantizers in ``body[start:end]``, each with the index it starts at."""
    units = []
    index = start
    while index < end:
        if body[index].op_type in QUANTIZER_OPS:
            quantizer = quantizer_at(graph, body[:end], index)
            units.append((index, quantizer))
            index += len(quantizer.nodes)
        else:
            index += 1
    return units


def reading(source: Quantizer, tensor: str, floats: bool) -> tuple[str, list[Node]]:
    """Where a subgraph that reads ``tensor`` starts, fed the output of ``source``'s coding nodes, and
    the nodes from there to ``tensor``: the dequantization where it holds floats, and a rename where
    shape ops or max pools lie between."""
    start = source.nodes[source.n_coding - 1].outputs[0] if source.n_coding else source.codes_tensor
    front = list(source.nodes[source.n_coding:]) if floats else []
    given = source.output if floats else start
    if given != tensor:
        front.append(Node("Identity", f"{tensor}_read", [given], [tensor]))
    return start, front


def code_values(codes: Codes) -> np.ndarray:
    """Every code the stream can carry."""
    return np.array([-1, 1]) if codes.dtype == BIPOLAR else np.arange(codes.lo, codes.hi + 1)
