"""Thresholds by search: a linear layer's output codes as a step function of its accumulator.

The model's own ops from the accumulator to the quantizer run in the reference executor, and every
channel's step points are binary-searched over the reachable accumulator range, then checked; a layer
with more thresholds than comparators pay for gets a requantization where one equals them, or one
with a few correction points where float32 rounding moved some steps.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ..datatypes import BIPOLAR, DataType, datatype_of_values, smallest_datatype
from ..errors import LoweringError
from ..execute import execute
from ..ir import Graph, Node, TensorInfo
from ..monotone import least_reaching
from ..requant_fit import fit_corrected, fit_requant
from ..rtl.requant import Requant
from .linear_layers import FLOAT_EXACT, Linear, acc_range, add_matmul, conv_geometry, linear_layer, rounded_terms
from .quantizers import Codes, Quantizer
from .tables import lower_lookup_table

#: Up to this many thresholds per channel (a 4-bit output) comparators are cheaper than a multiplier.
MAX_THRESHOLDS = 15
#: Accumulator values tried at random per channel to confirm the thresholds.
CHECK_SAMPLES = 2048
#: Window sums of codes whose terms are checked in one evaluation of the model's ops.
TERMS_CHECKED = 4096


@dataclass
class Thresholded:
    """A linear layer whose output is a step function of its accumulator, before it enters the graph."""

    linear: Linear
    weights: np.ndarray       # rows negated where the function falls
    lo: np.ndarray
    hi: np.ndarray
    thresholds: np.ndarray    # only the levels some channel can both miss and reach
    out_bias: int
    out_dtype: DataType
    quantizer: Quantizer
    requant: Requant | None = None

    @property
    def cheap(self) -> bool:
        """Few comparators, or one multiplier proven equal to them."""
        return self.thresholds.shape[1] <= MAX_THRESHOLDS or self.requant is not None


def thresholded(graph, node, codes, following, quantizer) -> Thresholded:
    """The linear layer or average ``node`` on ``codes``, with thresholds up to ``quantizer``.

    An average whose float32 terms decide some output codes (see :class:`.linear_layers.RoundedTerms`) sums
    each code's term, from a table before it."""
    linear = linear_layer(graph, node, codes)
    terms = rounded_terms(linear, codes) if linear.divisor else None
    if terms is not None:
        summed = replace(linear, terms=terms, offset=np.zeros_like(linear.offset),
                         pad=None if linear.pad is None else 0)
        if _terms_decide(graph, node, summed, codes, following, quantizer):
            linear = summed
    return threshold_layer(graph, node, linear, *acc_range(linear.weights, *linear.code_range(codes),
                                                            linear.acc_limit), following, quantizer)


