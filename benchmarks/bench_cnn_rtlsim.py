"""The convolutional test models in Verilator: bit-exact outputs and measured against predicted cycles.

Run: python benchmarks/bench_cnn_rtlsim.py [--models cnv_w1a1 ...] [--frames 8] [--out DIR]

Each model is built through the sim step (load ... fold, rtl, sim) with random input gaps and output
back-pressure (the sim step's defaults), its outputs compared with the reference and with the frames'
expected outputs recorded at export. CNV-w1a1/w1a2/w2a2 are folded for 100 frames/s at 100 MHz
(about 0.9 M cycles per frame): each takes tens of minutes here, most of it Verilator compiling the
design's C++. The blocks are the CI test models (tests/test_conv_lowering.py runs them too).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import yaml

from streamc.pipeline.runner import run_build

ROOT = Path(__file__).resolve().parent.parent
CNN = ROOT / "tests" / "models" / "cnn"
MODELS = {
    "cnv_w1a1": ("cnv_frames.npy", 100),
    "cnv_w1a2": ("cnv_frames.npy", 100),
    "cnv_w2a2": ("cnv_frames.npy", 100),
    "digits_cnn": ("digits_cnn_frames.npy", 150_000),
    "depthwise_block": ("depthwise_block_frames.npy", 150_000),
    "residual_block": ("residual_block_frames.npy", 150_000),
    "concat_block": ("concat_block_frames.npy", 150_000),
    "conv1d_kws": ("conv1d_kws_frames.npy", 150_000),
}


def build(name: str, frames: int, out: Path) -> dict:
    inputs, fps = MODELS[name]
    config = out / f"{name}.yaml"
    config.write_text(yaml.safe_dump({
        "model": str(CNN / f"{name}.onnx"), "output_dir": str(out / name), "target_fps": fps,
        "steps": ["load", "tidy", "streamline", "to_hw", "fold", "rtl", "sim"],
        "verify": {"inputs": str(CNN / inputs), "expected": str(CNN / f"{name}_expected.npy"), "frames": frames}}))
    start = time.perf_counter()
    report = run_build(config, fresh=True).rtlsim
    return dict(report, seconds=time.perf_counter() - start)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", choices=sorted(MODELS), default=list(MODELS))
    parser.add_argument("--frames", type=int, default=8)
    parser.add_argument("--out", type=Path, default=ROOT / "out" / "bench_cnn_rtlsim")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    print(f"{'model':16} {'frames':>6} {'mismatches':>10} {'vs expected':>11} {'predicted':>10} {'measured':>10} "
          f"{'ratio':>7} {'seconds':>8}")
    failures = 0
    for name in args.models:
        r = build(name, args.frames, args.out)
        ratio = r["measured_cycles_per_frame"] / r["predicted_cycles_per_frame"]
        failures += r["mismatches"] + r.get("expected_mismatches", 0) + (abs(ratio - 1) > 0.02)
        print(f"{name:16} {r['frames']:>6} {r['mismatches']:>10} {r.get('expected_mismatches', 0):>11} "
              f"{r['predicted_cycles_per_frame']:>10} {r['measured_cycles_per_frame']:>10.0f} {ratio:>7.4f} "
              f"{r['seconds']:>8.0f}", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
