"""Quantization: the QONNX ops, QDQ and the integer ops.

* QONNX ops (``Quant``, ``BipolarQuant``, ``Trunc``, ``MultiThreshold``) follow qonnx 1.0's
  ``execute_node`` expression by expression -- the same operation order, the same dtypes
  (they compute in the dtype of their inputs, float32 for real models, and only ``Quant``
  casts its result to float32), including qonnx's quirks (clamping *before* rounding, 1-bit
  signed ``Quant`` ignoring ``narrow`` and rounding, ``HALF_UP`` computed as
  ``floor(|x| + 0.5)`` in float32).
* ``QuantizeLinear`` and ``DequantizeLinear`` follow onnxruntime's CPU kernels (MLAS).
* Integer ops (``MatMulInteger``, ``ConvInteger``) are exact; the operator-oriented
  ``QLinearMatMul`` and ``QLinearConv`` requantize as MLAS does: the multiplier
  ``input_scale * weight_scale / output_scale`` in float32, the int32 accumulator converted to
  float32 and multiplied by it, clamped, rounded half to even.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from streamc.errors import FrontendError

from .casts import onnx_dtype
from .linear import conv_geometry, convolution, per_channel
from .registry import like, op, optional_input, required
from .windows import Windows

# --------------------------------------------------------------------------------------
# QONNX ops: expression for expression as qonnx 1.0 (custom_op/general/*.py)
# --------------------------------------------------------------------------------------

def _round_half_up(x):
    return np.sign(x) * np.floor(np.abs(x) + 0.5)


def _round_half_down(x):
    return np.sign(x) * np.ceil(np.abs(x) - 0.5)


def _round_up(x):
    return np.sign(x) * np.ceil(np.abs(x))


ROUNDING_MODES: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "ROUND": np.round,
    "HALF_EVEN": np.round,
    "CEIL": np.ceil,
    "FLOOR": np.floor,
    "UP": _round_up,
    "DOWN": np.fix,
    "HALF_UP": _round_half_up,
    "HALF_DOWN": _round_half_down,
}


def _rounding(mode: str, op_type: str) -> Callable[[np.ndarray], np.ndarray]:
    function = ROUNDING_MODES.get(mode.upper())
    if function is None:
        raise FrontendError(
            f"{op_type} rounding_mode must be one of {', '.join(ROUNDING_MODES)} (any case), not {mode!r}"
        )
    return function


def _min_int(signed, narrow, bit_width):
    # qonnx's formulas evaluated on the bit-width tensor itself: a non-integer
    # bit width gives non-integer bounds, in the bit width's dtype
    if signed and narrow:
        return -(2 ** (bit_width - 1)) + 1
    if signed:
        return -(2 ** (bit_width - 1))
    return 0 * bit_width


def _max_int(signed, narrow, bit_width):
    if not signed and not narrow:
        return (2**bit_width) - 1
    if not signed:
        return (2**bit_width) - 2
    return (2 ** (bit_width - 1)) - 1


def _clamp(y, low, high):
    # np.clip keeps NaN as the two comparisons did; the bounds in y's dtype keep its dtype
    return np.clip(y, np.asarray(low).astype(y.dtype), np.asarray(high).astype(y.dtype))


@op("Quant")
def _quant(attrs, inputs, versions):
    x, scale, zero_point, bit_width = inputs
    signed = required(attrs, "signed", "Quant")
    narrow = required(attrs, "narrow", "Quant")
    rounding = _rounding(attrs.get("rounding_mode", "ROUND"), "Quant")
    y = x / scale
    y = y + zero_point
    # qonnx clamps before rounding: with a non-integer bit width, rounding may then
    # step outside [min_int, max_int] (7.5 bits: 89.51 rounds to 90)
    integers = rounding(_clamp(y, _min_int(signed, narrow, bit_width), _max_int(signed, narrow, bit_width)))
    if signed and np.any(np.asarray(bit_width) == 1):
        # qonnx maps 1-bit signed Quant to bipolar {-1, +1}, ignoring narrow and rounding;
        # elementwise here, so that a per-channel bit width (which qonnx rejects) works too
        ones = np.ones(y.shape, dtype=y.dtype)
        integers = np.where(np.asarray(bit_width) == 1, np.where(y >= 0.0, ones, -ones), integers)
    out = (integers - zero_point) * scale
    return [np.asarray(out).astype(np.float32, copy=False)]


@op("BipolarQuant")
def _bipolar_quant(attrs, inputs, versions):
    x, scale = inputs
    ones = np.ones(x.shape, dtype=x.dtype)
    return [np.where(x >= 0.0, ones, -ones) * scale]


@op("Trunc")
def _trunc(attrs, inputs, versions):
    rounding = _rounding(required(attrs, "rounding_mode", "Trunc"), "Trunc")
    if versions.qonnx_opset >= 2:
        return [_trunc_v2(attrs, inputs, rounding)]
    x, scale, zero_point, input_bit_width, output_bit_width = inputs
    y = np.round(x / scale + zero_point)
    y = y / 2.0 ** (input_bit_width - output_bit_width)
    y = rounding(y)
    return [(y - zero_point) * scale]


def _trunc_v2(attrs, inputs, rounding):
    x, scale, zero_point, input_bit_width, output_scale, output_bit_width = inputs
    signed = attrs.get("signed", 1)
    narrow = attrs.get("narrow", 0)
    y = np.round(x / scale + zero_point)
    # qonnx forces the truncation scale to a power of two
    trunc_scale = 2 ** np.round(np.log2(output_scale / scale))
    y = y / trunc_scale
    y = _clamp(y, _min_int(signed, narrow, output_bit_width), _max_int(signed, narrow, output_bit_width))
    y = rounding(y)
    y = y - zero_point / trunc_scale
    return y * output_scale


_LAYOUT_OF_RANK = {2: "NC", 3: "NWC", 4: "NCHW"}


@op("MultiThreshold")
def _multi_threshold(attrs, inputs, versions):
    x, thresholds = inputs
    layout = attrs.get("data_layout", "") or _LAYOUT_OF_RANK.get(x.ndim, "")
    channel_axis = layout.index("C") if "C" in layout else 1
    if x.ndim < 2 or channel_axis >= x.ndim:
        raise FrontendError(
            f"MultiThreshold input of shape {x.shape} has no channel axis {channel_axis} "
            f"(data_layout {attrs.get('data_layout', '')!r}); the input needs rank >= 2"
        )
    channels = x.shape[channel_axis]
    if thresholds.ndim != 2 or thresholds.shape[0] not in (1, channels):
        raise FrontendError(
            f"MultiThreshold thresholds must have shape ({channels}, L) or (1, L) for an input "
            f"of shape {x.shape} with channels on axis {channel_axis}, not {thresholds.shape}"
        )
    channels_last = np.moveaxis(x, channel_axis, -1)
    counts = np.count_nonzero(channels_last[..., np.newaxis] >= thresholds, axis=-1).astype(x.dtype)
    counts = np.moveaxis(counts, -1, channel_axis)
    # qonnx multiplies by the python-float attributes: numpy 2 computes that in the
    # counts' dtype, which the explicit conversion spells out
    return [like(attrs.get("out_scale", 1.0), counts) * counts + like(attrs.get("out_bias", 0.0), counts)]


# --------------------------------------------------------------------------------------
# Standard ONNX: QDQ
# --------------------------------------------------------------------------------------

def _per_axis(parameter: np.ndarray, x: np.ndarray, axis: int, op_type: str) -> np.ndarray:
    """A scale or zero point, shaped to broadcast along ``axis`` of ``x`` when 1-D."""
    if parameter.size == 1 and parameter.ndim <= 1:
        # onnxruntime treats a one-element vector as per-tensor
        return parameter.reshape(())
    if parameter.ndim != 1 or parameter.shape[0] != x.shape[axis]:
        raise FrontendError(
            f"{op_type} scale/zero point of shape {parameter.shape} must be a scalar or 1-D with "
            f"{x.shape[axis]} values (axis {axis} of input shape {x.shape})"
        )
    shape = [1] * x.ndim
    shape[axis] = -1
    return parameter.reshape(shape)


def _check_not_blocked(attrs, op_type):
    if attrs.get("block_size", 0):
        raise FrontendError(
            f"{op_type} block_size={attrs['block_size']} (blocked quantization) is not supported; "
            "only per-tensor and per-axis"
        )


@op("QuantizeLinear")
def _quantize_linear(attrs, inputs, versions):
    x, scale = inputs[0], inputs[1]
    _check_not_blocked(attrs, "QuantizeLinear")
    zero_point = optional_input(inputs, 2)
    if zero_point is None:
        # opset 21's output_dtype picks the type when there is no zero point; 0 means uint8
        zero_point = np.zeros((), dtype=onnx_dtype(attrs.get("output_dtype", 0) or 2, "QuantizeLinear"))
    axis = attrs.get("axis", 1)
    # onnxruntime quantizes float16 inputs in float32
    x = x.astype(np.float32) if x.dtype == np.float16 else x
    scale = _per_axis(scale, x, axis, "QuantizeLinear").astype(x.dtype)
    bounds = np.iinfo(zero_point.dtype)
    zero_point = _per_axis(zero_point, x, axis, "QuantizeLinear")
    # as MLAS: round half to even of x / scale, add the zero point, saturate, all in float32
    y = np.round(x / scale) + zero_point.astype(x.dtype)
    y = np.minimum(np.maximum(y, like(bounds.min, y)), like(bounds.max, y))
    return [y.astype(zero_point.dtype)]


@op("DequantizeLinear")
def _dequantize_linear(attrs, inputs, versions):
    x, scale = inputs[0], inputs[1]
    _check_not_blocked(attrs, "DequantizeLinear")
    zero_point = optional_input(inputs, 2)
    axis = attrs.get("axis", 1)
    scale = _per_axis(scale, x, axis, "DequantizeLinear")
    shifted = x.astype(np.int32)
    if zero_point is not None:
        shifted = shifted - _per_axis(zero_point, x, axis, "DequantizeLinear").astype(np.int32)
    return [shifted.astype(scale.dtype) * scale]


# --------------------------------------------------------------------------------------
# Standard ONNX: integer ops
# --------------------------------------------------------------------------------------

@op("MatMulInteger")
def _matmul_integer(attrs, inputs, versions):
    a, b = inputs[0].astype(np.int32), inputs[1].astype(np.int32)
    a_zero_point, b_zero_point = optional_input(inputs, 2), optional_input(inputs, 3)
    if a_zero_point is not None:
        # a 1-D a_zero_point holds one value per row of A
        a = a - (a_zero_point.astype(np.int32).reshape(-1, 1) if a_zero_point.ndim == 1 else a_zero_point)
    if b_zero_point is not None:
        b = b - b_zero_point.astype(np.int32)
    return [np.matmul(a.astype(np.int64), b.astype(np.int64)).astype(np.int32)]

def _requantize(accumulator: np.ndarray, multiplier: np.ndarray, zero_point: np.ndarray) -> np.ndarray:
    """MLAS's requantization of an int32 accumulator to the zero point's 8-bit type.

    ``MlasRequantizeOutput``: convert to float32, multiply by the float32 multiplier, clamp
    to ``[min - zero_point, max - zero_point]``, round half to even (``cvtps2dq``), add the
    zero point. The bounds are integers, so clamping before rounding is the same as after.
    """
    bounds = np.iinfo(zero_point.dtype)
    offset = np.int32(zero_point.reshape(-1)[0])
    scaled = accumulator.astype(np.float32) * multiplier
    scaled = np.clip(scaled, np.float32(bounds.min - offset), np.float32(bounds.max - offset))
    return (np.round(scaled).astype(np.int32) + offset).astype(zero_point.dtype)


def _output_multiplier(input_scale: np.ndarray, weight_scale: np.ndarray, output_scale: np.ndarray) -> np.ndarray:
    # onnxruntime computes input_scale * weight_scale / output_scale left to right in float32
    return (np.float32(input_scale.reshape(-1)[0]) * weight_scale.astype(np.float32).reshape(-1)
            / np.float32(output_scale.reshape(-1)[0]))


def _per_tensor(parameter: np.ndarray, what: str, op_type: str) -> np.ndarray:
    if parameter.size != 1:
        raise FrontendError(
            f"{op_type} {what} must be per-tensor (a scalar or one-element vector), not of shape {parameter.shape}"
        )
    return parameter


@op("QLinearMatMul")
def _qlinear_matmul(attrs, inputs, versions):
    a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, y_zero_point = inputs
    for what, parameter in (("a_scale", a_scale), ("a_zero_point", a_zero_point),
                            ("y_scale", y_scale), ("y_zero_point", y_zero_point)):
        _per_tensor(parameter, what, "QLinearMatMul")
    columns = b.shape[-1]
    for what, parameter in (("b_scale", b_scale), ("b_zero_point", b_zero_point)):
        if parameter.size not in (1, columns):
            raise FrontendError(
                f"QLinearMatMul {what} of shape {parameter.shape} must be per-tensor or hold one value per "
                f"column of b ({columns})"
            )
    shifted_a = a.astype(np.int32) - a_zero_point.astype(np.int32).reshape(-1)[0]
    # a per-column zero point broadcasts along b's last axis as a flat vector
    shifted_b = b.astype(np.int32) - b_zero_point.astype(np.int32).reshape(-1)
    accumulator = np.matmul(shifted_a.astype(np.int64), shifted_b.astype(np.int64)).astype(np.int32)
    return [_requantize(accumulator, _output_multiplier(a_scale, b_scale, y_scale), y_zero_point)]


@op("QGemm")
def _qgemm(attrs, inputs, versions):
    """onnxruntime's contrib ``QGemm`` on the CPU: the int32 bias ``C`` plus the product of the zero-point
    shifted ``A`` and ``B``, times ``alpha * a_scale * b_scale`` (per column of B), divided by ``y_scale``,
    in float32 left to right; requantized as MLAS does where ``y`` has a zero point, else that float32
    product."""
    a, a_scale, a_zero_point, b, b_scale, b_zero_point = inputs[:6]
    c, y_scale, y_zero_point = optional_input(inputs, 6), optional_input(inputs, 7), optional_input(inputs, 8)
    if attrs.get("transA", 0):
        a = a.T
    if attrs.get("transB", 0):
        b = b.T
    for what, parameter in (("a_scale", a_scale), ("a_zero_point", a_zero_point), ("y_scale", y_scale),
                            ("y_zero_point", y_zero_point)):
        if parameter is not None:
            _per_tensor(parameter, what, "QGemm")
    if (y_scale is None) != (y_zero_point is None):
        raise FrontendError("QGemm needs both y_scale and y_zero_point for an 8-bit output, or neither for a float one")
    columns = b.shape[-1]
    for what, parameter in (("b_scale", b_scale), ("b_zero_point", b_zero_point)):
        if parameter.size not in (1, columns):
            raise FrontendError(f"QGemm {what} of shape {parameter.shape} must be per-tensor or hold one value per "
                                f"column of B ({columns})")
    shifted_a = a.astype(np.int32) - a_zero_point.astype(np.int32).reshape(-1)[0]
    shifted_b = b.astype(np.int32) - b_zero_point.astype(np.int32).reshape(-1)
    accumulator = np.matmul(shifted_a.astype(np.int64), shifted_b.astype(np.int64)).astype(np.int32)
    if c is not None:
        accumulator = accumulator + c.astype(np.int32)
    scales = np.float32(attrs.get("alpha", 1.0)) * np.float32(a_scale.reshape(-1)[0]) * b_scale.astype(np.float32).reshape(-1)
    if y_scale is None:
        return [accumulator.astype(np.float32) * scales]
    return [_requantize(accumulator, scales / np.float32(y_scale.reshape(-1)[0]), y_zero_point)]

def _shift_weights(w: np.ndarray, zero_point: np.ndarray | None) -> np.ndarray:
    shifted = w.astype(np.int32)
    if zero_point is None:
        return shifted
    # a 1-D weight zero point holds one value per output channel
    return shifted - zero_point.astype(np.int32).reshape((-1,) + (1,) * (w.ndim - 1))


def _integer_convolution(x: np.ndarray, w: np.ndarray, windows: Windows, group: int) -> np.ndarray:
    """Convolution of zero-point-free int32 tensors, accumulated exactly, as int32."""
    def magnitude(a):
        return max(int(a.max(initial=0)), -int(a.min(initial=0)))

    largest_sum = magnitude(x) * magnitude(w) * w[0].size
    # float64 holds every partial sum exactly below 2**53 and takes numpy's BLAS path,
    # which is several times faster than int64
    wide = np.float64 if largest_sum < 2**53 else np.int64
    return convolution(x.astype(wide), w.astype(wide), windows, group).astype(np.int64).astype(np.int32)


@op("ConvInteger")
def _conv_integer(attrs, inputs, versions):
    x, w = inputs[0], inputs[1]
    x_zero_point, w_zero_point = optional_input(inputs, 2), optional_input(inputs, 3)
    windows, group = conv_geometry(attrs, x, w, "ConvInteger")
    shifted_x = x.astype(np.int32)
    if x_zero_point is not None:
        # padding holds the zero point: after the shift it is 0, as the window padding writes
        shifted_x = shifted_x - _per_tensor(x_zero_point, "x_zero_point", "ConvInteger").astype(np.int32).reshape(-1)[0]
    return [_integer_convolution(shifted_x, _shift_weights(w, w_zero_point), windows, group)]


@op("QLinearConv")
def _qlinear_conv(attrs, inputs, versions):
    x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale, y_zero_point = inputs[:8]
    bias = optional_input(inputs, 8)
    for what, parameter in (("x_scale", x_scale), ("x_zero_point", x_zero_point),
                            ("y_scale", y_scale), ("y_zero_point", y_zero_point)):
        _per_tensor(parameter, what, "QLinearConv")
    if w_scale.size not in (1, w.shape[0]):
        raise FrontendError(
            f"QLinearConv w_scale of shape {w_scale.shape} must be per-tensor or hold one value per output "
            f"channel ({w.shape[0]})"
        )
    windows, group = conv_geometry(attrs, x, w, "QLinearConv")
    shifted_x = x.astype(np.int32) - x_zero_point.astype(np.int32).reshape(-1)[0]
    accumulator = _integer_convolution(shifted_x, _shift_weights(w, w_zero_point), windows, group)
    if bias is not None:
        # MLAS adds the int32 bias before converting to float
        accumulator = accumulator + per_channel(bias.astype(np.int32), x.ndim)
    multiplier = per_channel(_output_multiplier(x_scale, w_scale, y_scale), x.ndim)
    return [_requantize(accumulator, multiplier, y_zero_point)]