def _terms_decide(graph, node, summed: Linear, codes, following, quantizer) -> bool:
    """Whether the rounding of an average's terms changes an output code: some window sum of codes gives
    different codes at the least and the greatest sum of the terms' errors."""
    terms = summed.terms
    if not terms.error_low <= 0 < terms.error_low + terms.base:
        return True  # the codes' sum alone (errors 0) is no window's value
    code_of = _code_function(graph, node, summed, following, quantizer)
    lo, hi = acc_range(summed.weights, *summed.code_range(codes), summed.acc_limit)
    first, last = ((np.array([lo.min(), hi.max()]) - terms.error_low) // terms.base).tolist()
    channels = len(summed.weights)
    for start in range(first, last + 1, TERMS_CHECKED):
        codes_sum = np.arange(start, min(start + TERMS_CHECKED, last + 1))
        low = np.repeat(codes_sum[:, None] * terms.base + terms.error_low, channels, axis=1)
        if np.any(code_of(low) != code_of(low + terms.base - 1)):
            return True
    return False


def _code_function(graph, node, linear: Linear, following, quantizer):
    """The codes ``quantizer`` outputs after ``following`` for accumulator values of ``linear`` (N, C)."""
    coding = quantizer.nodes[:quantizer.n_coding]
    last = coding[-1].outputs[0]
    channels = linear.weights.shape[0]
    sub = Graph(nodes=[*following, *coding], constants=graph.constants,
                inputs=[TensorInfo(node.outputs[0], (1, channels))],
                outputs=[TensorInfo(last, (1, channels))], opset=graph.opset, qonnx_opset=graph.qonnx_opset)

    def code_of(acc: np.ndarray) -> np.ndarray:
        y = execute(sub, {node.outputs[0]: linear.output(node, acc)})[last]
        if y.size != acc.size:
            raise LoweringError(f"the elementwise ops from {node.describe()} to quantizer {quantizer.name!r} differ "
                                "within a channel (a constant per pixel); streamc takes ops that are the same for "
                                "every pixel of a channel there")
        return quantizer.codes_from_output(y).reshape(acc.shape)

    return code_of


def threshold_layer(graph, node, linear: Linear, lo, hi, following, quantizer, *, requantize: bool = True) -> Thresholded:
    """Thresholds on the accumulator of ``linear`` that give the codes of ``quantizer`` after ``following``;
    with ``requantize``, a requantization equal to them too where there are many."""
    weights = linear.weights
    code_of = _code_function(graph, node, linear, following, quantizer)
    at_ends = code_of(np.stack([hi, lo]))
    levels = quantizer.levels(at_ends)
    # A channel whose code falls as acc grows (e.g. a negative BatchNorm scale) gets its weights negated.
    sign = np.where(at_ends[0] >= at_ends[1], 1, -1)
    weights = weights * sign[:, None]
    lo, hi = np.where(sign > 0, lo, -hi), np.where(sign > 0, hi, -lo)

    def code_of_signed(acc):
        return code_of(acc * sign)

    # per channel and level, the least accumulator value in lo..hi whose code reaches the level (hi + 1: none)
    wanted = levels[1:][None, :]
    thresholds = least_reaching(lambda acc: code_of_signed(acc.T).T >= wanted,
                                np.repeat(lo[:, None], wanted.shape[1], axis=1), (hi + 1)[:, None])
    _check_thresholds(code_of_signed, thresholds, lo, hi, levels, node, quantizer)
    # Drop levels no channel can miss, or none can reach: they cost comparators and output bits.
    always = np.all(thresholds <= lo[:, None], axis=0)
    never = np.all(thresholds > hi[:, None], axis=0)
    first = int(np.argmin(always)) if not always.all() else len(always)
    last_kept = len(never) - int(np.argmin(never[::-1])) if not never.all() else 0
    bipolar = quantizer.dtype == BIPOLAR
    if bipolar:
        first, last_kept = 0, 1
    else:  # keep one level at least, so that the unit still has an output
        first = min(first, len(levels) - 2)
        last_kept = max(last_kept, first + 1)
    kept = thresholds[:, first:last_kept].astype(np.int64)
    out_bias = int(levels[first])
    out_dtype = BIPOLAR if bipolar else smallest_datatype(out_bias, out_bias + kept.shape[1])
    result = Thresholded(linear, weights, lo, hi, kept, out_bias, out_dtype, quantizer)
    if requantize and kept.shape[1] > MAX_THRESHOLDS:
        # A multiplier costs about MAX_THRESHOLDS compares; each correction point one more.
        result.requant = (fit_requant(kept, lo, hi, out_bias)
                          or fit_corrected(kept, lo, hi, out_bias, kept.shape[1] - MAX_THRESHOLDS - 1))
    return result


def emit_thresholded_layer(graph, node, codes, layer: Thresholded, stages) -> tuple[list[Node], Codes]:
    quantizer, kept, out_bias, out_dtype = layer.quantizer, layer.thresholds, layer.out_bias, layer.out_dtype
    bipolar = out_dtype == BIPOLAR
    front = []
    if layer.linear.terms is not None:
        terms = layer.linear.terms
        stream_codes = Codes(codes.tensor, codes.dtype.min, codes.dtype.max, codes.dtype, codes.quantizer)
        front, codes = lower_lookup_table(graph, stream_codes, terms.table, codes.quantizer, stages)
    mm_nodes, acc = add_matmul(graph, node, codes, layer.linear, layer.weights, layer.lo, layer.hi)
    mt_out = graph.fresh_name(f"{quantizer.name}_codes")
    graph.datatypes[mt_out] = out_dtype
    attrs = {"out_dtype": out_dtype.name, "out_scale": 2.0 if bipolar else 1.0, "out_bias": float(out_bias)}
    if layer.linear.spatial:  # qonnx takes a rank-3 input as channels-last unless told otherwise
        attrs["data_layout"] = "NC" + "DHW"[3 - layer.linear.spatial:]
    exact = np.float32 if np.abs(kept).max(initial=0) < FLOAT_EXACT else np.float64
    mt = Node("MultiThreshold", graph.fresh_name(f"{quantizer.name}_thresholds"),
              [acc, graph.add_constant(f"{quantizer.name}_thresholds", kept.astype(exact))], [mt_out], attrs)
    stages.append(dict(kind="vvau" if layer.linear.depthwise else "mvau", name=node.name, inputs=[codes.tensor],
                       output=mt_out, weights=layer.weights, in_dtype=codes.dtype,
                       weight_dtype=datatype_of_values(layer.weights), thresholds=kept, requant=layer.requant,
                       out_dtype=out_dtype, out_bias=out_bias, acc_lo=layer.lo, acc_hi=layer.hi,
                       conv=conv_geometry(graph, node, layer.linear.pad)))
    out_hi = 1 if bipolar else out_bias + kept.shape[1]
    return [*front, *mm_nodes, mt], Codes(mt_out, out_bias, out_hi, out_dtype, quantizer)


def _check_thresholds(code_of, thresholds, lo, hi, levels, node, quantizer) -> None:
    """Compare the thresholds with the model's ops at the range ends and random accumulator values."""
    rng = np.random.default_rng(0)
    span = (hi - lo + 1).astype(np.float64)
    samples = lo[None, :] + np.floor(rng.random((CHECK_SAMPLES, len(lo))) * span[None, :]).astype(np.int64)
    samples = np.concatenate([lo[None, :], hi[None, :], thresholds.T, thresholds.T - 1, samples])
    samples = np.clip(samples, lo[None, :], hi[None, :])
    counts = (samples[:, :, None] >= thresholds[None, :, :]).sum(axis=2)
    if not np.array_equal(levels[counts], code_of(samples)):
        raise LoweringError(f"the function from {node.describe()} to quantizer {quantizer.name!r} is not monotonic "
                            "in the accumulator; it cannot be expressed as thresholds")
