"""ONNX -> Verilog compile time of the demo and of TFC-w2a2 (median of several runs).

Run: python benchmarks/bench_compile.py [--runs N]

"front" is everything before Verilog emission (load, tidy, streamline, to_hw, fold);
"total" adds building the Amaranth design and emitting Verilog. A first, untimed run warms
up Amaranth's WebAssembly Yosys (its first-ever call compiles the WebAssembly module).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import yaml

from streamc.build.config import load_config
from streamc.build.folder import BuildFolder
from streamc.build.steps import STEP_FUNCTIONS, BuildState

ROOT = Path(__file__).resolve().parent.parent
FRONT = ["load", "tidy", "streamline", "to_hw", "fold"]
CASES = {
    "digits demo (64-64-32-10)": dict(model=ROOT / "build_configs/models/digits_mlp.onnx", target_fps=1_000_000),
    "TFC-w2a2 (784-64-64-64-10)": dict(model=ROOT / "tests/models/tfc_w2a2.onnx", target_fps=1_000_000),
}
#: Slow today (tens of seconds): timed with --cnv only.
CNV_CASE = {"CNV-w2a2 at 500 frames/s": dict(model=ROOT / "tests/models/cnn/cnv_w2a2.onnx", target_fps=500)}


def compile_once(config_path: Path) -> tuple[float, float]:
    state = BuildState(config=load_config(config_path), folder=BuildFolder(load_config(config_path).output_dir),
                       config_path=str(config_path))
    start = time.perf_counter()
    for name in FRONT:
        STEP_FUNCTIONS[name](state)
    front = time.perf_counter() - start
    STEP_FUNCTIONS["rtl"](state)
    return front, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--cnv", action="store_true", help="also time CNV-w2a2 (tens of seconds a run)")
    args = parser.parse_args()
    cases = {**CASES, **(CNV_CASE if args.cnv else {})}
    with tempfile.TemporaryDirectory() as tmp:
        print(f"{'model':<30} {'front (s)':>10} {'total (s)':>10}   runs={args.runs}, median")
        for name, case in cases.items():
            config = Path(tmp) / f"{len(name)}.yaml"
            config.write_text(yaml.safe_dump({"model": str(case["model"]), "output_dir": str(Path(tmp) / "out"),
                                              "target_fps": case["target_fps"], "clock_mhz": 100}))
            compile_once(config)  # warm-up, not timed
            runs = [compile_once(config) for _ in range(args.runs)]
            front = statistics.median(r[0] for r in runs)
            total = statistics.median(r[1] for r in runs)
            print(f"{name:<30} {front:>10.3f} {total:>10.3f}")


if __name__ == "__main__":
    main()
