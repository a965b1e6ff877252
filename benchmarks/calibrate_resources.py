"""Calibrate streamc's resource models against Yosys: synthesize a sweep of single-kernel designs.

Run: python benchmarks/calibrate_resources.py [--synthesize] [--respec] [--devices ice40-up5k ecp5-85f gowin-gw1nr-9]
                                             [--jobs 2] [--skip-slower SECONDS]

With ``--synthesize`` every design of the sweep not yet in ``benchmarks/calibration/<device>.json``
is generated (one kernel in a :class:`StreamAccelerator`, or a FIFO alone), synthesized with
:func:`streamc.synth.synthesize` in ``--workdir`` (default ``out/calibration``, outside /tmp:
YoWASP cannot see /tmp), and its cell counts stored with the kernel's parameters. The whole sweep
takes about 50 minutes on two cores (CNV-w2a2's last convolution, a 1.2 Mbit ROM, alone 16–18
minutes per family); small widths first. Without it only the stored results are used. Then the LUT and FF coefficients of :mod:`streamc.resources`
are fitted (least squares on relative error) on the training designs and written to
``benchmarks/calibration/fit.json`` and (when a device of every family is fitted) ``streamc/resources/coefficients.json``
(what streamc ships), and
a table compares the model with every stored design, ending with the share within +-15 % on the
training and on the held-out designs apart.

Held-out designs (:func:`held_out_keys`), which the fit never sees, so that their accuracy is an
out-of-sample figure: in each kernel kind, the designs are ordered by the SHA-1 of their key
(:func:`key_of`, the same on every device, so a design is held out on all devices or on none) and the
first ``max(1, round(0.2 * n))`` of the kind's ``n`` designs are held out: every kind has some, about
20 % of each. Adding designs to a kind can move its boundary, so the fit is rerun after a sweep (and
``tests/test_resources.py`` checks that the shipped coefficients are the fit of the training part).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict
from pathlib import Path

import numpy as np

from streamc import resources
from streamc.datatypes import INT, DataType, from_name

CALIBRATION = Path(__file__).parent / "calibration"
SEED = 0


def _weights(rng, dtype: DataType, mh: int, mw: int) -> np.ndarray:
    if dtype.bipolar:
        return rng.choice([-1, 1], size=(mh, mw))
    return rng.integers(dtype.min, dtype.max + 1, size=(mh, mw))


def make_mvau(p: dict):
    """A MatrixVectorUnit with random weights for the sweep entry ``p``."""
    from streamc.rtl.mvau import MatrixVectorUnit
    from streamc.rtl.requant import Requant

    rng = np.random.default_rng(SEED)
    in_dt, w_dt = from_name(p["in_dtype"]), from_name(p["weight_dtype"])
    weights = _weights(rng, w_dt, p["mh"], p["mw"])
    common = dict(weights=weights, in_dtype=in_dt, weight_dtype=w_dt, pe=p["pe"], simd=p["simd"],
                  res_type=p.get("res_type", "auto"), ram_style=p.get("ram_style", "auto"),
                  ram_style_thresholds=p.get("ram_style_thresholds", "auto"), tree_every=p.get("tree_every", 0),
                  name="mvau")
    # Reach of a dot product: what thresholds and multipliers are spread over.
    x = _weights(rng, in_dt, 256, p["mw"]) if in_dt.bipolar else rng.integers(in_dt.min, in_dt.max + 1,
                                                                                size=(256, p["mw"]))
    acc = x @ weights.T
    stage = p["stage"]
    if stage == "accumulator":
        lo, hi = resources.accumulator_range(weights, in_dt)
        out = INT(max((-lo - 1).bit_length(), hi.bit_length()) + 1)
        if in_dt.bipolar and w_dt.bipolar:
            out = INT(max(abs(lo), abs(hi)).bit_length() + 2)
        return MatrixVectorUnit(**common, thresholds=None, out_dtype=out)
    if stage == "thresholds":
        out = from_name(p["out_dtype"])
        levels = 1 if out.bipolar else out.max - out.min
        qs = np.linspace(0.05, 0.95, levels)
        thresholds = np.sort(np.quantile(acc, qs, axis=0).T.astype(np.int64), axis=1)
        return MatrixVectorUnit(**common, thresholds=thresholds, out_dtype=out,
                                out_bias=0 if out.bipolar else out.min)
    out = from_name(p["out_dtype"])
    shift = p["shift"]
    typical = acc.std(axis=0) + 1
    if p.get("per_tensor"):  # one scale for the layer, as onnxruntime's quantize_static gives
        typical = np.full_like(typical, typical.mean())
    multiplier = np.maximum(1, np.round(out.max / 3 / typical * 2 ** shift)).astype(np.int64)
    offset = rng.integers(-(1 << shift), 1 << shift, size=p["mh"])
    requant = Requant(multiplier=multiplier, offset=offset, shift=shift, rounding=p.get("rounding", "HALF_EVEN"),
                      lo=out.min, hi=out.max)
    return MatrixVectorUnit(**common, thresholds=None, requant=requant, out_dtype=out)


def make_unit(kernel: str, p: dict):
    """The component for one sweep entry, and the spec the model takes."""
    if kernel == "mvau":
        unit = make_mvau(p)
        return unit, resources.MVAUSpec.of_unit(unit)
    if kernel == "lut":
        from streamc.rtl.lut import LookupTable

        in_dt, out_dt = from_name(p["in_dtype"]), from_name(p["out_dtype"])
        rng = np.random.default_rng(SEED)
        entries = 2 if in_dt.bipolar else in_dt.max - in_dt.min + 1
        channels = p.get("channels", 1)
        if "slope" in p:  # a requantization: codes rescaled, shifted (by a bias per channel) and clipped
            codes = np.arange(in_dt.min, in_dt.max + 1)
            bias = rng.integers(-entries // 8, entries // 8 + 1, size=(channels, 1)) if channels > 1 else 0
            table = np.clip(np.round(codes * p["slope"]) + p.get("offset", 0) + bias, out_dt.min, out_dt.max)
        else:
            table = rng.integers(out_dt.min, out_dt.max + 1, size=entries)
        unit = LookupTable(table=table.astype(np.int64), in_dtype=in_dt, out_dtype=out_dt, elems=p["elems"],
                           frame_elems=max(p["elems"], channels) * 16, ram_style=p.get("ram_style", "auto"),
                           name="lut")
        return unit, resources.spec_of_unit(unit)
    if kernel == "window":
        from streamc.rtl.window import SlidingWindow

        dt = from_name(p["dtype"])
        unit = SlidingWindow(in_shape=tuple(p["in_shape"]), kernel=tuple(p["kernel"]),
                             stride=tuple(p["stride"]), padding=tuple(p["padding"]), dtype=dt,
                             simd=p["simd"], name="swg")
        return unit, resources.WindowSpec.of_unit(unit)
    if kernel == "pool":
        from streamc.rtl.window import WindowReduce

        dt = from_name(p["dtype"])
        unit = WindowReduce(channels=p["channels"], window=p["window"], mode="max", in_dtype=dt,
                            out_dtype=dt, simd=p["simd"], vectors=p["vectors"], name="pool")
        return unit, resources.spec_of_unit(unit)
    if kernel == "fifo":
        from streamc.rtl.stream import StreamFIFO

        return (StreamFIFO(width=p["width"], depth=p["depth"]),
                resources.FIFOSpec(width=p["width"], depth=p["depth"]))
    if kernel == "convert":
        from streamc.rtl.stream import WidthConverter

        unit = WidthConverter(elem_width=p["bits"], in_elems=p["in_elems"], out_elems=p["out_elems"])
        return unit, resources.ConverterSpec(bits=p["bits"], in_elems=p["in_elems"], out_elems=p["out_elems"])
    if kernel in BRANCH_KERNELS:
        unit = make_branch_unit(kernel, p)
        return unit, resources.spec_of_unit(unit)
    raise ValueError(f"unknown kernel {kernel!r}")


#: Kernels of dataflow graphs, synthesized alone (a two-input kernel has no place in a one-stage accelerator).
BRANCH_KERNELS = ("vvau", "threshold", "add", "concat", "fork")


def make_branch_unit(kernel: str, p: dict):
    """The component for one sweep entry of a graph kernel (vector unit, thresholds, add, concat, fork)."""
    from streamc.rtl.branch import ChannelConcat, ElementwiseAdd, StreamFork
    from streamc.rtl.threshold import ThresholdUnit
    from streamc.rtl.vvau import VectorVectorUnit

    rng = np.random.default_rng(SEED)
    if kernel == "vvau":
        w_dt = from_name(p["weight_dtype"])
        weights = (np.full((p["channels"], p["taps"]), p["constant"]) if "constant" in p
                   else _weights(rng, w_dt, p["channels"], p["taps"]))
        return VectorVectorUnit(weights=weights, in_dtype=from_name(p["in_dtype"]), weight_dtype=w_dt,
                                simd=p["simd"], res_type=p.get("res_type", "auto"), name="vvau")
    if kernel == "threshold":
        in_dt, out_dt = from_name(p["in_dtype"]), from_name(p["out_dtype"])
        levels = 1 if out_dt.bipolar else out_dt.max - out_dt.min
        rows = 1 if p.get("shared") else p["channels"]
        if p.get("spacing") == "even":
            # As training leaves them: evenly spaced from each channel's start, repeated from where
            # they reach the channel's clip (some channels clip early; ``clip``: after that share of them).
            span = in_dt.max - in_dt.min
            step = rng.uniform(span / (4 * levels), span / (1.5 * levels), size=(rows, 1))
            start = rng.uniform(in_dt.min, in_dt.min + span / 2, size=(rows, 1))
            reach = rng.uniform(levels / 4, levels * 1.2, size=(rows, 1)) if "clip" not in p else p["clip"] * levels
            clip = start + step * reach
            thresholds = np.rint(np.minimum(start + step * np.arange(levels), clip)).astype(np.int64)
        else:
            thresholds = np.sort(rng.integers(in_dt.min, in_dt.max + 1, size=(rows, levels)), axis=1)
        return ThresholdUnit(thresholds=thresholds, in_dtype=in_dt, out_dtype=out_dt,
                             out_bias=0 if out_dt.bipolar else out_dt.min, channels=p["channels"],
                             elems=p["elems"], name="thresholds")
    if kernel == "add":
        return ElementwiseAdd(a_dtype=from_name(p["a_dtype"]), b_dtype=from_name(p["b_dtype"]),
                              a_weight=p["a_weight"], b_weight=p["b_weight"], bias=0, elems=p["elems"], name="add")
    if kernel == "concat":
        return ChannelConcat(channels=tuple(p["channels"]), dtype=from_name(p["dtype"]), elems=p["elems"],
                             name="concat")
    return StreamFork(elem_width=p["bits"], elems=p["elems"], outputs=p["outputs"], name="fork")


def _mvau(mh, mw, pe, simd, in_dtype, weight_dtype, stage, out_dtype=None, shift=None, res_type=None,
          ram_style=None, ram_style_thresholds=None, per_tensor=False, rounding=None, tree_every=0):
    p = dict(mh=mh, mw=mw, pe=pe, simd=simd, in_dtype=in_dtype, weight_dtype=weight_dtype, stage=stage)
    if per_tensor:
        p["per_tensor"] = True
    if rounding:
        p["rounding"] = rounding
    if res_type:
        p["res_type"] = res_type
    if ram_style:
        p["ram_style"] = ram_style
    if ram_style_thresholds:
        p["ram_style_thresholds"] = ram_style_thresholds
    if out_dtype:
        p["out_dtype"] = out_dtype
    if shift is not None:
        p["shift"] = shift
    if tree_every:
        p["tree_every"] = tree_every
    return "mvau", p


#: The sweep: small widths first, and weight memories on both sides of the block-RAM threshold.
SWEEP = [
    _mvau(16, 16, 2, 2, "INT4", "INT4", "accumulator"),
    # Multiplies in LUTs (res_type="lut"): partial products, never a hard multiplier.
    _mvau(16, 16, 2, 2, "INT4", "INT4", "accumulator", res_type="lut"),
    _mvau(32, 32, 4, 8, "INT4", "INT4", "accumulator", res_type="lut"),
    _mvau(64, 64, 4, 4, "UINT2", "INT2", "accumulator", res_type="lut"),
    _mvau(16, 32, 1, 4, "INT8", "INT8", "accumulator", res_type="lut"),
    _mvau(64, 64, 4, 8, "UINT4", "INT4", "thresholds", "UINT2", res_type="lut"),
    _mvau(32, 64, 8, 8, "UINT2", "INT2", "thresholds", "UINT2", res_type="lut"),
    _mvau(16, 16, 4, 4, "INT4", "INT4", "accumulator"),
    _mvau(32, 32, 4, 8, "INT4", "INT4", "accumulator"),
    _mvau(32, 64, 2, 4, "INT2", "INT2", "accumulator"),
    _mvau(64, 64, 4, 4, "UINT2", "INT2", "accumulator"),
    _mvau(16, 32, 1, 4, "INT8", "INT8", "accumulator"),
    _mvau(64, 64, 4, 8, "BIPOLAR", "BIPOLAR", "thresholds", "BIPOLAR"),
    _mvau(64, 64, 8, 16, "BIPOLAR", "BIPOLAR", "thresholds", "BIPOLAR"),
    _mvau(128, 64, 2, 32, "BIPOLAR", "BIPOLAR", "thresholds", "BIPOLAR"),
    # XNOR-popcount at the test models' shapes: TFC's wide first layer and its 64 x 64 layers.
    _mvau(64, 784, 2, 196, "BIPOLAR", "BIPOLAR", "thresholds", "BIPOLAR"),
    _mvau(64, 64, 1, 32, "BIPOLAR", "BIPOLAR", "thresholds", "BIPOLAR"),
    _mvau(64, 256, 4, 64, "BIPOLAR", "BIPOLAR", "thresholds", "BIPOLAR"),
    _mvau(10, 64, 1, 8, "BIPOLAR", "BIPOLAR", "accumulator"),
    # Sums of 2-bit products at TFC-w2a2's shapes.
    _mvau(64, 784, 4, 7, "INT2", "INT2", "thresholds", "TERNARY"),
    _mvau(64, 64, 1, 16, "INT2", "INT2", "thresholds", "TERNARY"),
    _mvau(10, 64, 1, 16, "INT2", "INT2", "accumulator"),
    # The convolutions of the keyword-spotting and digits CNNs.
    _mvau(12, 64, 1, 1, "UINT4", "INT4", "accumulator"),
    _mvau(8, 9, 1, 9, "UINT4", "INT4", "thresholds", "UINT4"),
    _mvau(16, 72, 2, 4, "UINT4", "INT4", "thresholds", "UINT2"),
    _mvau(10, 64, 1, 2, "UINT2", "INT4", "accumulator"),
    _mvau(32, 32, 4, 4, "UINT2", "INT2", "thresholds", "UINT2"),
    _mvau(64, 32, 8, 4, "UINT2", "BIPOLAR", "thresholds", "UINT2"),
    _mvau(32, 64, 2, 8, "UINT2", "INT2", "thresholds", "UINT2"),
    _mvau(16, 16, 2, 2, "UINT4", "INT4", "thresholds", "UINT4"),
    _mvau(32, 16, 4, 2, "UINT4", "INT4", "thresholds", "UINT4"),
    _mvau(64, 16, 1, 16, "UINT2", "INT3", "thresholds", "UINT2"),
    _mvau(128, 32, 1, 2, "UINT2", "INT2", "thresholds", "UINT2"),
    _mvau(256, 16, 2, 1, "UINT2", "INT4", "thresholds", "UINT2"),
    _mvau(16, 16, 2, 2, "INT8", "INT8", "requant", "INT8", 16),
    _mvau(32, 32, 4, 2, "INT4", "INT4", "requant", "INT8", 12),
    _mvau(32, 64, 1, 4, "INT8", "INT4", "requant", "INT8", 16),
    # Foldings the planner picks at a tenth of an ECP5: wide SIMD, several PEs, small output layers.
    _mvau(32, 64, 2, 16, "BIPOLAR", "BIPOLAR", "thresholds", "BIPOLAR"),
    _mvau(16, 128, 4, 8, "BIPOLAR", "BIPOLAR", "thresholds", "BIPOLAR"),
    _mvau(10, 32, 5, 2, "BIPOLAR", "BIPOLAR", "accumulator"),
    _mvau(32, 392, 8, 28, "BIPOLAR", "BIPOLAR", "thresholds", "BIPOLAR"),
    _mvau(16, 96, 2, 16, "UINT4", "INT4", "thresholds", "UINT4"),
    _mvau(8, 16, 1, 4, "UINT4", "INT4", "thresholds", "UINT4"),
    _mvau(12, 40, 1, 20, "UINT3", "INT4", "thresholds", "UINT4"),
    _mvau(10, 128, 2, 2, "UINT4", "INT4", "accumulator"),
    _mvau(12, 32, 3, 2, "UINT4", "INT4", "accumulator"),
    _mvau(10, 32, 5, 1, "UINT2", "INT4", "accumulator"),
    _mvau(32, 392, 4, 14, "INT2", "INT2", "thresholds", "TERNARY"),
    _mvau(10, 32, 2, 2, "INT2", "INT2", "accumulator"),
    # Convolutions as the planner places them on a small device: multiplies in LUTs, 15 thresholds per
    # channel in LUTs (few folds: thresholds nearly or wholly constant), weights in block RAM.
    _mvau(16, 24, 4, 1, "UINT4", "INT4", "thresholds", "UINT4", res_type="lut", ram_style="block",
          ram_style_thresholds="distributed"),
    _mvau(8, 36, 8, 1, "UINT4", "INT4", "thresholds", "UINT4", res_type="lut", ram_style="block",
          ram_style_thresholds="distributed"),
    _mvau(16, 64, 2, 4, "UINT3", "INT4", "thresholds", "UINT4", res_type="lut", ram_style="block",
          ram_style_thresholds="distributed"),
    _mvau(32, 16, 4, 2, "UINT4", "INT4", "thresholds", "UINT4", res_type="lut", ram_style="block",
          ram_style_thresholds="distributed"),
    _mvau(12, 96, 2, 3, "UINT4", "INT4", "accumulator", res_type="lut", ram_style="block"),
    _mvau(16, 32, 2, 2, "UINT2", "INT4", "thresholds", "UINT2", res_type="lut", ram_style="block",
          ram_style_thresholds="distributed"),
    # Layers of trained CNNs: unsigned activations, 8 to 24 lanes, weights read over many folds.
    _mvau(12, 128, 1, 8, "UINT4", "INT4", "accumulator"),
    _mvau(16, 144, 2, 8, "UINT4", "INT4", "thresholds", "UINT4"),
    _mvau(32, 72, 1, 24, "UINT4", "INT4", "thresholds", "UINT4"),
    _mvau(24, 96, 2, 12, "UINT2", "INT4", "thresholds", "UINT2"),
    _mvau(10, 64, 1, 16, "UINT4", "INT4", "accumulator"),
    # Classifier heads after a global pooling: 8-bit means, one lane, a few classes.
    _mvau(10, 24, 1, 1, "UINT8", "INT4", "accumulator"),
    _mvau(6, 12, 1, 1, "UINT8", "INT4", "accumulator"),
    _mvau(10, 32, 2, 1, "UINT6", "INT4", "accumulator"),
    # One lane over a long input vector: the input buffer in many LUT-RAM banks on an ECP5.
    _mvau(8, 192, 4, 1, "UINT4", "INT4", "accumulator"),
    _mvau(12, 160, 3, 1, "UINT3", "INT4", "accumulator"),
    _mvau(6, 128, 2, 2, "UINT4", "INT4", "accumulator"),
    # Output layers on hard multipliers: a few lanes per PE, several PEs, unsigned activations.
    _mvau(16, 64, 4, 2, "UINT4", "INT4", "accumulator"),
    _mvau(12, 48, 3, 4, "UINT4", "INT4", "accumulator"),
    _mvau(20, 32, 5, 2, "UINT2", "INT4", "accumulator"),
    _mvau(8, 512, 1, 8, "UINT4", "INT4", "accumulator"),
    _mvau(24, 64, 2, 8, "UINT3", "INT4", "thresholds", "UINT2"),
    _mvau(10, 96, 2, 4, "UINT8", "INT4", "accumulator"),
    # Weights and thresholds in block RAM, as the planner places them on an ECP5.
    _mvau(16, 72, 2, 8, "UINT4", "INT4", "thresholds", "UINT4", ram_style="block", ram_style_thresholds="block"),
    _mvau(32, 64, 1, 16, "UINT2", "INT4", "thresholds", "UINT2", ram_style="block", ram_style_thresholds="block"),
    _mvau(8, 36, 1, 9, "UINT4", "INT4", "thresholds", "UINT4", ram_style="block", ram_style_thresholds="block"),
    _mvau(16, 128, 2, 16, "UINT4", "INT4", "thresholds", "UINT2", ram_style="block", ram_style_thresholds="block"),
    # One matrix at growing SIMD (weights in block RAM): how the adder tree of the lane products
    # and the banks of the input buffer grow.
    *(_mvau(8, 128, pe, simd, "UINT4", "INT4", "accumulator", ram_style="block")
      for pe, simd in ((1, 2), (1, 4), (1, 8), (1, 16), (2, 4), (2, 8))),
    # As the planner places layers on a UP5K: classifier heads and requantized layers with their
    # lanes' multiplies in LUTs (the requantization's on a hard multiplier), binarized layers with
    # their thresholds in LUTs.
    _mvau(10, 64, 1, 2, "UINT4", "INT4", "accumulator", res_type="lut", ram_style="block"),
    _mvau(10, 128, 1, 1, "UINT2", "INT4", "accumulator", res_type="lut", ram_style="block"),
    _mvau(10, 96, 1, 4, "UINT3", "INT3", "accumulator", res_type="lut", ram_style="block"),
    _mvau(12, 64, 2, 2, "UINT4", "INT4", "accumulator", res_type="lut"),
    _mvau(16, 48, 2, 3, "UINT4", "INT4", "requant", "INT6", 14, res_type="lut", ram_style="block"),
    _mvau(8, 64, 4, 2, "UINT3", "INT4", "requant", "INT8", 12, res_type="lut", ram_style="block"),
    _mvau(16, 36, 2, 4, "INT4", "INT4", "requant", "INT8", 16, res_type="lut"),
    # Signed inputs times signed weights read from block RAM, multiplied in LUTs.
    _mvau(8, 72, 2, 12, "INT4", "INT4", "thresholds", "UINT4", res_type="lut", ram_style="block"),
    _mvau(16, 64, 2, 8, "INT4", "INT4", "accumulator", res_type="lut", ram_style="block"),
    _mvau(16, 64, 2, 8, "UINT4", "INT4", "accumulator", res_type="lut", ram_style="block"),
    _mvau(16, 48, 1, 6, "INT3", "INT3", "accumulator", res_type="lut", ram_style="block"),
    _mvau(64, 64, 1, 16, "BIPOLAR", "BIPOLAR", "thresholds", "BIPOLAR", ram_style="block",
          ram_style_thresholds="distributed"),
    _mvau(128, 128, 2, 32, "BIPOLAR", "BIPOLAR", "thresholds", "BIPOLAR", ram_style="block",
          ram_style_thresholds="distributed"),
    _mvau(32, 256, 1, 64, "BIPOLAR", "BIPOLAR", "thresholds", "BIPOLAR", ram_style="block",
          ram_style_thresholds="distributed"),
    # Weight ROMs deeper than a block RAM, as CNV's late layers have at narrow folds: the read
    # multiplexer over the blocks' address banks.
    _mvau(128, 1152, 1, 8, "BIPOLAR", "BIPOLAR", "thresholds", "BIPOLAR", ram_style="block",
          ram_style_thresholds="block"),
    _mvau(64, 2304, 1, 16, "BIPOLAR", "BIPOLAR", "thresholds", "BIPOLAR", ram_style="block",
          ram_style_thresholds="block"),
    _mvau(64, 1152, 1, 4, "UINT2", "INT2", "thresholds", "UINT2", ram_style="block", ram_style_thresholds="block"),
    _mvau(32, 4096, 2, 8, "BIPOLAR", "BIPOLAR", "accumulator", ram_style="block"),
    _mvau(384, 768, 1, 8, "BIPOLAR", "BIPOLAR", "thresholds", "BIPOLAR", ram_style="block",
          ram_style_thresholds="block"),
    # Four, six and eight address banks on an ECP5 (the multiplexer's shape changes past 8).
    _mvau(64, 2048, 1, 16, "UINT2", "INT2", "thresholds", "UINT2", ram_style="block", ram_style_thresholds="block"),
    _mvau(96, 2048, 1, 16, "UINT2", "INT2", "thresholds", "UINT2", ram_style="block", ram_style_thresholds="block"),
    _mvau(256, 1024, 1, 16, "BIPOLAR", "BIPOLAR", "thresholds", "BIPOLAR", ram_style="block",
          ram_style_thresholds="block"),
    # Signed two-bit inputs against binary weights (negated or not), as CNV-w1a2's layers.
    _mvau(32, 288, 2, 72, "INT2", "BIPOLAR", "thresholds", "INT2", ram_style="block", ram_style_thresholds="block"),
    _mvau(64, 576, 1, 32, "INT2", "BIPOLAR", "thresholds", "INT2", ram_style="block", ram_style_thresholds="block"),
    _mvau(64, 1152, 1, 4, "INT2", "BIPOLAR", "thresholds", "INT2", ram_style="block", ram_style_thresholds="block"),
    # One XNOR lane over a long input, as a classifier head at the narrowest fold.
    _mvau(16, 384, 1, 1, "BIPOLAR", "BIPOLAR", "accumulator", ram_style="block"),
    _mvau(12, 1024, 2, 1, "BIPOLAR", "BIPOLAR", "accumulator", ram_style="block"),
    # ... and at wider folds, where the popcount's full adders are most of the layer.
    _mvau(12, 128, 1, 16, "BIPOLAR", "BIPOLAR", "accumulator", ram_style="block"),
    _mvau(10, 256, 2, 32, "BIPOLAR", "BIPOLAR", "accumulator", ram_style="block"),
    _mvau(16, 64, 4, 16, "BIPOLAR", "BIPOLAR", "accumulator"),
    # Input buffers wider than 18 bits in block RAM (an ECP5 PDPW16KD).
    _mvau(16, 1536, 1, 12, "INT2", "BIPOLAR", "thresholds", "INT2", ram_style="block", ram_style_thresholds="block"),
    # Wider inputs against binary weights (a lane complements the input), and binary inputs against
    # multi-bit weights (a lane masks the weight): QONNX's BipolarQuant on either side of a layer,
    # before thresholds, a requantization or a bare accumulator that starts from an offset per channel.
    _mvau(16, 96, 4, 24, "INT4", "BIPOLAR", "thresholds", "BIPOLAR", ram_style="block", ram_style_thresholds="block"),
    _mvau(64, 48, 8, 16, "INT4", "BIPOLAR", "thresholds", "BIPOLAR", ram_style="block", ram_style_thresholds="block"),
    _mvau(32, 128, 4, 64, "INT4", "BIPOLAR", "thresholds", "BIPOLAR", ram_style="distributed",
          ram_style_thresholds="block"),
    _mvau(32, 64, 4, 16, "UINT4", "BIPOLAR", "thresholds", "UINT2"),
    _mvau(16, 64, 2, 8, "INT4", "BIPOLAR", "accumulator"),
    _mvau(12, 96, 4, 24, "UINT2", "BIPOLAR", "accumulator", ram_style="block"),
    _mvau(16, 48, 4, 8, "BIPOLAR", "INT2", "accumulator", ram_style="block"),
    _mvau(12, 64, 3, 16, "BIPOLAR", "INT3", "accumulator", ram_style="block"),
    _mvau(10, 64, 10, 8, "BIPOLAR", "INT2", "accumulator", ram_style="block"),
    _mvau(8, 96, 8, 12, "BIPOLAR", "INT3", "accumulator"),
    _mvau(32, 64, 8, 16, "BIPOLAR", "INT2", "thresholds", "UINT2"),
    _mvau(64, 128, 4, 32, "BIPOLAR", "INT4", "thresholds", "BIPOLAR", ram_style="block", ram_style_thresholds="block"),
    _mvau(16, 64, 4, 16, "BIPOLAR", "INT4", "requant", "UINT8", 10),
    # Binary inputs against constant weights (a layer folded flat: its ROM is one word).
    _mvau(10, 32, 10, 32, "BIPOLAR", "INT2", "accumulator"),
    _mvau(16, 16, 16, 16, "BIPOLAR", "INT3", "accumulator"),
    _mvau(8, 24, 8, 24, "BIPOLAR", "INT2", "thresholds", "UINT2"),
    # Eight-bit inputs (an image) against binary weights, as a binary CNN's first layer.
    _mvau(16, 36, 2, 18, "UINT8", "BIPOLAR", "thresholds", "BIPOLAR", ram_style="block", ram_style_thresholds="block"),
    _mvau(16, 64, 1, 32, "UINT8", "BIPOLAR", "thresholds", "BIPOLAR", ram_style="block", ram_style_thresholds="block"),
    _mvau(32, 48, 4, 12, "INT8", "BIPOLAR", "thresholds", "UINT2"),
    _mvau(8, 24, 2, 24, "UINT6", "BIPOLAR", "accumulator"),
    _mvau(8, 1024, 1, 8, "UINT3", "INT3", "accumulator"),
    _mvau(16, 640, 2, 10, "UINT3", "INT2", "thresholds", "UINT2"),
    _mvau(32, 2048, 1, 32, "BIPOLAR", "BIPOLAR", "thresholds", "BIPOLAR", ram_style="block"),
    # XNOR lanes reading an input buffer of several LUT RAM banks.
    _mvau(32, 512, 1, 8, "BIPOLAR", "BIPOLAR", "thresholds", "BIPOLAR"),
    _mvau(16, 768, 2, 4, "BIPOLAR", "BIPOLAR", "thresholds", "BIPOLAR"),
    ("lut", dict(in_dtype="INT4", out_dtype="INT4", elems=1)),
    ("lut", dict(in_dtype="INT4", out_dtype="INT4", elems=4)),
    ("lut", dict(in_dtype="INT8", out_dtype="INT8", elems=1)),
    ("lut", dict(in_dtype="INT8", out_dtype="UINT4", elems=2)),
    # Requantizing tables (a quantizer after a max pool or a flatten): monotone, a few pieces per bit.
    ("lut", dict(in_dtype="UINT8", out_dtype="UINT8", elems=1, slope=0.37, offset=3)),
    ("lut", dict(in_dtype="INT8", out_dtype="INT8", elems=1, slope=0.8, offset=-2)),
    ("lut", dict(in_dtype="INT8", out_dtype="UINT8", elems=2, slope=1.3, offset=128)),
    ("lut", dict(in_dtype="UINT8", out_dtype="UINT4", elems=1, slope=0.05)),
    ("lut", dict(in_dtype="INT8", out_dtype="INT8", elems=1, slope=0.5)),
    ("lut", dict(in_dtype="UINT6", out_dtype="UINT6", elems=4, slope=0.7, offset=5)),
    ("lut", dict(in_dtype="UINT8", out_dtype="UINT8", elems=1, slope=2.0, offset=-224)),
    ("lut", dict(in_dtype="UINT8", out_dtype="UINT8", elems=1, slope=1.8, offset=-200)),
    ("lut", dict(in_dtype="INT8", out_dtype="INT8", elems=1, slope=1.5, offset=10)),
    # Tables as the planner may place them: in block RAM (one read port per lane), or in logic where
    # the iCE40 would pick block RAM.
    ("lut", dict(in_dtype="INT8", out_dtype="INT8", elems=1, ram_style="block")),
    ("lut", dict(in_dtype="INT8", out_dtype="INT8", elems=2, slope=0.8, offset=-2, ram_style="block")),
    ("lut", dict(in_dtype="UINT8", out_dtype="UINT4", elems=4, slope=0.05, ram_style="block")),
    ("lut", dict(in_dtype="INT4", out_dtype="INT4", elems=2, ram_style="block")),
    ("lut", dict(in_dtype="UINT6", out_dtype="UINT8", elems=3, slope=3.1, ram_style="block")),
    ("lut", dict(in_dtype="INT8", out_dtype="INT8", elems=1, slope=0.8, offset=-2, ram_style="distributed")),
    # A table per channel: a quantized bias add between two quantizers (onnxruntime's MatMul + Add).
    ("lut", dict(in_dtype="UINT8", out_dtype="UINT8", elems=1, slope=0.8, channels=32)),
    ("lut", dict(in_dtype="UINT8", out_dtype="UINT8", elems=4, slope=1.3, channels=16)),
    ("lut", dict(in_dtype="INT8", out_dtype="INT8", elems=2, slope=0.6, channels=10)),
    ("lut", dict(in_dtype="UINT4", out_dtype="UINT4", elems=2, slope=0.9, channels=8, ram_style="distributed")),
    ("lut", dict(in_dtype="INT4", out_dtype="INT4", elems=1, slope=1.1, offset=1, channels=6)),
    ("window", dict(in_shape=[8, 8, 4], kernel=[3, 3], stride=[1, 1], padding=[0, 0, 0, 0], dtype="UINT2", simd=1)),
    ("window", dict(in_shape=[8, 8, 4], kernel=[3, 3], stride=[1, 1], padding=[1, 1, 1, 1], dtype="UINT2", simd=4)),
    ("window", dict(in_shape=[12, 12, 8], kernel=[3, 3], stride=[1, 1], padding=[0, 0, 0, 0], dtype="UINT4", simd=2)),
    ("window", dict(in_shape=[16, 16, 16], kernel=[3, 3], stride=[1, 1], padding=[1, 1, 1, 1], dtype="UINT2", simd=4)),
    ("window", dict(in_shape=[10, 10, 8], kernel=[2, 2], stride=[2, 2], padding=[0, 0, 0, 0], dtype="UINT2", simd=8)),
    ("window", dict(in_shape=[28, 28, 1], kernel=[3, 3], stride=[1, 1], padding=[0, 0, 0, 0], dtype="UINT8", simd=1)),
    # One-dimensional windows (keyword spotting) and the digits CNN's small 2-D ones.
    ("window", dict(in_shape=[1, 32, 4], kernel=[1, 5], stride=[1, 1], padding=[0, 0, 0, 0], dtype="UINT8", simd=1)),
    ("window", dict(in_shape=[1, 16, 8], kernel=[1, 4], stride=[1, 1], padding=[0, 1, 0, 2], dtype="UINT4", simd=2)),
    ("window", dict(in_shape=[1, 16, 16], kernel=[1, 2], stride=[1, 2], padding=[0, 0, 0, 0], dtype="UINT3", simd=1)),
    ("window", dict(in_shape=[1, 8, 16], kernel=[1, 3], stride=[1, 1], padding=[0, 1, 0, 1], dtype="UINT3", simd=1)),
    ("window", dict(in_shape=[8, 8, 8], kernel=[2, 2], stride=[2, 2], padding=[0, 0, 0, 0], dtype="UINT4", simd=1)),
    ("window", dict(in_shape=[4, 4, 8], kernel=[3, 3], stride=[1, 1], padding=[0, 0, 0, 0], dtype="UINT4", simd=4)),
    ("window", dict(in_shape=[8, 8, 8], kernel=[1, 1], stride=[1, 1], padding=[0, 0, 0, 0], dtype="UINT4", simd=4)),
    ("window", dict(in_shape=[8, 8, 1], kernel=[3, 3], stride=[1, 1], padding=[1, 1, 1, 1], dtype="UINT4", simd=1)),
    # Wide beats (a ring word of 24 to 48 bits) and one-by-one kernels.
    ("window", dict(in_shape=[1, 24, 8], kernel=[1, 3], stride=[1, 1], padding=[0, 0, 0, 0], dtype="UINT4", simd=8)),
    ("window", dict(in_shape=[6, 6, 16], kernel=[3, 3], stride=[1, 1], padding=[1, 1, 1, 1], dtype="UINT4", simd=8)),
    ("window", dict(in_shape=[8, 8, 12], kernel=[1, 1], stride=[1, 1], padding=[0, 0, 0, 0], dtype="UINT4", simd=12)),
    ("window", dict(in_shape=[1, 20, 6], kernel=[1, 5], stride=[1, 1], padding=[0, 0, 0, 0], dtype="UINT8", simd=6)),
    ("window", dict(in_shape=[6, 6, 8], kernel=[3, 3], stride=[1, 1], padding=[1, 1, 1, 1], dtype="UINT4", simd=1)),
    ("window", dict(in_shape=[8, 8, 16], kernel=[1, 1], stride=[1, 1], padding=[0, 0, 0, 0], dtype="UINT4", simd=4)),
    ("window", dict(in_shape=[6, 6, 4], kernel=[2, 2], stride=[2, 2], padding=[0, 0, 0, 0], dtype="UINT4", simd=4)),
    # Every channel in one beat (no channel fold).
    ("window", dict(in_shape=[6, 6, 8], kernel=[3, 3], stride=[1, 1], padding=[1, 1, 1, 1], dtype="UINT4", simd=8)),
    ("window", dict(in_shape=[5, 5, 6], kernel=[3, 3], stride=[1, 1], padding=[0, 0, 0, 0], dtype="UINT4", simd=6)),
    ("window", dict(in_shape=[1, 12, 12], kernel=[1, 3], stride=[1, 1], padding=[0, 1, 0, 1], dtype="UINT3", simd=12)),
    # Rings of wide words deep enough for block RAM on ECP5 as well.
    ("window", dict(in_shape=[1, 40, 8], kernel=[1, 3], stride=[1, 1], padding=[0, 0, 0, 0], dtype="UINT4", simd=8)),
    ("window", dict(in_shape=[12, 12, 16], kernel=[3, 3], stride=[1, 1], padding=[1, 1, 1, 1], dtype="UINT4", simd=4)),
    ("window", dict(in_shape=[1, 64, 4], kernel=[1, 5], stride=[1, 1], padding=[0, 0, 0, 0], dtype="UINT8", simd=2)),
    # All channels in one beat (channels == simd), as a fast layer is folded: no channel counter.
    ("window", dict(in_shape=[10, 10, 8], kernel=[3, 3], stride=[1, 1], padding=[1, 1, 1, 1], dtype="UINT4", simd=8)),
    ("window", dict(in_shape=[5, 5, 16], kernel=[3, 3], stride=[1, 1], padding=[0, 0, 0, 0], dtype="UINT4", simd=16)),
    ("window", dict(in_shape=[7, 7, 4], kernel=[2, 2], stride=[2, 2], padding=[0, 0, 0, 0], dtype="UINT4", simd=4)),
    ("window", dict(in_shape=[1, 12, 8], kernel=[1, 3], stride=[1, 1], padding=[0, 0, 0, 0], dtype="UINT3", simd=8)),
    # Binarized feature maps with many channels, as CNV's late layers: one bit a channel, rows of
    # hundreds of channels in block RAM.
    ("window", dict(in_shape=[12, 12, 96], kernel=[2, 2], stride=[2, 2], padding=[0, 0, 0, 0], dtype="BIPOLAR", simd=1)),
    ("window", dict(in_shape=[6, 6, 192], kernel=[3, 3], stride=[1, 1], padding=[0, 0, 0, 0], dtype="BIPOLAR", simd=4)),
    ("window", dict(in_shape=[5, 5, 256], kernel=[3, 3], stride=[1, 1], padding=[0, 0, 0, 0], dtype="BIPOLAR", simd=16)),
    ("window", dict(in_shape=[14, 14, 64], kernel=[2, 2], stride=[2, 2], padding=[0, 0, 0, 0], dtype="BIPOLAR", simd=2)),
    # Eight-bit layers as onnxruntime's quantize_static writes them: where no multiply-add-shift is
    # exact (its float32 rounding), a layer keeps its 127 or 255 thresholds; else one multiplier.
    _mvau(8, 72, 1, 1, "UINT8", "INT8", "thresholds", "UINT8", res_type="lut", ram_style_thresholds="distributed"),
    _mvau(8, 72, 1, 1, "UINT8", "INT8", "thresholds", "UINT7", res_type="lut", ram_style_thresholds="distributed"),
    _mvau(8, 72, 1, 1, "UINT8", "INT8", "thresholds", "UINT6", res_type="lut", ram_style_thresholds="distributed"),
    _mvau(8, 27, 2, 3, "UINT8", "INT8", "thresholds", "UINT8", ram_style_thresholds="distributed"),
    _mvau(6, 27, 1, 1, "UINT8", "INT8", "thresholds", "UINT8", res_type="lut", ram_style_thresholds="distributed"),
    _mvau(16, 32, 4, 2, "INT8", "INT8", "thresholds", "INT8", ram_style_thresholds="distributed"),
    _mvau(8, 36, 2, 4, "UINT4", "INT4", "thresholds", "UINT6", ram_style_thresholds="distributed"),
    # The same thresholds read from block RAM, where equal compares stay apart.
    _mvau(8, 72, 1, 2, "UINT8", "INT8", "thresholds", "UINT8", ram_style_thresholds="block"),
    _mvau(6, 27, 1, 3, "UINT8", "INT8", "thresholds", "UINT7", ram_style_thresholds="block"),
    _mvau(8, 27, 2, 3, "UINT8", "INT8", "requant", "UINT8", 20, res_type="lut", per_tensor=True),
    _mvau(6, 54, 1, 1, "UINT8", "INT8", "requant", "UINT8", 20, res_type="lut", per_tensor=True),
    _mvau(4, 32, 1, 1, "UINT7", "INT8", "requant", "INT8", 20, res_type="lut", per_tensor=True),
    _mvau(16, 32, 2, 4, "INT8", "INT8", "requant", "INT8", 18, per_tensor=True),
    # onnxruntime's per-channel requantizing layers: 8-bit unsigned inputs on hard multipliers, a
    # few channels, one to four lanes (the scale and offset ROMs shallow, in logic).
    _mvau(8, 36, 1, 4, "UINT8", "INT8", "requant", "UINT8", 20, ram_style="block"),
    _mvau(12, 18, 1, 2, "UINT8", "INT8", "requant", "UINT8", 20),
    _mvau(4, 48, 1, 1, "UINT8", "INT8", "requant", "INT8", 20, ram_style="block"),
    # Rounding down (where no tie can occur): the sum's bits below the shift only carry.
    _mvau(4, 32, 1, 1, "UINT7", "INT8", "requant", "INT8", 28, res_type="lut", per_tensor=True, rounding="FLOOR"),
    _mvau(6, 54, 1, 1, "UINT8", "INT8", "requant", "UINT8", 27, res_type="lut", per_tensor=True, rounding="FLOOR"),
    _mvau(8, 27, 2, 3, "UINT8", "INT8", "requant", "UINT8", 26, res_type="lut", per_tensor=True, rounding="FLOOR"),
    _mvau(16, 32, 2, 4, "INT8", "INT8", "requant", "INT8", 24, per_tensor=True, rounding="FLOOR"),
    _mvau(10, 64, 1, 4, "UINT4", "INT4", "requant", "UINT8", 16, rounding="FLOOR"),
    ("window", dict(in_shape=[11, 9, 3], kernel=[3, 3], stride=[1, 1], padding=[1, 1, 1, 1], dtype="UINT8", simd=1)),
    ("window", dict(in_shape=[11, 9, 6], kernel=[3, 3], stride=[2, 2], padding=[0, 0, 0, 0], dtype="UINT8", simd=1)),
    ("window", dict(in_shape=[9, 7, 8], kernel=[3, 3], stride=[1, 1], padding=[1, 1, 1, 1], dtype="UINT8", simd=2)),
    # CNV-w1a2's and CNV-w2a2's convolutions as a fifth of the ECP5 folds them: unsigned two-bit
    # activations times bipolar or two-bit weights, wide SIMD, weights and thresholds in block RAM.
    _mvau(64, 576, 8, 64, "UINT2", "BIPOLAR", "thresholds", "UINT2", ram_style="block", ram_style_thresholds="block"),
    _mvau(32, 288, 4, 32, "UINT2", "BIPOLAR", "thresholds", "UINT2", ram_style="block"),
    _mvau(256, 2304, 1, 8, "UINT2", "INT2", "thresholds", "UINT2", ram_style="block", ram_style_thresholds="block"),
    # Adder trees registered for the clock (tree_every), as the digits MLP is built for a Tang Nano 9K at 60 MHz:
    # the multiplies in LUTs become the critical stage, which a Gowin's abc9 maps for depth in wider LUTs.
    _mvau(64, 64, 1, 64, "UINT4", "INT4", "thresholds", "UINT4", res_type="lut", ram_style="block",
          ram_style_thresholds="block", tree_every=3),
    _mvau(32, 64, 1, 32, "UINT4", "INT4", "thresholds", "UINT4", res_type="lut", ram_style="block",
          ram_style_thresholds="block", tree_every=3),
    _mvau(10, 32, 1, 8, "UINT4", "INT4", "accumulator", res_type="lut", ram_style="block", tree_every=3),
    _mvau(64, 64, 4, 16, "UINT4", "INT4", "accumulator", res_type="lut", ram_style="block", tree_every=1),
    _mvau(16, 64, 2, 8, "INT4", "INT4", "accumulator", res_type="lut", ram_style="block", tree_every=2),
    _mvau(16, 72, 2, 8, "UINT4", "INT4", "thresholds", "UINT4", tree_every=2),
    # Whole pixels of many one- and two-bit channels per beat, the ring in block RAM.
    ("window", dict(in_shape=[10, 10, 96], kernel=[3, 3], stride=[1, 1], padding=[0, 0, 0, 0], dtype="BIPOLAR", simd=96)),
    ("window", dict(in_shape=[16, 16, 64], kernel=[3, 3], stride=[1, 1], padding=[0, 0, 0, 0], dtype="BIPOLAR", simd=64)),
    ("window", dict(in_shape=[8, 8, 48], kernel=[3, 3], stride=[1, 1], padding=[1, 1, 1, 1], dtype="UINT2", simd=48)),
    ("pool", dict(channels=8, window=4, vectors=16, dtype="UINT2", simd=1)),
    ("pool", dict(channels=16, window=2, vectors=8, dtype="UINT3", simd=1)),
    ("pool", dict(channels=16, window=4, vectors=16, dtype="UINT2", simd=4)),
    ("pool", dict(channels=32, window=9, vectors=4, dtype="UINT4", simd=8)),
    ("pool", dict(channels=8, window=9, vectors=4, dtype="UINT4", simd=1)),
    ("pool", dict(channels=24, window=4, vectors=8, dtype="UINT3", simd=2)),
    ("pool", dict(channels=32, window=2, vectors=16, dtype="UINT2", simd=4)),
    ("pool", dict(channels=12, window=4, vectors=8, dtype="UINT4", simd=3)),
    ("pool", dict(channels=24, window=4, vectors=4, dtype="UINT4", simd=2)),
    ("pool", dict(channels=8, window=2, vectors=8, dtype="UINT2", simd=2)),
    # Every channel in one beat: Yosys finds the constant top bit of each running maximum.
    ("pool", dict(channels=16, window=4, vectors=8, dtype="UINT3", simd=16)),
    ("pool", dict(channels=4, window=9, vectors=4, dtype="UINT3", simd=4)),
    ("pool", dict(channels=12, window=2, vectors=8, dtype="UINT2", simd=12)),
    ("pool", dict(channels=6, window=4, vectors=8, dtype="UINT4", simd=6)),
    # CNV-like: one- and two-bit values, many channels.
    ("pool", dict(channels=32, window=4, vectors=49, dtype="BIPOLAR", simd=4)),
    ("pool", dict(channels=96, window=4, vectors=16, dtype="BIPOLAR", simd=2)),
    ("pool", dict(channels=128, window=4, vectors=9, dtype="BIPOLAR", simd=16)),
    ("pool", dict(channels=48, window=9, vectors=9, dtype="BIPOLAR", simd=1)),
    ("pool", dict(channels=96, window=4, vectors=16, dtype="UINT2", simd=8)),
    ("pool", dict(channels=48, window=4, vectors=36, dtype="UINT2", simd=3)),
    # Groups in a power of two, as most CNNs pool: the first group is a decode of the count's top bits.
    ("pool", dict(channels=32, window=4, vectors=16, dtype="UINT2", simd=4)),
    ("pool", dict(channels=128, window=4, vectors=9, dtype="UINT2", simd=16)),
    ("pool", dict(channels=64, window=4, vectors=16, dtype="UINT2", simd=2)),
    ("pool", dict(channels=32, window=9, vectors=4, dtype="UINT2", simd=8)),
    ("pool", dict(channels=64, window=4, vectors=16, dtype="BIPOLAR", simd=2)),
    ("pool", dict(channels=256, window=4, vectors=4, dtype="BIPOLAR", simd=8)),
    ("fifo", dict(width=8, depth=2)),
    ("fifo", dict(width=1, depth=2)),
    ("fifo", dict(width=2, depth=2)),
    ("fifo", dict(width=1, depth=3)),
    ("fifo", dict(width=1, depth=4)),
    ("fifo", dict(width=1, depth=384)),
    ("fifo", dict(width=32, depth=4)),
    ("fifo", dict(width=16, depth=32)),
    ("fifo", dict(width=64, depth=64)),
    ("fifo", dict(width=8, depth=256)),
    # Registers or LUT RAM below 16 beats, block RAM from there: widths and depths on both sides.
    ("fifo", dict(width=4, depth=8)),
    ("fifo", dict(width=16, depth=5)),
    ("fifo", dict(width=96, depth=2)),
    ("fifo", dict(width=3, depth=3)),
    ("fifo", dict(width=2, depth=48)),
    ("fifo", dict(width=6, depth=32)),
    ("fifo", dict(width=8, depth=16)),
    ("fifo", dict(width=12, depth=128)),
    ("fifo", dict(width=16, depth=100)),
    ("fifo", dict(width=4, depth=600)),
    ("fifo", dict(width=32, depth=80)),
    ("fifo", dict(width=24, depth=20)),
    ("fifo", dict(width=48, depth=16)),
    ("fifo", dict(width=2, depth=20)),
    ("fifo", dict(width=3, depth=16)),
    ("fifo", dict(width=8, depth=40)),
    ("fifo", dict(width=64, depth=3)),
    # Narrow and deep: LUT RAM in many 16-word banks on an ECP5 (a write enable each, a wide read mux).
    ("fifo", dict(width=2, depth=128)),
    ("fifo", dict(width=6, depth=160)),
    ("fifo", dict(width=8, depth=96)),
    ("fifo", dict(width=2, depth=300)),
    ("fifo", dict(width=3, depth=200)),
    # Shallow queues of wide beats at the depths between powers of two.
    ("fifo", dict(width=48, depth=6)),
    ("fifo", dict(width=8, depth=6)),
    ("fifo", dict(width=24, depth=7)),
    ("fifo", dict(width=128, depth=5)),
    # Converters: gathering (out a multiple of in), splitting (in a multiple of out), and other ratios.
    ("convert", dict(bits=2, in_elems=1, out_elems=4)),
    ("convert", dict(bits=4, in_elems=8, out_elems=2)),
    ("convert", dict(bits=2, in_elems=4, out_elems=6)),
    ("convert", dict(bits=3, in_elems=6, out_elems=4)),
    ("convert", dict(bits=1, in_elems=2, out_elems=32)),
    ("convert", dict(bits=1, in_elems=32, out_elems=1)),
    ("convert", dict(bits=1, in_elems=1, out_elems=8)),
    ("convert", dict(bits=2, in_elems=1, out_elems=16)),
    ("convert", dict(bits=2, in_elems=16, out_elems=2)),
    ("convert", dict(bits=4, in_elems=2, out_elems=8)),
    ("convert", dict(bits=2, in_elems=4, out_elems=16)),
    ("convert", dict(bits=4, in_elems=1, out_elems=6)),
    ("convert", dict(bits=4, in_elems=3, out_elems=27)),
    ("convert", dict(bits=8, in_elems=2, out_elems=10)),
    ("convert", dict(bits=3, in_elems=6, out_elems=30)),
    ("convert", dict(bits=4, in_elems=12, out_elems=4)),
    ("convert", dict(bits=8, in_elems=6, out_elems=1)),
    ("convert", dict(bits=4, in_elems=3, out_elems=1)),
    ("convert", dict(bits=2, in_elems=1, out_elems=2)),
    ("convert", dict(bits=4, in_elems=2, out_elems=2)),
    ("convert", dict(bits=6, in_elems=1, out_elems=5)),
    ("convert", dict(bits=3, in_elems=2, out_elems=16)),
    ("convert", dict(bits=2, in_elems=1, out_elems=12)),
    ("convert", dict(bits=4, in_elems=2, out_elems=3)),
    ("convert", dict(bits=2, in_elems=9, out_elems=6)),
    ("convert", dict(bits=4, in_elems=6, out_elems=2)),
    ("convert", dict(bits=2, in_elems=24, out_elems=3)),
    # More rings (no ratio between the widths), as concats and odd foldings give them.
    ("convert", dict(bits=4, in_elems=4, out_elems=3)),
    ("convert", dict(bits=4, in_elems=3, out_elems=4)),
    ("convert", dict(bits=2, in_elems=6, out_elems=4)),
    ("convert", dict(bits=8, in_elems=3, out_elems=2)),
    ("convert", dict(bits=1, in_elems=5, out_elems=3)),
    ("convert", dict(bits=4, in_elems=6, out_elems=9)),
    ("convert", dict(bits=8, in_elems=2, out_elems=3)),
    ("convert", dict(bits=2, in_elems=5, out_elems=7)),
    ("convert", dict(bits=4, in_elems=8, out_elems=6)),
    ("convert", dict(bits=3, in_elems=10, out_elems=4)),
    ("vvau", dict(channels=8, taps=9, simd=1, in_dtype="UINT2", weight_dtype="INT2")),
    ("vvau", dict(channels=16, taps=9, simd=4, in_dtype="UINT4", weight_dtype="INT4")),
    # Multiplies in LUTs (res_type="lut"): partial products, never a hard multiplier.
    ("vvau", dict(channels=16, taps=9, simd=4, in_dtype="UINT4", weight_dtype="INT4", res_type="lut")),
    ("vvau", dict(channels=32, taps=9, simd=8, in_dtype="UINT2", weight_dtype="INT2", res_type="lut")),
    ("vvau", dict(channels=8, taps=9, simd=2, in_dtype="INT8", weight_dtype="INT8")),
    ("vvau", dict(channels=32, taps=9, simd=8, in_dtype="UINT2", weight_dtype="BIPOLAR")),
    ("vvau", dict(channels=64, taps=9, simd=2, in_dtype="UINT4", weight_dtype="INT4")),
    ("vvau", dict(channels=16, taps=4, simd=4, in_dtype="UINT4", weight_dtype="UINT1", constant=1)),
    ("vvau", dict(channels=32, taps=49, simd=2, in_dtype="UINT2", weight_dtype="UINT1", constant=1)),
    # The depthwise block: a 3 x 3 depthwise convolution with its thresholds, and an average pool.
    ("vvau", dict(channels=8, taps=9, simd=2, in_dtype="UINT4", weight_dtype="INT4")),
    ("vvau", dict(channels=16, taps=64, simd=1, in_dtype="UINT4", weight_dtype="UINT1", constant=1)),
    ("threshold", dict(channels=8, elems=2, in_dtype="INT10", out_dtype="UINT4")),
    ("threshold", dict(channels=16, elems=1, in_dtype="INT8", out_dtype="UINT2")),
    ("threshold", dict(channels=16, elems=4, in_dtype="INT8", out_dtype="UINT2")),
    ("threshold", dict(channels=32, elems=2, in_dtype="INT10", out_dtype="UINT4")),
    ("threshold", dict(channels=16, elems=4, in_dtype="INT5", out_dtype="UINT2", shared=True)),
    ("threshold", dict(channels=64, elems=8, in_dtype="INT6", out_dtype="UINT4", shared=True)),
    ("threshold", dict(channels=64, elems=1, in_dtype="INT12", out_dtype="BIPOLAR")),
    # Many thresholds shared by every channel: what follows an average pool.
    ("threshold", dict(channels=16, elems=1, in_dtype="INT10", out_dtype="UINT8", shared=True)),
    ("threshold", dict(channels=32, elems=2, in_dtype="INT9", out_dtype="UINT6", shared=True)),
    ("threshold", dict(channels=8, elems=1, in_dtype="UINT9", out_dtype="UINT7", shared=True)),
    ("threshold", dict(channels=12, elems=2, in_dtype="UINT10", out_dtype="UINT6", shared=True)),
    ("threshold", dict(channels=8, elems=1, in_dtype="INT13", out_dtype="UINT4", shared=True)),
    ("threshold", dict(channels=16, elems=2, in_dtype="INT12", out_dtype="UINT3", shared=True)),
    # Thresholds as trained models have them: evenly spaced, repeated at the clip.
    ("threshold", dict(channels=4, elems=4, in_dtype="INT9", out_dtype="UINT4", spacing="even")),
    ("threshold", dict(channels=12, elems=12, in_dtype="INT11", out_dtype="UINT3", spacing="even")),
    ("threshold", dict(channels=16, elems=16, in_dtype="INT8", out_dtype="UINT2", spacing="even")),
    ("threshold", dict(channels=8, elems=4, in_dtype="INT10", out_dtype="UINT4", spacing="even")),
    ("threshold", dict(channels=32, elems=4, in_dtype="INT10", out_dtype="UINT4", spacing="even")),
    ("threshold", dict(channels=8, elems=4, in_dtype="INT13", out_dtype="UINT4", shared=True, spacing="even",
                       clip=1.0)),
    ("threshold", dict(channels=16, elems=1, in_dtype="INT12", out_dtype="UINT4", shared=True, spacing="even")),
    ("threshold", dict(channels=16, elems=2, in_dtype="INT9", out_dtype="UINT6", shared=True, spacing="even",
                       clip=0.7)),
    ("threshold", dict(channels=8, elems=1, in_dtype="UINT11", out_dtype="UINT8", shared=True, spacing="even",
                       clip=1.0)),
    ("threshold", dict(channels=16, elems=2, in_dtype="UINT10", out_dtype="UINT6", shared=True, spacing="even",
                       clip=1.0)),
    ("threshold", dict(channels=8, elems=2, in_dtype="INT9", out_dtype="UINT4", shared=True, spacing="even",
                       clip=1.0)),
    ("threshold", dict(channels=8, elems=1, in_dtype="INT11", out_dtype="UINT7", shared=True, spacing="even",
                       clip=1.0)),
    ("add", dict(a_dtype="INT4", b_dtype="INT4", a_weight=1, b_weight=1, elems=1)),
    ("add", dict(a_dtype="UINT2", b_dtype="UINT2", a_weight=1, b_weight=1, elems=4)),
    ("add", dict(a_dtype="INT8", b_dtype="INT4", a_weight=1, b_weight=3, elems=2)),
    ("add", dict(a_dtype="INT4", b_dtype="INT4", a_weight=1, b_weight=1, elems=16)),
    # Residual adds whose branches are scaled by integer weights (multiplies by constants).
    ("add", dict(a_dtype="INT5", b_dtype="INT4", a_weight=57, b_weight=101, elems=1)),
    ("add", dict(a_dtype="INT4", b_dtype="INT6", a_weight=45, b_weight=77, elems=2)),
    ("add", dict(a_dtype="INT3", b_dtype="INT4", a_weight=5, b_weight=1, elems=4)),
    ("add", dict(a_dtype="UINT3", b_dtype="INT2", a_weight=3, b_weight=7, elems=2)),
    ("add", dict(a_dtype="INT6", b_dtype="INT6", a_weight=1, b_weight=-1, elems=4)),
    ("add", dict(a_dtype="UINT1", b_dtype="UINT2", a_weight=1, b_weight=1, elems=8)),
    ("concat", dict(channels=[8, 8], dtype="UINT2", elems=1)),
    ("concat", dict(channels=[16, 16], dtype="UINT4", elems=4)),
    ("concat", dict(channels=[8, 8, 16], dtype="INT8", elems=2)),
    ("concat", dict(channels=[32, 64], dtype="UINT2", elems=8)),
    ("fork", dict(bits=2, elems=1, outputs=2)),
    ("fork", dict(bits=8, elems=4, outputs=2)),
    ("fork", dict(bits=4, elems=8, outputs=3)),
    ("fork", dict(bits=4, elems=2, outputs=4)),
    ("fork", dict(bits=2, elems=2, outputs=5)),
    ("fork", dict(bits=1, elems=4, outputs=6)),
]


def key_of(kernel: str, p: dict) -> str:
    return kernel + "(" + ", ".join(f"{k}={v}" for k, v in p.items()) + ")"


def kernel_verilog(unit, name: str) -> str:
    """The Verilog the sweep synthesizes for one kernel: a FIFO or a branch kernel as its own top module,
    any other inside a one-stage accelerator. The models are fitted to these, and Yosys maps the same
    logic differently as its surroundings change (one MVAU: 1,495 LUTs alone, 1,216 in a one-stage
    accelerator), so whatever is compared with the models is synthesized the same way."""
    from amaranth.back import verilog as amaranth_verilog

    from streamc.rtl.top import StreamAccelerator, to_verilog

    if resources.kernel_name(resources.spec_of_unit(unit)) in ("fifo", *BRANCH_KERNELS):
        return amaranth_verilog.convert(unit, name=name, emit_src=False)
    return to_verilog(StreamAccelerator(stages=[unit]), name=name)


def synthesize_one(kernel: str, p: dict, device: str, workdir: Path) -> dict:
    """Generate and synthesize one sweep entry; the record stored in the calibration data."""
    from streamc.synth import synthesize

    unit, spec = make_unit(kernel, p)
    name = "cal_" + hashlib.sha1(key_of(kernel, p).encode()).hexdigest()[:10]
    folder = workdir / device / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.v").write_text(kernel_verilog(unit, name))
    result = synthesize(verilog=folder / f"{name}.v", top=name, device=device, workdir=folder)
    log = result.log.read_text(errors="replace")
    mapped = [line.strip() for line in log.splitlines()
              if line.startswith("mapping memory ") or line.startswith("using FF mapping")]
    return dict(kernel=kernel, params=p, spec=spec.to_dict(), device=device, lut=result.lut, ff=result.ff,
                bram=result.bram, dsp=result.dsp, spram=result.spram, cells=result.cells,
                memories=mapped, seconds=round(result.seconds, 1))


def data_path(device: str) -> Path:
    return CALIBRATION / f"{device}.json"


def load_records(device: str) -> list[dict]:
    path = data_path(device)
    return json.loads(path.read_text()) if path.exists() else []


def run_sweep(devices: list[str], workdir: Path, jobs: int, skip_slower: float | None = None) -> None:
    CALIBRATION.mkdir(parents=True, exist_ok=True)
    stored = {device: load_records(device) for device in devices}
    done = {(r["device"], key_of(r["kernel"], r["params"])) for rs in stored.values() for r in rs}
    # The slowest designs (a few large ROMs) by what Yosys took on the ECP5, where a family is added in a hurry.
    slow = ({key_of(r["kernel"], r["params"]) for r in load_records("ecp5-85f") if r["seconds"] > skip_slower}
            if skip_slower is not None else set())
    todo = [(kernel, p, device) for kernel, p in SWEEP for device in devices
            if (device, key_of(kernel, p)) not in done and key_of(kernel, p) not in slow]
    # Kinds taken in turn, each in the sweep's order: a sweep cut short has designs of every kind to fit.
    seen: dict[str, int] = {}
    turns = []
    for kernel, _, _ in todo:
        turns.append(seen.get(kernel, 0))
        seen[kernel] = turns[-1] + 1
    todo = [entry for _, entry in sorted(zip(turns, todo), key=lambda pair: pair[0])]
    print(f"{len(todo)} designs to synthesize", flush=True)
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        futures = {pool.submit(synthesize_one, kernel, p, device, workdir.resolve()): (kernel, p, device)
                   for kernel, p, device in todo}
        for future in as_completed(futures):
            kernel, p, device = futures[future]
            try:
                record = future.result()
            except Exception as exc:  # one failed design must not lose the others
                print(f"FAILED {device} {key_of(kernel, p)}: {exc}", flush=True)
                continue
            stored[device].append(record)
            order = [key_of(k, q) for k, q in SWEEP]
            stored[device].sort(key=lambda r: order.index(key_of(r["kernel"], r["params"]))
                                if key_of(r["kernel"], r["params"]) in order else len(order))
            data_path(device).write_text(json.dumps(stored[device], indent=1) + "\n")
            print(f"{device:<11} {key_of(kernel, p):<90} LUT {record['lut']:>6} FF {record['ff']:>6} "
                  f"BRAM {record['bram']:>3} DSP {record['dsp']:>3} ({record['seconds']} s)", flush=True)


def refresh_specs(devices: list[str]) -> None:
    """Rebuild every stored record's spec from its parameters: after a spec gains a field, no Yosys run."""
    for device in devices:
        records = load_records(device)
        for record in records:
            record["spec"] = make_unit(record["kernel"], record["params"])[1].to_dict()
        data_path(device).write_text(json.dumps(records, indent=1) + "\n")


