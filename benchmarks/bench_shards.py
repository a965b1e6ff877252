"""The demo's verification of all 1,797 digits in Verilator, in one run and sharded (``verify.shards``), in one run.

Run: python benchmarks/bench_shards.py [--shards 2] [--runs 3]

The digits MLP is built once through the sim step (the Verilator model is then reused); the sim step is run
again with one shard and with ``--shards``, taking turns (a new ``verify.seed`` each run, so that the step
reruns), and the seconds ``reports/time_per_step.json`` gives
for it are printed with their medians and ratio. Both must be bit-exact.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from pathlib import Path

import yaml

from streamc.pipeline.runner import run_build

ROOT = Path(__file__).resolve().parent.parent
MODELS = ROOT / "build_configs" / "models"


def sim_seconds(folder: Path, shards: int, seed: int) -> float:
    config = {"model": str(MODELS / "digits_mlp.onnx"), "output_dir": str(folder / "out"), "devices": ["ice40-up5k"],
              "clock_mhz": 30, "target_fps": 50_000, "steps": ["load", "tidy", "streamline", "to_hw", "fold", "rtl", "sim"],
              "verify": {"inputs": str(MODELS / "digits_frames.npy"), "labels": str(MODELS / "digits_labels.npy"),
                         "shards": shards, "seed": seed}}
    (folder / "build.yaml").write_text(yaml.safe_dump(config))
    report = run_build(folder / "build.yaml").rtlsim
    assert report["mismatches"] == 0 and report["frames"] == 1797, report
    return json.loads((folder / "out" / "reports" / "time_per_step.json").read_text())["sim"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shards", type=int, default=2)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        folder = Path(folder)
        sim_seconds(folder, 1, -1)  # builds the model both then reuse
        times = {1: [], args.shards: []}
        for run in range(args.runs):
            for shards in times:
                # a seed of its own per run: the build reruns the sim step, and both counts see the same seeds
                times[shards].append(sim_seconds(folder, shards, run))
    one, many = statistics.median(times[1]), statistics.median(times[args.shards])
    print("| shards | sim step s (each run) | median s |")
    print("|---:|---|---:|")
    for shards, seconds in times.items():
        print(f"| {shards} | {', '.join(f'{s:.1f}' for s in seconds)} | {statistics.median(seconds):.1f} |")
    print(f"ratio 1 / {args.shards} shards: {one / many:.2f}")


if __name__ == "__main__":
    main()
