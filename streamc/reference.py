"""Reference semantics of every operator streamc accepts, in numpy.

This module is what "bit-exact" means in streamc: hardware, transformed graphs and the
input model are all compared against :func:`run_node`. Each op is written to agree with
the executor the input model was written for:

* QONNX ops (``Quant``, ``BipolarQuant``, ``Trunc``, ``MultiThreshold``) follow qonnx 1.0's
  ``execute_node`` expression by expression -- the same operation order, the same dtypes
  (they compute in the dtype of their inputs, float32 for real models, and only ``Quant``
  casts its result to float32), including qonnx's quirks (clamping *before* rounding, 1-bit
  signed ``Quant`` ignoring ``narrow`` and rounding, ``HALF_UP`` computed as
  ``floor(|x| + 0.5)`` in float32).
* Standard ONNX ops follow onnxruntime's CPU kernels: elementwise arithmetic and data
  movement are exact, float16 arithmetic included (onnxruntime computes it in float32 and
  rounds once, as numpy does). Integer ops (``MatMulInteger``, ``ConvInteger``) are exact;
  the operator-oriented ``QLinearMatMul`` and ``QLinearConv`` requantize as MLAS does: the
  multiplier ``input_scale * weight_scale / output_scale`` in float32, the int32
  accumulator converted to float32 and multiplied by it, clamped, rounded half to even.
  ``Cast`` from float to integer reproduces onnxruntime's x86-64 result for out-of-range
  values too (truncation through int32, then the low bits). ``Sum`` and ``Mean`` add left to
  right in the input dtype, as onnxruntime does, and ``Mean`` multiplies by the reciprocal
  count. Convolution and pooling (1-, 2- and 3-D) take onnxruntime's window geometry: its
  ``SAME_*`` padding, its ``ceil_mode`` output size (a last window starting in the end
  padding is dropped) and its ``AveragePool`` divisor (``count_include_pad`` counts the
  padding but not what ``ceil_mode`` adds past it). Where onnxruntime's result depends on its
  own accumulation order or its own polynomial approximations (``MatMul``/``Gemm``/``Conv``,
  ``AveragePool``/``GlobalAveragePool``, ``ReduceSum``/``ReduceMean`` on floats, ``Exp``,
  ``Tanh``, ``Erf``, ``Softplus``, ``Softmax``, ``Pow``) this module computes in float64 and
  rounds once to the input dtype. ``Sigmoid`` on float32/float16
  replays MLAS's rational approximation with fused multiply-adds and is bit-exact. That is deterministic on every
  machine, equal to onnxruntime whenever onnxruntime is exact (integer-valued operands with
  sums below 2**24, which is what quantized graphs carry), and within a few ulp otherwise.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from streamc.errors import FrontendError

__all__ = ["SUPPORTED_OPS", "UnsupportedOpError", "run_node"]


class UnsupportedOpError(FrontendError):
    """An operator the reference executor (and so streamc) cannot execute."""


@dataclass(frozen=True)
class _Versions:
    opset: int
    qonnx_opset: int


_OpFunction = Callable[[dict, list, _Versions], list]
_REGISTRY: dict[str, _OpFunction] = {}


def _op(*names: str) -> Callable[[_OpFunction], _OpFunction]:
    def register(function: _OpFunction) -> _OpFunction:
        for name in names:
            _REGISTRY[name] = function
        return function

    return register


def run_node(
    op_type: str,
    attrs: dict,
    inputs: list[np.ndarray | None],
    *,
    opset: int = 13,
    qonnx_opset: int = 1,
) -> list[np.ndarray]:
    """Execute one node.

    Parameters
    ----------
    op_type : str
        Operator name, domain-normalized by the caller: ``Quant``, ``BipolarQuant``,
        ``Trunc`` and ``MultiThreshold`` are the QONNX ops, every other name is standard ONNX.
    attrs : dict
        Attributes as plain python values (int, float, str, lists, numpy arrays for tensors).
    inputs : list of numpy.ndarray or None
        Inputs in node order, ``None`` for an omitted optional input.
    opset : int
        The model's default-domain opset; selects e.g. attribute or input forms of
        ``Clip``, ``Squeeze``, ``Unsqueeze``, ``Slice``, ``Reshape``, ``Softmax``.
    qonnx_opset : int
        The model's qonnx-domain opset; ``Trunc`` has two versions.

    Returns
    -------
    list of numpy.ndarray
        The node's outputs. ``Dropout`` returns its output and its mask; a caller binds
        as many as the node names.

    Raises
    ------
    UnsupportedOpError
        If ``op_type`` is not one of :data:`SUPPORTED_OPS`.
    FrontendError
        If an attribute or input has a value the op does not support.
    """
    function = _REGISTRY.get(op_type)
    if function is None:
        raise UnsupportedOpError(
            f"op {op_type!r} is not supported by streamc's reference executor; "
            f"supported ops: {', '.join(sorted(_REGISTRY))}"
        )
    outputs = function(attrs, list(inputs), _Versions(opset, qonnx_opset))
    # numpy turns 0-d results into scalars; callers get arrays
    return [np.asarray(output) for output in outputs]


def _required(attrs: dict, name: str, op_type: str):
    if name not in attrs:
        raise FrontendError(f"{op_type} node requires attribute {name!r}; attributes given: {sorted(attrs)}")
    return attrs[name]


def _input(inputs: list, index: int) -> np.ndarray | None:
    return inputs[index] if index < len(inputs) else None


def _like(value, array: np.ndarray) -> np.ndarray:
    """A python constant in the array's dtype, so numpy does not promote the result."""
    return np.asarray(value, dtype=array.dtype)


def _ints(values) -> list[int]:
    return [int(v) for v in np.asarray(values).reshape(-1)]


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
    y = np.where(y > high, np.asarray(high).astype(y.dtype), y)
    return np.where(y < low, np.asarray(low).astype(y.dtype), y)


