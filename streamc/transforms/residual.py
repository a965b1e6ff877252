"""Residual adds: two quantized branches weighted by small integers, then thresholds on the sum."""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from ..datatypes import BIPOLAR, datatype_of_values, smallest_datatype
from ..errors import LoweringError
from ..execute import execute
from ..ir import Graph, Node, TensorInfo
from .linear_layers import Linear
from .quantizers import Codes, channel_values, code_values, reading
from .thresholds import Thresholded, threshold_layer


def lower_add(graph, node, reads: list[tuple[Codes, bool]], following, quantizer, stages) -> tuple[list[Node], Codes]:
    """A residual ``Add`` of two quantized branches up to its quantizer: ``t = ka*a + kb*b`` on the codes, then
    thresholds on ``t``. ``ka : kb`` is the ratio of the branches' scales, or the nearest small-integer ratio
    that gives the model's output for every pair of input codes (checked on all pairs). ``reads`` are the
    codes of each input and whether the model holds them as dequantized floats there."""
    inputs = [codes for codes, _ in reads]
    a, b = inputs
    shape = graph.meta["shapes"][node.outputs[0]]
    channels, spatial = shape[1], len(shape) - 2
    # One value per channel (the same in each where a branch is quantized per tensor): the add's integer
    # weighting is one pair for all channels, its thresholds are per channel.
    scales = [channel_values(c.quantizer.scale, channels) for c in inputs]
    zeros = [channel_values(c.quantizer.zero_point, channels) for c in inputs]
    for ka, kb in _scale_ratios(scales[0] / scales[1]):
        linear = Linear(np.tile([ka, kb], (channels, 1)), datatype_of_values(np.array([ka, kb])),
                        scales[1] / kb, ka * zeros[0] + kb * zeros[1], spatial)
        lo, hi = np.full(channels, ka * a.lo + kb * b.lo), np.full(channels, ka * a.hi + kb * b.hi)
        try:
            # The add stage compares thresholds: it has no multiplier to requantize with.
            layer = threshold_layer(graph, node, linear, lo, hi, following, quantizer, requantize=False)
        except LoweringError:
            continue
        if np.any(layer.weights != linear.weights):
            raise LoweringError(f"{node.describe()}: the code of quantizer {quantizer.name!r} falls as the sum grows in "
                                "some channel; streamc supports residual Adds followed by rising functions")
        if _add_matches(graph, node, reads, (ka, kb), layer, following):
            break
    else:
        ratios = np.unique(scales[0] / scales[1])
        detail = (f"scales {scales[0][0]:g} and {scales[1][0]:g}" if ratios.size == 1 else
                  f"per-channel scale ratios from {ratios.min():g} to {ratios.max():g}; the hardware add weights its "
                  "inputs alike in every channel")
        raise LoweringError(f"{node.describe()}: no integer weighting of its inputs ({detail}) reproduces quantizer "
                            f"{quantizer.name!r} on every pair of input codes in every channel")
    kept, out_dtype = layer.thresholds, layer.out_dtype
    bipolar = out_dtype == BIPOLAR
    weighted = []
    for codes, weight in zip(inputs, (ka, kb)):
        out = graph.fresh_name(f"{node.name}_weighted")
        weighted.append(out)
        graph.datatypes[out] = smallest_datatype(min(codes.lo * weight, codes.hi * weight), max(codes.lo * weight, codes.hi * weight))
    total = graph.fresh_name(f"{node.name}_sum")
    graph.datatypes[total] = smallest_datatype(int(lo[0]), int(hi[0]))
    mt_out = graph.fresh_name(f"{quantizer.name}_codes")
    graph.datatypes[mt_out] = out_dtype
    attrs = {"out_dtype": out_dtype.name, "out_scale": 2.0 if bipolar else 1.0, "out_bias": float(layer.out_bias)}
    if spatial:
        attrs["data_layout"] = "NC" + "DHW"[3 - spatial:]
    nodes = [Node("Mul", graph.fresh_name(f"{node.name}_weight"),
                  [codes.tensor, graph.add_constant(f"{node.name}_weight", np.float32(weight))], [out])
             for codes, weight, out in zip(inputs, (ka, kb), weighted)]
    nodes.append(Node("Add", node.name, weighted, [total]))
    nodes.append(Node("MultiThreshold", graph.fresh_name(f"{quantizer.name}_thresholds"),
                      [total, graph.add_constant(f"{quantizer.name}_thresholds", kept.astype(np.float32))], [mt_out],
                      attrs))
    stages.append(dict(kind="add", name=node.name, inputs=[a.tensor, b.tensor], output=mt_out, weights=(ka, kb),
                       in_dtypes=[a.dtype, b.dtype], thresholds=kept, out_bias=layer.out_bias, out_dtype=out_dtype,
                       channels=channels, count=int(np.prod(shape[1:]))))
    out_hi = 1 if bipolar else layer.out_bias + kept.shape[1]
    return nodes, Codes(mt_out, layer.out_bias, out_hi, out_dtype, quantizer)


