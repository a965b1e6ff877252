"""Exact integer implementations of ONNX's quantized ops (and exactly summed averages of dequantized
values), the oracle the tests compare streamc with.

Written from the ONNX operator definitions (and com.microsoft's QGemm), independently of streamc:
every integer product and sum is exact in numpy int64. onnxruntime is not an exact oracle here: on
x86 CPUs without VNNI its u8 x s8 kernels add pairs of products in saturating int16 (vpmaddubsw).

Where the definitions leave float arithmetic open, these follow onnxruntime's MLAS, the runtime
the quantized models are written for:

- requantization is ``float32(acc) * multiplier`` with the multiplier computed once in float32,
  ``x_scale * w_scale / y_scale`` left to right (QGemm: ``alpha * a_scale * b_scale [/ y_scale]``);
  the product is rounded half to even, the zero point added, and the result saturated;
- QuantizeLinear divides by the scale in float32 (not a multiply by its reciprocal);
- DequantizeLinear subtracts the zero point in integers, then multiplies in float32.

Integer inputs are stored codes; a zero point is subtracted before any product, so padding a
convolution with 0 after the subtraction is padding with the zero point's code, as onnxruntime does.
"""

from __future__ import annotations

import math

import numpy as np
from onnx import helper


def _int(x) -> np.ndarray:
    return np.asarray(x).astype(np.int64)


def _per_axis(values, ndim: int, axis: int) -> np.ndarray:
    """A scalar, one-element or per-axis parameter shaped to broadcast against a rank-``ndim`` tensor."""
    values = np.asarray(values)
    if values.size == 1:
        return values.reshape(())
    shape = [1] * ndim
    shape[axis % ndim] = values.size
    return values.reshape(shape)


def _saturate_round(scaled: np.ndarray, zero_point: np.ndarray, dtype) -> np.ndarray:
    """round_half_to_even(scaled) + zero_point, saturated to ``dtype``.

    Clamping before rounding (as MLAS does) equals clamping after, the bounds being integers, and keeps
    infinities and huge values out of the integer conversion.
    """
    info = np.iinfo(dtype)
    zero_point = _int(zero_point)
    clamped = np.clip(scaled.astype(np.float64), info.min - zero_point, info.max - zero_point)
    return (np.rint(clamped).astype(np.int64) + zero_point).astype(dtype)


def _output_type(zero_point, output_dtype: int):
    if zero_point is not None:
        return np.asarray(zero_point).dtype
    if output_dtype:
        return helper.tensor_dtype_to_np_dtype(output_dtype)
    return np.dtype(np.uint8)  # the definition's default when neither says


def _check_block_size(op_type: str, block_size: int) -> None:
    if block_size:
        raise NotImplementedError(f"{op_type} with block_size={block_size} (blocked quantization)")


# ------------------------------------------------------------------------------------------------
# QuantizeLinear / DequantizeLinear (opsets 10-21: per-tensor and per-axis)
# ------------------------------------------------------------------------------------------------

def quantize_linear(x, y_scale, y_zero_point=None, *, axis: int = 1, block_size: int = 0, saturate: int = 1,
                    output_dtype: int = 0) -> np.ndarray:
    """``saturate(round(x / y_scale) + y_zero_point)``; ``saturate`` only concerns float8 outputs."""
    _check_block_size("QuantizeLinear", block_size)
    dtype = _output_type(y_zero_point, output_dtype)
    if not np.issubdtype(dtype, np.integer) or np.dtype(dtype).itemsize > 4:
        raise NotImplementedError(f"QuantizeLinear to {np.dtype(dtype)}")
    x = np.asarray(x)
    # float16 inputs and scales are widened: onnxruntime quantizes them in float32
    scale = _per_axis(np.asarray(y_scale, np.float32), x.ndim, axis)
    zero_point = _per_axis(0 if y_zero_point is None else y_zero_point, x.ndim, axis)
    return _saturate_round(x.astype(np.float32) / scale, zero_point, dtype)


def dequantize_linear(x, x_scale, x_zero_point=None, *, axis: int = 1, block_size: int = 0) -> np.ndarray:
    """``(x - x_zero_point) * x_scale`` in the scale's float type."""
    _check_block_size("DequantizeLinear", block_size)
    x, scale = np.asarray(x), np.asarray(x_scale)
    zero_point = _per_axis(0 if x_zero_point is None else x_zero_point, x.ndim, axis)
    # the difference is exact in int64; converting it to float32 rounds only beyond 2**24 (int32 inputs)
    difference = (_int(x) - _int(zero_point)).astype(np.float32)
    return (difference * _per_axis(scale.astype(np.float32), x.ndim, axis)).astype(scale.dtype)


# ------------------------------------------------------------------------------------------------
# Integer products
# ------------------------------------------------------------------------------------------------

def _matmul_accumulator(a, b, a_zero_point=None, b_zero_point=None) -> np.ndarray:
    a, b = np.asarray(a), np.asarray(b)
    a_zero = _int(0 if a_zero_point is None else a_zero_point)
    b_zero = _int(0 if b_zero_point is None else b_zero_point)
    if a_zero.ndim == 1 and a_zero.size > 1:
        a_zero = a_zero.reshape(-1, 1)  # one zero point per row of A
    # b's 1-D zero point (one per column) broadcasts along the last axis as it is
    return np.matmul(_int(a) - a_zero, _int(b) - b_zero)


