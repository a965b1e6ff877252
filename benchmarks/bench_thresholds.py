"""The zoo's threshold units with many thresholds, compared in parallel and searched: estimate and Yosys.

Run: python benchmarks/bench_thresholds.py [--synth] [--models PATTERN] [--stages PATTERN] [--timeout SECONDS]
                                           [--workdir DIR]

For every stage of the zoo models (``tests/models/zoo``) that ends in a standalone threshold unit with
enough thresholds to search (:func:`streamc.stages.threshold.can_search`: a pool, a depthwise convolution,
a residual add), the unit is built at one lane in both styles and its LUTs, flip-flops and block RAMs
estimated on the iCE40 UP5K and the ECP5-85F (:mod:`streamc.resources`), with what ``"auto"`` takes on each
family. With ``--synth`` each unit is also synthesized by Yosys (as its own top module, as the calibration
synthesizes a threshold unit), each run killed after ``--timeout`` seconds (printed as ``timeout``): a
parallel unit of 255 wide thresholds takes Yosys long.
"""

from __future__ import annotations

import argparse
import fnmatch
import tempfile
from pathlib import Path

from streamc.errors import BuildError
from streamc.frontend.load import load_onnx
from streamc.hw import to_hw
from streamc.resources import estimate_kernel, spec_of_unit
from streamc.stages.threshold import can_search, cheaper_style
from streamc.synth import synthesize
from streamc.timing import Clock
from streamc.transforms.streamline import streamline
from streamc.transforms.tidy import tidy

ROOT = Path(__file__).resolve().parent.parent
ZOO = ROOT / "tests" / "models" / "zoo"
DEVICES = {"ice40-up5k": "ice40", "ecp5-85f": "ecp5"}


def threshold_stages(model: Path):
    """The stages of ``model`` whose threshold unit may search, each with its unit's input type."""
    dataflow = to_hw(streamline(tidy(load_onnx(model))))
    for stage in dataflow.stages:
        if getattr(stage, "threshold_style", None) is not None and can_search(stage):
            yield stage


def units_of(stage):
    """The stage's threshold unit in each style, at the stage's lanes."""
    units = {}
    for style in ("parallel", "search"):
        stage.threshold_style = style
        units[style] = stage.components()[-1]
    stage.threshold_style = "auto"
    return units


def synthesized(unit, device: str, workdir: Path, timeout: float) -> str:
    from amaranth.back import verilog

    folder = workdir / f"{unit.name}_{unit.style}"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "k.v").write_text(verilog.convert(unit, name="k", emit_src=False))
    try:
        result = synthesize(verilog=folder / "k.v", top="k", device=device, workdir=folder, timeout_s=timeout)
    except BuildError as exc:
        return "timeout" if "within" in str(exc) else "failed"
    return f"{result.lut} / {result.ff} / {result.bram}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="*", help="glob over the zoo's model names")
    parser.add_argument("--stages", default="*", help="glob over the stages' names")
    parser.add_argument("--synth", action="store_true", help="synthesize every unit with Yosys too")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds per Yosys run")
    parser.add_argument("--workdir", type=Path, default=None, help="keep Yosys' files here (default: a temporary "
                                                                    "folder; YoWASP cannot see /tmp, use one outside)")
    args = parser.parse_args()
    models = sorted(path for path in ZOO.glob("*.onnx") if fnmatch.fnmatch(path.stem, args.models))
    print(f"{'stage':<34} {'L':>4} {'in':>7} {'device':<11} {'style':<9} {'estimate LUT/FF/BRAM':>21} "
          f"{'Yosys LUT/FF/BRAM':>19}  auto")
    with tempfile.TemporaryDirectory(dir=ROOT / "out" if (ROOT / "out").is_dir() else None) as tmp:
        workdir = args.workdir or Path(tmp)
        for model in models:
            for stage in threshold_stages(model):
                if not fnmatch.fnmatch(stage.name, args.stages):
                    continue
                units = units_of(stage)
                in_dtype = units["parallel"].in_dtype
                for device, family in DEVICES.items():
                    stage.pipeline_for(Clock(mhz=100, family=family))
                    auto = cheaper_style(stage, in_dtype, stage.channels, stage.in_elems)
                    for style, unit in units.items():
                        est = estimate_kernel(spec_of_unit(unit), family)
                        yosys = synthesized(unit, device, workdir, args.timeout) if args.synth else ""
                        print(f"{model.stem + ':' + stage.name:<34} {stage.thresholds.shape[1]:>4} "
                              f"{in_dtype.name:>7} {device:<11} {style:<9} "
                              f"{f'{est.lut} / {est.ff} / {est.bram}':>21} {yosys:>19}  {auto}", flush=True)


if __name__ == "__main__":
    main()