#: Integer weightings an add with per-channel scale ratios tries: each is checked on every pair of codes.
MAX_ADD_WEIGHTINGS = 32


def _scale_ratios(ratios: np.ndarray):
    """Integer pairs ``(ka, kb)`` with ``ka / kb`` near the ratios ``scale_a / scale_b`` (one per channel),
    simplest first; where the channels' ratios differ, the best fractions for each channel in turn."""
    seen = set()
    for limit in (2 ** k for k in range(13)):
        for value in np.unique(ratios):
            ratio = Fraction(float(value)).limit_denominator(limit)
            pair = (ratio.numerator, ratio.denominator)
            if pair[0] > 0 and pair not in seen:
                seen.add(pair)
                yield pair
                if len(seen) >= MAX_ADD_WEIGHTINGS:
                    return


def _add_matches(graph, node, reads: list[tuple[Codes, bool]], weights, layer: Thresholded, following) -> bool:
    """Whether the thresholds on ``ka*a + kb*b`` give the model's codes for every pair of input codes
    (a random 2**20 of them where there are more). A weighting that is wrong is nearly always wrong
    on a few thousand pairs: those are tried first, so that refusing one costs little."""
    values = [code_values(codes) for codes, _ in reads]
    pairs = np.stack(np.meshgrid(*values, indexing="ij"), axis=-1).reshape(-1, 2)
    order = np.random.default_rng(0).permutation(len(pairs))
    pairs = pairs[order[:1 << 20]]
    return all(_pairs_match(graph, node, reads, weights, layer, following, pairs[:count])
               for count in sorted({min(len(pairs), SCREEN_PAIRS), len(pairs)}))


#: Pairs of input codes an add's weighting is screened on before the check on all pairs.
SCREEN_PAIRS = 4096


def _pairs_match(graph, node, reads, weights, layer: Thresholded, following, pairs: np.ndarray) -> bool:
    """Whether the model's codes and the thresholds on ``ka*a + kb*b`` agree on ``pairs`` of input codes."""
    quantizer = layer.quantizer
    channels = layer.thresholds.shape[0]
    spatial = len(graph.meta["shapes"][node.outputs[0]]) - 2
    feeds, fronts = {}, []
    for k, (tensor, (codes, floats)) in enumerate(zip(node.inputs, reads)):
        start, front = reading(codes.quantizer, tensor, floats)
        fronts += front
        # Every channel gets the pair, turned into values with that channel's scale and zero point.
        feeds[start] = codes.quantizer.output_from_codes(
            np.repeat(pairs[:, k][:, None], channels, axis=1).reshape(len(pairs), channels, *[1] * spatial))
    coding = quantizer.nodes[:quantizer.n_coding]
    last = coding[-1].outputs[0]
    sub = Graph(nodes=[*fronts, node, *following, *coding], constants=graph.constants,
                inputs=[TensorInfo(t, (1, channels)) for t in feeds], outputs=[TensorInfo(last, (1, channels))],
                opset=graph.opset, qonnx_opset=graph.qonnx_opset)
    model = quantizer.codes_from_output(execute(sub, feeds)[last]).reshape(len(pairs), channels)
    # Few distinct sums: count each one's thresholds (sorted per channel) once.
    sums, index = np.unique(pairs @ np.asarray(weights), return_inverse=True)
    counts = np.stack([np.searchsorted(row, sums, side="right") for row in layer.thresholds], axis=1)[index.ravel()]
    ours = np.where(counts > 0, 1, -1) if layer.out_dtype == BIPOLAR else counts + layer.out_bias
    return np.array_equal(model, ours)
