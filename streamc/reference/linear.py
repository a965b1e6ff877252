"""Linear algebra and normalization: ``MatMul``, ``Gemm``, ``BatchNormalization`` and ``Conv``.

``MatMul``, ``Gemm`` and ``Conv`` depend, in onnxruntime, on its accumulation order: here they
accumulate in float64 and round once to the input dtype, which equals onnxruntime whenever its
result is exact. The convolution itself (geometry checks, grouped taps) is shared with the
integer convolutions in :mod:`.quantization`.
"""

from __future__ import annotations

import math

import numpy as np

from streamc.errors import FrontendError

from .registry import ints, like, op, optional_input
from .windows import Windows, sliding_windows, window_geometry


def _matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if np.issubdtype(a.dtype, np.floating):
        # float64 accumulation rounded once: independent of BLAS blocking, and exact
        # (hence equal to onnxruntime) for integer-valued operands with sums below 2**24
        return np.matmul(a.astype(np.float64), b.astype(np.float64)).astype(a.dtype)
    return np.matmul(a, b)


@op("MatMul")
def _matmul_op(attrs, inputs, versions):
    a, b = inputs
    return [_matmul(a, b)]


@op("Gemm")
def _gemm(attrs, inputs, versions):
    a, b = inputs[0], inputs[1]
    c = optional_input(inputs, 2)
    if attrs.get("transA", 0):
        a = a.T
    if attrs.get("transB", 0):
        b = b.T
    y = _matmul(a, b)
    alpha, beta = attrs.get("alpha", 1.0), attrs.get("beta", 1.0)
    if c is None or beta == 0.0:
        return [like(alpha, y) * y if alpha != 1.0 else y]
    # MLAS scales the bias by beta first, then adds alpha * product with one fused
    # multiply-add; float64 holds the float32 product alpha * y exactly
    c = like(beta, c) * c if beta != 1.0 else c
    fused = np.float64(np.float32(alpha)) * y.astype(np.float64) + c.astype(np.float64)
    return [fused.astype(y.dtype)]


@op("BatchNormalization")
def _batch_normalization(attrs, inputs, versions):
    x, scale, bias, mean, var = inputs[:5]
    if attrs.get("training_mode", 0):
        raise FrontendError(
            "BatchNormalization with training_mode=1 is not supported; export the model for inference"
        )
    if versions.opset < 9 and not attrs.get("spatial", 1):
        raise FrontendError("BatchNormalization with spatial=0 is not supported; only spatial=1 (per-channel)")
    # onnxruntime folds the normalization into one scale and one bias per channel
    inverse_std = like(1, var) / np.sqrt(var + like(attrs.get("epsilon", 1e-5), var))
    channel_scale = inverse_std * scale
    channel_bias = bias - mean * channel_scale
    channel_shape = (-1,) + (1,) * (x.ndim - 2)
    return [x * channel_scale.reshape(channel_shape) + channel_bias.reshape(channel_shape)]


def conv_geometry(attrs: dict, x: np.ndarray, w: np.ndarray, op_type: str) -> tuple[Windows, int]:
    """The windows and group count of a Conv-family node, checked against its weights."""
    if w.ndim != x.ndim:
        raise FrontendError(
            f"{op_type} weights of shape {w.shape} must have the input's rank {x.ndim} "
            f"(M, C/group and one kernel size per spatial axis of input shape {x.shape})"
        )
    kernel = w.shape[2:]
    if "kernel_shape" in attrs and tuple(ints(attrs["kernel_shape"])) != kernel:
        raise FrontendError(
            f"{op_type} kernel_shape {ints(attrs['kernel_shape'])} does not match weights of shape {w.shape}"
        )
    group = attrs.get("group", 1)
    if x.shape[1] != w.shape[1] * group or w.shape[0] % group:
        raise FrontendError(
            f"{op_type} with group={group}: input channels {x.shape[1]} must equal weight channels {w.shape[1]} "
            f"x group, and output channels {w.shape[0]} must be divisible by group"
        )
    return window_geometry(attrs, x, kernel, op_type, pooling=False), group


def convolution(x: np.ndarray, w: np.ndarray, windows: Windows, group: int) -> np.ndarray:
    """Grouped convolution without bias, in the dtype of ``x`` and ``w`` (padding reads 0)."""
    taps = sliding_windows(x, windows, 0)
    batch, channels = x.shape[:2]
    out_channels = w.shape[0]
    taps = taps.reshape(batch, group, channels // group, math.prod(windows.output), taps.shape[-1])
    weights = w.reshape(group, out_channels // group, w.shape[1], -1)
    result = np.einsum("ngcpk,gmck->ngmp", taps, weights, optimize=True)
    return result.reshape((batch, out_channels) + windows.output)


def per_channel(vector: np.ndarray, rank: int) -> np.ndarray:
    """A per-output-channel vector shaped to broadcast over an ``[n, m, *spatial]`` tensor."""
    return vector.reshape((1, -1) + (1,) * (rank - 2))


@op("Conv")
def _conv(attrs, inputs, versions):
    x, w = inputs[0], inputs[1]
    bias = optional_input(inputs, 2)
    windows, group = conv_geometry(attrs, x, w, "Conv")
    # float64 accumulation rounded once, as for MatMul: exact (so equal to onnxruntime's
    # MLAS result) for integer-valued operands with sums below 2**24
    total = convolution(x.astype(np.float64), w.astype(np.float64), windows, group)
    if bias is not None:
        total = total + per_channel(bias.astype(np.float64), total.ndim)
    return [total.astype(x.dtype)]
