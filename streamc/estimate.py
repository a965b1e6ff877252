"""``streamc estimate``: folding, cycles and resources per stage in seconds, without generating RTL.

Runs the build through its fold step in a scratch folder, so that a build's own reports in ``output_dir``
(``folding.json``, ``estimates.json``) stay as that build wrote them, and prices every kernel the rtl step
would generate (:func:`streamc.kernels.estimate_design`). Writes ``reports/estimate.json`` and
``reports/estimate.md`` in ``output_dir``, with SVG charts.
"""

from __future__ import annotations

import itertools
import tempfile
from pathlib import Path
from xml.sax.saxutils import escape

from .api import compile
from .devices import get_device
from .folding import cycle_budget
from .kernels import estimate_design
from .pipeline.config import load_config
from .pipeline.folder import BuildFolder
from .planner.cost import LONE_FLIP_FLOPS, logic_cells, over_limits
from .resources import ResourceEstimate

RESOURCES = ("lut", "ff", "bram", "dsp", "spram")


def run_estimate(config_path: Path, *, device_names: list[str] | None = None) -> dict:
    """Fold the model as ``config_path`` says and estimate it; returns what estimate.json holds, which
    ends with where it is (``written``: the folder and the files)."""
    output_dir = load_config(config_path).output_dir
    with tempfile.TemporaryDirectory(prefix="streamc-estimate-") as scratch:
        acc = compile(config=config_path, output_dir=scratch)
    config, dataflow = acc.config, acc.dataflow
    devices = [get_device(name) for name in (device_names or config.devices)]
    rows = estimate_design(dataflow.stages, devices, config.fifo_depth)
    cycles = dataflow.cycles_per_frame()
    budget = cycle_budget(target_fps=config.target_fps, clock_mhz=config.clock_mhz) if config.target_fps else None
    report = {
        "config": str(config_path), "clock_mhz": acc.clock_mhz, "clock_chosen": config.clock_mhz == "auto",
        "target_fps": config.target_fps, "cycle_budget": budget, "predicted_cycles_per_frame": cycles,
        "predicted_fps": acc.clock_mhz * 1e6 / cycles,
        "kernels": [{"name": r.name, "kind": r.kind, "cycles": r.cycles, "folding": r.folding,
                     "resources": {d: e.to_dict() for d, e in r.resources.items()}} for r in rows],
        "devices": {},
    }
    for device in devices:
        total = sum((r.resources[device.name] for r in rows), ResourceEstimate())
        budget_of = device.budget()
        utilization = {key: getattr(total, key) / budget_of[key] if budget_of[key] else None for key in RESOURCES}
        over = over_limits(total, budget_of, device.family)
        report["devices"][device.name] = {"part": device.part, "budget": budget_of, "total": total.to_dict(),
                                          "utilization": utilization, "fits": not over, "over_budget": over}
        if device.family in LONE_FLIP_FLOPS:
            report["devices"][device.name]["logic_cells"] = logic_cells(total, device.family)
    folder = BuildFolder(output_dir)
    charts = _charts(report, folder.reports)
    folder.write_text("reports", "estimate.md", text=_markdown(report, charts))
    report["written"] = {"folder": str(folder.reports),
                         "files": ["estimate.json", "estimate.md", *charts]}
    folder.write_report("estimate", report)
    return report