#: Families whose placed designs are fitted with the others: a UP5K multiplies a layer's narrow
#: operands in logic either way (its DSPs take only products of 11 bits and more), so a multiply in
#: LUTs changes the amount of the same kind of logic, not its kind.
FITTED_TOGETHER = {"ice40"}


#: The share of each kernel kind's designs that the fit never sees (see :func:`held_out_keys`).
HELD_OUT_SHARE = 0.2
#: The device of each family whose syntheses the shipped coefficients are fitted on.
CALIBRATED_DEVICES = ("ice40-up5k", "ecp5-85f", "gowin-gw1nr-9")
#: Where ``main`` writes the fitted coefficients that streamc ships (read by streamc.resources.coefficients).
COEFFICIENTS_FILE = Path(__file__).resolve().parent.parent / "streamc" / "resources" / "coefficients.json"


def held_out_keys(records: list[dict]) -> set[str]:
    """The keys (:func:`key_of`) of the held-out designs among ``records`` (of any devices).

    In each kernel kind, the distinct design keys ordered by their SHA-1; the first
    ``max(1, round(HELD_OUT_SHARE * n))`` are held out. A hash, not the sweep's order, so that the
    held-out designs are spread over the sweep's families (the sweep lists small widths first).
    """
    by_kernel: dict[str, set[str]] = {}
    for record in records:
        by_kernel.setdefault(record["kernel"], set()).add(key_of(record["kernel"], record["params"]))
    held = set()
    for keys in by_kernel.values():
        ordered = sorted(keys, key=lambda key: hashlib.sha1(key.encode()).hexdigest())
        held.update(ordered[:max(1, round(HELD_OUT_SHARE * len(keys)))])
    return held


