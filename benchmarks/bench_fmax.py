"""fmax after place and route, with and without the clock's pipeline registers, per design and board.

Run: python benchmarks/bench_fmax.py [--boards icebreaker ulx3s-85f tangnano9k] [--designs digits tfc-w1a1 digits-cnn]
                                    [--pipelining clock none] [--out DIR] [--seeds N] [--budget F]
                                    [--clock-mhz F|auto] [--jobs N] [--timeout-min M]

Each design is planned at the fastest folding within the board's budget (``budget``: 90 % of the UP5K's logic cells,
which its flip-flops take too, and 60 % of the Tang Nano 9K's GW1NR-9 with the board shell kept free, half of the
ECP5-85F) at the board's clock (50 MHz on the
UP5K, 150 MHz on the ECP5-85F: issue 23's targets; 60 MHz on the GW1NR-9), compiled to Verilog by the build
steps (load .. rtl), and placed and routed inside the board top (PLL, board shell with its UART at 115200 baud)
by :func:`streamc.pnr.build_board`, as ``streamc build`` does. Each row is run twice in the same run:
``pipelining: none`` (the kernels' fixed stages only, as before the clock-aware registers) and ``pipelining:
clock`` (the registers the delay model asks for at that clock). The table gives cycles/frame, nextpnr's fmax,
frames/s at the clock the design closes at (the lower of fmax and the clock asked), the cells placed (logic,
flip-flops, block RAM, DSP), frames/s per logic cell, the predicted latency of a frame through the empty
accelerator at that clock, the critical path's ends; with ``--seeds N``, the best of up to N placement seeds. With
``--clock-mhz auto`` the planner chooses the clock with the folding (``clock_mhz: auto``; ``--pipelining clock`` only),
and the design is placed at the clock it chose. ``--jobs N`` builds and places N rows side by side (the rows print
as they finish, the table in the order above).
"""

from __future__ import annotations

import argparse
import multiprocessing
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

import yaml
from rich.console import Console
from rich.table import Table

from streamc.boards import get_board
from streamc.errors import BuildError
from streamc.fifo_sizing import fifo_depths
from streamc.latency import predicted_latency
from streamc.pipeline.config import load_config
from streamc.pipeline.folder import BuildFolder
from streamc.pipeline.steps import STEP_FUNCTIONS, BuildState
from streamc.pnr import TIMEOUT_S, build_board
from streamc.protocol import FrameFormat

ROOT = Path(__file__).resolve().parent.parent
TARGET_MHZ = {"icebreaker": 50.0, "ulx3s-85f": 150.0, "tangnano9k": 60.0}
#: On the GW1NR-9 nextpnr places more than synth_gowin counts (a LUT passing each flip-flop's input that no LUT
#: drives, four per LUT RAM, more ALUs at the ends of carry chains): 60 % of the LUTs leaves room for that.
BUDGET = {"icebreaker": 0.9, "ulx3s-85f": 0.5, "tangnano9k": 0.6}
DESIGNS = {
    "digits": ROOT / "build_configs/models/digits_mlp.onnx",
    "tfc-w1a1": ROOT / "tests/models/tfc_w1a1.onnx",
    "digits-cnn": ROOT / "tests/models/cnn/digits_cnn.onnx",
}
#: Issue 23's rows: TFC-w1a1 and the digits CNN in 90 % of the UP5K, those and the digits MLP in half the ECP5-85F
#: and in 60 % of the Tang Nano 9K.
ROWS = {"icebreaker": ("tfc-w1a1", "digits-cnn"), "ulx3s-85f": ("digits", "tfc-w1a1", "digits-cnn"),
        "tangnano9k": ("digits", "tfc-w1a1", "digits-cnn")}
#: nextpnr's cells counted as logic, flip-flops (none apart on the iCE40: a logic cell holds both), block RAM and
#: hard multipliers (a Gowin MULT36X36 is four 18 x 18, as streamc.devices counts them), with their weights.
PLACED_CELLS = {
    "ice40": dict(logic={"ICESTORM_LC": 1}, ff={}, bram={"ICESTORM_RAM": 1}, dsp={"ICESTORM_DSP": 1}),
    "ecp5": dict(logic={"TRELLIS_COMB": 1}, ff={"TRELLIS_FF": 1}, bram={"DP16KD": 1}, dsp={"MULT18X18D": 1}),
    "gowin": dict(logic={"LUT4": 1, "ALU": 1}, ff={"DFF": 1}, bram={"BSRAM": 1},
                  dsp={"MULT9X9": 1, "MULT18X18": 1, "MULT36X36": 4}),
}


def placed(utilization: dict, cells: dict[str, int]) -> int | str:
    """The weighted count of ``cells`` nextpnr placed; "-" where the family counts none apart."""
    return sum(weight * utilization.get(cell, {"used": 0})["used"] for cell, weight in cells.items()) if cells else "-"