def _markdown(report: dict, charts: list[str]) -> str:
    lines = [f"# Estimate for {report['config']}", ""]
    target = (f"target {report['target_fps']:g} frames/s = {report['cycle_budget']} cycles per frame at "
              f"{report['clock_mhz']:g} MHz" if report["target_fps"] else "explicit folding")
    chosen = f" at {report['clock_mhz']:g} MHz (clock_mhz auto: chosen)" if report["clock_chosen"] else ""
    lines += [f"{target}; predicted {report['predicted_cycles_per_frame']} cycles per frame, "
              f"{report['predicted_fps']:,.0f} frames/s{chosen}.", ""]
    for name, device in report["devices"].items():
        verdict = "fits" if device["fits"] else f"does NOT fit (over: {', '.join(device['over_budget'])})"
        lines += [f"## {name} ({device['part']}): {verdict}", "",
                  "| kernel | kind | folding | cycles | LUT | FF | BRAM | DSP | LUT RAM |",
                  "|---|---|---|---:|---:|---:|---:|---:|---:|"]
        for kernel in report["kernels"]:
            r = kernel["resources"][name]
            folding = ", ".join(f"{k}={v}" for k, v in kernel["folding"].items())
            cycles = "" if kernel["cycles"] is None else kernel["cycles"]
            lines.append(f"| {kernel['name']} | {kernel['kind']} | {folding} | {cycles} | {r['lut']} | {r['ff']} "
                         f"| {r['bram']} | {r['dsp']} | {r['lutram']} |")
        total, budget = device["total"], device["budget"]
        lines.append(f"| **total** | | | | {total['lut']} / {budget['lut']} | {total['ff']} / {budget['ff']} "
                     f"| {total['bram']} / {budget['bram']} | {total['dsp']} / {budget['dsp']} | {total['lutram']} |")
        if "logic_cells" in device:
            lines += ["", f"Logic cells (the LUT4s and the flip-flops that take a cell of their own, which the "
                          f"device's LUT count holds): {device['logic_cells']} / {budget['lut']}"]
        lines.append("")
    lines += [f"![{chart}]({chart})" for chart in charts] + [""]
    lines += ["LUT and FF are models calibrated against Yosys (within about 15 % on the calibration sweep); "
              "block RAM and DSP counts follow Yosys' own mapping rules.", ""]
    return "\n".join(lines)


#: The charts' layout in SVG pixels: the width, a stage's row, the room above a panel's bars (its title) and below
#: them (the axis), and what a character of an 11-pixel stage name takes (DejaVu Sans, a little over).
_WIDTH, _ROW, _ABOVE, _BELOW, _CHAR = 800, 24, 34, 46, 6.8
_COLORS = {"lut": "#1f77b4", "ff": "#ff7f0e", "bram": "#2ca02c", "dsp": "#9467bd", "cycles": "#1f77b4"}
_RED = "#d62728"


def _charts(report: dict, folder: Path) -> list[str]:
    """SVG charts next to the Markdown: per stage, cycles, and each device's resources in counts (not shares of
    the device: a small design's bars would all sit at 0 % of a large one), as horizontal bars on linear axes from
    zero, each labelled with its value. Written as SVG text: drawn with matplotlib, two charts of bars took 1.1 to
    1.7 of the command's 4.9 to 5.8 CPU seconds on CNV-w2a2 (its import about 0.5)."""
    stages = [k for k in report["kernels"] if k["cycles"] is not None]
    names = [k["name"] for k in stages]
    left = 16 + _CHAR * max(map(len, names), default=1)
    budget = report["cycle_budget"]
    title = (f"Cycles per frame by stage: the slowest, {report['predicted_cycles_per_frame']:,}, sets "
             f"{report['predicted_fps']:,.0f} frames/s at {report['clock_mhz']:g} MHz")
    marker = (budget, f"target: {budget:,} cycles ({report['target_fps']:,.0f} frames/s)") if budget else None
    charts = {"estimate_cycles.svg": _svg([], [(title, "black", [k["cycles"] for k in stages], "cycles", marker,
                                                 "cycles per frame")], names, left)}
    for device_name, device in report["devices"].items():
        panels = []
        for key in (key for key in ("lut", "ff", "bram", "dsp") if device["budget"][key]):
            used, have = device["total"][key], device["budget"][key]
            over = " (over the budget)" if used > have else ""
            panels.append((f"{key.upper()}: {used:,} of {have:,} ({100 * used / have:.1f} %){over}",
                           _RED if over else "black", _per_stage(report["kernels"], device_name, key), key, None, ""))
        heading = [f"{device_name} ({device['part']}): estimated resources by stage",
                   "(each stage with the FIFO and width converter before it)"]
        charts[f"estimate_resources_{device_name}.svg"] = _svg(heading, panels, names, left)
    for chart, text in charts.items():
        (folder / chart).write_text(text)
    return list(charts)


