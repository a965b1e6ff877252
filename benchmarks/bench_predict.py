"""Frames/s of ``Accelerator.predict`` (the hardware's exact arithmetic in numpy, batched) on TFC-w2a2, the digits
CNN and CNV-w2a2, with this tree and optionally an earlier revision in the same run.

Run: python benchmarks/bench_predict.py [--before REV] [--runs N] [--frames N] [--cnn-frames N] [--cnv-frames N]

Each model is compiled once per revision (``streamc.compile``, ECP5-85F, 100 MHz) in a fresh process; its recorded
frames are repeated to the count asked (predict's time does not depend on the values) and predicted ``--runs``
times; the table gives the median wall seconds, frames/s, the median CPU seconds (all threads) and frames per CPU
second (the figure a busy machine disturbs least). The first run of each includes finding the head's thresholds
(:mod:`streamc.input_thresholds`, about a second on CNV). ``--before``
runs that revision from a git worktree, the two taking turns model by model so that a busy machine slows both
alike, and checks that both predicted the same integers. The issue's targets: 10,000 CNV frames in under
5 minutes, about 1 M frames/s for TFC-size MLPs.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
MODELS = ROOT / "tests" / "models"
CASES = {
    "TFC-w2a2": (MODELS / "tfc_w2a2.onnx", MODELS / "tfc_frames.npy", 100_000),
    "digits CNN": (MODELS / "cnn/digits_cnn.onnx", MODELS / "cnn/digits_cnn_frames.npy", 10_000),
    "CNV-w2a2": (MODELS / "cnn/cnv_w2a2.onnx", MODELS / "cnn/cnv_frames.npy", 500),
}


def measure(name: str, count: int, runs: int, save: Path) -> None:
    """In a worker process: compile ``name`` with the streamc on the path, predict ``count`` frames ``runs`` times;
    prints the (wall, CPU) seconds of each run as JSON and saves the hardware integers to ``save``."""
    import streamc

    model, recorded, target_fps = CASES[name]
    with tempfile.TemporaryDirectory() as out:
        acc = streamc.compile(model, device="ecp5-85f", clock_mhz=100, target_fps=target_fps, output_dir=out)
        frames = np.load(recorded)
        frames = np.resize(frames, (count, *frames.shape[1:]))
        times = []
        for _ in range(runs):
            wall, cpu = time.perf_counter(), time.process_time()
            integers = acc.predict(frames, hardware=True)
            times.append((time.perf_counter() - wall, time.process_time() - cpu))
    np.save(save, integers)
    print(json.dumps({"times": times, "streamc": streamc.__file__}))


def run_worker(tree: Path, name: str, count: int, runs: int, save: Path) -> list[tuple[float, float]]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tree), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, __file__, "--worker", name, "--count", str(count), "--runs", str(runs),
                           "--save", str(save)], cwd=tree, env=env, check=True, capture_output=True, text=True)
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert Path(result["streamc"]).resolve().is_relative_to(tree.resolve()), result["streamc"]
    return result["times"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", help="a git revision to compare with (run from a worktree)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--frames", type=int, default=100_000, help="frames per run of the MLP")
    parser.add_argument("--cnn-frames", type=int, default=2_000, help="frames per run of the digits CNN")
    parser.add_argument("--cnv-frames", type=int, default=1_000, help="frames per run of CNV-w2a2")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--count", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--save", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        measure(args.worker, args.count, args.runs, Path(args.save))
        return
    counts = {"TFC-w2a2": args.frames, "digits CNN": args.cnn_frames, "CNV-w2a2": args.cnv_frames}
    with tempfile.TemporaryDirectory() as folder:
        trees = {"after": ROOT}
        if args.before:
            trees = {"before": Path(folder) / "before", "after": ROOT}
            subprocess.run(["git", "worktree", "add", "--detach", str(trees["before"]), args.before], cwd=ROOT,
                           check=True, capture_output=True)
        try:
            print(f"| model | revision | frames per run | median wall s ({args.runs} runs) | frames/s "
                  "| median CPU s | frames/CPU s |")
            print("|---|---|---:|---:|---:|---:|---:|")
            for name in CASES:
                saved = {}
                for revision, tree in trees.items():
                    saved[revision] = Path(folder) / f"{revision}.npy"
                    walls, cpus = zip(*run_worker(tree, name, counts[name], args.runs, saved[revision]))
                    wall, cpu = statistics.median(walls), statistics.median(cpus)
                    label = args.before if revision == "before" else "this tree"
                    print(f"| {name} | {label} | {counts[name]:,} | {wall:.2f} | {counts[name] / wall:,.0f} "
                          f"| {cpu:.2f} | {counts[name] / cpu:,.0f} |", flush=True)
                if args.before and not np.array_equal(np.load(saved["before"]), np.load(saved["after"])):
                    print(f"{name}: THE REVISIONS PREDICT DIFFERENT INTEGERS", flush=True)
        finally:
            if args.before:
                subprocess.run(["git", "worktree", "remove", "--force", str(trees["before"])], cwd=ROOT, check=True)


if __name__ == "__main__":
    main()