@_op("Quant")
def _quant(attrs, inputs, versions):
    x, scale, zero_point, bit_width = inputs
    signed = _required(attrs, "signed", "Quant")
    narrow = _required(attrs, "narrow", "Quant")
    rounding = _rounding(attrs.get("rounding_mode", "ROUND"), "Quant")
    y = x / scale
    y = y + zero_point
    # qonnx clamps before rounding: with a non-integer bit width, rounding may then
    # step outside [min_int, max_int] (7.5 bits: 89.51 rounds to 90)
    integers = rounding(_clamp(y, _min_int(signed, narrow, bit_width), _max_int(signed, narrow, bit_width)))
    if signed:
        # qonnx maps 1-bit signed Quant to bipolar {-1, +1}, ignoring narrow and rounding;
        # elementwise here, so that a per-channel bit width (which qonnx rejects) works too
        ones = np.ones(y.shape, dtype=y.dtype)
        integers = np.where(np.asarray(bit_width) == 1, np.where(y >= 0.0, ones, -ones), integers)
    out = (integers - zero_point) * scale
    return [np.asarray(out).astype(np.float32)]


@_op("BipolarQuant")
def _bipolar_quant(attrs, inputs, versions):
    x, scale = inputs
    ones = np.ones(x.shape, dtype=x.dtype)
    return [np.where(x >= 0.0, ones, -ones) * scale]


@_op("Trunc")
def _trunc(attrs, inputs, versions):
    rounding = _rounding(_required(attrs, "rounding_mode", "Trunc"), "Trunc")
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


@_op("MultiThreshold")
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
    return [_like(attrs.get("out_scale", 1.0), counts) * counts + _like(attrs.get("out_bias", 0.0), counts)]


# --------------------------------------------------------------------------------------
# Standard ONNX: arithmetic
# --------------------------------------------------------------------------------------

def _exact_float(function):
    """Elementwise ops numpy computes exactly as onnxruntime does, in the input dtype."""

    def run(attrs, inputs, versions):
        return [function(*inputs)]

    return run


def _integer_divide(a, b):
    # C++ integer division truncates toward zero; numpy's // floors
    quotient = a // b
    return quotient + ((a % b != 0) & ((a < 0) != (b < 0))).astype(quotient.dtype)


def _divide(a, b):
    if np.issubdtype(a.dtype, np.integer):
        return _integer_divide(a, b)
    return a / b


def _pow(base, exponent):
    if exponent.size == 1 and base.size != 1 and exponent.reshape(-1)[0] in (2, 3):
        # onnxruntime multiplies out a scalar exponent of 2 or 3, in the base's dtype
        return base * base if exponent.reshape(-1)[0] == 2 else base * base * base
    if np.issubdtype(base.dtype, np.integer):
        return np.power(base, exponent.astype(base.dtype))
    # onnxruntime calls std::pow: libm's powf for float32 (within an ulp of the float64
    # result this rounds, and exact where the result is representable), double otherwise.
    # numpy's own float32 power differs from powf in about 1 of 5 results.
    return np.power(base.astype(np.float64), exponent.astype(np.float64)).astype(base.dtype)


for _name, _function in {
    "Add": np.add,
    "Sub": np.subtract,
    "Mul": np.multiply,
    "Div": _divide,
    "Neg": np.negative,
    "Abs": np.abs,
    "Sqrt": np.sqrt,
    "Reciprocal": lambda x: _like(1, x) / x,
    "Pow": _pow,
    "Sign": np.sign,
    "Floor": np.floor,
    "Ceil": np.ceil,
    "Round": np.round,
    "Equal": np.equal,
    "Less": np.less,
    "Greater": np.greater,
    "Not": np.logical_not,
    "Where": np.where,
    "Relu": lambda x: np.maximum(x, _like(0, x)),
}.items():
    _REGISTRY[_name] = _exact_float(_function)


def _in_float64(function):
    """Transcendental ops: computed in float64, rounded once to the input dtype."""

    def run(attrs, inputs, versions):
        (x,) = inputs
        return [function(x.astype(np.float64)).astype(x.dtype)]

    return run


_erf = np.vectorize(math.erf, otypes=[np.float64])

for _name, _function in {
    "Exp": np.exp,
    "Log": np.log,
    "Tanh": np.tanh,
    "Erf": _erf,
    # onnxruntime evaluates x + log1p(exp(-x)) or log1p(exp(x)) with Eigen's float32 approximations
    "Softplus": lambda x: np.logaddexp(0.0, x),
}.items():
    _REGISTRY[_name] = _in_float64(_function)


# MLAS's logistic: Eigen's rational approximation on [-18, 18], evaluated with fused
# multiply-adds (its FMA3 kernel); float16 goes through it in float32
_LOGISTIC_NUMERATOR = np.array(
    [4.37031012579801e-11, 1.15627324459942e-07, 6.08574864600143e-05, 8.51377133304701e-03,
     2.48287947061529e-01], dtype=np.float32)
_LOGISTIC_DENOMINATOR = np.array(
    [6.10247389755681e-13, 5.76102136993427e-09, 6.29106785017040e-06, 1.70198817374094e-03,
     1.16817656904453e-01, 9.93151921023180e-01], dtype=np.float32)


