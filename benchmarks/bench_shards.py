"""The demo's verification of all 1,797 digits in Verilator: in one process, sharded among local processes
(``verify.shards``) and sharded among the workers of a Dask ``LocalCluster`` (``streamc build --scheduler``), in
one run.

Run: python benchmarks/bench_shards.py [--shards 2] [--runs 3]

The digits MLP is built once through the sim step (the Verilator model is then reused, locally and on the
cluster's machine, where the workers build it from the Verilog on their first task); the sim step is then run
again in each way, taking turns (a new ``verify.seed`` each run, so that the step reruns), and the seconds
``reports/time_per_step.json`` gives for it are printed with their medians and ratios. Every run must be
bit-exact.
"""

from __future__ import annotations

import argparse
import io
import json
import logging
import statistics
import tempfile
from pathlib import Path

import yaml
from distributed import LocalCluster
from rich.console import Console

from streamc.pipeline.runner import run_build

ROOT = Path(__file__).resolve().parent.parent
MODELS = ROOT / "build_configs" / "models"


def sim_seconds(folder: Path, shards: int, seed: int, scheduler: str | None = None) -> float:
    config = {"model": str(MODELS / "digits_mlp.onnx"), "output_dir": str(folder / "out"), "devices": ["ice40-up5k"],
              "clock_mhz": 30, "target_fps": 50_000, "steps": ["load", "tidy", "streamline", "to_hw", "fold", "rtl", "sim"],
              "verify": {"inputs": str(MODELS / "digits_frames.npy"), "labels": str(MODELS / "digits_labels.npy"),
                         "shards": shards, "seed": seed}}
    (folder / "build.yaml").write_text(yaml.safe_dump(config))
    report = run_build(folder / "build.yaml", scheduler=scheduler, console=Console(file=io.StringIO())).rtlsim
    assert report["mismatches"] == 0 and report["frames"] == 1797 and report["shards"] == shards, report
    return json.loads((folder / "out" / "reports" / "time_per_step.json").read_text())["sim"]


def measure(shards: int, runs: int) -> dict[str, list[float]]:
    """The sim step's seconds in each way, ``runs`` times each."""
    with tempfile.TemporaryDirectory() as folder, LocalCluster(
            n_workers=shards, threads_per_worker=1, processes=True, host="127.0.0.1", dashboard_address=":0",
            memory_limit=0, silence_logs=logging.ERROR) as cluster:
        folder = Path(folder)
        ways = {"1 process": (1, None), f"{shards} local shards": (shards, None),
                f"{shards} shards on {shards} Dask workers": (shards, cluster.scheduler_address)}
        for count, scheduler in ways.values():
            sim_seconds(folder, count, -1, scheduler)  # builds the models the runs then reuse
        times = {way: [] for way in ways}
        for run in range(runs):
            for way, (count, scheduler) in ways.items():
                # a seed of its own per run: the build reruns the sim step, and every way sees the same seeds
                times[way].append(sim_seconds(folder, count, run, scheduler))
    return times


def print_table(times: dict[str, list[float]]) -> None:
    one = statistics.median(next(iter(times.values())))
    print("| 1,797 digits verified in | sim step s (each run) | median s | 1 process / this |")
    print("|---|---|---:|---:|")
    for way, seconds in times.items():
        median = statistics.median(seconds)
        print(f"| {way} | {', '.join(f'{s:.1f}' for s in seconds)} | {median:.1f} | {one / median:.2f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shards", type=int, default=2)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    print_table(measure(args.shards, args.runs))


if __name__ == "__main__":
    main()