def accelerator_verilog(design: str, board: str, pipelining: str, out: Path, budget: float,
                        clock_mhz: float | str) -> tuple[Path, BuildState]:
    """Compile ``design`` for ``board``'s device within its budget at its clock; the Verilog's path and the build
    state."""
    folder = out / f"{design}_{board}_{pipelining}"
    folder.mkdir(parents=True, exist_ok=True)
    config_path = folder / "build.yaml"
    config_path.write_text(yaml.safe_dump(dict(
        model=str(DESIGNS[design]), output_dir=str(folder / "build"), devices=[get_board(board).device],
        board=board, clock_mhz=clock_mhz, budget=budget, pipelining=pipelining,
        steps=["load", "tidy", "streamline", "to_hw", "fold", "rtl"])))
    config = load_config(config_path)
    state = BuildState(config=config, folder=BuildFolder(config.output_dir), config_path=str(config_path))
    for name in config.steps:
        STEP_FUNCTIONS[name](state)
    return state.folder.path("verilog", "streamc_top.v"), state


def row(design: str, board: str, pipelining: str, out: Path, budget: float, mhz: float | str,
        seeds: int, timeout_s: float) -> tuple[str, ...]:
    """One row of the table: ``design`` compiled for ``board`` and placed and routed there."""
    verilog, state = accelerator_verilog(design, board, pipelining, out, budget, mhz)
    cycles = state.dataflow.cycles_per_frame()
    lead = (design, board, f"{budget:g}", pipelining, str(cycles),
            f"{state.clock_mhz:g}" + (" (auto)" if mhz == "auto" else ""))
    mhz = state.clock_mhz
    started = time.perf_counter()
    try:
        result = build_board(accelerator_verilog=verilog, frame_format=FrameFormat.from_dataflow(state.dataflow),
                             board=board, clock_mhz=mhz, seeds=seeds, timeout_s=timeout_s,
                             workdir=out / f"{design}_{board}_{pipelining}" / "pnr")
    except BuildError as error:
        return (*lead, "-", "NO", "-", "-", "-", "-", "-", "-", "-", str(error)[:160], "")
    cells = PLACED_CELLS[get_board(board).family]
    logic, ff, bram, dsp = (placed(result.utilization, cells[what]) for what in ("logic", "ff", "bram", "dsp"))
    closes_mhz = min(result.fmax_mhz, mhz)
    fps = closes_mhz * 1e6 / cycles
    latency_us = predicted_latency(state.dataflow, fifo_depths(state.dataflow, state.config.fifo_depth)) / closes_mhz
    path = result.critical_path
    ends = f"{path[0].from_cell} -> {path[-1].to_cell} ({result.critical_path_ns:.1f} ns)" if path else ""
    return (*lead, f"{result.fmax_mhz:.1f}", "yes" if result.timing_met else "NO", f"{fps:,.0f}", str(logic),
            str(ff), str(bram), str(dsp), f"{fps / logic:,.1f}", f"{latency_us:.1f}", ends,
            f"{time.perf_counter() - started:.0f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--boards", nargs="+", default=list(TARGET_MHZ), choices=list(TARGET_MHZ))
    parser.add_argument("--designs", nargs="+", choices=list(DESIGNS),
                        help="designs to build on every board named (default: each board's rows of ROWS)")
    parser.add_argument("--pipelining", nargs="+", default=["none", "clock"], choices=["none", "clock"])
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "bench_fmax",
                        help="work folder (YoWASP tools cannot see /tmp paths given absolutely; any folder works)")
    parser.add_argument("--seeds", type=int, default=1, help="placement seeds to try while timing is short")
    parser.add_argument("--budget", type=float, help="share of the device for every board (default: BUDGET's)")
    parser.add_argument("--clock-mhz", type=lambda text: text if text == "auto" else float(text),
                        help="the clock for every board, or auto: chosen by the planner (default: TARGET_MHZ's)")
    parser.add_argument("--jobs", type=int, default=1, help="rows built and placed side by side, each in a process")
    parser.add_argument("--timeout-min", type=float, default=TIMEOUT_S / 60,
                        help="minutes each tool run may take; a row whose run takes longer says so")
    args = parser.parse_args()

    table = Table(title="fmax after place and route (nextpnr)", title_justify="left")
    for column in ("design", "board", "budget", "pipelining", "cycles/frame", "clock MHz", "fmax MHz", "met",
                   "frames/s", "logic", "FF", "BRAM", "DSP", "frames/s per logic cell", "latency us", "critical path",
                   "P&R s"):
        table.add_column(column)
    console = Console(width=260)
    rows = [(design, board, pipelining, args.out, args.budget or BUDGET[board], args.clock_mhz or TARGET_MHZ[board],
             args.seeds, args.timeout_min * 60)
            for board in args.boards for design in args.designs or ROWS[board] for pipelining in args.pipelining]
    # Each row in a process of its own (forked: the rows only read what the parent holds).
    with ProcessPoolExecutor(max_workers=args.jobs, mp_context=multiprocessing.get_context("fork")) as pool:
        futures = [pool.submit(row, *arguments) for arguments in rows]
        for future in as_completed(futures):
            console.print(" | ".join(future.result()))
        for future in futures:
            table.add_row(*future.result())
    console.print(table)


if __name__ == "__main__":
    main()
