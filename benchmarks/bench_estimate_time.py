"""How long ``streamc estimate`` takes on Brevitas' CNV-w2a2 at 1000 frames/s, 100 MHz, ECP5-85F (issue 24):
this tree against an earlier revision, in one run.

    python benchmarks/bench_estimate_time.py [--before REV] [--runs 3] [--model tests/models/cnn/cnv_w2a2.onnx]

Each run is the whole command (``python -m streamc.cli estimate``, interpreter start included) in a fresh
process, the revisions taking turns so that a busy machine slows both alike; ``--before`` runs in a git worktree
of that revision. Prints each run's wall and CPU seconds and their medians, and whether both revisions planned
the same design (the estimate's totals).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent


def run_once(tree: Path, config: Path) -> tuple[float, float, dict]:
    """Wall and CPU seconds of one ``streamc estimate`` with ``tree``'s streamc, and the totals it estimated."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tree), os.environ.get("PYTHONPATH", "")])}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "streamc.cli", "estimate", str(config)], cwd=tree, env=env, check=True,
                   capture_output=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    report = json.loads((config.parent / "out" / "reports" / "estimate.json").read_text())
    return wall, cpu, {name: device["total"] for name, device in report["devices"].items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", default="HEAD~1", help="the git revision to compare with (default HEAD~1)")
    parser.add_argument("--runs", type=int, default=3, help="runs of each revision (default 3; medians printed)")
    parser.add_argument("--model", default="tests/models/cnn/cnv_w2a2.onnx")
    parser.add_argument("--fps", type=float, default=1000.0)
    parser.add_argument("--device", default="ecp5-85f")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as folder:
        before = Path(folder) / "before"
        subprocess.run(["git", "worktree", "add", "--detach", str(before), args.before], cwd=ROOT, check=True,
                       capture_output=True)
        try:
            configs = {}
            for name in ("before", "after"):
                config = Path(folder) / f"{name}_run" / "estimate.yaml"
                config.parent.mkdir(parents=True, exist_ok=True)
                config.write_text(yaml.safe_dump({
                    "model": str((ROOT / args.model).resolve()), "output_dir": str(config.parent / "out"),
                    "devices": [args.device], "clock_mhz": 100, "target_fps": args.fps}))
                configs[name] = config
            trees = {"before": before, "after": ROOT}
            times = {name: [] for name in trees}
            totals = {}
            print(f"streamc estimate {args.model} at {args.fps:g} frames/s, 100 MHz, {args.device}; "
                  f"before: {args.before}, after: this tree")
            for run in range(args.runs):
                for name, tree in trees.items():
                    wall, cpu, totals[name] = run_once(tree, configs[name])
                    times[name].append((wall, cpu))
                    print(f"  run {run + 1} {name}: {wall:.2f} s wall, {cpu:.2f} s CPU")
            print("| revision | median wall s | median CPU s |")
            print("|---|---:|---:|")
            for name in trees:
                walls, cpus = zip(*times[name])
                print(f"| {name} | {statistics.median(walls):.2f} | {statistics.median(cpus):.2f} |")
            print("same estimate before and after" if totals["before"] == totals["after"]
                  else f"ESTIMATES DIFFER: before {totals['before']}, after {totals['after']}")
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(before)], cwd=ROOT, check=True)


if __name__ == "__main__":
    main()
