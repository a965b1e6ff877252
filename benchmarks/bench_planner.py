"""The folding planner against FINN's greedy pass and an exhaustive search, on every test model.

    python benchmarks/bench_planner.py [--budget 0.8] [--clock-mhz 100] [--models PATTERN]
    python benchmarks/bench_planner.py --branching [--before REV] [--timeout 120]

For each model (the ONNX files in tests/models/, tests/models/cnn/ and build_configs/models/) and
device (iCE40 UP5K, ECP5-85F), two comparisons on streamc's resource models:

- LUTs at equal throughput: the fewest LUTs each method needs for one cycles-per-frame target
  (the fastest the greedy pass fits in the budget, or the middle of the range where it fits nowhere),
  the planner and exhaustive search within the device's block RAM, DSPs and flip-flops; a greedy
  folding that needs more than the device has says so;
- throughput at equal budget: the fewest cycles per frame each method fits in ``--budget`` of the
  device's LUTs with its block RAM and DSPs.

The planner also chooses where each ROM goes (LUTs or block RAM); "plan, Yosys places" is the
planner with that left to Yosys, as greedy leaves it, to show what the choice gains.

Exhaustive search (exact, branch and bound) runs where the foldings to try are few enough; "-"
where not. A model that does not lower to hardware yet is reported as such.

``--branching``: the designs that branch (the residual and concat blocks, MLPerf Tiny's ResNet-8 from
the zoo, from onnxruntime's QDQ and from tests/resnet_factory.py) planned as ``streamc estimate`` plans
them, at ``target_fps`` (devices named: the plan must fit) and at ``budget: 0.5``, on the ECP5-85F
and the UP5K: seconds of planning (wall and CPU), cycles per frame and LUTs, by this planner and by the one at git
revision ``--before``, each case in a fresh process stopped after ``--timeout`` seconds.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from streamc.devices import get_device
from streamc.errors import FrontendError, LoweringError, StreamcError
from streamc.folding import target_cycles
from streamc.frontend.load import load_onnx
from streamc.hw import to_hw
from streamc.planner import (device_limits, exhaustive_for_budget, exhaustive_for_cycles, greedy_for_budget,
                             greedy_for_cycles, plan_for_budget, plan_for_cycles)
from streamc.transforms.streamline import streamline
from streamc.transforms.tidy import tidy

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = ("tests/models", "tests/models/cnn", "build_configs/models")
DEVICES = ("ice40-up5k", "ecp5-85f")


def models(pattern: str) -> list[Path]:
    found = [path for folder in FOLDERS for path in sorted((ROOT / folder).glob("*.onnx"))]
    return [path for path in found if fnmatch.fnmatch(path.name, pattern)]


def lower(path: Path):
    return to_hw(streamline(tidy(load_onnx(path))))


def _cell(plan, what: str) -> str:
    if plan is None:
        return "no fit"
    if what != "lut":
        return f"{plan.cycles}"
    # Greedy folds for cycles alone, and without a say in placement the planner may find no folding that
    # fits: either may need more than the device has.
    over = [f"{key} {getattr(plan.resources, key)}/{limit}" for key, limit in device_limits(get_device(plan.device)).items()
            if key != "lut" and getattr(plan.resources, key) > limit]
    return f"{plan.resources.lut}" + (f" (over: {', '.join(over)})" if over else "")


def _try(function, **kwargs):
    """A baseline's plan, ``None`` if nothing fits, or why it could not run (too many foldings)."""
    try:
        return function(**kwargs)
    except ValueError as exc:
        return str(exc)