def matmul_integer(a, b, a_zero_point=None, b_zero_point=None) -> np.ndarray:
    """``(a - a_zero_point) @ (b - b_zero_point)`` in int32."""
    return _matmul_accumulator(a, b, a_zero_point, b_zero_point).astype(np.int32)


def _conv_pads(size, kernel, strides, dilations, auto_pad: str, pads) -> tuple[list[int], list[int]]:
    rank = len(size)
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        begins, ends = [], []
        for n, k, s, d in zip(size, kernel, strides, dilations):
            total = (math.ceil(n / s) - 1) * s + (k - 1) * d + 1 - n
            # onnxruntime halves with C's truncation, which matters where the total is negative
            # (strides beyond the kernel): the odd step goes to the end (UPPER) or the start (LOWER)
            half = int(total / 2) if auto_pad == "SAME_UPPER" else int((total + 1) / 2)
            begins.append(half)
            ends.append(total - half)
        return begins, ends
    if auto_pad == "VALID" or not pads:
        return [0] * rank, [0] * rank
    if auto_pad != "NOTSET":
        raise ValueError(f"auto_pad {auto_pad!r}")
    return list(pads[:rank]), list(pads[rank:])


def _pad_spatial(x: np.ndarray, begins, ends) -> np.ndarray:
    """Zero padding of the spatial axes; negative amounts crop."""
    crop = (slice(None), slice(None)) + tuple(slice(max(-b, 0), n - max(-e, 0))
                                              for b, e, n in zip(begins, ends, x.shape[2:]))
    widths = [(0, 0), (0, 0)] + [(max(b, 0), max(e, 0)) for b, e in zip(begins, ends)]
    return np.pad(x[crop], widths)


