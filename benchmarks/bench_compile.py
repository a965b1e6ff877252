"""ONNX -> Verilog compile time of the demo, TFC-w2a2 and CNV-w2a2, per phase (median of several runs).

Run: python benchmarks/bench_compile.py [--runs N] [--no-cnv]

Phases: "load" (load and tidy), "streamline", "to_hw", "fold", "rtl" (size the FIFOs, build the
Amaranth design, emit Verilog through Yosys); "front" is everything before "rtl", "total" is the
whole ONNX -> Verilog. "fifo sizing" is timed on its own as well (it is also part of "rtl").
A first, untimed run of each model warms up Amaranth's WebAssembly Yosys (its first-ever call
compiles the WebAssembly module) and Python's imports.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import yaml

from streamc.pipeline.config import load_config
from streamc.pipeline.folder import BuildFolder
from streamc.pipeline.steps import STEP_FUNCTIONS, BuildState
from streamc.fifo_sizing import fifo_depths

ROOT = Path(__file__).resolve().parent.parent
PHASES = {"load": ["load", "tidy"], "streamline": ["streamline"], "to_hw": ["to_hw"], "fold": ["fold"],
          "rtl": ["rtl"]}
CASES = {
    "digits demo (64-64-32-10)": dict(model=ROOT / "build_configs/models/digits_mlp.onnx", target_fps=1_000_000),
    "TFC-w2a2 (784-64-64-64-10)": dict(model=ROOT / "tests/models/tfc_w2a2.onnx", target_fps=1_000_000),
}
CNV_CASE = {"CNV-w2a2 at 500 frames/s": dict(model=ROOT / "tests/models/cnn/cnv_w2a2.onnx", target_fps=500)}
COLUMNS = [*PHASES, "front", "total", "fifo sizing"]


def compile_once(config_path: Path) -> dict[str, float]:
    """Seconds per phase of one ONNX -> Verilog build."""
    config = load_config(config_path)
    state = BuildState(config=config, folder=BuildFolder(config.output_dir), config_path=str(config_path))
    times = {}
    for phase, steps in PHASES.items():
        if phase == "rtl":
            start = time.perf_counter()
            fifo_depths(state.dataflow, config.fifo_depth)
            times["fifo sizing"] = time.perf_counter() - start
        start = time.perf_counter()
        for name in steps:
            STEP_FUNCTIONS[name](state)
        times[phase] = time.perf_counter() - start
    times["front"] = sum(times[phase] for phase in PHASES if phase != "rtl")
    times["total"] = times["front"] + times["rtl"]
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--no-cnv", action="store_true", help="leave out CNV-w2a2 (several seconds a run)")
    args = parser.parse_args()
    cases = {**CASES, **({} if args.no_cnv else CNV_CASE)}
    with tempfile.TemporaryDirectory() as tmp:
        print(f"{'seconds, median of ' + str(args.runs):<28}" + "".join(f"{c:>12}" for c in COLUMNS))
        for name, case in cases.items():
            config = Path(tmp) / f"{len(name)}.yaml"
            config.write_text(yaml.safe_dump({"model": str(case["model"]), "output_dir": str(Path(tmp) / "out"),
                                              "target_fps": case["target_fps"], "clock_mhz": 100}))
            compile_once(config)  # warm-up, not timed
            runs = [compile_once(config) for _ in range(args.runs)]
            print(f"{name:<28}" + "".join(f"{statistics.median(r[c] for r in runs):>12.3f}" for c in COLUMNS))


if __name__ == "__main__":
    main()
