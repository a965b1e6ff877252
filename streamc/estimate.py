"""``streamc estimate``: folding, cycles and resources per stage in seconds, without generating RTL.

Runs the build through its fold step in a scratch folder, so that a build's own reports in ``output_dir``
(``folding.json``, ``estimates.json``) stay as that build wrote them, and prices every kernel the rtl step
would generate (:func:`streamc.kernels.estimate_design`). Writes ``reports/estimate.json`` and
``reports/estimate.md`` in ``output_dir``, with SVG charts when matplotlib is there.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from .api import compile
from .devices import get_device
from .folding import cycle_budget
from .kernels import estimate_design
from .pipeline.config import load_config
from .pipeline.folder import BuildFolder
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
        "config": str(config_path), "clock_mhz": config.clock_mhz, "target_fps": config.target_fps,
        "cycle_budget": budget, "predicted_cycles_per_frame": cycles,
        "predicted_fps": config.clock_mhz * 1e6 / cycles,
        "kernels": [{"name": r.name, "kind": r.kind, "cycles": r.cycles, "folding": r.folding,
                     "resources": {d: e.to_dict() for d, e in r.resources.items()}} for r in rows],
        "devices": {},
    }
    for device in devices:
        total = sum((r.resources[device.name] for r in rows), ResourceEstimate())
        budget_of = device.budget()
        utilization = {key: getattr(total, key) / budget_of[key] if budget_of[key] else None for key in RESOURCES}
        over = [key for key in RESOURCES if getattr(total, key) > budget_of[key]]
        report["devices"][device.name] = {"part": device.part, "budget": budget_of, "total": total.to_dict(),
                                          "utilization": utilization, "fits": not over, "over_budget": over}
    folder = BuildFolder(output_dir)
    charts = _charts(report, folder.reports)
    folder.write_text("reports", "estimate.md", text=_markdown(report, charts))
    report["written"] = {"folder": str(folder.reports),
                         "files": ["estimate.json", "estimate.md", *([] if isinstance(charts, str) else charts)]}
    folder.write_report("estimate", report)
    return report


def _markdown(report: dict, charts: list[str] | str) -> str:
    lines = [f"# Estimate for {report['config']}", ""]
    target = (f"target {report['target_fps']:g} frames/s = {report['cycle_budget']} cycles per frame at "
              f"{report['clock_mhz']:g} MHz" if report["target_fps"] else "explicit folding")
    lines += [f"{target}; predicted {report['predicted_cycles_per_frame']} cycles per frame, "
              f"{report['predicted_fps']:,.0f} frames/s.", ""]
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
        lines.append("")
    if isinstance(charts, str):
        lines += [f"_{charts}_", ""]
    else:
        lines += [f"![{chart}]({chart})" for chart in charts] + [""]
    lines += ["LUT and FF are models calibrated against Yosys (within about 15 % on the calibration sweep); "
              "block RAM and DSP counts follow Yosys' own mapping rules.", ""]
    return "\n".join(lines)


#: The charts' layout in inches: the width, a stage's bar, the margins around each panel (title above, tick
#: labels below) and what a character of a stage's name takes (10-point DejaVu Sans, a little over).
_WIDTH, _BAR, _ABOVE, _BELOW, _CHAR = 8.0, 0.35, 0.5, 0.5, 0.085


def _charts(report: dict, folder: Path) -> list[str] | str:
    """SVG charts next to the Markdown; a note instead when matplotlib is not installed.

    Drawn on matplotlib's ``Figure`` without pyplot, laid out from the longest stage name rather than by
    ``tight_layout``, titles at the axes' top (``y=1``: not moved clear of tick labels measured one by one, there
    are none above), and written as SVG with text kept as text."""
    try:
        import matplotlib
    except ImportError:
        return "Charts skipped: matplotlib is not installed (pip install matplotlib)."
    from matplotlib.figure import Figure

    stages = [k for k in report["kernels"] if k["cycles"] is not None]
    names = [k["name"] for k in stages]
    # Horizontal bars on linear axes from zero: lengths compare as the numbers do, and long names stay readable.
    panel = 0.4 + _BAR * len(names)
    left = (0.2 + _CHAR * max(map(len, names), default=1)) / _WIDTH
    charts = []
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "streamc"}):
        figure = Figure(figsize=(_WIDTH, panel + _ABOVE + _BELOW + 0.3))
        axes = figure.subplots()
        _place(figure, left, panels=1, panel=panel, top=_ABOVE, bottom=_BELOW + 0.3)
        cycles = [k["cycles"] for k in stages]
        _bars(axes, names, cycles, "tab:blue")
        budget = report["cycle_budget"]
        if budget:
            axes.axvline(budget, color="tab:red", linestyle="--",
                         label=f"target: {budget:,} cycles ({report['target_fps']:,.0f} frames/s)")
            axes.legend(loc="lower right")
        axes.set_xlim(0, 1.18 * max([*cycles, budget or 0]))
        axes.set_xlabel("cycles per frame")
        axes.set_title(f"Cycles per frame by stage: the slowest, {report['predicted_cycles_per_frame']:,}, sets "
                       f"{report['predicted_fps']:,.0f} frames/s at {report['clock_mhz']:g} MHz", fontsize=10, y=1)
        figure.savefig(folder / "estimate_cycles.svg", metadata={"Date": None})
        charts.append("estimate_cycles.svg")
        for device_name, device in report["devices"].items():
            kinds = [key for key in ("lut", "ff", "bram", "dsp") if device["budget"][key]]
            figure = Figure(figsize=(_WIDTH, len(kinds) * (panel + _ABOVE + _BELOW) + 0.6))
            grid = figure.subplots(len(kinds), 1, squeeze=False)
            _place(figure, left, panels=len(kinds), panel=panel, top=_ABOVE + 0.45, bottom=_BELOW)
            for axes, key, color in zip(grid[:, 0], kinds, ("tab:blue", "tab:orange", "tab:green", "tab:purple")):
                # Counts, not shares of the device: a small design's bars would all sit at 0 % of a large one.
                _bars(axes, names, _per_stage(report["kernels"], device_name, key), color)
                used, have = device["total"][key], device["budget"][key]
                over = " (over the budget)" if used > have else ""
                axes.set_title(f"{key.upper()}: {used:,} of {have:,} ({100 * used / have:.1f} %){over}", fontsize=10,
                               loc="left", color="tab:red" if over else "black", y=1)
            figure.suptitle(f"{device_name} ({device['part']}): estimated resources by stage\n"
                            "(each stage with the FIFO and width converter before it)", fontsize=11,
                            y=1 - 0.1 / figure.get_figheight())
            chart = f"estimate_resources_{device_name}.svg"
            figure.savefig(folder / chart, metadata={"Date": None})
            charts.append(chart)
    return charts


def _place(figure, left: float, *, panels: int, panel: float, top: float, bottom: float) -> None:
    """Lay ``panels`` stacked axes of ``panel`` inches each out on ``figure``, ``top`` inches above the first for
    its titles, ``bottom`` below the last for its tick labels, room for a title and tick labels between."""
    height = figure.get_figheight()
    figure.subplots_adjust(left=left, right=0.97, top=1 - top / height, bottom=bottom / height,
                           hspace=(_ABOVE + _BELOW) / panel)


def _bars(axes, names: list[str], values: list[int], color: str) -> None:
    """One horizontal bar per stage, first stage on top, each labelled with its value."""
    bars = axes.barh(names, values, color=color)
    axes.bar_label(bars, labels=[f"{value:,}" for value in values], padding=3, fontsize=9)
    axes.invert_yaxis()
    axes.set_xlim(0, 1.18 * max(max(values, default=0), 1))
    axes.xaxis.get_major_locator().set_params(integer=True)


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
