"""Convolution and pooling windows (1-, 2- and 3-D, one sliding-window geometry) and the pools.

Convolution and pooling take onnxruntime's window geometry: its ``SAME_*`` padding, its
``ceil_mode`` output size (a last window starting in the end padding is dropped) and its
``AveragePool`` divisor (``count_include_pad`` counts the padding but not what ``ceil_mode``
adds past it). ``AveragePool`` and ``GlobalAveragePool`` sum in float64 and round once to the
input dtype.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from streamc.errors import FrontendError

from .registry import ints, like, op, required


@dataclass(frozen=True)
class Windows:
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
    values = ints(attrs.get(name) or [default] * count)
    if len(values) != count:
        raise FrontendError(
            f"{op_type} {name} must hold {count} values for an input of shape {x.shape} "
            f"({x.ndim - 2} spatial axes), not {values}"
        )
    return tuple(values)


def window_geometry(attrs: dict, x: np.ndarray, kernel, op_type: str, *, pooling: bool) -> Windows:
    """The windows of a Conv-family or pooling node, with onnxruntime's padding and output sizes.

    ``SAME_UPPER``/``SAME_LOWER`` pad ``(ceil(in / stride) - 1) * stride + kernel - in`` in
    total, the odd one at the end or at the beginning. With ``ceil_mode`` (pooling only) the
    output size is rounded up, less a last window that would start in the end padding
    (onnxruntime's rule, not the one ONNX shape inference applies).
    """
    if x.ndim < 3:
        raise FrontendError(f"{op_type} input must have rank >= 3 (N, C and spatial axes), not shape {x.shape}")
    spatial = x.ndim - 2
    kernel = tuple(ints(kernel))
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
    return Windows(tuple(sizes), kernel, strides, dilations, pads_begin, pads_end, tuple(output))


def sliding_windows(x: np.ndarray, windows: Windows, fill) -> np.ndarray:
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


def _max_pool_indices(windows: Windows, chosen: np.ndarray, has_input: np.ndarray, column_major: bool) -> np.ndarray:
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


@op("MaxPool")
def _max_pool(attrs, inputs, versions):
    (x,) = inputs
    storage_order = attrs.get("storage_order", 0)
    if storage_order not in (0, 1):
        raise FrontendError(f"MaxPool storage_order must be 0 (row major) or 1 (column major), not {storage_order!r}")
    windows = window_geometry(attrs, x, required(attrs, "kernel_shape", "MaxPool"), "MaxPool", pooling=True)
    floating = np.issubdtype(x.dtype, np.floating)
    taps = sliding_windows(x, windows, -np.inf if floating else np.iinfo(x.dtype).min)
    inside = sliding_windows(np.ones((1, 1) + windows.input, dtype=np.bool_), windows, False)
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
    return [np.where(has_input, maximum[..., 0], like(lowest, x)), indices]


def _taps_counted(windows: Windows, include_pad: bool) -> np.ndarray:
    """How many taps of each window an average divides by, shaped like the output's spatial axes."""
    count = np.ones((), dtype=np.int64)
    for axis, size in enumerate(windows.input):
        positions = windows.positions(axis)
        # onnxruntime counts the padding taps, but not those past the end padding that ceil_mode adds
        inside = positions < size + windows.pads_end[axis] if include_pad else (positions >= 0) & (positions < size)
        count = np.multiply.outer(count, np.count_nonzero(inside, axis=1))
    return count


@op("AveragePool")
def _average_pool(attrs, inputs, versions):
    (x,) = inputs
    windows = window_geometry(attrs, x, required(attrs, "kernel_shape", "AveragePool"), "AveragePool", pooling=True)
    total = sliding_windows(x.astype(np.float64), windows, 0.0).sum(axis=-1)
    # a window with no input tap is 0 in onnxruntime
    count = np.maximum(_taps_counted(windows, bool(attrs.get("count_include_pad", 0))), 1)
    return [(total / count).astype(x.dtype)]


@op("GlobalAveragePool")
def _global_average_pool(attrs, inputs, versions):
    (x,) = inputs
    spatial = tuple(range(2, x.ndim))
    total = np.sum(x.astype(np.float64), axis=spatial, keepdims=True)
    return [(total / math.prod(x.shape[2:])).astype(x.dtype)]


@op("GlobalMaxPool")
def _global_max_pool(attrs, inputs, versions):
    (x,) = inputs
    return [np.max(x, axis=tuple(range(2, x.ndim)), keepdims=True)]
