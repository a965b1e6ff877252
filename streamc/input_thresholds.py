"""The host head as thresholds on the float input: each input code a count of float32 thresholds reached.

The head (float input to the hardware's integer codes) of every streamc model is elementwise: shape ops, and ops
that each take one dynamic input and constants (``Mul``, ``Sub``, ``Quant``, ``Round``, ...). Each such op is
monotonic in its dynamic input, float rounding included (IEEE rounding is monotonic, and so are clamps and
the quantizers' roundings), so each code is a monotonic step function of one input element. Its steps are found
once by bisecting the float32 line with the head itself (streamc's executor), so the thresholds are exact by
construction: the code of ``x`` is ``low + sign * #{k : x >= t_k}``. This replaces the head's chain of float
ops over every input element (two thirds of TFC-w2a2's predict) by a compare per threshold, or a search.

Where a head has another op, a constant that is not finite, a division by a dynamic value or by zero, or a
non-float input, :func:`input_thresholds` gives None and the head runs in the executor. NaN could only arise
from an infinity (a division by zero and products with infinite constants are refused), at the ends of the
float line, so the extreme finite floats are checked; frames that are not finite take the executor's path.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from onnx import TensorProto

from .execute import execute
from .ir import Graph, Node
from .monotone import least_reaching
from .stages.base import narrowest_integers, thresholds_reached
from .transforms.tidy import SHAPE_OPS

#: Ops monotonic in their one dynamic input (the first, for ``Div``: a dynamic divisor is not).
MONOTONIC_HEAD_OPS = frozenset({"Add", "Sub", "Mul", "Div", "Neg", "Relu", "Clip", "Max", "Min", "Round", "Floor",
                                "Ceil", "Quant", "BipolarQuant", "QuantizeLinear", "DequantizeLinear", "Cast"})
#: Ops that multiply or divide their dynamic input by their second input: a zero there could make a NaN of an
#: infinity (``inf * 0``) in the middle of the float line, or divide by zero.
SCALING_OPS = frozenset({"Mul", "Div", "Quant", "BipolarQuant", "QuantizeLinear"})
_FLOAT_MAX = float(np.finfo(np.float32).max)


@dataclass
class InputThresholds:
    """Each stream position's thresholds ``(P, L)`` (or one row for all; sorted, ``+inf`` past the position's
    levels), its code at the bottom of the float line and whether codes fall as the input rises; ``source[j]``:
    the input element stream position ``j`` takes (None: the same order)."""

    thresholds: np.ndarray
    low: np.ndarray
    sign: np.ndarray
    source: np.ndarray | None
    dtype: np.dtype

    def codes(self, frames: np.ndarray) -> np.ndarray | None:
        """The codes of ``frames`` (N, *input shape; finite, as ``model_frames`` leaves them), one row per frame in
        stream order, in :attr:`dtype`; None if they are not float32 (the executor's path decides what those give)."""
        x = frames.reshape(len(frames), int(np.prod(frames.shape[1:])))
        if x.dtype != np.float32:
            return None
        if self.source is not None:
            x = x[:, self.source]
        count = thresholds_reached(x, self.thresholds, self.dtype)
        if (self.sign < 0).any():
            count *= self.sign
        count += self.low
        return count


def input_thresholds(head: Graph, to_stream_order) -> InputThresholds | None:
    """The head of a dataflow as :class:`InputThresholds`, or None where it is not an elementwise monotonic
    chain on a float32 input (see the module's documentation). ``to_stream_order``: the dataflow's
    :meth:`~streamc.hw.Dataflow.to_stream_order`."""
    given = head.inputs[0]
    if given.elem_type != TensorProto.FLOAT or not _monotonic(head):
        return None
    shape = (1, *given.shape[1:])
    size = int(np.prod(shape))

    def run(frames: np.ndarray) -> np.ndarray:
        return to_stream_order(execute(head, {given.name: frames.reshape(-1, *shape[1:])})[head.outputs[0].name])

    layout = to_stream_order(execute(_layout_only(head), {given.name: np.arange(size, dtype=np.float64)
                                                          .reshape(shape)})[head.outputs[0].name])[0]
    if layout.size != size or not np.array_equal(np.sort(layout), np.arange(size)):
        return None
    source = layout.astype(np.int64)
    with np.errstate(over="ignore", invalid="ignore"):
        ends = run(np.repeat(np.float32([[-_FLOAT_MAX], [_FLOAT_MAX]]), size, axis=1)).astype(np.float32)
    if not np.isfinite(ends).all() or not np.array_equal(ends, np.round(ends)):
        return None
    low, high = ends.astype(np.int64)
    sign = np.where(high >= low, 1, -1)
    levels = int(np.abs(high - low).max())
    with np.errstate(over="ignore", invalid="ignore"):   # the ends of the float line overflow the head's float ops
        thresholds = _bisect(run, source, low, sign, np.abs(high - low), levels)
    dtype = narrowest_integers(min(low.min(), high.min(), 0), max(low.max(), high.max(), levels))
    identity = np.array_equal(source, np.arange(size))
    if (thresholds == thresholds[:1]).all():
        thresholds = thresholds[:1]   # one row for every position: a search or compare without a row per position
    return InputThresholds(thresholds=thresholds, low=low.astype(dtype), sign=sign.astype(dtype),
                           source=None if identity else source, dtype=dtype)


def _bisect(run, source: np.ndarray, low: np.ndarray, sign: np.ndarray, steps: np.ndarray,
            levels: int) -> np.ndarray:
    """For each stream position and level ``k`` in 1..``levels``, the least float32 ``x`` whose code has moved
    ``k`` steps from ``low`` (``+inf`` past the position's ``steps``): a bisection over the float32 line ordered
    as integers, every position and level at once, a probe frame per level."""
    wanted = np.arange(1, levels + 1)[:, None]                    # (L, 1)
    inverse = np.argsort(source)

    def reached(order: np.ndarray) -> np.ndarray:
        probes = _from_order(order)[:, inverse]                    # stream position j's probe at source[j]
        return sign * (run(probes).astype(np.int64) - low) >= wanted

    # -FLOAT_MAX reaches no level; FLOAT_MAX reaches every level a position has
    lowest = np.full((levels, len(source)), _order(np.float32(-_FLOAT_MAX)) + 1, np.int64)
    thresholds = _from_order(least_reaching(reached, lowest, _order(np.float32(_FLOAT_MAX))))
    thresholds[wanted > steps[None, :]] = np.inf
    return np.ascontiguousarray(thresholds.T)


def _order(x: np.ndarray) -> np.ndarray:
    """float32 values as int64 in the same order (-0.0 and +0.0 both 0)."""
    bits = np.asarray(x, np.float32).view(np.uint32).astype(np.int64)
    return np.where(bits >= 1 << 31, (1 << 31) - bits, bits)


def _from_order(order: np.ndarray) -> np.ndarray:
    bits = np.where(order >= 0, order, (1 << 31) - order)
    return bits.astype(np.uint32).view(np.float32)


def _monotonic(head: Graph) -> bool:
    """Whether every node is a shape op or a :data:`MONOTONIC_HEAD_OPS` op on one dynamic input with finite
    constants (a scale or divisor none of them zero), a ``Cast`` only to a float or from an integer."""
    given = head.inputs[0]
    dtypes = {name: value.dtype for name, value in execute(head, {given.name: np.zeros(given.shape, np.float32)},
                                                           keep_all=True).items()}
    for node in head.nodes:
        dynamic = [k for k, name in enumerate(node.inputs) if name and name not in head.constants]
        if node.op_type in SHAPE_OPS:
            if dynamic != [0]:
                return False
            continue
        if node.op_type not in MONOTONIC_HEAD_OPS or len(dynamic) != 1:
            return False
        constants = [head.constants[name] for name in node.inputs if name and name in head.constants]
        if not all(np.isfinite(np.asarray(c, np.float64)).all() for c in constants):
            return False
        if node.op_type in SCALING_OPS:
            # Mul commutes; the others divide their first input by their second
            scale = node.inputs[1 - dynamic[0]] if node.op_type == "Mul" else node.inputs[1]
            if (node.op_type != "Mul" and dynamic != [0]) or not np.all(np.asarray(head.constants[scale]) != 0):
                return False
        if node.op_type == "Cast" and not (np.issubdtype(dtypes[node.outputs[0]], np.floating)
                                           or np.issubdtype(dtypes[node.inputs[0]], np.integer)):
            return False
    return True


def _layout_only(head: Graph) -> Graph:
    """The head with its shape ops only, every other op passing its dynamic input on: where each input element
    goes."""
    nodes = [node if node.op_type in SHAPE_OPS else
             Node("Identity", node.name, [next(n for n in node.inputs if n and n not in head.constants)],
                  node.outputs[:1])
             for node in head.nodes]
    return Graph(nodes=nodes, constants=head.constants, inputs=head.inputs, outputs=head.outputs, opset=head.opset,
                 qonnx_opset=head.qonnx_opset, name="head layout")
