"""``streamc estimate``: folding, cycles and resources per stage in seconds, without generating RTL.

Runs the build through its fold step and prices every kernel the rtl step would generate
(:func:`streamc.kernels.estimate_design`). Writes ``reports/estimate.json`` and ``reports/estimate.md``,
with PNG charts when matplotlib is there.
"""

from __future__ import annotations

from pathlib import Path

from .api import compile
from .devices import get_device
from .folding import cycle_budget
from .kernels import estimate_design
from .pipeline.folder import BuildFolder
from .resources import ResourceEstimate

RESOURCES = ("lut", "ff", "bram", "dsp", "spram")


def run_estimate(config_path: Path, *, device_names: list[str] | None = None) -> dict:
    """Fold the model as ``config_path`` says and estimate it; returns what estimate.json holds."""
    acc = compile(config=config_path)
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
    folder = BuildFolder(acc.output_dir)
    folder.write_report("estimate", report)
    charts = _charts(report, folder.reports)
    folder.write_text("reports", "estimate.md", text=_markdown(report, charts))
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


def _charts(report: dict, folder: Path) -> list[str] | str:
    """PNG charts next to the Markdown; a note instead when matplotlib is not installed."""
    try:
        import matplotlib
    except ImportError:
        return "Charts skipped: matplotlib is not installed (pip install matplotlib)."
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    stages = [k for k in report["kernels"] if k["cycles"] is not None]
    names = [k["name"] for k in stages]
    figure, axes = plt.subplots(figsize=(max(6, len(names) * 0.8), 4))
    axes.bar(names, [k["cycles"] for k in stages], color="tab:blue")
    if report["cycle_budget"]:
        axes.axhline(report["cycle_budget"], color="tab:red", linestyle="--", label="target")
        axes.legend()
    axes.set_ylabel("cycles per frame")
    axes.set_yscale("log")
    axes.tick_params(axis="x", rotation=45)
    figure.tight_layout()
    figure.savefig(folder / "estimate_cycles.png", dpi=100)
    plt.close(figure)
    charts = ["estimate_cycles.png"]
    for device_name, device in report["devices"].items():
        figure, axes = plt.subplots(figsize=(max(6, len(names) * 0.8), 4))
        kinds = [key for key in ("lut", "ff", "bram", "dsp") if device["budget"][key]]
        width = 0.8 / len(kinds)
        for index, key in enumerate(kinds):
            shares = [used / device["budget"][key] * 100 for used in _per_stage(report["kernels"], device_name, key)]
            axes.bar([i + index * width for i in range(len(names))], shares, width, label=key.upper())
        axes.axhline(100, color="tab:red", linestyle="--")
        axes.set_xticks([i + 0.4 - width / 2 for i in range(len(names))], names, rotation=45, ha="right")
        axes.set_ylabel(f"% of {device['part']}")
        axes.legend()
        figure.tight_layout()
        chart = f"estimate_resources_{device_name}.png"
        figure.savefig(folder / chart, dpi=100)
        plt.close(figure)
        charts.append(chart)
    return charts


def _per_stage(kernels: list[dict], device: str, key: str) -> list[int]:
    """``key`` used by each stage, counting the FIFO and width converter in front of it as its own."""
    totals, pending = [], 0
    for kernel in kernels:
        pending += kernel["resources"][device][key]
        if kernel["cycles"] is not None:
            totals.append(pending)
            pending = 0
    return totals