def _conv_accumulator(x: np.ndarray, w: np.ndarray, *, auto_pad="NOTSET", pads=None, strides=None,
                      dilations=None, group: int = 1, kernel_shape=None) -> np.ndarray:
    """Convolution (cross-correlation) of ``x`` (N, C, *spatial) with ``w`` (M, C/group, *kernel), in
    their dtype (int64: exact)."""
    if isinstance(auto_pad, bytes):
        auto_pad = auto_pad.decode()
    rank = x.ndim - 2
    kernel = list(kernel_shape or w.shape[2:])
    strides, dilations = list(strides or [1] * rank), list(dilations or [1] * rank)
    begins, ends = _conv_pads(x.shape[2:], kernel, strides, dilations, auto_pad, pads)
    x = _pad_spatial(x, begins, ends)
    out_shape = [(n - (k - 1) * d - 1) // s + 1 for n, k, d, s in zip(x.shape[2:], kernel, dilations, strides)]
    batch, channels, out_channels = x.shape[0], x.shape[1], w.shape[0]
    group_in, group_out = channels // group, out_channels // group
    y = np.zeros((batch, out_channels, *out_shape), np.result_type(x, w))
    # one kernel tap at a time: the input positions it sees for every output position form a strided slice
    for tap in np.ndindex(*kernel):
        window = x[(slice(None), slice(None)) + tuple(slice(t * d, t * d + (o - 1) * s + 1, s)
                                                      for t, d, s, o in zip(tap, dilations, strides, out_shape))]
        for g in range(group):
            taps = w[(slice(g * group_out, (g + 1) * group_out), slice(None)) + tap]
            y[:, g * group_out:(g + 1) * group_out] += np.einsum(
                "nc...,mc->nm...", window[:, g * group_in:(g + 1) * group_in], taps)
    return y


def _conv_operands(x, w, x_zero_point, w_zero_point) -> tuple[np.ndarray, np.ndarray]:
    x, w = np.asarray(x), np.asarray(w)
    x = _int(x) - _int(0 if x_zero_point is None else x_zero_point).reshape(())
    w = _int(w) - _per_axis(_int(0 if w_zero_point is None else w_zero_point), w.ndim, 0)
    return x, w


def conv_integer(x, w, x_zero_point=None, w_zero_point=None, **attrs) -> np.ndarray:
    """ConvInteger: any rank, pads/auto_pad, strides, dilations, group; w's zero point may be per output channel."""
    return _conv_accumulator(*_conv_operands(x, w, x_zero_point, w_zero_point), **attrs).astype(np.int32)


# ------------------------------------------------------------------------------------------------
# Averages of dequantized values
# ------------------------------------------------------------------------------------------------
# A QDQ average pool sums codes of one scale and divides by the window's size: exact ties (a mean of
# k + 0.5 codes) are common, and onnxruntime's float32 running sum lands them a rounding either side,
# so its AveragePool is no oracle there. These sum in float64, exact for values of one scale (their
# exponents span far fewer than float64's 29 spare bits), and round the mean once.

def average_pool(x, *, kernel_shape, auto_pad="NOTSET", pads=None, strides=None, dilations=None,
                 ceil_mode: int = 0, count_include_pad: int = 0) -> np.ndarray:
    """AveragePool of a float tensor; ``ceil_mode`` is not implemented (the zoo and test models use none)."""
    if ceil_mode:
        raise NotImplementedError("AveragePool with ceil_mode=1")
    x = np.asarray(x)
    channels = x.shape[1]
    geometry = dict(auto_pad=auto_pad, pads=pads, strides=strides, dilations=dilations, kernel_shape=kernel_shape)
    window = np.ones((channels, 1, *kernel_shape))
    total = _conv_accumulator(x.astype(np.float64), window, group=channels, **geometry)
    if count_include_pad:
        count = math.prod(kernel_shape)
    else:
        count = _conv_accumulator(np.ones((1, 1, *x.shape[2:])), np.ones((1, 1, *kernel_shape)), **geometry)
    return (total / np.maximum(count, 1)).astype(x.dtype)


def global_average_pool(x) -> np.ndarray:
    x = np.asarray(x)
    return np.mean(x.astype(np.float64), axis=tuple(range(2, x.ndim)), keepdims=True).astype(x.dtype)


# ------------------------------------------------------------------------------------------------
# Requantizing ops
# ------------------------------------------------------------------------------------------------

def requantize(accumulator: np.ndarray, multiplier: np.ndarray, zero_point) -> np.ndarray:
    """MLAS's requantization: ``float32(acc) * multiplier`` (one float32 rounding), then round half to
    even, add the zero point and saturate to its type."""
    scaled = _int(accumulator).astype(np.float32) * np.asarray(multiplier, np.float32)
    return _saturate_round(scaled, np.asarray(zero_point).reshape(()), np.asarray(zero_point).dtype)


def _f32(value) -> np.ndarray:
    return np.asarray(value, np.float32)


def qlinear_matmul(a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, y_zero_point) -> np.ndarray:
    """QLinearMatMul; b's scale and zero point may be per column."""
    accumulator = _matmul_accumulator(a, b, a_zero_point, b_zero_point)
    # float32(a_scale * b_scale) / y_scale, as onnxruntime computes it once per column
    # (a per-column scale, of shape (N,) or (1, N), broadcasts along the accumulator's last axis)
    multiplier = _f32(a_scale).reshape(()) * _f32(b_scale) / _f32(y_scale).reshape(())
    return requantize(accumulator, multiplier, y_zero_point)


def qlinear_conv(x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale, y_zero_point, B=None,
                 **attrs) -> np.ndarray:
    """QLinearConv; w's scale (and zero point) may be per output channel, B is an int32 bias per channel."""
    accumulator = _conv_accumulator(*_conv_operands(x, w, x_zero_point, w_zero_point), **attrs)
    if B is not None:
        accumulator = accumulator + _per_axis(_int(B), accumulator.ndim, 1)  # exact, before the scaling
    multiplier = _f32(x_scale).reshape(()) * _f32(w_scale) / _f32(y_scale).reshape(())
    return requantize(accumulator, _per_axis(multiplier, accumulator.ndim, 1), y_zero_point)


def qgemm(a, a_scale, a_zero_point, b, b_scale, b_zero_point, c=None, y_scale=None, y_zero_point=None, *,
          alpha: float = 1.0, transA: int = 0, transB: int = 0) -> np.ndarray:
    """com.microsoft QGemm: ``alpha * (A' @ B')`` with A' = A - a_zero_point, B' = B - b_zero_point (per
    column allowed), plus the int32 bias ``c`` added to the accumulator; requantized with y_scale and
    y_zero_point, or float32 ``float32(acc) * alpha * a_scale * b_scale`` when y_scale is absent."""
    a, b = np.asarray(a), np.asarray(b)
    a, b = (a.T if transA else a), (b.T if transB else b)
    accumulator = _matmul_accumulator(a, b, a_zero_point, b_zero_point)
    if c is not None:
        accumulator = accumulator + _int(c)
    # onnxruntime: alpha * a_scale * b_scale[j], left to right in float32, then / y_scale
    scale = np.float32(alpha) * _f32(a_scale).reshape(()) * _f32(b_scale).reshape(-1)
    if y_scale is None:
        if y_zero_point is not None:
            raise ValueError("QGemm with a y_zero_point but no y_scale")
        return _int(accumulator).astype(np.float32) * scale
    if y_zero_point is None:
        raise ValueError("QGemm with a y_scale but no y_zero_point")
    return requantize(accumulator, scale / _f32(y_scale).reshape(()), y_zero_point)


#: (domain, op_type) -> implementation: inputs positionally (None for an absent optional input), attributes by name.
OPS = {
    ("", "QuantizeLinear"): quantize_linear,
    ("", "DequantizeLinear"): dequantize_linear,
    ("", "MatMulInteger"): matmul_integer,
    ("", "ConvInteger"): conv_integer,
    ("", "QLinearMatMul"): qlinear_matmul,
    ("", "QLinearConv"): qlinear_conv,
    ("com.microsoft", "QGemm"): qgemm,
    ("", "AveragePool"): average_pool,
    ("", "GlobalAveragePool"): global_average_pool,
}