def compare(flow, device, budget: float) -> dict:
    row = {}
    started = time.perf_counter()
    greedy_b = greedy_for_budget(flow, device=device, budget=budget)
    try:
        plan_b = plan_for_budget(flow, device=device, budget=budget)
    except StreamcError:
        plan_b = None
    row["plan_time"] = time.perf_counter() - started
    exhaustive_b = _try(exhaustive_for_budget, dataflow=flow, device=device, budget=budget)
    # Equal throughput: where greedy fits, its own best; elsewhere a target both can reach.
    if greedy_b is not None:
        cycles = greedy_b.cycles
    else:
        slowest = greedy_for_cycles(flow, cycles=10**12, device=device).cycles
        fastest = greedy_for_cycles(flow, cycles=1, device=device).cycles
        cycles = int((slowest * fastest) ** 0.5)
    greedy_t = greedy_for_cycles(flow, cycles=cycles, device=device)
    plan_t = plan_for_cycles(flow, cycles=max(cycles, greedy_t.cycles), device=device)
    auto_t = plan_for_cycles(flow, cycles=max(cycles, greedy_t.cycles), device=device, placement=False)
    # The planner's problem: the fewest LUTs whose block RAMs, DSPs and flip-flops fit the device.
    exhaustive_t = _try(exhaustive_for_cycles, dataflow=flow, cycles=max(cycles, greedy_t.cycles), device=device,
                        limits=device_limits(device))
    row.update(cycles=max(cycles, greedy_t.cycles), greedy_t=greedy_t, plan_t=plan_t, auto_t=auto_t,
               exhaustive_t=exhaustive_t,
               greedy_b=greedy_b, plan_b=plan_b, exhaustive_b=exhaustive_b)
    return row


#: Branching designs and the frame rate asked of each (at 100 MHz): one the blocks' slowest folding misses.
BRANCHING = {"tests/models/cnn/residual_block.onnx": 25_000, "tests/models/cnn/concat_block.onnx": 25_000,
             "tests/models/zoo/resnet8.onnx": 100, "tests/models/zoo/resnet8_ort_qdq.onnx": 100,
             "tests/resnet_factory.py": 100}


def plan_once(model: str, device_name: str, ask: str) -> dict:
    """One planning as ``streamc estimate`` does it, timed (the lowering is not)."""
    import streamc.planner as planner  # this tree's, or the worktree's of --before (see _run)

    flow, device = lower(Path(model)), get_device(device_name)
    started, cpu = time.perf_counter(), time.process_time()
    try:
        if ask == "budget":
            plan = planner.plan_for_budget(flow, device=device, budget=0.5)
        else:
            plan = planner.plan_for_cycles(flow, cycles=target_cycles(target_fps=float(ask), clock_mhz=100.0),
                                           device=device, limits=planner.device_limits(device))
    except StreamcError as exc:
        return {"seconds": time.perf_counter() - started, "cpu": time.process_time() - cpu, "error": str(exc)}
    return {"seconds": time.perf_counter() - started, "cpu": time.process_time() - cpu, "cycles": plan.cycles,
            "lut": plan.resources.lut,
            "bram": plan.resources.bram, "dsp": plan.resources.dsp}


