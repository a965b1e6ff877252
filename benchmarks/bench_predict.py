"""Frames/s of ``Accelerator.predict`` (the hardware's exact arithmetic in numpy, batched) on TFC-w2a2, the digits
CNN and CNV-w2a2.

Run: python benchmarks/bench_predict.py [--runs N] [--frames N] [--cnv-frames N]

Each model is compiled once (``streamc.compile``, ECP5-85F, 100 MHz); its recorded frames are repeated to the
count asked (predict's time does not depend on the values) and predicted ``--runs`` times; the table gives the
median. The issue's targets: 10,000 CNV frames in under 5 minutes, about 1 M frames/s for TFC-size MLPs.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

import streamc

ROOT = Path(__file__).resolve().parent.parent
MODELS = ROOT / "tests" / "models"
CASES = {
    "TFC-w2a2": (MODELS / "tfc_w2a2.onnx", MODELS / "tfc_frames.npy", 100_000),
    "digits CNN": (MODELS / "cnn/digits_cnn.onnx", MODELS / "cnn/digits_cnn_frames.npy", 10_000),
    "CNV-w2a2": (MODELS / "cnn/cnv_w2a2.onnx", MODELS / "cnn/cnv_frames.npy", 500),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--frames", type=int, default=100_000, help="frames per run of the MLP")
    parser.add_argument("--cnn-frames", type=int, default=2_000, help="frames per run of the digits CNN")
    parser.add_argument("--cnv-frames", type=int, default=1_000, help="frames per run of CNV-w2a2")
    args = parser.parse_args()
    counts = {"TFC-w2a2": args.frames, "digits CNN": args.cnn_frames, "CNV-w2a2": args.cnv_frames}
    print(f"| model | frames per run | median s ({args.runs} runs) | frames/s |")
    print("|---|---:|---:|---:|")
    for name, (model, recorded, target_fps) in CASES.items():
        with tempfile.TemporaryDirectory() as out:
            acc = streamc.compile(model, device="ecp5-85f", clock_mhz=100, target_fps=target_fps, output_dir=out)
            frames = np.load(recorded)
            frames = np.resize(frames, (counts[name], *frames.shape[1:]))
            seconds = []
            for _ in range(args.runs):
                start = time.perf_counter()
                acc.predict(frames)
                seconds.append(time.perf_counter() - start)
        median = statistics.median(seconds)
        print(f"| {name} | {len(frames):,} | {median:.2f} | {len(frames) / median:,.0f} |", flush=True)


if __name__ == "__main__":
    main()
