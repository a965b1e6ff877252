"""The same design with its memories inline in the Verilog and in ROM files: sizes, Verilator build, Yosys.

Run: python benchmarks/bench_rom_files.py MODEL [--target-fps F] [--verilator] [--device D ...] [--work DIR]

Builds MODEL through the ``rtl`` step (ROM files, as every build writes them), then converts the same
stitched design again with every memory inline (what the build wrote before the ROM files). Prints
both sizes; with ``--verilator`` the wall-clock time and peak memory of a Verilator build of each
(``streamc.sim.cocotb_engine.build_model``: Verilator, then the C++ compile); with ``--device`` the
synthesized cell counts of each on that device, and whether they are equal.
"""

from __future__ import annotations

import argparse
import resource
import tempfile
import time
from pathlib import Path

import yaml

from streamc.kernels import stitch
from streamc.pipeline.config import load_config
from streamc.pipeline.folder import BuildFolder
from streamc.pipeline.steps import STEP_FUNCTIONS, TOP, BuildState
from streamc.rtl.rom_files import rom_files
from streamc.rtl.top import to_verilog

STEPS = ["load", "tidy", "streamline", "to_hw", "fold", "rtl"]


def build(model: Path, target_fps: float, work: Path) -> tuple[Path, Path]:
    """The ``rtl`` step's Verilog (with its ROM files beside it) and the inline Verilog of the same design."""
    config_path = work / "build.yaml"
    config_path.write_text(yaml.safe_dump({"model": str(model), "output_dir": str(work / "out"), "clock_mhz": 100,
                                           "target_fps": target_fps, "steps": STEPS}))
    config = load_config(config_path)
    state = BuildState(config=config, folder=BuildFolder(config.output_dir), config_path=str(config_path))
    for name in STEPS:
        started = time.perf_counter()
        STEP_FUNCTIONS[name](state)
        print(f"{name}: {time.perf_counter() - started:.1f} s")
    stages = state.dataflow.stages
    started = time.perf_counter()
    inline = work / "inline" / f"{TOP}.v"
    inline.parent.mkdir(exist_ok=True)
    inline.write_text(to_verilog(stitch(stages, [stage.components() for stage in stages], state.fifo_depths),
                                 name=TOP))
    print(f"inline Verilog: {time.perf_counter() - started:.1f} s")
    return state.folder.path("verilog", f"{TOP}.v"), inline


def verilator_build(verilog: Path, build_dir: Path) -> float:
    from streamc.sim import cocotb_engine

    tools = cocotb_engine.simulation_tools()
    started = time.perf_counter()
    cocotb_engine.build_model(tools.get_runner("verilator"), tools, verilog=verilog, top=TOP, build_dir=build_dir,
                       timeout_s=None)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", type=Path)
    parser.add_argument("--target-fps", type=float, default=100)
    parser.add_argument("--verilator", action="store_true", help="time a Verilator build of each")
    parser.add_argument("--device", action="append", default=[], help="synthesize each for this device")
    parser.add_argument("--work", type=Path, help="work folder (default: a temporary one)")
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="bench_rom_files_"))
    work.mkdir(parents=True, exist_ok=True)
    files, inline = build(args.model.resolve(), args.target_fps, work)
    roms = [files.parent / name for name in rom_files(files)]
    mb = 1e6
    print(f"inline:    {TOP}.v {inline.stat().st_size / mb:.2f} MB")
    print(f"ROM files: {TOP}.v {files.stat().st_size / mb:.2f} MB + {len(roms)} ROM files "
          f"{sum(p.stat().st_size for p in roms) / mb:.2f} MB")
    if args.verilator:
        # Peak memory of the children so far: the smaller build first, so that each figure is its own.
        for what, verilog in (("ROM files", files), ("inline", inline)):
            seconds = verilator_build(verilog, work / f"verilator_{what.replace(' ', '_')}")
            peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1e6
            print(f"Verilator build, {what}: {seconds:.1f} s, peak child memory {peak:.2f} GB")
    for device in args.device:
        from streamc.synth import synthesize

        counts = {}
        for what, verilog in (("inline", inline), ("ROM files", files)):
            result = synthesize(verilog=verilog, top=TOP, device=device, workdir=work / f"synth_{what.replace(' ', '_')}")
            counts[what] = result.cells
            print(f"{device} {what}: LUT {result.lut}, FF {result.ff}, BRAM {result.bram}, DSP {result.dsp} "
                  f"({result.seconds:.0f} s)")
        print(f"{device}: cell counts {'equal' if counts['inline'] == counts['ROM files'] else 'DIFFER'}")


if __name__ == "__main__":
    main()
