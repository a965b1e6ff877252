"""Reductions, ``Softmax`` and ``ArgMax``.

``ReduceSum`` and ``ReduceMean`` on floats and ``Softmax`` depend, in onnxruntime, on its
accumulation order: here they compute in float64 and round once to the input dtype.
"""

from __future__ import annotations

import math

import numpy as np

from .elementwise import integer_divide
from .registry import REGISTRY, op
from .shapes import node_axes


def _reduce(reduction, first_opset_with_axes_input: int):
    def run(attrs, inputs, versions):
        x = inputs[0]
        axes = node_axes(attrs, inputs, versions, first_opset_with_axes_input)
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
    return integer_divide(total, np.int64(count)).astype(x.dtype)


def _max_reduction(x, axes, keepdims):
    return np.max(x, axis=axes, keepdims=keepdims)


REGISTRY["ReduceSum"] = _reduce(_sum, 13)
REGISTRY["ReduceMean"] = _reduce(_mean, 18)
REGISTRY["ReduceMax"] = _reduce(_max_reduction, 18)


@op("Softmax")
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


@op("ArgMax")
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
