"""streamc quantize on the float digits models: float against quantized accuracy (w8a8, w4a4, float
scales and power-of-two scales), and the LUTs of the w8a8 model with float scales against the one with
power-of-two scales, from streamc's estimate and from Yosys (synth_ice40 for the UP5K).

Run: python benchmarks/bench_quantize.py [--model digits_mlp] [--target-fps 20000] [--workdir DIR]
"""

from __future__ import annotations

import argparse
import os
import resource
import tempfile
from pathlib import Path

import streamc
from streamc.synth import synthesize as yosys

FLOAT = Path(__file__).resolve().parent.parent / "tests" / "models" / "float"
DEVICE = "ice40-up5k"


def quantize(model: str, bits: str, pow2: bool, out: Path):
    return streamc.quantize(FLOAT / f"{model}.onnx", FLOAT / f"{model}_calib.npy", out, bits=bits, scales="pow2" if pow2 else "float",
                            test=FLOAT / f"{model}_test.npy", labels=FLOAT / f"{model}_test_labels.npy")


def synthesize(onnx_path: Path, folder: Path, target_fps: float):
    accelerator = streamc.compile(onnx_path, device=DEVICE, target_fps=target_fps, clock_mhz=30,
                                  output_dir=folder / "build")
    verilog = accelerator.write_verilog(folder / "verilog")
    synth = yosys(verilog=verilog, device=DEVICE, workdir=folder / "synth")
    stages = [layer.output_stage for layer in accelerator.dataflow.layers]
    return accelerator.estimate()[DEVICE], synth, stages


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="digits_mlp", choices=["digits_mlp", "digits_float_cnn"])
    parser.add_argument("--target-fps", type=float, default=20_000)
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args()
    print(f"load: {os.getloadavg()}")
    with tempfile.TemporaryDirectory(prefix="bench-quantize-") as scratch:
        work = args.workdir or Path(scratch)
        work.mkdir(parents=True, exist_ok=True)
        for bits in ("w8a8", "w4a4"):
            for pow2 in (False, True):
                name = f"{args.model}_{bits}{'_pow2' if pow2 else ''}"
                report = quantize(args.model, bits, pow2, work / f"{name}.onnx")
                print(f"{name}: accuracy float {report.float_accuracy:.4f} quantized {report.quantized_accuracy:.4f} "
                      f"({report.frames} test frames), output SQNR {report.sqnr_db:.1f} dB")
        for pow2 in (False, True):
            name = f"{args.model}_w8a8{'_pow2' if pow2 else ''}"
            estimate, synth, stages = synthesize(work / f"{name}.onnx", work / name, args.target_fps)
            print(f"{name} on the UP5K at {args.target_fps:g} frames/s: LUTs estimated {estimate['lut']}, "
                  f"Yosys {synth.lut}; FF estimated {estimate['ff']}, Yosys {synth.ff}; "
                  f"output stages: {'; '.join(stages)}")
    usage = resource.getrusage(resource.RUSAGE_SELF).ru_utime + resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime
    print(f"CPU seconds (user, this process and its tools): {usage:.0f}; load: {os.getloadavg()}")


if __name__ == "__main__":
    main()