def _svg(heading: list[str], panels: list[tuple], names: list[str], left: float) -> str:
    """An SVG of ``panels`` stacked under the ``heading`` lines, each ``(title, title colour, values, colour key,
    marker, axis label)``: a bar per stage from zero, labelled with its value, the stage names on the left, ticks
    below; ``marker`` a ``(value, legend)`` drawn as a dashed line."""
    right = _WIDTH - 24
    body, y = [], 10 + 22 * len(heading)
    for n, line in enumerate(heading):
        body.append(f'<text class="heading" x="{_WIDTH / 2}" y="{24 + 22 * n}" text-anchor="middle" '
                    f'font-size="14">{escape(line)}</text>')
    for title, title_color, values, key, marker, axis_label in panels:
        # A marker's legend is a line of its own under the title.
        top = y + _ABOVE + (18 if marker else 0)
        bottom = top + _ROW * len(names)
        limit = 1.18 * max(*values, marker[0] if marker else 0, 1)
        scale = (right - left) / limit
        body.append(f'<g class="panel"><text class="title" x="16" y="{y + _ABOVE - 12}" font-size="13" '
                    f'fill="{title_color}">{escape(title)}</text>')
        for row, (name, value) in enumerate(zip(names, values)):
            middle = top + _ROW * row + _ROW / 2
            body.append(f'<text x="{left - 6}" y="{middle + 4}" text-anchor="end">{escape(name)}</text>'
                        f'<rect class="bar" x="{left}" y="{middle - 8}" width="{value * scale:.2f}" height="16" '
                        f'fill="{_COLORS[key]}"/><text class="value" x="{left + value * scale + 4:.2f}" '
                        f'y="{middle + 4}" font-size="10">{value:,}</text>')
        body.append(f'<path d="M{left} {top}V{bottom}H{right}" stroke="black" fill="none"/>')
        for tick in _ticks(limit):
            x = left + tick * scale
            body.append(f'<path d="M{x:.2f} {bottom}v5" stroke="black"/><text x="{x:.2f}" y="{bottom + 18}" '
                        f'text-anchor="middle" font-size="10">{tick:,}</text>')
        if axis_label:
            body.append(f'<text x="{(left + right) / 2}" y="{bottom + 36}" text-anchor="middle">{axis_label}</text>')
        if marker:
            x = left + marker[0] * scale
            body.append(f'<path class="marker" d="M{x:.2f} {top}V{bottom}" stroke="{_RED}" stroke-dasharray="6 4"/>'
                        f'<text x="16" y="{top - 10}" fill="{_RED}">- - {escape(marker[1])}</text>')
        body.append("</g>")
        y = bottom + _BELOW
    return (f'<?xml version="1.0" encoding="utf-8"?>\n<svg xmlns="http://www.w3.org/2000/svg" width="{_WIDTH}" '
            f'height="{y}" viewBox="0 0 {_WIDTH} {y}" font-family="DejaVu Sans, sans-serif" font-size="11">\n'
            f'<rect width="100%" height="100%" fill="white"/>\n' + "\n".join(body) + "\n</svg>\n")


def _ticks(limit: float) -> list[int]:
    """Whole-number ticks from 0 up to ``limit``, the least of 1, 2 or 5 times a power of ten apart that gives at
    most eleven."""
    for power in itertools.count():
        for mantissa in (1, 2, 5):
            step = mantissa * 10 ** power
            if limit / step <= 10:
                return list(range(0, int(limit) + 1, step))


def _per_stage(kernels: list[dict], device: str, key: str) -> list[int]:
    """``key`` used by each stage, counting the FIFO and width converter in front of it as its own (and any
    after the last stage as the last stage's), so that the bars sum to the device's total."""
    totals, pending = [], 0
    for kernel in kernels:
        pending += kernel["resources"][device][key]
        if kernel["cycles"] is not None:
            totals.append(pending)
            pending = 0
    if totals:
        totals[-1] += pending
    return totals
