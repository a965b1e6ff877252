"""The delay model's figures (streamc.timing.DELAYS) from nextpnr's timing reports of placed designs.

Run: python benchmarks/calibrate_delays.py [FOLDER ...]   (default: build/, where bench_fmax.py places its designs)

Reads every ``report.json`` under the folders (nextpnr ``--report``), takes the steps of each clock-to-clock
critical path and sorts them by what they cross, told apart by the ports nextpnr names: a flip-flop's or a
block RAM's clock-to-output, a LUT, a carry step, a hard multiplier, the routes between them, the setup. It
prints each kind's median per family, and the parts of the delay model built from them:

- register: a flip-flop's clock-to-output, the route into the next register and its setup;
- adder level: a LUT and the route after it (on Gowin, where the tree is ALU chains, also a chain's carry in, its
  last sum and the route from it, printed apart);
- carry bit: a step along a carry chain (an ECP5 CCU2C carries two bits, a Gowin ALU one; steps into and out
  of a chain are printed apart, as carry_in and carry_out);
- memory: a block RAM's clock-to-output and the route after it;
- multiply: a hard multiplier and the route after it.

Kinds no report shows are printed as missing; the model keeps its earlier figure for them.

A LUT step is not an adder level: Yosys builds the first levels of a tree as LUT logic, several LUTs deep. So it
also prints the adder level as placed: each critical path from an MVAU's product registers to the first registers
of its pipelined tree (``tree_every`` levels: the ``reports/folding.json`` of the build beside the placement), less
the register's clock-to-output, its setup and the carry-chain steps, per level.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: (family, step type, from port, to port) -> kind; ports as nextpnr's iCE40, ECP5 and Gowin cells name them.
LUT_INPUTS = {"I0", "I1", "I2", "I3", "A", "B", "C", "D", "A0", "B0", "C0", "D0", "A1", "B1", "C1", "D1"}


def kind_of(family: str, step: dict) -> str | None:
    kind, source, sink = step["type"], step["from"].get("port", ""), step["to"].get("port", "")
    # A Gowin multiplier's outputs are DOUT*, its block RAM's DO*.
    from_multiplier = source.startswith("DOUT") if family == "gowin" else source.startswith("P")
    if kind == "clk-to-q":
        if from_multiplier and family == "gowin":
            return "multiplier_clk_to_q"
        return "ram_clk_to_q" if source.startswith(("DO", "RDATA")) else "ff_clk_to_q"
    if kind == "setup":
        return "setup"
    if kind == "routing":
        if from_multiplier:
            return "route_from_multiplier"
        if source.startswith(("DO", "RDATA")):
            return "route_from_ram"
        if source in ("COUT", "FCO") and sink in ("CIN", "FCI"):
            return "route_from_carry"
        return "route_from_sum" if family == "gowin" and source == "SUM" else "route"
    if source in ("CIN", "FCI") and sink in ("COUT", "FCO"):
        return "carry"
    if sink in ("COUT", "FCO"):
        return "carry_in"
    if source in ("CIN", "FCI"):
        return "carry_out"
    if (sink.startswith("DOUT") if family == "gowin" else
            sink.startswith("P") or sink.startswith("O") and family == "ice40" and source.startswith(("A", "B"))):
        return "multiplier"
    if source in LUT_INPUTS and sink in ("O", "F", "OFX0", "OFX1"):
        return "lut"
    return None


def steps_by_kind(folders: list[Path]) -> dict[str, dict[str, list[float]]]:
    found: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for report in sorted(path for folder in folders for path in folder.rglob("report.json")):
        placed = json.loads(report.read_text())
        cells = placed["utilization"]
        family = "ecp5" if "TRELLIS_COMB" in cells else "gowin" if "LUT4" in cells else "ice40"
        for path in placed["critical_paths"]:
            if "<async>" in (path["from"], path["to"]):
                continue
            for step in path["path"]:
                kind = kind_of(family, step)
                if kind:
                    found[family][kind].append(step["delay"])
    return found


#: A placed cell of an MVAU's product registers, or of its tree's registers: the stage's layer is the group.
PRODUCT_CELL = re.compile(r"\.stage\d+_(.+?)\.product_")
TREE_CELL = re.compile(r"\.stage\d+_(.+?)\.staged\$")


def tree_levels_placed(folders: list[Path]) -> dict[str, list[float]]:
    """Per family, the nanoseconds per adder level of the critical paths that cross a pipelined tree's first stage."""
    found: dict[str, list[float]] = defaultdict(list)
    for report in sorted(path for folder in folders for path in folder.rglob("report.json")):
        foldings = sorted(report.parent.parent.rglob("folding.json"))
        if not foldings:
            continue
        folding = json.loads(foldings[0].read_text())
        placed = json.loads(report.read_text())
        cells = placed["utilization"]
        family = "ecp5" if "TRELLIS_COMB" in cells else "gowin" if "LUT4" in cells else "ice40"
        for path in placed["critical_paths"]:
            steps = path["path"]
            if not steps:
                continue
            start = PRODUCT_CELL.search(steps[0]["from"].get("cell", ""))
            end = TREE_CELL.search(steps[-1]["to"].get("cell", ""))
            levels = folding.get(start.group(1), {}).get("tree_every", 0) if start and end else 0
            if not levels or start.group(1) != end.group(1):
                continue
            kept = [step["delay"] for step in steps
                    if kind_of(family, step) not in ("ff_clk_to_q", "setup", "carry", "carry_in", "carry_out")]
            found[family].append(sum(kept) / levels)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="*", type=Path, default=[ROOT / "build"])
    args = parser.parse_args()
    for family, kinds in sorted(steps_by_kind(args.folders).items()):
        median = {kind: statistics.median(values) for kind, values in kinds.items()}
        print(f"{family}:")
        for kind, values in sorted(kinds.items()):
            print(f"  {kind:22s} {len(values):4d} steps  median {median[kind]:.3f} ns  max {max(values):.3f} ns")

        def part(*names: str) -> str:
            missing = [name for name in names if name not in median]
            return f"missing {', '.join(missing)}" if missing else f"{sum(median[name] for name in names):.2f} ns"

        print(f"  model: register {part('ff_clk_to_q', 'route', 'setup')}, adder level {part('lut', 'route')}, "
              f"carry step {part('carry')}, memory {part('ram_clk_to_q', 'route_from_ram')}, "
              f"multiply {part('multiplier', 'route_from_multiplier')}")
        placed_levels = tree_levels_placed(args.folders).get(family)
        if placed_levels:
            print(f"  adder level as placed ({len(placed_levels)} tree stages): median "
                  f"{statistics.median(placed_levels):.2f} ns, max {max(placed_levels):.2f} ns")
        if family == "gowin":
            # The adder tree is ALU chains: a level is a chain's carry in, its last sum and the route to the next.
            print(f"  adder level of ALU chains {part('carry_in', 'carry_out', 'route_from_sum')}")


if __name__ == "__main__":
    main()
