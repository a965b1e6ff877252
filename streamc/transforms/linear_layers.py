"""Linear layers as integer weights on codes: dense, convolutions (grouped, depthwise) and averages.

Each becomes a :class:`Linear` (integer weights, and how the model's float output follows from the
accumulator); this module also holds the window geometry (pads, strides, kernels) and the integer
``MatMul``/``Conv`` node that replaces the layer in the streamlined graph.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from onnx import TensorProto

from ..datatypes import BIPOLAR, DataType, datatype_of_values, smallest_datatype
from ..errors import FrontendError, LoweringError
from ..ir import Graph, Node
from ..reference import window_geometry
from .op_kinds import AVERAGING_OPS, CONV_OPS, INTEGER_LINEAR_OPS
from .quantizers import Codes, Quantizer, channel_values, constant

#: Beyond this float32 cannot hold every accumulator value exactly.
FLOAT_EXACT = 1 << 24
FLOAT64_EXACT = 1 << 53


@dataclass(frozen=True)
class RoundedTerms:
    """An average's terms as the model sums them: each code's dequantized value rounded to float32 on its own.

    The model averages ``d(q) = float32((q - z) * s)``, which is ``(q - z) * s + e(q)`` with a rounding error
    ``e(q)`` of the code itself. Where the window's mean of codes lands on (or next to) a rounding tie, the sum
    of those errors decides the output code, and it depends on which codes were summed, not on their sum. All
    of ``d(q)`` and ``(q - z) * s`` are multiples of ``unit`` (the scale's lowest bit), so the stream can carry
    one integer per code, ``table[q] = (q - z) * base + e(q) / unit``: summed over a window it is
    ``S * base + E`` (``S`` the codes' sum, ``E`` the errors'), and ``base`` exceeds the span of ``E``, so the
    sum tells both apart and orders windows exactly as their float sums. A table before the average writes
    those integers; ``total`` turns the accumulator back into the exact float sum.
    """

    table: np.ndarray   # (C, codes) or (codes,): the integer each stream code becomes, codes from table_min up
    table_min: int
    base: int
    error_low: int      # the least E a window can sum (in units)
    scale: np.ndarray   # per channel, float64 (the float32 scale)
    unit: np.ndarray    # per channel, float64: a power of two every term is a multiple of

    def value_range(self, codes: "Codes") -> tuple[int, int]:
        """The least and greatest integer the codes the stream can carry become."""
        reached = self.table[..., codes.lo - self.table_min:codes.hi - self.table_min + 1]
        return int(reached.min()), int(reached.max())

    def total(self, acc: np.ndarray) -> np.ndarray:
        """The exact float64 sum of the window's float32 terms for accumulator values ``acc`` (N, C)."""
        acc = np.asarray(acc, np.int64)
        codes_sum = np.floor_divide(acc - self.error_low, self.base)
        errors = acc - codes_sum * self.base
        return codes_sum * self.scale + errors * self.unit


def rounded_terms(linear: Linear, codes: "Codes") -> RoundedTerms | None:
    """The terms of an average on ``codes`` where float32 rounds some of them (None where every term is exact:
    the codes' sum then decides the output alone)."""
    scale = np.broadcast_to(np.asarray(linear.scale).astype(np.float32).astype(np.float64), (len(linear.weights),))
    zero = np.broadcast_to(np.asarray(linear.offset, np.float64) / linear.divisor, scale.shape)
    if codes.dtype == BIPOLAR or not np.all(zero == np.rint(zero)):
        return None
    first, last = codes.dtype.min, codes.dtype.max
    q = np.arange(first, last + 1, dtype=np.float64)
    centered = q[None, :] - zero[:, None]
    # as DequantizeLinear and Quant compute them: (q - z) in float32 times the float32 scale, rounded once
    rounded = (centered.astype(np.float32) * scale.astype(np.float32)[:, None]).astype(np.float64)
    exact = centered * scale[:, None]   # 9 bits of codes times 24 of scale: exact in float64
    if np.array_equal(rounded, exact):
        return None
    mantissa, exponent = np.frexp(scale)
    # the scale's lowest set bit: a float32 has 24 significant bits
    lowest = exponent - 24 + np.array([_trailing_zeros(int(m * (1 << 24))) for m in mantissa])
    unit = np.ldexp(1.0, lowest)
    errors = np.rint((rounded - exact) / unit[:, None]).astype(np.int64)
    reached = errors[:, codes.lo - first:codes.hi - first + 1]
    if linear.pad is not None:
        reached = np.concatenate([reached, np.zeros((len(reached), 1), np.int64)], axis=1)
    taps = linear.weights.shape[1]
    error_low, error_high = taps * int(reached.min()), taps * int(reached.max())
    base = error_high - error_low + 1
    table = np.rint(centered).astype(np.int64) * base + errors
    if np.all(table == table[:1]):
        table = table[0]
    return RoundedTerms(table, first, base, error_low, scale, unit)


def _trailing_zeros(value: int) -> int:
    return (value & -value).bit_length() - 1


@dataclass
class Linear:
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
    terms: RoundedTerms | None = None  # an average summing each code's float32 term, from a table before it

    def code_range(self, codes: "Codes") -> tuple[int, int]:
        """The input values the accumulator sums: the stream's codes (or their terms), and the pad value where
        the window pads."""
        lo, hi = (codes.lo, codes.hi) if self.terms is None else self.terms.value_range(codes)
        if self.pad is None:
            return lo, hi
        return min(lo, self.pad), max(hi, self.pad)

    @property
    def acc_limit(self) -> int:
        """How large the accumulator may grow: exact in float32, or in float64 for the terms of an average (the
        streamlined graph sums those in double)."""
        return FLOAT_EXACT if self.terms is None else FLOAT64_EXACT

    def output(self, node: Node, acc: np.ndarray) -> np.ndarray:
        """What the model's linear node outputs for accumulator values ``acc`` (N, MH), in its layout."""
        if node.op_type in INTEGER_LINEAR_OPS:
            value = (acc - self.offset).astype(np.int32)
        elif self.bias is not None:  # as the reference convolves: in float64, bias added, rounded once
            value = ((acc - self.offset) * self.scale + self.bias).astype(np.float32)
        elif self.divisor:  # as the reference averages: in float64, rounded once to float32
            total = (self.terms.total(acc) if self.terms is not None
                     else (acc - self.offset) * self.scale.astype(np.float32).astype(np.float64))
            value = (total / self.divisor).astype(np.float32)
        else:
            value = np.float32(acc - self.offset) * np.float32(self.scale)
        return value.reshape(value.shape + (1,) * self.spatial)

    def channel_shape(self) -> tuple[int, ...]:
        """How a per-channel constant broadcasts against the node's output."""
        return (-1,) + (1,) * self.spatial


def check_linear_input(node: Node, floats: bool) -> None:
    """A MatMul, Conv or average must read dequantized values, a MatMulInteger or ConvInteger integer codes."""
    wants_floats = node.op_type not in INTEGER_LINEAR_OPS
    if floats != wants_floats:
        kind = "dequantized values" if wants_floats else "integer codes"
        raise LoweringError(f"{node.describe()} must read the {kind} of its input quantizer")


def linear_layer(graph: Graph, node: Node, codes: Codes) -> Linear:
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
        codes_w = constant(graph, weight, node, "weight (B)")
        zero_w = constant(graph, node.inputs[3] if len(node.inputs) > 3 else "", node, "B zero point")
        zero_w = np.zeros(()) if zero_w is None else zero_w
        a_zero = constant(graph, node.inputs[2] if len(node.inputs) > 2 else "", node, "A zero point")
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
    return Linear(weights, datatype_of_values(weights), np.float64(in_scale) * np.asarray(w_scale, np.float64),
                  in_zero * weights.sum(axis=1))


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


def _conv_linear(graph: Graph, node: Node, codes: Codes) -> Linear:
    weight = node.inputs[1]
    padded = any(node.attrs.get("pads", []))
    if node.op_type == "ConvInteger":
        # Codes in, the int32 accumulator of (x - x_zero_point) and (w - w_zero_point) out; it pads with x's
        # zero point.
        integer = constant(graph, weight, node, "weight (w)").astype(np.float64)
        channels = integer.shape[0]
        zero_w = constant(graph, node.inputs[3] if len(node.inputs) > 3 else "", node, "w zero point")
        if zero_w is not None:
            integer = integer - np.asarray(zero_w, np.float64).reshape(-1, *[1] * (integer.ndim - 1))
        x_zero = constant(graph, node.inputs[2] if len(node.inputs) > 2 else "", node, "x zero point")
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
        bias = constant(graph, node.inputs[2], node, "bias") if len(node.inputs) > 2 and node.inputs[2] else None
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
        return Linear(weights, datatype_of_values(weights), in_scale * channel_scale, in_zero * weights.sum(axis=1),
                      spatial=spatial, depthwise=True, bias=bias, pad=pad)
    kernel = _dense_kernel(kernel, group)
    # (OC, C, *K) -> (OC, *K, C): the sliding window emits patches channel-fastest.
    weights = np.moveaxis(kernel, 1, -1).reshape(channels, -1)
    return Linear(weights, datatype_of_values(weights), in_scale * channel_scale, in_zero * weights.sum(axis=1),
                  spatial=spatial, bias=bias, pad=pad)


def _average_linear(graph: Graph, node: Node, codes: Codes) -> Linear:
    """An average pool as a depthwise layer of ones, whose output is the window's sum times scale / K."""
    channels = graph.meta["shapes"][node.inputs[0]][1]
    taps = int(np.prod(_pool_window(graph, node)["kernel"]))
    weights = np.ones((channels, taps), np.int64)
    # Each channel's sum times its own scale: exact with a scale per channel.
    in_scale = _per_output(codes.quantizer, "scale", channels, channels, channels, node)
    in_zero = _per_output(codes.quantizer, "zero_point", channels, channels, channels, node)
    pad = _pad_code(node, codes, any(_pool_window(graph, node)["pads"]))
    return Linear(weights, datatype_of_values(weights), in_scale, in_zero * taps,
                  spatial=len(graph.meta["shapes"][node.outputs[0]]) - 2, depthwise=True, divisor=taps, pad=pad)


def _per_output(quantizer: Quantizer, what: str, in_channels: int, groups: int, out_channels: int,
                node: Node) -> np.ndarray:
    """The input scale or zero point each output channel's accumulator sums codes of, shape (OC,).

    Output channel ``o`` of a layer in ``groups`` groups reads the input channels of group ``o // (OC / groups)``
    (a dense layer: one group; depthwise and averages: one channel per group). That is exact where those channels
    share one value: the value then multiplies the channel's weight scale. A layer summing codes of different
    scales has no integer form."""
    value = getattr(quantizer, what)
    per_channel = channel_values(value, in_channels)
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


def _pad_code(node: Node, codes: Codes, padded: bool) -> int | None:
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


#: Ops whose ``auto_pad`` :func:`explicit_pads` writes out, and whether they pool.
_WINDOW_OPS = {"Conv": False, "ConvInteger": False, "MaxPool": True, "AveragePool": True}


def explicit_pads(graph: Graph) -> None:
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
        check_global(graph, node, shape, "a global average pool")
    return dict(kernel=tuple(shape[2:]), strides=(1,) * spatial, pads=[0] * 2 * spatial, dilations=(1,) * spatial)


def check_global(graph: Graph, node: Node, shape, meaning: str) -> None:
    """A reduction (ReduceMean, ReduceMax) must be over every spatial axis of its (N, C, *spatial) input."""
    axes = node.attrs.get("axes")
    if axes is None and len(node.inputs) > 1 and node.inputs[1]:
        axes = constant(graph, node.inputs[1], node, "axes").tolist()
    if axes is None or sorted(a % len(shape) for a in axes) != list(range(2, len(shape))):
        raise LoweringError(f"{node.describe()}: {node.op_type} over axes {axes} is not supported; over every "
                            f"spatial axis ({meaning}) it is")


def conv_geometry(graph: Graph, node: Node, pad: int | None) -> dict | None:
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


def acc_range(weights: np.ndarray, lo: int, hi: int, limit: int = FLOAT_EXACT) -> tuple[np.ndarray, np.ndarray]:
    """Each output channel's least and greatest accumulator over input codes in [lo, hi]."""
    low = np.minimum(weights * lo, weights * hi).sum(axis=1)
    high = np.maximum(weights * lo, weights * hi).sum(axis=1)
    if max(-low.min(), high.max()) >= limit:
        raise LoweringError(f"accumulators reach {max(-low.min(), high.max())}, beyond 2**{limit.bit_length() - 1} "
                            "where the streamlined model's float intermediates lose exactness")
    return low, high


def add_matmul(graph: Graph, node: Node, codes: Codes, linear: Linear, weights: np.ndarray,
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
    float_type = np.float32
    if max(-lo.min(), hi.max()) >= FLOAT_EXACT:  # sums float32 cannot hold: the node sums in double
        float_type, padded = np.float64, codes_in
        codes_in = graph.fresh_name(f"{padded}_double")
        graph.datatypes[codes_in] = codes.dtype
        front.append(Node("Cast", graph.fresh_name(f"{node.name}_to_double"), [padded], [codes_in],
                          {"to": TensorProto.DOUBLE}))
    if linear.depthwise:
        if node.op_type in CONV_OPS:
            taps, attrs = _kernel_shape(graph, node)[2:], dict(node.attrs)
        else:
            window = _pool_window(graph, node)
            taps = window["kernel"]
            attrs = dict(kernel_shape=list(taps), strides=list(window["strides"]), pads=list(window["pads"]),
                         dilations=list(window["dilations"]))
        if linear.pad:  # the Pad node pads instead
            attrs.pop("pads")
        channels = len(weights)
        w_name = graph.add_constant(f"{node.name}_weight_int", weights.reshape(channels, 1, *taps).astype(float_type))
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
        w_name = graph.add_constant(f"{node.name}_weight_int", restored.astype(float_type))
        graph.datatypes[w_name] = datatype_of_values(weights)
        attrs = {**node.attrs, "group": 1}
        if linear.pad:  # the Pad node pads instead
            attrs.pop("pads")
        return [*front, Node("Conv", node.name, [codes_in, w_name], [acc], attrs)], acc
    w_name = graph.add_constant(f"{node.name}_weight_int", weights.T.astype(float_type))
    graph.datatypes[w_name] = datatype_of_values(weights)
    return [*front, Node("MatMul", node.name, [codes_in, w_name], [acc])], acc