def _run(model: str, device: str, ask: str, tree: Path | None, timeout: float) -> dict:
    """One case in a fresh process: with ``tree`` (a worktree of an earlier revision), all of streamc is that
    revision's, so that the planner is compared as it was, whatever files it then had."""
    command = [sys.executable, __file__, "--one", model, device, ask]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tree), os.environ.get("PYTHONPATH", "")])} if tree else None
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return {"timeout": timeout}
    if done.returncode:
        return {"error": done.stderr.strip().splitlines()[-1]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def _result(found: dict) -> str:
    if "timeout" in found:
        return f"> {found['timeout']:g} | | |"
    if "cycles" not in found:
        fits = "no fit" if "does not fit" in found["error"] else found["error"][:60]
        return f"{found.get('seconds', 0):.1f} / {found.get('cpu', 0):.1f} | {fits} | |"
    return (f"{found['seconds']:.1f} / {found['cpu']:.1f} | {found['cycles']} | {found['lut']} | "
            f"{found['bram']} / {found['dsp']}")


def branching(before: str, timeout: float) -> None:
    sys.path.insert(0, str(ROOT / "tests"))
    import onnx
    from resnet_factory import make_resnet8

    with tempfile.TemporaryDirectory() as folder:
        factory = Path(folder) / "resnet8_factory.onnx"
        onnx.save(make_resnet8(), factory)
        tree = Path(folder) / "before"
        subprocess.run(["git", "worktree", "add", "--detach", str(tree), before], cwd=ROOT, check=True,
                       capture_output=True)
        print(f"Planning branching designs, ECP5-85F and UP5K, 100 MHz; before: {before}, after: this tree; "
              f"each case in a fresh process, at most {timeout:g} s")
        # CPU seconds too: on a loaded machine they say what the planner costs, the wall clock what it took
        print("| model | device | asked | before s / CPU s | cycles | LUT | BRAM / DSP | after s / CPU s | cycles | LUT "
              "| BRAM / DSP |")
        print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        for model, fps in BRANCHING.items():
            path = str(factory) if model.endswith(".py") else str(ROOT / model)
            for device in DEVICES[::-1]:
                for ask in (str(fps), "budget"):
                    asked = "budget 0.5" if ask == "budget" else f"{fps} fps"
                    print(f"| {model} | {device} | {asked} | {_result(_run(path, device, ask, tree, timeout))} "
                          f"| {_result(_run(path, device, ask, None, timeout))} |")
        subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=ROOT, check=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--budget", type=float, default=0.8, help="fraction of the device's LUTs (default 0.8)")
    parser.add_argument("--clock-mhz", type=float, default=100.0)
    parser.add_argument("--models", default="*", help="file name pattern, e.g. 'tfc*'")
    parser.add_argument("--branching", action="store_true", help="time the branching designs, before and after")
    parser.add_argument("--before", help="with --branching, the git revision to compare with (default HEAD~1)")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per planning (default 120)")
    parser.add_argument("--one", nargs=3, metavar=("MODEL", "DEVICE", "ASK"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    sys.stdout.reconfigure(line_buffering=True)     # rows as they come: the CNV rows take a while
    if args.one:
        print(json.dumps(plan_once(*args.one)))
        return
    if args.branching:
        branching(args.before or "HEAD~1", args.timeout)
        return

    print(f"LUTs at equal throughput (cycles/frame T), and cycles/frame within {args.budget:.0%} of the device's "
          f"LUTs (frames/s at {args.clock_mhz:g} MHz); planner / greedy / exhaustive")
    header = ("| model | device | T | LUT plan | LUT plan, Yosys places | LUT greedy | LUT exh. | plan vs greedy "
              "| BRAM plan / greedy | cycles plan | cycles greedy | cycles exh. | fps plan | plan s |")
    print(header)
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for path in models(args.models):
        name = path.relative_to(ROOT).as_posix()
        try:
            flow = lower(path)
        except (LoweringError, FrontendError) as exc:
            print(f"| {name} | | not lowerable yet: {str(exc)[:90]} |")
            continue
        for device_name in DEVICES:
            device = get_device(device_name)
            try:
                row = compare(flow, device, args.budget)
            except Exception as exc:      # a stage streamc cannot estimate yet: report it and go on
                print(f"| {name} | {device_name} | planner failed: {type(exc).__name__}: {str(exc)[:90]} |")
                continue
            plan_t, greedy_t, exhaustive_t = row["plan_t"], row["greedy_t"], row["exhaustive_t"]
            saving = 1 - plan_t.resources.lut / greedy_t.resources.lut
            exh_t = "-" if isinstance(exhaustive_t, str) else _cell(exhaustive_t, "lut")
            exh_b = "-" if isinstance(row["exhaustive_b"], str) else _cell(row["exhaustive_b"], "c")
            fps = f"{args.clock_mhz * 1e6 / row['plan_b'].cycles:,.0f}" if row["plan_b"] else "-"
            print(f"| {name} | {device_name} | {row['cycles']} | {plan_t.resources.lut} | {_cell(row['auto_t'], 'lut')} "
                  f"| {_cell(greedy_t, 'lut')} | {exh_t} | {saving:+.1%} "
                  f"| {plan_t.resources.bram} / {greedy_t.resources.bram} | {_cell(row['plan_b'], 'c')} "
                  f"| {_cell(row['greedy_b'], 'c')} "
                  f"| {exh_b} | {fps} | {row['plan_time']:.1f} |")


if __name__ == "__main__":
    main()
