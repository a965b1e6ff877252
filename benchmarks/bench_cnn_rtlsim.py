"""The convolutional test models in Verilator: bit-exact outputs and measured against predicted cycles.

Run: python benchmarks/bench_cnn_rtlsim.py [--models cnv_w1a1 ...] [--frames 8] [--out DIR]
     python benchmarks/bench_cnn_rtlsim.py --speed [--lfc MODEL] [--cocotb-cycles N] [--out DIR]

Each model is built through the sim step (load ... fold, rtl, sim) with random input gaps and output
back-pressure (the sim step's defaults), its outputs compared with the reference and with the frames'
expected outputs recorded at export. CNV-w1a1/w1a2/w2a2 are folded for 100 frames/s at 100 MHz
(about 0.9 M cycles per frame): CNV-w2a2 from ONNX through 4 frames took 310 s here (``--speed``),
277 s of it the sim step, 128 s of that simulating. The blocks are the CI test models
(tests/test_conv_lowering.py runs them too).

``--speed`` measures the simulation engines on LFC-w1a1 and CNV-w2a2 at 100 frames/s: the wall time of a
fresh build from the ONNX file through a bit-exact 4-frame simulation (the sim step, on its default engine,
the C++ harness) with the time of each step, and the simulated cycles per second of the harness (that run)
and of the cocotb testbench (``engine="cocotb"``). The cocotb engine runs ``--cocotb-cycles`` cycles of the
first frame's randomized phase (CNV-w2a2's first frame alone is 5.0 M cycles in the two phases, 27
minutes at the 3,100 cycles/s cocotb reached): its cycle budget stops it there, and the figure counts its
start-up. LFC-w1a1 is Brevitas' ``lfc_1w1a`` with the TFC test model's randomized norms and frames
(tests/models/make_tfc.py), exported
into DIR unless ``--lfc`` names a file.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import yaml

from streamc.errors import BuildError
from streamc.pipeline.runner import run_build
from streamc.pipeline.steps import TOP
from streamc.sim.runner import simulate

ROOT = Path(__file__).resolve().parent.parent
CNN = ROOT / "tests" / "models" / "cnn"
MODELS = {
    "cnv_w1a1": ("cnv_frames.npy", 100),
    "cnv_w1a2": ("cnv_frames.npy", 100),
    "cnv_w2a2": ("cnv_frames.npy", 100),
    "digits_cnn": ("digits_cnn_frames.npy", 150_000),
    "depthwise_block": ("depthwise_block_frames.npy", 150_000),
    "residual_block": ("residual_block_frames.npy", 150_000),
    "concat_block": ("concat_block_frames.npy", 150_000),
    "conv1d_kws": ("conv1d_kws_frames.npy", 150_000),
}


def build(name: str, frames: int, out: Path) -> dict:
    inputs, fps = MODELS[name]
    config = out / f"{name}.yaml"
    config.write_text(yaml.safe_dump({
        "model": str(CNN / f"{name}.onnx"), "output_dir": str(out / name), "target_fps": fps,
        "steps": ["load", "tidy", "streamline", "to_hw", "fold", "rtl", "sim"],
        "verify": {"inputs": str(CNN / inputs), "expected": str(CNN / f"{name}_expected.npy"), "frames": frames}}))
    start = time.perf_counter()
    report = run_build(config, fresh=True).rtlsim
    return dict(report, seconds=time.perf_counter() - start)


SPEED_FRAMES = 4
SIM_STEPS = ["load", "tidy", "streamline", "to_hw", "fold", "rtl", "sim"]


def export_lfc(path: Path) -> Path:
    """LFC-w1a1 (Brevitas' ``lfc_1w1a``) as the TFC test models are made, and its frames beside it."""
    sys.path.insert(0, str(ROOT / "tests" / "models"))
    import onnx
    import torch
    from brevitas.export import export_qonnx
    from brevitas_examples.bnn_pynq.models import model_with_cfg
    from make_tfc import EXPORT_SHAPE, FRAME_COUNT, FRAME_SHAPE, SEED, randomize

    torch.manual_seed(SEED)
    generator = torch.Generator().manual_seed(SEED)
    frames = torch.rand((FRAME_COUNT,) + FRAME_SHAPE, generator=generator)
    model, _ = model_with_cfg("lfc_1w1a", pretrained=False)
    randomize(model, frames, generator)
    model.eval()
    with tempfile.TemporaryDirectory() as scratch:
        exported = export_qonnx(model, args=torch.zeros(EXPORT_SHAPE), export_path=f"{scratch}/lfc.onnx",
                                dynamo=True, optimize=True, input_names=["global_in"], output_names=["global_out"])
    onnx.save(exported, path)
    np.save(path.with_name("lfc_w1a1_frames.npy"), frames.numpy()[:16])
    return path


def speed(name: str, model: Path, inputs: Path, out: Path, cocotb_cycles: int, shards: int = 1) -> dict:
    """One model's ONNX -> 4-frame simulation wall time, and each engine's simulated cycles per second."""
    config = out / f"{name}_speed.yaml"
    config.write_text(yaml.safe_dump({
        "model": str(model), "output_dir": str(out / f"{name}_speed"), "target_fps": 100, "clock_mhz": 100,
        "steps": SIM_STEPS, "verify": {"inputs": str(inputs), "frames": SPEED_FRAMES, "shards": shards}}))
    start = time.perf_counter()
    state = run_build(config, fresh=True)
    wall = time.perf_counter() - start
    report = state.rtlsim
    steps = json.loads((state.folder.reports / "time_per_step.json").read_text())

    # The cocotb engine on the first frame, in the same build folder (its own Verilator build), stopped by
    # its cycle budget.
    dataflow, first, last = state.dataflow, state.dataflow.stages[0], state.dataflow.stages[-1]
    frames = first.in_dtype.to_hw(dataflow.input_codes(state.frames[:1]))
    arguments = dict(verilog=state.folder.path("verilog", f"{TOP}.v"), top=TOP,
                     build_dir=state.folder.path("sim_build", "x").parent, in_elems=first.in_elems,
                     in_width=first.in_dtype.bitwidth, out_elems=last.out_elems, out_width=last.out_dtype.bitwidth,
                     frames=frames, expected=None, n_out=last.out_count, seed=state.config.verify.seed,
                     timeout_cycles=cocotb_cycles, engine="cocotb")
    build_start = time.perf_counter()
    try:  # builds; its Verilator build is timed apart from its run
        simulate(**{**arguments, "timeout_cycles": 1})
    except BuildError as error:
        if "failed after 1 cycles" not in str(error):
            raise
    cocotb_build = time.perf_counter() - build_start
    run_start = time.perf_counter()
    with_cap = f"failed after {cocotb_cycles} cycles: random gaps and back-pressure"
    try:
        simulate(**arguments)
        raise RuntimeError(f"{name}: the cocotb run finished within {cocotb_cycles} cycles; give more")
    except BuildError as error:
        if with_cap not in str(error):
            raise
    cocotb_seconds = time.perf_counter() - run_start
    return dict(name=name, wall=wall, steps=steps, report=report,
                harness_rate=report["simulated_cycles"] / report["sim_seconds"],
                cocotb_rate=cocotb_cycles / cocotb_seconds, cocotb_build=cocotb_build)


def print_speed(rows: list[dict], cocotb_cycles: int, shards: int) -> None:
    print(f"\nONNX -> {SPEED_FRAMES}-frame Verilator simulation at 100 frames/s (100 MHz), fresh build, harness engine, "
          f"verify.shards {shards}:")
    for r in rows:
        rep = r["report"]
        steps = ", ".join(f"{step} {seconds:.1f}" for step, seconds in r["steps"].items())
        print(f"  {r['name']}: {r['wall']:.1f} s (steps, s: {steps}); {rep['simulated_cycles']:,} cycles simulated "
              f"in {rep['sim_seconds']:.1f} s; mismatches {rep['mismatches']}, end-to-end differing frames "
              f"{len(rep['end_to_end_differing_frames'])}; measured {rep['measured_cycles_per_frame']:,.0f} vs "
              f"predicted {rep['predicted_cycles_per_frame']:,} cycles/frame")
    print(f"\nSimulated cycles per second (cocotb: the first {cocotb_cycles:,} cycles of frame 1, start-up "
          "included; harness: the whole run above):")
    print(f"  {'model':10} {'cocotb':>10} {'harness':>10} {'speed-up':>9} {'cocotb Verilator build':>24}")
    for r in rows:
        print(f"  {r['name']:10} {r['cocotb_rate']:>10,.0f} {r['harness_rate']:>10,.0f} "
              f"{r['harness_rate'] / r['cocotb_rate']:>8.0f}x {r['cocotb_build']:>22.1f} s", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", choices=sorted(MODELS), default=list(MODELS))
    parser.add_argument("--frames", type=int, default=8)
    parser.add_argument("--out", type=Path, default=ROOT / "out" / "bench_cnn_rtlsim")
    parser.add_argument("--speed", action="store_true", help="the simulation engines' speed instead (see above)")
    parser.add_argument("--lfc", type=Path, help="the LFC-w1a1 ONNX file, with lfc_w1a1_frames.npy beside it")
    parser.add_argument("--cocotb-cycles", type=int, default=100_000)
    parser.add_argument("--shards", type=int, default=1,
                        help="with --speed: verify.shards of the fresh builds (the frames run side by side)")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    if args.speed:
        lfc = args.lfc or export_lfc(args.out / "lfc_w1a1.onnx")
        rows = [speed("lfc_w1a1", lfc, lfc.with_name("lfc_w1a1_frames.npy"), args.out, args.cocotb_cycles,
                      args.shards),
                speed("cnv_w2a2", CNN / "cnv_w2a2.onnx", CNN / "cnv_frames.npy", args.out, args.cocotb_cycles,
                      args.shards)]
        print_speed(rows, args.cocotb_cycles, args.shards)
        return 1 if any(r["report"]["mismatches"] or r["report"]["end_to_end_differing_frames"] for r in rows) else 0
    print(f"{'model':16} {'frames':>6} {'mismatches':>10} {'vs expected':>11} {'predicted':>10} {'measured':>10} "
          f"{'ratio':>7} {'seconds':>8}")
    failures = 0
    for name in args.models:
        r = build(name, args.frames, args.out)
        ratio = r["measured_cycles_per_frame"] / r["predicted_cycles_per_frame"]
        failures += r["mismatches"] + r.get("expected_mismatches", 0) + (abs(ratio - 1) > 0.02)
        print(f"{name:16} {r['frames']:>6} {r['mismatches']:>10} {r.get('expected_mismatches', 0):>11} "
              f"{r['predicted_cycles_per_frame']:>10} {r['measured_cycles_per_frame']:>10.0f} {ratio:>7.4f} "
              f"{r['seconds']:>8.0f}", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
