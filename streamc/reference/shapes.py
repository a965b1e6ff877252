"""Shapes, data movement and constants; exact, as onnxruntime's CPU kernels are."""

from __future__ import annotations

import math

import numpy as np

from streamc.errors import FrontendError

from .registry import ints, like, op, optional_input, required


@op("Reshape")
def _reshape(attrs, inputs, versions):
    x = inputs[0]
    shape = ints(required(attrs, "shape", "Reshape") if versions.opset < 5 else inputs[1])
    if not attrs.get("allowzero", 0):
        # 0 copies the input's dimension at that index
        shape = [x.shape[i] if dim == 0 else dim for i, dim in enumerate(shape)]
    return [np.reshape(x, shape)]


@op("Flatten")
def _flatten(attrs, inputs, versions):
    (x,) = inputs
    axis = attrs.get("axis", 1)
    axis = axis + x.ndim if axis < 0 else axis
    return [x.reshape(math.prod(x.shape[:axis]), math.prod(x.shape[axis:]))]


@op("Transpose")
def _transpose(attrs, inputs, versions):
    (x,) = inputs
    return [np.transpose(x, attrs.get("perm"))]


@op("Identity")
def _identity(attrs, inputs, versions):
    return [inputs[0]]


@op("Dropout")
def _dropout(attrs, inputs, versions):
    x = inputs[0]
    training_mode = optional_input(inputs, 2)
    if training_mode is not None and bool(training_mode):
        raise FrontendError("Dropout with training_mode=True is not supported; export the model for inference")
    if versions.opset >= 12:
        return [x, np.ones(x.shape, dtype=np.bool_)]
    # before opset 12 onnxruntime runs Dropout as Identity and zero-fills the mask
    return [x, np.zeros(x.shape, dtype=np.bool_ if versions.opset >= 10 else x.dtype)]


def node_axes(attrs, inputs, versions, first_opset_with_input: int) -> list[int] | None:
    if versions.opset < first_opset_with_input:
        axes = attrs.get("axes")
    else:
        axes = optional_input(inputs, 1)
    return None if axes is None else ints(axes)


@op("Squeeze")
def _squeeze(attrs, inputs, versions):
    x = inputs[0]
    axes = node_axes(attrs, inputs, versions, 13)
    return [np.squeeze(x) if axes is None else np.squeeze(x, axis=tuple(axes))]


@op("Unsqueeze")
def _unsqueeze(attrs, inputs, versions):
    axes = node_axes(attrs, inputs, versions, 13)
    return [np.expand_dims(inputs[0], tuple(axes))]


@op("Concat")
def _concat(attrs, inputs, versions):
    return [np.concatenate(inputs, axis=required(attrs, "axis", "Concat"))]


@op("Shape")
def _shape(attrs, inputs, versions):
    shape = inputs[0].shape
    start = attrs.get("start", 0)
    end = attrs.get("end", len(shape))
    return [np.array(shape[start:end], dtype=np.int64)]


@op("Gather")
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


@op("Slice")
def _slice(attrs, inputs, versions):
    x = inputs[0]
    if versions.opset < 10:
        starts, ends = attrs["starts"], attrs["ends"]
        axes, steps = attrs.get("axes"), None
    else:
        starts, ends = inputs[1], inputs[2]
        axes, steps = optional_input(inputs, 3), optional_input(inputs, 4)
    starts, ends = ints(starts), ints(ends)
    axes = list(range(len(starts))) if axes is None else ints(axes)
    steps = [1] * len(starts) if steps is None else ints(steps)
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
        pads, value, axes = ints(required(attrs, "pads", "Pad")), attrs.get("value", 0.0), None
    else:
        pads, value, axes = ints(inputs[1]), optional_input(inputs, 2), optional_input(inputs, 3)
        # an empty constant_value tensor means the default 0
        value = 0 if value is None or value.size == 0 else value.reshape(-1)[0]
    axes = list(range(x.ndim)) if axes is None else [a + x.ndim if a < 0 else a for a in ints(axes)]
    if len(pads) != 2 * len(axes):
        raise FrontendError(
            f"Pad pads must hold 2 values per padded axis ({2 * len(axes)} for axes {axes} of input shape "
            f"{x.shape}), not {pads}"
        )
    before, after = [0] * x.ndim, [0] * x.ndim
    for i, axis in enumerate(axes):
        before[axis], after[axis] = pads[i], pads[len(axes) + i]
    return before, after, value


@op("Pad")
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
        return [np.pad(cropped, widths, constant_values=like(value, x))]
    for axis, ((b, a), size) in enumerate(zip(widths, cropped.shape)):
        if (b or a) and (size == 0 or (mode == "reflect" and max(b, a) >= size)):
            raise FrontendError(
                f"Pad mode {mode!r} cannot pad axis {axis} of length {size} by ({b}, {a})"
                + ("; reflect pads must be smaller than the axis length" if mode == "reflect" else "")
            )
    return [np.pad(cropped, widths, mode=mode)]


@op("Expand")
def _expand(attrs, inputs, versions):
    x, shape = inputs
    return [np.broadcast_to(x, np.broadcast_shapes(x.shape, tuple(ints(shape)))).copy()]


@op("Constant")
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


@op("ConstantOfShape")
def _constant_of_shape(attrs, inputs, versions):
    value = np.asarray(attrs.get("value", np.zeros(1, dtype=np.float32)))
    return [np.full(tuple(ints(inputs[0])), value.reshape(-1)[0], dtype=value.dtype)]