def is_held_out(record: dict, held: set[str]) -> bool:
    return key_of(record["kernel"], record["params"]) in held


def fit(devices: list[str], records: dict[str, list[dict]] | None = None) -> dict:
    """Least-squares LUT and FF coefficients per device family and kernel, on relative error, from the
    training designs only (the held-out ones, :func:`held_out_keys`, are left out).

    ``records`` maps each device to its designs; by default the stored ones (:func:`load_records`).
    The split is drawn over the designs of all ``devices`` together.

    On the ECP5, designs with a placement (``res_type``) are fitted after the others, for the features
    only they have: there a multiply in LUTs replaces a hard multiplier with partial products that join
    the adder tree, and that must not bend the model of every other design. On the iCE40 (see
    :data:`FITTED_TOGETHER`) all are fitted together.
    """
    if records is None:
        records = {device: load_records(device) for device in devices}
    held = held_out_keys([record for device in devices for record in records[device]])
    fitted: dict = {}
    for device in devices:
        family = resources.family_of(device)
        by_kernel: dict[str, list[dict]] = {}
        for record in records[device]:
            if not is_held_out(record, held):
                by_kernel.setdefault(record["kernel"], []).append(record)
        for kernel, training in by_kernel.items():
            for what in ("lut", "ff"):
                rows, target, placed = [], [], []
                for record in training:
                    spec = resources.spec_from_dict(record["kernel"], record["spec"])
                    features = resources.features(spec, family, what)
                    scale = max(record[what], 1)
                    rows.append([v / scale for v in features.values()])
                    target.append(record[what] / scale)
                    placed.append("res_type" in record["params"] and family not in FITTED_TOGETHER)
                names = list(features)
                a, b, placed = np.array(rows), np.array(target), np.array(placed)
                coef = _nonnegative_lstsq(a[~placed], b[~placed])
                own = (a[~placed] == 0).all(axis=0) & (a[placed] != 0).any(axis=0)
                if own.any():
                    residual = b[placed] - a[placed][:, ~own] @ coef[~own]
                    coef[own] = _nonnegative_lstsq(a[placed][:, own], residual)
                fitted.setdefault(family, {}).setdefault(kernel, {})[what] = dict(zip(names, np.round(coef, 4).tolist()))
    return fitted


