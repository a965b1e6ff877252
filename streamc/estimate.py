"""``streamc estimate``: folding, cycles and resources per stage in seconds, without generating RTL.

Runs the build's front steps (load .. fold) and applies :mod:`streamc.resources` to every stage
and to the forks, FIFOs and width converters the rtl step would put on the links between them. Writes
``reports/estimate.json`` and ``reports/estimate.md``, with PNG charts when matplotlib is there.
"""

from __future__ import annotations

import copy
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import SimpleNamespace

from .build.config import load_config
from .build.folder import BuildFolder
from .build.steps import STEP_FUNCTIONS, BuildState, stage_components, stitch
from .devices import Device, get_device
from .fifo_sizing import INPUT, fifo_depths
from .folding import cycle_budget
from .hw import LUTStage, MVAULayer, Stage, VVAULayer
from .resources import ChainSpec, ResourceEstimate, Spec, estimate_kernel, spec_of_unit

FRONT_STEPS = ("load", "tidy", "streamline", "to_hw", "fold")
RESOURCES = ("lut", "ff", "bram", "dsp", "spram")


@dataclass
class EstimateRow:
    """One kernel of the design: a hardware stage (all the kernels it is built of), or a fork, width
    converter or FIFO on a link, named as the rtl step names its instance (``fifo_stage3_stage5_1``:
    the FIFO in front of input port 1 of kernel 5, fed by kernel 3, kernels numbered as in the Verilog)."""

    name: str
    kind: str
    cycles: int | None
    folding: dict
    resources: dict[str, ResourceEstimate] = field(default_factory=dict)


def stage_spec(stage: Stage) -> Spec:
    """The resource-model spec of a folded stage: of the kernels the rtl step builds for it
    (:func:`~streamc.build.steps.stage_components`), a :class:`~streamc.resources.ChainSpec` of several."""
    return stage_spec_and_ports(stage)[0]


Port = tuple[int, int]


def stage_spec_and_ports(stage: Stage) -> tuple[Spec, list[Port], Port]:
    """:func:`stage_spec`, with the (elements per beat, bits per element) of each input port of the stage's
    kernels and of its output, as the rtl step links them (:func:`link_specs`)."""
    from .rtl.top import input_ports

    kernels = _unused(stage_components(stage))
    ports = [(elems, width) for _, elems, width in input_ports(kernels[0])]
    return _spec_of_kernels(kernels), ports, (kernels[-1].out_elems, kernels[-1].out_width)


def link_specs(producer: Port, port: Port, depth: int) -> list[Spec]:
    """The width converter and FIFO :class:`~streamc.rtl.top.StreamAccelerator` puts on a link from an
    output ``producer`` to an input ``port``, with a FIFO of ``depth`` beats (0: none)."""
    from .rtl.top import StreamAccelerator

    (elems, width), (port_elems, _) = producer, port
    return [spec_of_unit(unit) for unit in
            _unused([unit for _, unit in StreamAccelerator._link_parts("link", elems, port_elems, width, depth)])]


def fork_spec(producer: Port, readers: int) -> Spec:
    """The fork :class:`~streamc.rtl.top.StreamAccelerator` puts on an output ``producer`` that ``readers``
    (two or more) input ports read."""
    from .rtl.branch import StreamFork

    elems, width = producer
    return spec_of_unit(_unused([StreamFork(elem_width=width, elems=elems, outputs=readers)])[0])


def _spec_of_kernels(kernels: list) -> Spec:
    specs = [spec_of_unit(unit) for unit in kernels]
    return specs[0] if len(specs) == 1 else ChainSpec(kernels=tuple(specs))


def _folding(stage: Stage) -> dict:
    if isinstance(stage, MVAULayer):
        return {"pe": stage.pe, "simd": stage.simd, "ram_style": stage.ram_style,
                **({"ram_style_thresholds": stage.ram_style_thresholds} if stage.threshold_rom else {}),
                "res_type": stage.res_type}
    if isinstance(stage, VVAULayer):
        return {"simd": stage.simd, "ram_style": stage.ram_style, "res_type": stage.res_type}
    if isinstance(stage, LUTStage):
        return {"elems": stage.in_elems, "ram_style": stage.ram_style}
    return {"elems": stage.in_elems}


#: What a link's kernel shows as its folding.
_LINK_FOLDING = ("depth", "in_elems", "out_elems", "outputs")


def kernel_rows(stages: list[Stage], fifo_depth: int) -> list[tuple[EstimateRow, Spec]]:
    """Every kernel the rtl step generates, in its order, with its spec: per stage its kernels, and
    per link the fork, width converter and FIFO :class:`~streamc.rtl.top.StreamAccelerator` puts
    there, with the depths :func:`~streamc.fifo_sizing.fifo_depths` gives for ``fifo_depth``.

    ``stages`` is a dataflow's whole stage list, or a run of consecutive stages of a chain (the
    planner prices one segment so): a source before the run counts as the hardware input.
    """
    stages = _renumbered(stages)
    depths = fifo_depths(SimpleNamespace(stages=stages), fifo_depth)
    kernels_of = [_unused(stage_components(stage)) for stage in stages]
    top = stitch(stages, kernels_of, depths)
    first_of = {id(kernels[0]): index for index, kernels in enumerate(kernels_of)}
    parts = {id(unit) for kernels in kernels_of for unit in kernels}
    rows = []
    for name, unit in top._components:
        _unused([unit])
        if id(unit) in first_of:
            stage = stages[first_of[id(unit)]]
            rows.append((EstimateRow(stage.name, type(stage).__name__, stage.cycles(), _folding(stage)),
                         _spec_of_kernels(kernels_of[first_of[id(unit)]])))
        elif id(unit) not in parts:
            spec = spec_of_unit(unit)
            folding = {key: value for key, value in asdict(spec).items() if key in _LINK_FOLDING}
            rows.append((EstimateRow(name, type(unit).__name__, None, folding), spec))
    _unused([top])
    return rows


def _renumbered(stages: list[Stage]) -> list[Stage]:
    """``stages`` with sources counted from the first of them; any source before it: the input."""
    offset = max(stages[0].sources) + 1
    if offset <= 0:
        return stages
    renumbered = []
    for stage in stages:
        stage = copy.copy(stage)
        stage.sources = [source - offset if source >= offset else INPUT for source in stage.sources]
        renumbered.append(stage)
    return renumbered


def _unused(units: list) -> list:
    """Components built only to read their parameters: never elaborated, so Amaranth must not warn."""
    for unit in units:
        unit._MustUse__used = True
    return units


def estimate_design(stages: list[Stage], devices: list[Device], fifo_depth: int) -> list[EstimateRow]:
    """Resources of every kernel on every device."""
    rows = kernel_rows(stages, fifo_depth)
    for row, spec in rows:
        for device in devices:
            row.resources[device.name] = estimate_kernel(spec, device.family, dsp=device.dsp > 0)
    return [row for row, _ in rows]


def run_estimate(config_path: Path, *, device_names: list[str] | None = None) -> dict:
    """Fold the model as ``config_path`` says and estimate it; returns what estimate.json holds."""
    config = load_config(config_path)
    devices = [get_device(name) for name in (device_names or config.devices)]
    state = BuildState(config=config, folder=BuildFolder(config.output_dir), config_path=str(config_path))
    for name in FRONT_STEPS:
        STEP_FUNCTIONS[name](state)
    dataflow = state.dataflow
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
    folder = state.folder
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
