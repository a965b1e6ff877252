"""streamc quantize on the float digits models (tests/models/float): float against quantized accuracy for
w8a8 and w4a4 with float, power-of-two and auto scales; the LUTs of the w8a8 model with float against
power-of-two scales, from streamc's estimate and from Yosys (synth_ice40 for the UP5K); optionally the
bit-width search at a frame rate, and every variant built and compared with qonnx's executor in Verilator.

Run: python benchmarks/bench_quantize.py [--model digits_mlp|digits_float_cnn] [--target-fps 20000]
         [--clock-mhz 30] [--search-fps F] [--verilator FRAMES] [--workdir DIR]

``--search-fps`` runs ``streamc quantize --device ice40-up5k --target-fps F`` with the test labels (the search
keeps the most accurate choice that fits), prints the choice and the uniform ones, and the LUTs (estimate and
Yosys) at that rate of the model written against uniform w8a8 (both with auto scales); ``--verilator`` builds
the w8a8 and w4a4 models with float and power-of-two scales (``Accelerator.simulate``, the build's sim step,
at 100,000 frames/s and 100 MHz) and counts the frames whose outputs differ from qonnx's executor.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
from pathlib import Path

import numpy as np

import streamc
from streamc.errors import FoldingError
from streamc.ptq.report import choice_line
from streamc.synth import synthesize as yosys

ROOT = Path(__file__).resolve().parent.parent
FLOAT = ROOT / "tests" / "models" / "float"
DEVICE = "ice40-up5k"
BITS = ("w8a8", "w4a4")
SCALES = ("float", "pow2", "auto")


def quantize(model: str, bits: str, scales: str, out: Path, **search):
    return streamc.quantize(FLOAT / f"{model}.onnx", FLOAT / f"{model}_calib.npy", out, bits=bits, scales=scales,
                            test=FLOAT / f"{model}_test.npy", labels=FLOAT / f"{model}_test_labels.npy", **search)


def synthesize(onnx_path: Path, folder: Path, target_fps: float, clock_mhz: float):
    accelerator = streamc.compile(onnx_path, device=DEVICE, target_fps=target_fps, clock_mhz=clock_mhz,
                                  output_dir=folder / "build")
    verilog = accelerator.write_verilog(folder / "verilog")
    synth = yosys(verilog=verilog, device=DEVICE, workdir=folder / "synth")
    stages = [layer.output_stage for layer in accelerator.dataflow.layers]
    return accelerator.estimate()[DEVICE], synth, stages


def verilator(onnx_path: Path, model: str, frames: int, folder: Path) -> dict:
    sys.path.insert(0, str(ROOT / "tests" / "models"))
    from qonnx_reference import execute_frames

    inputs = np.load(FLOAT / f"{model}_test.npy")[:frames]
    accelerator = streamc.compile(onnx_path, clock_mhz=100, target_fps=100_000, output_dir=folder,
                                  verify={"seed": 7})
    return accelerator.simulate(inputs, expected=execute_frames(onnx_path, inputs), check=False).report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="digits_mlp", choices=["digits_mlp", "digits_float_cnn"])
    parser.add_argument("--target-fps", type=float, default=20_000, help="the rate of the Yosys comparison")
    parser.add_argument("--clock-mhz", type=float, default=30)
    parser.add_argument("--search-fps", type=float, help="run the bit-width search at this rate")
    parser.add_argument("--verilator", type=int, metavar="FRAMES", help="build every variant in Verilator")
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args()
    print(f"load: {os.getloadavg()}")
    with tempfile.TemporaryDirectory(prefix="bench-quantize-") as scratch:
        work = args.workdir or Path(scratch)
        work.mkdir(parents=True, exist_ok=True)
        for bits in BITS:
            for scales in SCALES:
                name = f"{args.model}_{bits}_{scales}"
                report = quantize(args.model, bits, scales, work / f"{name}.onnx")
                pow2 = [layer.name for layer in report.layers if layer.pow2]
                back = "" if report.scales is None else \
                    f", float scales given back to [{'; '.join(', '.join(u) for u in report.scales.float_units)}]"
                print(f"{name}: accuracy float {report.float_accuracy:.4f} quantized {report.quantized_accuracy:.4f} "
                      f"({report.frames} test frames), output SQNR {report.sqnr_db:.1f} dB, "
                      f"all-power-of-two layers {len(pow2)} of {len(report.layers)}{back}")
        for scales in ("float", "pow2"):
            name = f"{args.model}_w8a8_{scales}"
            estimate, synth, stages = synthesize(work / f"{name}.onnx", work / name, args.target_fps, args.clock_mhz)
            print(f"{name} on the UP5K at {args.target_fps:g} frames/s, {args.clock_mhz:g} MHz: LUTs estimated "
                  f"{estimate['lut']}, Yosys {synth.lut}; FF estimated {estimate['ff']}, Yosys {synth.ff}; "
                  f"output stages: {'; '.join(stages)}")
        if args.search_fps:
            report = quantize(args.model, "w8a8", "auto", work / "searched.onnx", device=DEVICE,
                              target_fps=args.search_fps, clock_mhz=args.clock_mhz)
            print(f"bit-width search, {DEVICE} at {args.search_fps:g} frames/s and {args.clock_mhz:g} MHz "
                  f"({len(report.priced)} choices priced, each with auto scales): chosen {choice_line(report.chosen)}")
            for choice in report.priced:
                if len(set(choice.bits)) == 1:
                    print(f"  uniform {choice_line(choice)}")
            for name in ("searched", f"{args.model}_w8a8_auto"):
                try:
                    estimate, synth, _ = synthesize(work / f"{name}.onnx", work / f"{name}_at_search",
                                                    args.search_fps, args.clock_mhz)
                except FoldingError as exc:
                    print(f"{name} at {args.search_fps:g} frames/s: {exc}")
                else:
                    print(f"{name} at {args.search_fps:g} frames/s: LUTs estimated {estimate['lut']}, Yosys "
                          f"{synth.lut}; FF estimated {estimate['ff']}, Yosys {synth.ff}")
        if args.verilator:
            for bits in BITS:
                for scales in ("float", "pow2"):
                    name = f"{args.model}_{bits}_{scales}"
                    sim = verilator(work / f"{name}.onnx", args.model, args.verilator, work / f"{name}_sim")
                    print(f"{name} in Verilator: {sim['frames']} frames, {sim['expected_mismatches']} differ from "
                          f"qonnx's executor, {sim['mismatches']} from streamc's emulation, "
                          f"{sim['measured_cycles_per_frame']:g} cycles/frame")
    usage = resource.getrusage(resource.RUSAGE_SELF).ru_utime + resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime
    print(f"CPU seconds (user, this process and its tools): {usage:.0f}; load: {os.getloadavg()}")


if __name__ == "__main__":
    main()