def _nonnegative_lstsq(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Least squares with coefficients >= 0, by dropping negative ones until none is left."""
    active = list(range(a.shape[1]))
    coef = np.zeros(a.shape[1])
    while active:
        solution, *_ = np.linalg.lstsq(a[:, active], b, rcond=None)
        if (solution >= 0).all():
            coef[active] = solution
            break
        active.pop(int(np.argmin(solution)))
    return coef


def table(devices: list[str]) -> list[dict]:
    """Every stored design of ``devices`` with its estimate (the shipped coefficients), and whether it
    is held out of the fit."""
    records = {device: load_records(device) for device in devices}
    held = held_out_keys([record for device in devices for record in records[device]])
    rows = []
    for device in devices:
        family = resources.family_of(device)
        for record in records[device]:
            spec = resources.spec_from_dict(record["kernel"], record["spec"])
            estimate = resources.estimate_kernel(spec, family)
            rows.append(dict(device=device, kernel=record["kernel"], params=key_of(record["kernel"], record["params"]),
                             held_out=is_held_out(record, held), estimate=asdict(estimate),
                             synthesized={k: record[k] for k in ("lut", "ff", "bram", "dsp")}))
    return rows


#: A LUT or FF estimate is "within" when it is off by at most this share of the synthesized count, or 2 cells.
WITHIN = 0.15


def within(estimated: int, synthesized: int) -> bool:
    return abs(estimated - synthesized) <= max(2, WITHIN * synthesized)


def accuracy(rows: list[dict]) -> dict[str, float]:
    """The shares of ``rows`` (of :func:`table`) whose LUT, FF, and both estimates are within +-15 %."""
    ok = {what: [within(row["estimate"][what], row["synthesized"][what]) for row in rows] for what in ("lut", "ff")}
    both = [lut and ff for lut, ff in zip(ok["lut"], ok["ff"])]
    return dict(designs=len(rows), lut=float(np.mean(ok["lut"])), ff=float(np.mean(ok["ff"])), both=float(np.mean(both)))


def print_accuracy(rows: list[dict]) -> None:
    for part, held in (("training", False), ("held out", True)):
        for device in sorted({row["device"] for row in rows}) + ["all"]:
            chosen = [row for row in rows if row["held_out"] == held and device in ("all", row["device"])]
            if chosen:
                a = accuracy(chosen)
                print(f"{part:<8} {device:<11} {a['designs']:>4} designs within +-15 %: LUT {a['lut']:6.1%}  "
                      f"FF {a['ff']:6.1%}  both {a['both']:6.1%}")


def print_table(rows: list[dict]) -> None:
    print(f"{'device':<11} {'kernel and parameters':<92} {'part':<5} {'LUT est/syn':>13} {'ratio':>6} "
          f"{'FF est/syn':>13} {'ratio':>6} {'BRAM':>7} {'DSP':>7}")
    for row in rows:
        e, s = row["estimate"], row["synthesized"]
        print(f"{row['device']:<11} {row['params'][:92]:<92} {'held' if row['held_out'] else 'train':<5} "
              f"{e['lut']:>6}/{s['lut']:<6} {e['lut'] / max(s['lut'], 1):>6.2f} {e['ff']:>6}/{s['ff']:<6} "
              f"{e['ff'] / max(s['ff'], 1):>6.2f} {e['bram']:>3}/{s['bram']:<3} {e['dsp']:>3}/{s['dsp']:<3}")
    print()
    print_accuracy(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--synthesize", action="store_true", help="synthesize what the stored data lacks")
    parser.add_argument("--devices", nargs="+", default=list(CALIBRATED_DEVICES))
    parser.add_argument("--workdir", type=Path, default=Path("out/calibration"))
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--respec", action="store_true", help="rebuild the stored specs from their parameters")
    parser.add_argument("--skip-slower", type=float, metavar="SECONDS",
                        help="with --synthesize, leave out the designs whose ECP5-85F synthesis took longer")
    args = parser.parse_args(argv)
    if args.respec:
        refresh_specs(args.devices)
    if args.synthesize:
        run_sweep(args.devices, args.workdir, args.jobs, args.skip_slower)
    fitted = fit(args.devices)
    (CALIBRATION / "fit.json").write_text(json.dumps(fitted, indent=1) + "\n")
    if set(args.devices) >= set(CALIBRATED_DEVICES):   # every family: what streamc ships
        COEFFICIENTS_FILE.write_text(json.dumps(fitted, indent=1) + "\n")
        # The table's estimates use the coefficients just written.
        resources.COEFFICIENTS.clear()
        resources.COEFFICIENTS.update(fitted)
    print_table(table(args.devices))
    return 0


if __name__ == "__main__":
    sys.exit(main())
