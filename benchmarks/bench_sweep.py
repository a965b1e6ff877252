"""Wall time of one 6-point synth sweep of the digits MLP on 1 Dask worker and on 2 (``streamc.run_sweep``, an
embedded LocalCluster), and their ratio; then the demo's verification of 1,797 digits in one process and sharded
(benchmarks/bench_shards.py), in one run.

Run: python benchmarks/bench_sweep.py [--frames N] [--keep DIR] [--shard-runs N]

The points: target_fps 10,000, 25,000 and 50,000 at clock_mhz 30 and 48 on the iCE40 UP5K, each built through
synth (the Verilator check of ``--frames`` digits, then Yosys). Each sweep builds from empty folders, so neither
reuses the other's work; the two share the machine with whatever else runs on it, so the ratio says what the
second worker bought under that load. The per-point seconds are each build's own wall time on its worker; their
sum over a sweep's wall time says how many points were building at once, whatever the load.
"""

from __future__ import annotations

import argparse
import io
import tempfile
import time
from pathlib import Path

import yaml
from bench_shards import measure, print_table
from rich.console import Console

import streamc

ROOT = Path(__file__).resolve().parent.parent
MODELS = ROOT / "build_configs" / "models"
GRID = {"target_fps": [10000, 25000, 50000], "clock_mhz": [30, 48]}


def sweep_seconds(folder: Path, workers: int, frames: int) -> tuple[float, list[dict]]:
    """Write the sweep into ``folder``, run it on ``workers`` local workers; its wall time and rows."""
    base = {"model": str(MODELS / "digits_mlp.onnx"), "output_dir": "unused", "devices": ["ice40-up5k"],
            "clock_mhz": 30, "target_fps": 50000,
            "verify": {"inputs": str(MODELS / "digits_frames.npy"), "labels": str(MODELS / "digits_labels.npy"),
                       "frames": frames}}
    (folder / "base.yaml").write_text(yaml.safe_dump(base))
    sweep_file = folder / "sweep.yaml"
    sweep_file.write_text(yaml.safe_dump({"base": "base.yaml", "output_dir": "sweep", "until": "synth", "keep": "all",
                                          "grid": GRID}, sort_keys=False))
    start = time.perf_counter()
    result = streamc.run_sweep(sweep_file, workers=workers, console=Console(file=io.StringIO()))
    return time.perf_counter() - start, result.rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=64, help="digits each point simulates in Verilator")
    parser.add_argument("--keep", type=Path, help="build the sweeps in this folder and keep them (default: a temporary one)")
    parser.add_argument("--shard-runs", type=int, default=3, help="runs of each way of verifying the 1,797 digits")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        root = args.keep or Path(scratch)
        walls, rows = {}, {}
        for workers in (1, 2):
            folder = root / f"workers_{workers}"
            folder.mkdir(parents=True)
            walls[workers], rows[workers] = sweep_seconds(folder, workers, args.frames)
            print(f"{len(rows[workers])} points on {workers} worker{'s' if workers > 1 else ''}: "
                  f"{walls[workers]:.1f} s", flush=True)
    print("| point | LUT (Yosys) | 1 worker: s | 2 workers: s |")
    print("|---|---:|---:|---:|")
    for one, two in zip(rows[1], rows[2]):
        assert one["point"] == two["point"] and one["status"] == two["status"] == "passed", (one, two)
        print(f"| {one['point']} | {one['lut']:,} | {one['seconds']:.1f} | {two['seconds']:.1f} |")
    print(f"| **sweep wall time** | | **{walls[1]:.1f}** | **{walls[2]:.1f}** |")
    print(f"\n6 synth points: {walls[1]:.1f} s on 1 worker, {walls[2]:.1f} s on 2 workers: "
          f"{walls[1] / walls[2]:.2f}x faster")
    # The machine's load can change between the two sweeps; this figure of each sweep alone does not compare them.
    busy = {workers: sum(row["seconds"] for row in rows[workers]) / walls[workers] for workers in (1, 2)}
    print(f"points building at once, on average (their seconds over the wall time): {busy[1]:.2f} on 1 worker, "
          f"{busy[2]:.2f} on 2 workers\n")
    print_table(measure(2, args.shard_runs))


if __name__ == "__main__":
    main()
