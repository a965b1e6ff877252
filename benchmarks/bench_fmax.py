"""fmax after place and route, per design and board: the digits demo and TFC-w1a1 on iCEBreaker and ULX3S-85F.

Run: python benchmarks/bench_fmax.py [--boards icebreaker ulx3s-85f] [--designs digits tfc-w1a1] [--out DIR]
                                    [--seeds N]

Each design is compiled to Verilog by the build steps (load .. rtl) with the folding the planner picks
for ``target_fps`` at the board's target clock, then placed and routed inside the board top (PLL, board
shell with its UART at 115200 baud) by :func:`streamc.pnr.build_board`, as ``streamc build`` does. The
table gives nextpnr's fmax against the target (issue targets: 36 MHz on the UP5K, 100 MHz on the ECP5-85F), the
logic used and the critical path's ends; with ``--seeds N``, the best of up to N placement seeds (``seeds``:
the fmax of each one tried, as ``pnr_seeds`` does in a build).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import yaml
from rich.console import Console
from rich.table import Table

from streamc.boards import get_board
from streamc.pipeline.config import load_config
from streamc.pipeline.folder import BuildFolder
from streamc.pipeline.steps import STEP_FUNCTIONS, BuildState
from streamc.pnr import build_board
from streamc.protocol import FrameFormat

ROOT = Path(__file__).resolve().parent.parent
TARGET_MHZ = {"icebreaker": 36.0, "ulx3s-85f": 100.0, "ulx3s-45f": 100.0, "ulx3s-25f": 100.0}
DESIGNS = {
    "digits": dict(model=ROOT / "build_configs/models/digits_mlp.onnx", target_fps=50_000),
    "tfc-w1a1": dict(model=ROOT / "tests/models/tfc_w1a1.onnx", target_fps=20_000),
}
LOGIC_CELL = {"ice40": "ICESTORM_LC", "ecp5": "TRELLIS_COMB"}


def accelerator_verilog(design: str, board: str, out: Path) -> tuple[Path, BuildState]:
    """Compile ``design`` for ``board``'s device at its target clock; the Verilog's path and the build state."""
    folder = out / f"{design}_{board}"
    folder.mkdir(parents=True, exist_ok=True)
    config_path = folder / "build.yaml"
    case = DESIGNS[design]
    config_path.write_text(yaml.safe_dump(dict(
        model=str(case["model"]), output_dir=str(folder / "build"), devices=[get_board(board).device],
        clock_mhz=TARGET_MHZ[board], target_fps=case["target_fps"], steps=["load", "tidy", "streamline", "to_hw",
                                                                           "fold", "rtl"])))
    config = load_config(config_path)
    state = BuildState(config=config, folder=BuildFolder(config.output_dir), config_path=str(config_path))
    for name in config.steps:
        STEP_FUNCTIONS[name](state)
    return state.folder.path("verilog", "streamc_top.v"), state


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--boards", nargs="+", default=["icebreaker", "ulx3s-85f"], choices=sorted(TARGET_MHZ))
    parser.add_argument("--designs", nargs="+", default=list(DESIGNS), choices=list(DESIGNS))
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "bench_fmax",
                        help="work folder (YoWASP tools cannot see /tmp paths given absolutely; any folder works)")
    parser.add_argument("--seeds", type=int, default=1, help="placement seeds to try while timing is short")
    args = parser.parse_args()

    table = Table(title="fmax after place and route (nextpnr)", title_justify="left")
    for column in ("design", "board", "cycles/frame", "target MHz", "fmax MHz", "met", "seeds", "logic", "BRAM",
                   "DSP", "critical path", "P&R s"):
        table.add_column(column)
    console = Console(width=240)
    for design in args.designs:
        for board in args.boards:
            verilog, state = accelerator_verilog(design, board, args.out)
            started = time.perf_counter()
            result = build_board(accelerator_verilog=verilog, frame_format=FrameFormat.from_dataflow(state.dataflow),
                                 board=board, clock_mhz=TARGET_MHZ[board], seeds=args.seeds,
                                 workdir=args.out / f"{design}_{board}" / "pnr")
            family = get_board(board).family
            used = result.utilization
            logic = used[LOGIC_CELL[family]]
            bram = used.get("ICESTORM_RAM" if family == "ice40" else "DP16KD", {"used": 0})["used"]
            dsp = used.get("ICESTORM_DSP" if family == "ice40" else "MULT18X18D", {"used": 0})["used"]
            path = result.critical_path
            ends = f"{path[0].from_cell} -> {path[-1].to_cell} ({result.critical_path_ns:.1f} ns)" if path else ""
            row = (design, board, str(state.dataflow.cycles_per_frame()), f"{TARGET_MHZ[board]:g}",
                   f"{result.fmax_mhz:.1f}", "yes" if result.timing_met else "NO",
                   ", ".join(f"{seed}: {fmax:.1f}" for seed, fmax in result.fmax_by_seed.items()),
                   f"{logic['used']}/{logic['available']}", str(bram), str(dsp), ends,
                   f"{time.perf_counter() - started:.0f}")
            console.print(" | ".join(row))
            table.add_row(*row)
    console.print(table)


if __name__ == "__main__":
    main()
