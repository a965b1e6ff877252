"""Resources of one 64x64 INT8 layer with 8-bit outputs: 255 thresholds per channel vs requantization.

Run: python benchmarks/bench_requant.py [--pe 8] [--simd 8] [--workdir DIR]

Both units compute the same function. The requantization (positive per-channel multipliers,
FLOOR, offset in the middle of the output range) comes first; the thresholds are derived from
it exactly, ``T[c, k] = ceil(((lo + k) * 2**shift - offset[c]) / multiplier[c])``, and the two
are checked equal in numpy on every reachable accumulator value of a sample of channels before
any synthesis. Each unit alone is wrapped in a StreamAccelerator and synthesized by Yosys for
the ECP5-85F (``synth_ecp5``). LUTs count a CCU2C carry cell as two LUT4s. The same layer
with no output stage (the accumulator out) is the baseline for the output stages' own
cost. Takes about 4 minutes, nearly all of it the thresholds' synthesis.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

from streamc.datatypes import INT, smallest_datatype
from streamc.rtl.mvau import MatrixVectorUnit
from streamc.rtl.requant import Requant, requantize
from streamc.rtl.top import StreamAccelerator, to_verilog
from streamc.synth import synthesize

MH = MW = 64
SHIFT = 24  # multipliers of about 14 bits, as a requantization keeps its precision
OUT = INT(8)
SEED = 0


def make_layer(rng) -> tuple[np.ndarray, Requant, np.ndarray]:
    """Random INT8 weights, a requantization that spreads typical sums over INT8, and the
    255 thresholds per channel that give the same outputs (with ``out_bias = -128``)."""
    weights = rng.integers(-128, 128, size=(MH, MW))
    typical = (rng.integers(-128, 128, size=(512, MW)) @ weights.T).std(axis=0)
    multiplier = np.round(OUT.max / 3 / typical * 2 ** SHIFT).astype(np.int64)
    offset = rng.integers(-(1 << SHIFT), 1 << SHIFT, size=MH)
    requant = Requant(multiplier=multiplier, offset=offset, shift=SHIFT, rounding="FLOOR",
                      lo=OUT.min, hi=OUT.max)
    levels = np.arange(OUT.min + 1, OUT.max + 1)
    numerator = (levels[None, :] << SHIFT) - offset[:, None]
    thresholds = -((-numerator) // multiplier[:, None])
    return weights, requant, thresholds


def check_same_function(weights, requant, thresholds) -> None:
    """Every reachable accumulator value of four channels: thresholds and requant agree.
    (The thresholds of a channel are sorted, so the count reached is a sorted search.)"""
    for c in (0, 21, 42, 63):
        reach = int(np.abs(weights[c]).sum()) * 128
        acc = np.arange(-reach, reach + 1)
        by_thresholds = OUT.min + np.searchsorted(thresholds[c], acc, side="right")
        one_channel = Requant(multiplier=requant.multiplier[c:c + 1],
                              offset=requant.offset[c:c + 1], shift=requant.shift,
                              rounding=requant.rounding, lo=requant.lo, hi=requant.hi)
        by_requant = requantize(acc[:, None], one_channel)[:, 0]
        assert np.array_equal(by_thresholds, by_requant), f"channel {c} differs"


def synthesize_unit(unit, workdir: Path):
    top_name = f"bench_{unit.name}"
    verilog = workdir / f"{top_name}.v"
    verilog.write_text(to_verilog(StreamAccelerator(stages=[unit]), name=top_name))
    started = time.perf_counter()
    result = synthesize(verilog=verilog, top=top_name, device="ecp5-85f", workdir=workdir / unit.name)
    return result, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pe", type=int, default=8)
    parser.add_argument("--simd", type=int, default=8)
    parser.add_argument("--workdir", type=Path, default=None,
                        help="keep Verilog, logs and statistics here (default: a temporary folder)")
    args = parser.parse_args()

    weights, requant, thresholds = make_layer(np.random.default_rng(SEED))
    check_same_function(weights, requant, thresholds)
    common = dict(weights=weights, in_dtype=INT(8), weight_dtype=INT(8), pe=args.pe,
                  simd=args.simd, out_dtype=OUT)
    reach = int(np.abs(weights).sum(axis=1).max()) * 128
    bare = MatrixVectorUnit(**{**common, "out_dtype": smallest_datatype(-reach, reach)},
                            thresholds=None, name="bare")
    units = {
        "none (accumulator out)": bare,
        "255 thresholds/channel": MatrixVectorUnit(**common, thresholds=thresholds,
                                                   out_bias=OUT.min, name="thresholds"),
        "requantization": MatrixVectorUnit(**common, thresholds=None, requant=requant,
                                           name="requant"),
    }
    rq = units["requantization"]
    print(f"{MH}x{MW} MVAU, INT8 x INT8 -> INT8, pe={args.pe} simd={args.simd}, ECP5-85F "
          f"(Yosys synth_ecp5); accumulator {rq.acc_shape}, multiplier {rq.multiplier_shape}, "
          f"product {rq.product_shape}, sum {rq.sum_shape}")
    with tempfile.TemporaryDirectory() as tmp:
        workdir = args.workdir or Path(tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        results = {}
        print(f"{'output stage':<24} {'LUT4':>8} {'FF':>8} {'DSP':>5} {'BRAM':>5} {'Yosys (s)':>10}")
        for label, unit in units.items():
            result, seconds = synthesize_unit(unit, workdir)
            results[label] = result
            print(f"{label:<24} {result.lut:>8} {result.ff:>8} {result.dsp:>5} {result.bram:>5} "
                  f"{seconds:>10.1f}", flush=True)
    base, thr, req = (results[label] for label in units)
    print(f"{'ratio, whole layer':<24} {thr.lut / req.lut:>7.1f}x {thr.ff / req.ff:>7.1f}x")
    print(f"{'ratio, output stage':<24} {(thr.lut - base.lut) / (req.lut - base.lut):>7.1f}x "
          f"{(thr.ff - base.ff) / (req.ff - base.ff):>7.1f}x   (minus the accumulator-out layer)")


if __name__ == "__main__":
    main()