def _fused_horner(coefficients: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Horner's scheme in float32 with each step one fused multiply-add (exact in float64)."""
    result = np.full(x.shape, coefficients[0], dtype=np.float32)
    wide_x = x.astype(np.float64)
    for coefficient in coefficients[1:]:
        result = (result.astype(np.float64) * wide_x + np.float64(coefficient)).astype(np.float32)
    return result


def _mlas_logistic(x: np.ndarray) -> np.ndarray:
    value = np.clip(x.astype(np.float32), np.float32(-18.0), np.float32(18.0))
    square = value * value
    numerator = _fused_horner(_LOGISTIC_NUMERATOR, square) * value
    denominator = _fused_horner(_LOGISTIC_DENOMINATOR, square)
    return np.clip(numerator / denominator + np.float32(0.5), np.float32(0.0), np.float32(1.0))


@_op("Sigmoid")
def _sigmoid(attrs, inputs, versions):
    (x,) = inputs
    if x.dtype in (np.float32, np.float16):
        return [_mlas_logistic(x).astype(x.dtype)]
    return [1.0 / (1.0 + np.exp(-x.astype(np.float64)))]


@_op("Max")
def _max(attrs, inputs, versions):
    return [np.maximum.reduce(np.broadcast_arrays(*inputs))]


@_op("Min")
def _min(attrs, inputs, versions):
    return [np.minimum.reduce(np.broadcast_arrays(*inputs))]


@_op("Sum")
def _sum_inputs(attrs, inputs, versions):
    # onnxruntime adds the (broadcast) inputs left to right in their dtype, as reduce does
    return [functools.reduce(np.add, inputs)]


@_op("Mean")
def _mean_inputs(attrs, inputs, versions):
    total = functools.reduce(np.add, inputs)
    if not np.issubdtype(total.dtype, np.floating):
        raise FrontendError(f"Mean inputs must be floating point, not {total.dtype}")
    # onnxruntime multiplies the sum by the reciprocal of the input count
    return [total * (_like(1, total) / _like(len(inputs), total))]


@_op("LeakyRelu")
def _leaky_relu(attrs, inputs, versions):
    (x,) = inputs
    return [np.where(x >= 0, x, _like(attrs.get("alpha", 0.01), x) * x)]


def _hard_sigmoid_of(x: np.ndarray, alpha: float, beta: float) -> np.ndarray:
    # onnxruntime: alpha * x + beta in the input dtype (two roundings, no fused
    # multiply-add), then min with 1 and max with 0
    linear = _like(alpha, x) * x + _like(beta, x)
    return np.maximum(np.minimum(linear, _like(1, x)), _like(0, x))


@_op("HardSigmoid")
def _hard_sigmoid(attrs, inputs, versions):
    (x,) = inputs
    return [_hard_sigmoid_of(x, attrs.get("alpha", 0.2), attrs.get("beta", 0.5))]


@_op("HardSwish")
def _hard_swish(attrs, inputs, versions):
    (x,) = inputs
    # onnxruntime runs ONNX's function body: x * HardSigmoid(x, alpha=1/6, beta=0.5)
    return [x * _hard_sigmoid_of(x, 1 / 6, 0.5)]


@_op("Clip")
def _clip(attrs, inputs, versions):
    x = inputs[0]
    if versions.opset < 11:
        low = attrs.get("min", float(np.finfo(np.float32).min))
        high = attrs.get("max", float(np.finfo(np.float32).max))
    else:
        low, high = _input(inputs, 1), _input(inputs, 2)
    if low is not None:
        x = np.maximum(x, _like(low, x))
    if high is not None:
        # applied last: where min > max, ONNX sets every value to max
        x = np.minimum(x, _like(high, x))
    return [x]


# --------------------------------------------------------------------------------------
# Standard ONNX: linear algebra and normalization
# --------------------------------------------------------------------------------------

def _matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if np.issubdtype(a.dtype, np.floating):
        # float64 accumulation rounded once: independent of BLAS blocking, and exact
        # (hence equal to onnxruntime) for integer-valued operands with sums below 2**24
        return np.matmul(a.astype(np.float64), b.astype(np.float64)).astype(a.dtype)
    return np.matmul(a, b)


@_op("MatMul")
def _matmul_op(attrs, inputs, versions):
    a, b = inputs
    return [_matmul(a, b)]


@_op("Gemm")
def _gemm(attrs, inputs, versions):
    a, b = inputs[0], inputs[1]
    c = _input(inputs, 2)
    if attrs.get("transA", 0):
        a = a.T
    if attrs.get("transB", 0):
        b = b.T
    y = _matmul(a, b)
    alpha, beta = attrs.get("alpha", 1.0), attrs.get("beta", 1.0)
    if c is None or beta == 0.0:
        return [_like(alpha, y) * y if alpha != 1.0 else y]
    # MLAS scales the bias by beta first, then adds alpha * product with one fused
    # multiply-add; float64 holds the float32 product alpha * y exactly
    c = _like(beta, c) * c if beta != 1.0 else c
    fused = np.float64(np.float32(alpha)) * y.astype(np.float64) + c.astype(np.float64)
    return [fused.astype(y.dtype)]


@_op("MatMulInteger")
def _matmul_integer(attrs, inputs, versions):
    a, b = inputs[0].astype(np.int32), inputs[1].astype(np.int32)
    a_zero_point, b_zero_point = _input(inputs, 2), _input(inputs, 3)
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


@_op("QLinearMatMul")
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


@_op("QGemm")
def _qgemm(attrs, inputs, versions):
    """onnxruntime's contrib ``QGemm`` on the CPU: the int32 bias ``C`` plus the product of the zero-point
    shifted ``A`` and ``B``, times ``alpha * a_scale * b_scale`` (per column of B), divided by ``y_scale``,
    in float32 left to right; requantized as MLAS does where ``y`` has a zero point, else that float32
    product."""
    a, a_scale, a_zero_point, b, b_scale, b_zero_point = inputs[:6]
    c, y_scale, y_zero_point = _input(inputs, 6), _input(inputs, 7), _input(inputs, 8)
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


@_op("BatchNormalization")
def _batch_normalization(attrs, inputs, versions):
    x, scale, bias, mean, var = inputs[:5]
    if attrs.get("training_mode", 0):
        raise FrontendError(
            "BatchNormalization with training_mode=1 is not supported; export the model for inference"
        )
    if versions.opset < 9 and not attrs.get("spatial", 1):
        raise FrontendError("BatchNormalization with spatial=0 is not supported; only spatial=1 (per-channel)")
    # onnxruntime folds the normalization into one scale and one bias per channel
    inverse_std = _like(1, var) / np.sqrt(var + _like(attrs.get("epsilon", 1e-5), var))
    channel_scale = inverse_std * scale
    channel_bias = bias - mean * channel_scale
    channel_shape = (-1,) + (1,) * (x.ndim - 2)
    return [x * channel_scale.reshape(channel_shape) + channel_bias.reshape(channel_shape)]


# --------------------------------------------------------------------------------------
# Standard ONNX: convolution and pooling (1-, 2- and 3-D, one sliding-window geometry)
# --------------------------------------------------------------------------------------

@dataclass(frozen=True)
class _Windows:
    """Where a convolution or pooling window sits along each spatial axis.

    Output position ``o`` of an axis reads the input at ``o * stride - pad_begin + j * dilation``
    for kernel taps ``j``; positions outside ``[0, input)`` are padding.
    """

    input: tuple[int, ...]
    kernel: tuple[int, ...]
    strides: tuple[int, ...]
    dilations: tuple[int, ...]
    pads_begin: tuple[int, ...]
    pads_end: tuple[int, ...]
    output: tuple[int, ...]

    def positions(self, axis: int) -> np.ndarray:
        """Input positions read along ``axis``, indexed ``[output position, kernel tap]``."""
        starts = np.arange(self.output[axis]) * self.strides[axis] - self.pads_begin[axis]
        return starts[:, np.newaxis] + np.arange(self.kernel[axis]) * self.dilations[axis]


_AUTO_PADS = ("NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER")


def _spatial_ints(attrs: dict, name: str, default: int, count: int, x: np.ndarray, op_type: str) -> tuple[int, ...]:
    # onnxruntime treats an empty list like an absent attribute
    values = _ints(attrs.get(name) or [default] * count)
    if len(values) != count:
        raise FrontendError(
            f"{op_type} {name} must hold {count} values for an input of shape {x.shape} "
            f"({x.ndim - 2} spatial axes), not {values}"
        )
    return tuple(values)


def window_geometry(attrs: dict, x: np.ndarray, kernel, op_type: str, *, pooling: bool) -> _Windows:
    """The windows of a Conv-family or pooling node, with onnxruntime's padding and output sizes.

    ``SAME_UPPER``/``SAME_LOWER`` pad ``(ceil(in / stride) - 1) * stride + kernel - in`` in
    total, the odd one at the end or at the beginning. With ``ceil_mode`` (pooling only) the
    output size is rounded up, less a last window that would start in the end padding
    (onnxruntime's rule, not the one ONNX shape inference applies).
    """
    if x.ndim < 3:
        raise FrontendError(f"{op_type} input must have rank >= 3 (N, C and spatial axes), not shape {x.shape}")
    spatial = x.ndim - 2
    kernel = tuple(_ints(kernel))
    if len(kernel) != spatial:
        raise FrontendError(
            f"{op_type} kernel shape {list(kernel)} must have one size per spatial axis of input shape {x.shape}"
        )
    strides = _spatial_ints(attrs, "strides", 1, spatial, x, op_type)
    dilations = _spatial_ints(attrs, "dilations", 1, spatial, x, op_type)
    sizes = x.shape[2:]
    auto_pad = attrs.get("auto_pad", "NOTSET")
    if auto_pad not in _AUTO_PADS:
        raise FrontendError(f"{op_type} auto_pad must be one of {', '.join(_AUTO_PADS)}, not {auto_pad!r}")
    if auto_pad == "NOTSET":
        pads = _spatial_ints(attrs, "pads", 0, 2 * spatial, x, op_type)
        pads_begin, pads_end = pads[:spatial], pads[spatial:]
    elif auto_pad == "VALID":
        pads_begin = pads_end = (0,) * spatial
    else:
        if any(d != 1 for d in dilations):
            raise FrontendError(
                f"{op_type} auto_pad={auto_pad} with dilations {list(dilations)} is not supported; "
                "write explicit pads"
            )
        needed = [(-(-size // stride) - 1) * stride + k - size for size, stride, k in zip(sizes, strides, kernel)]
        # a stride beyond the kernel can make the total negative: onnxruntime's Conv then pads
        # nothing, its pooling ops pad by the negative amounts, halved in C++ (toward zero)
        if not pooling:
            needed = [max(n, 0) for n in needed]
        extra = 1 if auto_pad == "SAME_LOWER" else 0
        pads_begin = tuple(int((n + extra) / 2) for n in needed)
        pads_end = tuple(n - begin for n, begin in zip(needed, pads_begin))
    ceil_mode = bool(attrs.get("ceil_mode", 0))
    output = []
    for size, k, stride, dilation, begin, end in zip(sizes, kernel, strides, dilations, pads_begin, pads_end):
        span = size + begin + end - (dilation * (k - 1) + 1)
        count = (-(-span // stride) if ceil_mode else span // stride) + 1
        if ceil_mode and (count - 1) * stride >= size + begin:
            count -= 1
        if span < 0 or count < 1:
            raise FrontendError(
                f"{op_type} window (kernel {list(kernel)}, dilations {list(dilations)}) does not fit input "
                f"shape {x.shape} padded by {list(pads_begin)} + {list(pads_end)}"
            )
        output.append(count)
    return _Windows(tuple(sizes), kernel, strides, dilations, pads_begin, pads_end, tuple(output))


def _sliding_windows(x: np.ndarray, windows: _Windows, fill) -> np.ndarray:
    """``x[n, c, *spatial]`` as ``[n, c, *output, tap]``, taps row-major over the kernel.

    Taps that fall outside the input read ``fill``.
    """
    widths, first_window = [(0, 0), (0, 0)], []
    for axis, size in enumerate(windows.input):
        positions = windows.positions(axis)
        before = max(-int(positions.min()), 0)
        widths.append((before, max(int(positions.max()) + 1 - size, 0)))
        first_window.append(positions[0] + before)
    padded = np.pad(x, widths, constant_values=fill)
    taps = np.empty(x.shape[:2] + windows.output + (math.prod(windows.kernel),), dtype=x.dtype)
    for tap, index in enumerate(np.ndindex(*windows.kernel)):
        region = tuple(
            slice(int(first[j]), int(first[j]) + stride * (count - 1) + 1, stride)
            for first, j, stride, count in zip(first_window, index, windows.strides, windows.output)
        )
        taps[..., tap] = padded[(slice(None), slice(None)) + region]
    return taps


def _conv_geometry(attrs: dict, x: np.ndarray, w: np.ndarray, op_type: str) -> tuple[_Windows, int]:
    """The windows and group count of a Conv-family node, checked against its weights."""
    if w.ndim != x.ndim:
        raise FrontendError(
            f"{op_type} weights of shape {w.shape} must have the input's rank {x.ndim} "
            f"(M, C/group and one kernel size per spatial axis of input shape {x.shape})"
        )
    kernel = w.shape[2:]
    if "kernel_shape" in attrs and tuple(_ints(attrs["kernel_shape"])) != kernel:
        raise FrontendError(
            f"{op_type} kernel_shape {_ints(attrs['kernel_shape'])} does not match weights of shape {w.shape}"
        )
    group = attrs.get("group", 1)
    if x.shape[1] != w.shape[1] * group or w.shape[0] % group:
        raise FrontendError(
            f"{op_type} with group={group}: input channels {x.shape[1]} must equal weight channels {w.shape[1]} "
            f"x group, and output channels {w.shape[0]} must be divisible by group"
        )
    return window_geometry(attrs, x, kernel, op_type, pooling=False), group


def _convolution(x: np.ndarray, w: np.ndarray, windows: _Windows, group: int) -> np.ndarray:
    """Grouped convolution without bias, in the dtype of ``x`` and ``w`` (padding reads 0)."""
    taps = _sliding_windows(x, windows, 0)
    batch, channels = x.shape[:2]
    out_channels = w.shape[0]
    taps = taps.reshape(batch, group, channels // group, math.prod(windows.output), taps.shape[-1])
    weights = w.reshape(group, out_channels // group, w.shape[1], -1)
    result = np.einsum("ngcpk,gmck->ngmp", taps, weights, optimize=True)
    return result.reshape((batch, out_channels) + windows.output)


def _per_channel(vector: np.ndarray, rank: int) -> np.ndarray:
    """A per-output-channel vector shaped to broadcast over an ``[n, m, *spatial]`` tensor."""
    return vector.reshape((1, -1) + (1,) * (rank - 2))


@_op("Conv")
def _conv(attrs, inputs, versions):
    x, w = inputs[0], inputs[1]
    bias = _input(inputs, 2)
    windows, group = _conv_geometry(attrs, x, w, "Conv")
    # float64 accumulation rounded once, as for MatMul: exact (so equal to onnxruntime's
    # MLAS result) for integer-valued operands with sums below 2**24
    total = _convolution(x.astype(np.float64), w.astype(np.float64), windows, group)
    if bias is not None:
        total = total + _per_channel(bias.astype(np.float64), total.ndim)
    return [total.astype(x.dtype)]


def _shift_weights(w: np.ndarray, zero_point: np.ndarray | None) -> np.ndarray:
    shifted = w.astype(np.int32)
    if zero_point is None:
        return shifted
    # a 1-D weight zero point holds one value per output channel
    return shifted - zero_point.astype(np.int32).reshape((-1,) + (1,) * (w.ndim - 1))


def _integer_convolution(x: np.ndarray, w: np.ndarray, windows: _Windows, group: int) -> np.ndarray:
    """Convolution of zero-point-free int32 tensors, accumulated exactly, as int32."""
    def magnitude(a):
        return max(int(a.max(initial=0)), -int(a.min(initial=0)))

    largest_sum = magnitude(x) * magnitude(w) * w[0].size
    # float64 holds every partial sum exactly below 2**53 and takes numpy's BLAS path,
    # which is several times faster than int64
    wide = np.float64 if largest_sum < 2**53 else np.int64
    return _convolution(x.astype(wide), w.astype(wide), windows, group).astype(np.int64).astype(np.int32)


@_op("ConvInteger")
def _conv_integer(attrs, inputs, versions):
    x, w = inputs[0], inputs[1]
    x_zero_point, w_zero_point = _input(inputs, 2), _input(inputs, 3)
    windows, group = _conv_geometry(attrs, x, w, "ConvInteger")
    shifted_x = x.astype(np.int32)
    if x_zero_point is not None:
        # padding holds the zero point: after the shift it is 0, as the window padding writes
        shifted_x = shifted_x - _per_tensor(x_zero_point, "x_zero_point", "ConvInteger").astype(np.int32).reshape(-1)[0]
    return [_integer_convolution(shifted_x, _shift_weights(w, w_zero_point), windows, group)]


@_op("QLinearConv")
def _qlinear_conv(attrs, inputs, versions):
    x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale, y_zero_point = inputs[:8]
    bias = _input(inputs, 8)
    for what, parameter in (("x_scale", x_scale), ("x_zero_point", x_zero_point),
                            ("y_scale", y_scale), ("y_zero_point", y_zero_point)):
        _per_tensor(parameter, what, "QLinearConv")
    if w_scale.size not in (1, w.shape[0]):
        raise FrontendError(
            f"QLinearConv w_scale of shape {w_scale.shape} must be per-tensor or hold one value per output "
            f"channel ({w.shape[0]})"
        )
    windows, group = _conv_geometry(attrs, x, w, "QLinearConv")
    shifted_x = x.astype(np.int32) - x_zero_point.astype(np.int32).reshape(-1)[0]
    accumulator = _integer_convolution(shifted_x, _shift_weights(w, w_zero_point), windows, group)
    if bias is not None:
        # MLAS adds the int32 bias before converting to float
        accumulator = accumulator + _per_channel(bias.astype(np.int32), x.ndim)
    multiplier = _per_channel(_output_multiplier(x_scale, w_scale, y_scale), x.ndim)
    return [_requantize(accumulator, multiplier, y_zero_point)]


def _max_pool_indices(windows: _Windows, chosen: np.ndarray, has_input: np.ndarray, column_major: bool) -> np.ndarray:
    """onnxruntime's MaxPool ``Indices``: the flat input index (batch and channel included) of each chosen tap.

    A window without input taps (all padding) reports coordinates -1, as onnxruntime does.
    """
    spatial = len(windows.kernel)
    kernel_index = np.unravel_index(chosen, windows.kernel)
    sizes = windows.input if column_major else windows.input[::-1]
    strides = np.cumprod((1,) + sizes[:-1])
    strides = strides if column_major else strides[::-1]
    within_plane = np.zeros(chosen.shape, dtype=np.int64)
    for axis in range(spatial):
        output_position = np.arange(windows.output[axis]).reshape((-1,) + (1,) * (spatial - 1 - axis))
        position = (output_position * windows.strides[axis] - windows.pads_begin[axis]
                    + kernel_index[axis] * windows.dilations[axis])
        within_plane += np.where(has_input, position, -1) * strides[axis]
    planes = np.arange(chosen.shape[0] * chosen.shape[1]).reshape(chosen.shape[:2] + (1,) * spatial)
    return planes * math.prod(windows.input) + within_plane


@_op("MaxPool")
def _max_pool(attrs, inputs, versions):
    (x,) = inputs
    storage_order = attrs.get("storage_order", 0)
    if storage_order not in (0, 1):
        raise FrontendError(f"MaxPool storage_order must be 0 (row major) or 1 (column major), not {storage_order!r}")
    windows = window_geometry(attrs, x, _required(attrs, "kernel_shape", "MaxPool"), "MaxPool", pooling=True)
    floating = np.issubdtype(x.dtype, np.floating)
    taps = _sliding_windows(x, windows, -np.inf if floating else np.iinfo(x.dtype).min)
    inside = _sliding_windows(np.ones((1, 1) + windows.input, dtype=np.bool_), windows, False)
    maximum = np.max(taps, axis=-1, keepdims=True)
    # onnxruntime's Indices: the first input tap (row-major kernel order) holding the
    # maximum, never a padding tap, even when the maximum is the dtype's minimum. (Where
    # onnxruntime pools with MLAS instead, one output and no dilations, a window of -inf
    # touching the padding gives the lowest finite float; -inf never reaches a quantized graph.)
    chosen = np.argmax((taps == maximum) & inside, axis=-1)
    has_input = inside.any(axis=-1)
    indices = _max_pool_indices(windows, chosen, has_input, column_major=storage_order == 1)
    # a window of padding only (possible with dilations) keeps onnxruntime's starting value
    lowest = np.finfo(x.dtype).min if floating else np.iinfo(x.dtype).min
    return [np.where(has_input, maximum[..., 0], _like(lowest, x)), indices]


def _taps_counted(windows: _Windows, include_pad: bool) -> np.ndarray:
    """How many taps of each window an average divides by, shaped like the output's spatial axes."""
    count = np.ones((), dtype=np.int64)
    for axis, size in enumerate(windows.input):
        positions = windows.positions(axis)
        # onnxruntime counts the padding taps, but not those past the end padding that ceil_mode adds
        inside = positions < size + windows.pads_end[axis] if include_pad else (positions >= 0) & (positions < size)
        count = np.multiply.outer(count, np.count_nonzero(inside, axis=1))
    return count


@_op("AveragePool")
def _average_pool(attrs, inputs, versions):
    (x,) = inputs
    windows = window_geometry(attrs, x, _required(attrs, "kernel_shape", "AveragePool"), "AveragePool", pooling=True)
    total = _sliding_windows(x.astype(np.float64), windows, 0.0).sum(axis=-1)
    # a window with no input tap is 0 in onnxruntime
    count = np.maximum(_taps_counted(windows, bool(attrs.get("count_include_pad", 0))), 1)
    return [(total / count).astype(x.dtype)]


@_op("GlobalAveragePool")
def _global_average_pool(attrs, inputs, versions):
    (x,) = inputs
    spatial = tuple(range(2, x.ndim))
    total = np.sum(x.astype(np.float64), axis=spatial, keepdims=True)
    return [(total / math.prod(x.shape[2:])).astype(x.dtype)]


@_op("GlobalMaxPool")
def _global_max_pool(attrs, inputs, versions):
    (x,) = inputs
    return [np.max(x, axis=tuple(range(2, x.ndim)), keepdims=True)]


# --------------------------------------------------------------------------------------
# Standard ONNX: shapes and data movement
# --------------------------------------------------------------------------------------

@_op("Reshape")
def _reshape(attrs, inputs, versions):
    x = inputs[0]
    shape = _ints(_required(attrs, "shape", "Reshape") if versions.opset < 5 else inputs[1])
    if not attrs.get("allowzero", 0):
        # 0 copies the input's dimension at that index
        shape = [x.shape[i] if dim == 0 else dim for i, dim in enumerate(shape)]
    return [np.reshape(x, shape)]


@_op("Flatten")
def _flatten(attrs, inputs, versions):
    (x,) = inputs
    axis = attrs.get("axis", 1)
    axis = axis + x.ndim if axis < 0 else axis
    return [x.reshape(math.prod(x.shape[:axis]), math.prod(x.shape[axis:]))]


@_op("Transpose")
def _transpose(attrs, inputs, versions):
    (x,) = inputs
    return [np.transpose(x, attrs.get("perm"))]


@_op("Identity")
def _identity(attrs, inputs, versions):
    return [inputs[0]]


@_op("Dropout")
def _dropout(attrs, inputs, versions):
    x = inputs[0]
    training_mode = _input(inputs, 2)
    if training_mode is not None and bool(training_mode):
        raise FrontendError("Dropout with training_mode=True is not supported; export the model for inference")
    if versions.opset >= 12:
        return [x, np.ones(x.shape, dtype=np.bool_)]
    # before opset 12 onnxruntime runs Dropout as Identity and zero-fills the mask
    return [x, np.zeros(x.shape, dtype=np.bool_ if versions.opset >= 10 else x.dtype)]


def _axes(attrs, inputs, versions, first_opset_with_input: int) -> list[int] | None:
    if versions.opset < first_opset_with_input:
        axes = attrs.get("axes")
    else:
        axes = _input(inputs, 1)
    return None if axes is None else _ints(axes)


@_op("Squeeze")
def _squeeze(attrs, inputs, versions):
    x = inputs[0]
    axes = _axes(attrs, inputs, versions, 13)
    return [np.squeeze(x) if axes is None else np.squeeze(x, axis=tuple(axes))]


@_op("Unsqueeze")
def _unsqueeze(attrs, inputs, versions):
    axes = _axes(attrs, inputs, versions, 13)
    return [np.expand_dims(inputs[0], tuple(axes))]


@_op("Concat")
def _concat(attrs, inputs, versions):
    return [np.concatenate(inputs, axis=_required(attrs, "axis", "Concat"))]


@_op("Shape")
def _shape(attrs, inputs, versions):
    shape = inputs[0].shape
    start = attrs.get("start", 0)
    end = attrs.get("end", len(shape))
    return [np.array(shape[start:end], dtype=np.int64)]


@_op("Gather")
def _gather(attrs, inputs, versions):
    data, indices = inputs
    return [np.take(data, indices, axis=attrs.get("axis", 0))]


def _onnx_slice(start: int, end: int, step: int, dim: int) -> slice:
    start = start + dim if start < 0 else start
    end = end + dim if end < 0 else end
    if step > 0:
        start, end = min(max(start, 0), dim), min(max(end, 0), dim)
        return slice(start, end, step)
    start, end = min(max(start, 0), dim - 1), min(max(end, -1), dim - 1)
    # end == -1 means "through index 0", which python spells None
    return slice(start, end if end >= 0 else None, step)


@_op("Slice")
def _slice(attrs, inputs, versions):
    x = inputs[0]
    if versions.opset < 10:
        starts, ends = attrs["starts"], attrs["ends"]
        axes, steps = attrs.get("axes"), None
    else:
        starts, ends = inputs[1], inputs[2]
        axes, steps = _input(inputs, 3), _input(inputs, 4)
    starts, ends = _ints(starts), _ints(ends)
    axes = list(range(len(starts))) if axes is None else _ints(axes)
    steps = [1] * len(starts) if steps is None else _ints(steps)
    index = [slice(None)] * x.ndim
    for start, end, axis, step in zip(starts, ends, axes, steps):
        if step == 0:
            raise FrontendError(f"Slice step must not be 0 (axis {axis})")
        axis = axis + x.ndim if axis < 0 else axis
        index[axis] = _onnx_slice(start, end, step, x.shape[axis])
    return [x[tuple(index)].copy()]


_PAD_MODES = ("constant", "reflect", "edge", "wrap")


def _pad_amounts(attrs, inputs, versions, x: np.ndarray) -> tuple[list[int], list[int], object]:
    """Pads before and after each axis, and the constant, from the attribute (opset < 11) or input form."""
    if versions.opset < 11:
        pads, value, axes = _ints(_required(attrs, "pads", "Pad")), attrs.get("value", 0.0), None
    else:
        pads, value, axes = _ints(inputs[1]), _input(inputs, 2), _input(inputs, 3)
        # an empty constant_value tensor means the default 0
        value = 0 if value is None or value.size == 0 else value.reshape(-1)[0]
    axes = list(range(x.ndim)) if axes is None else [a + x.ndim if a < 0 else a for a in _ints(axes)]
    if len(pads) != 2 * len(axes):
        raise FrontendError(
            f"Pad pads must hold 2 values per padded axis ({2 * len(axes)} for axes {axes} of input shape "
            f"{x.shape}), not {pads}"
        )
    before, after = [0] * x.ndim, [0] * x.ndim
    for i, axis in enumerate(axes):
        before[axis], after[axis] = pads[i], pads[len(axes) + i]
    return before, after, value


@_op("Pad")
def _pad(attrs, inputs, versions):
    x = inputs[0]
    mode = attrs.get("mode", "constant")
    if mode not in _PAD_MODES:
        raise FrontendError(f"Pad mode must be one of {', '.join(_PAD_MODES)}, not {mode!r}")
    before, after, value = _pad_amounts(attrs, inputs, versions, x)
    # onnxruntime crops by the negative pads first, then pads the cropped tensor
    cropped = x[tuple(slice(max(-b, 0), size - max(-a, 0)) for b, a, size in zip(before, after, x.shape))]
    widths = [(max(b, 0), max(a, 0)) for b, a in zip(before, after)]
    if mode == "constant":
        return [np.pad(cropped, widths, constant_values=_like(value, x))]
    for axis, ((b, a), size) in enumerate(zip(widths, cropped.shape)):
        if (b or a) and (size == 0 or (mode == "reflect" and max(b, a) >= size)):
            raise FrontendError(
                f"Pad mode {mode!r} cannot pad axis {axis} of length {size} by ({b}, {a})"
                + ("; reflect pads must be smaller than the axis length" if mode == "reflect" else "")
            )
    return [np.pad(cropped, widths, mode=mode)]


@_op("Expand")
def _expand(attrs, inputs, versions):
    x, shape = inputs
    return [np.broadcast_to(x, np.broadcast_shapes(x.shape, tuple(_ints(shape)))).copy()]


# ONNX TensorProto.DataType codes numpy represents natively
ONNX_DTYPES = {
    1: np.float32,
    2: np.uint8,
    3: np.int8,
    4: np.uint16,
    5: np.int16,
    6: np.int32,
    7: np.int64,
    9: np.bool_,
    10: np.float16,
    11: np.float64,
    12: np.uint32,
    13: np.uint64,
}


def _onnx_dtype(code: int, op_type: str):
    if code not in ONNX_DTYPES:
        raise FrontendError(
            f"{op_type} to data type {code} is not supported; supported TensorProto codes: "
            + ", ".join(f"{c} ({np.dtype(t).name})" for c, t in ONNX_DTYPES.items())
        )
    return ONNX_DTYPES[code]


def _float_to_integer(x: np.ndarray, dtype) -> np.ndarray:
    """A float to integer conversion as onnxruntime's x86-64 build performs it.

    C++ leaves an out-of-range conversion undefined; onnxruntime truncates toward zero with
    ``cvttss2si`` into int32 (int64 for the 64-bit types), which yields the minimum value
    for NaN and out-of-range inputs, then keeps the low bits: 300.7 -> int8 44, 255.9 ->
    int8 -1, NaN -> 0, 1e10 -> int32 -2147483648.
    """
    target = np.dtype(dtype)
    wide = np.int64 if target.itemsize >= 4 and target != np.int32 else np.int32
    limit = 2.0 ** (np.iinfo(wide).bits - 1)
    truncated = np.trunc(x.astype(np.float64))
    in_range = (truncated >= -limit) & (truncated < limit)
    return np.where(in_range, truncated, -limit).astype(wide).astype(target)


@_op("Cast")
def _cast(attrs, inputs, versions):
    (x,) = inputs
    dtype = _onnx_dtype(_required(attrs, "to", "Cast"), "Cast")
    if np.issubdtype(x.dtype, np.floating) and np.issubdtype(dtype, np.integer):
        return [_float_to_integer(x, dtype)]
    # every other pair is what numpy does: round to nearest even into floats (overflowing
    # to infinity, as onnxruntime does), wrap into integers
    with np.errstate(over="ignore"):
        return [x.astype(dtype)]


@_op("Constant")
def _constant(attrs, inputs, versions):
    if "value" in attrs:
        return [np.array(attrs["value"])]
    if "value_float" in attrs:
        return [np.array(attrs["value_float"], dtype=np.float32)]
    if "value_floats" in attrs:
        return [np.array(attrs["value_floats"], dtype=np.float32)]
    if "value_int" in attrs:
        return [np.array(attrs["value_int"], dtype=np.int64)]
    if "value_ints" in attrs:
        return [np.array(attrs["value_ints"], dtype=np.int64)]
    raise FrontendError(
        f"Constant needs one of value, value_float, value_floats, value_int, value_ints; got {sorted(attrs)}"
    )


@_op("ConstantOfShape")
def _constant_of_shape(attrs, inputs, versions):
    value = np.asarray(attrs.get("value", np.zeros(1, dtype=np.float32)))
    return [np.full(tuple(_ints(inputs[0])), value.reshape(-1)[0], dtype=value.dtype)]


# --------------------------------------------------------------------------------------
# Standard ONNX: reductions and Softmax
# --------------------------------------------------------------------------------------

def _reduce(reduction, first_opset_with_axes_input: int):
    def run(attrs, inputs, versions):
        x = inputs[0]
        axes = _axes(attrs, inputs, versions, first_opset_with_axes_input)
        if not axes:
            if attrs.get("noop_with_empty_axes", 0) and versions.opset >= first_opset_with_axes_input:
                return [x]
            axes = list(range(x.ndim))
        return [reduction(x, tuple(axes), bool(attrs.get("keepdims", 1)))]

    return run


def _sum(x, axes, keepdims):
    if np.issubdtype(x.dtype, np.floating):
        return np.sum(x.astype(np.float64), axis=axes, keepdims=keepdims).astype(x.dtype)
    return np.sum(x, axis=axes, keepdims=keepdims, dtype=x.dtype)


def _mean(x, axes, keepdims):
    count = math.prod(x.shape[a] for a in axes)
    total = np.sum(x, axis=axes, keepdims=keepdims, dtype=np.float64 if x.dtype.kind == "f" else np.int64)
    if np.issubdtype(x.dtype, np.floating):
        return (total / count).astype(x.dtype)
    return _integer_divide(total, np.int64(count)).astype(x.dtype)


def _max_reduction(x, axes, keepdims):
    return np.max(x, axis=axes, keepdims=keepdims)


_REGISTRY["ReduceSum"] = _reduce(_sum, 13)
_REGISTRY["ReduceMean"] = _reduce(_mean, 18)
_REGISTRY["ReduceMax"] = _reduce(_max_reduction, 18)


@_op("Softmax")
def _softmax(attrs, inputs, versions):
    (x,) = inputs
    wide = x.astype(np.float64)
    if versions.opset < 13:
        # before opset 13 Softmax works on the input coerced to 2-D at axis
        axis = attrs.get("axis", 1)
        axis = axis + x.ndim if axis < 0 else axis
        wide = wide.reshape(math.prod(x.shape[:axis]), -1)
        reduce_axis = 1
    else:
        reduce_axis = attrs.get("axis", -1)
    exponentials = np.exp(wide - wide.max(axis=reduce_axis, keepdims=True))
    result = exponentials / exponentials.sum(axis=reduce_axis, keepdims=True)
    return [result.reshape(x.shape).astype(x.dtype)]


@_op("ArgMax")
def _argmax(attrs, inputs, versions):
    (x,) = inputs
    axis = attrs.get("axis", 0)
    keepdims = bool(attrs.get("keepdims", 1))
    if attrs.get("select_last_index", 0):
        flipped = np.argmax(np.flip(x, axis=axis), axis=axis, keepdims=keepdims)
        index = x.shape[axis] - 1 - flipped
    else:
        index = np.argmax(x, axis=axis, keepdims=keepdims)
    return [index.astype(np.int64)]


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


@_op("QuantizeLinear")
def _quantize_linear(attrs, inputs, versions):
    x, scale = inputs[0], inputs[1]
    _check_not_blocked(attrs, "QuantizeLinear")
    zero_point = _input(inputs, 2)
    if zero_point is None:
        # opset 21's output_dtype picks the type when there is no zero point; 0 means uint8
        zero_point = np.zeros((), dtype=_onnx_dtype(attrs.get("output_dtype", 0) or 2, "QuantizeLinear"))
    axis = attrs.get("axis", 1)
    # onnxruntime quantizes float16 inputs in float32
    x = x.astype(np.float32) if x.dtype == np.float16 else x
    scale = _per_axis(scale, x, axis, "QuantizeLinear").astype(x.dtype)
    bounds = np.iinfo(zero_point.dtype)
    zero_point = _per_axis(zero_point, x, axis, "QuantizeLinear")
    # as MLAS: round half to even of x / scale, add the zero point, saturate, all in float32
    y = np.round(x / scale) + zero_point.astype(x.dtype)
    y = np.minimum(np.maximum(y, _like(bounds.min, y)), _like(bounds.max, y))
    return [y.astype(zero_point.dtype)]


@_op("DequantizeLinear")
def _dequantize_linear(attrs, inputs, versions):
    x, scale = inputs[0], inputs[1]
    _check_not_blocked(attrs, "DequantizeLinear")
    zero_point = _input(inputs, 2)
    axis = attrs.get("axis", 1)
    scale = _per_axis(scale, x, axis, "DequantizeLinear")
    shifted = x.astype(np.int32)
    if zero_point is not None:
        shifted = shifted - _per_axis(zero_point, x, axis, "DequantizeLinear").astype(np.int32)
    return [shifted.astype(scale.dtype) * scale]


SUPPORTED_OPS: frozenset[str] = frozenset(_REGISTRY)
