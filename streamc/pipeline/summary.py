"""The one-screen summary of a build: folding, cycles, verdict, resources."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from ..synth import CAPACITY
from .steps import BuildState


def summary_data(state: BuildState, timings: dict[str, float], failed: dict | None = None) -> dict:
    """What ``reports/summary.json`` holds; ``failed`` (the step and its error) for a build a step stopped."""
    data: dict = {"model": str(state.config.model), "output_dir": str(state.config.output_dir), "steps": timings}
    if failed is not None:
        data["failed"] = failed
    if _folded(state, timings, failed["step"] if failed else None):
        df = state.dataflow
        data["stages"] = [dict(name=st.name, cycles=st.cycles(), in_dtype=st.in_dtype.name, out_dtype=st.out_dtype.name,
                               output_stage=st.output_stage, sources=st.sources, **st.summary()["fields"])
                          for st in df.stages]
        data["host_head_ops"] = [n.op_type for n in df.head.nodes]
        data["host_tail_ops"] = [n.op_type for n in df.tail.nodes]
    if state.rtlsim is not None:
        data["rtlsim"] = state.rtlsim
    if state.synth:
        data["synth"] = {d: {k: r[k] for k in ("lut", "ff", "bram", "dsp")} for d, r in state.synth.items()}
    if state.pnr is not None:
        data["pnr"] = {k: state.pnr[k] for k in ("board", "requested_mhz", "pll_mhz", "fmax_mhz", "timing_met",
                                                 "critical_path_ns", "utilization", "bitstream")}
    return data


def print_summary(state: BuildState, timings: dict[str, float], console: Console, failed: str | None = None) -> None:
    """The design and the results of the steps that ran; ``failed`` names the step that stopped the build."""
    ran = ", ".join(f"{k} {v:.1f}s" for k, v in timings.items())
    outcome = f"[red]failed in step {failed}[/red]; " if failed else ""
    if _folded(state, timings, failed):
        print_design(state, console)
        print_results(state, console)
    console.print(f"Outputs: {state.config.output_dir} ({outcome}steps: {ran}; reports/summary.json)")


def _folded(state: BuildState, timings: dict[str, float], failed: str | None) -> bool:
    """Whether the fold step completed: before, the stages are not yet folded, or folded halfway by a failed plan."""
    return state.dataflow is not None and "fold" in timings and failed != "fold"


def print_design(state: BuildState, console: Console) -> None:
    """The folded design: its stages, what runs on the host, cycles and frames/s."""
    df = state.dataflow
    layers = Table(title="Hardware stages", title_justify="left")
    for column in ("stage", "MH x MW", "in", "weights", "out", "output stage", "PE", "SIMD", "cycles/frame"):
        layers.add_column(column, justify="right" if column in ("PE", "SIMD", "cycles/frame") else "left")
    for st in df.stages:
        row = st.summary()
        layers.add_row(st.name, row["shape"], st.in_dtype.name, row["weights"], st.out_dtype.name, st.output_stage,
                       row["pe"], row["simd"], str(st.cycles()))
    console.print(layers)
    console.print(f"Host head: {' -> '.join(n.op_type for n in df.head.nodes) or '(none)'}   "
                  f"Host float tail: {' -> '.join(n.op_type for n in df.tail.nodes) or '(none)'}")
    predicted = df.cycles_per_frame()
    chosen = " (clock_mhz auto: chosen by the planner)" if state.config.clock_mhz == "auto" else ""
    console.print(f"Predicted: {predicted} cycles/frame = {state.clock_mhz * 1e6 / predicted:,.0f} frames/s "
                  f"at {state.clock_mhz:g} MHz{chosen}")


def print_estimates(state: BuildState, console: Console) -> None:
    """The fold step's resource estimates, per device."""
    table = Table(title="Estimated resources", title_justify="left")
    for column in ("device", "LUT", "FF", "BRAM", "DSP"):
        table.add_column(column, justify="left" if column == "device" else "right")
    for device, estimated in state.resources.items():
        have = CAPACITY[device]
        table.add_row(device, *(f"{estimated[k]} ({100 * estimated[k] / have[k]:.0f}% of {have[k]})" if have[k]
                                else str(estimated[k]) for k in ("lut", "ff", "bram", "dsp")))
    console.print(table)


def print_results(state: BuildState, console: Console) -> None:
    """What the sim, synth and pnr steps found, those of them that ran."""
    sim = state.rtlsim
    if sim is not None:
        verdict = "[green]BIT-EXACT[/green]" if sim["mismatches"] == 0 else f"[red]{sim['mismatches']} MISMATCHES[/red]"
        console.print(f"RTL simulation (Verilator): {sim['frames']} frames, {verdict}; measured "
                      f"{sim['measured_cycles_per_frame']} cycles/frame (predicted {sim['predicted_cycles_per_frame']}), "
                      f"latency {sim['latency_cycles']} cycles"
                      + (f" (predicted {sim['predicted_latency_cycles']})" if "predicted_latency_cycles" in sim else "")
                      + "; end-to-end max |diff| vs reference "
                      f"{sim['end_to_end_max_abs_diff']:.3g}"
                      + (f" ([red]{len(sim['end_to_end_differing_frames'])} frames beyond float32 rounding[/red])"
                         if sim.get("end_to_end_differing_frames") else ""))
        if "accuracy_hw" in sim:
            console.print(f"Accuracy: hardware {sim['accuracy_hw']:.2%}, reference model {sim['accuracy_reference']:.2%} "
                          f"over {sim['frames']} frames")
        if "expected_mismatches" in sim:
            console.print(f"Against verify.expected: {sim['expected_mismatches']} frames differ")
            if "expected_note" in sim:
                console.print(f"  note: {sim['expected_note']}")
    if state.synth:
        table = Table(title="Synthesis (Yosys)", title_justify="left")
        for column in ("device", "LUT", "FF", "BRAM", "DSP"):
            table.add_column(column, justify="left" if column == "device" else "right")
        for device, r in state.synth.items():
            have, estimated = CAPACITY[device], state.resources.get(device, {})
            table.add_row(device, *(f"{r[k]} ({100 * r[k] / have[k]:.0f}% of {have[k]}; est. {estimated.get(k, '?')})"
                                    if have[k] else f"{r[k]} (est. {estimated.get(k, '?')})"
                                    for k in ("lut", "ff", "bram", "dsp")))
        console.print(table)
    if state.pnr is not None:
        p = state.pnr
        verdict = "[green]met[/green]" if p["timing_met"] else "[red]NOT MET[/red]"
        used = ", ".join(f"{cell} {u['used']}/{u['available']} ({100 * u['used'] / u['available']:.0f}%)"
                         for cell, u in p["utilization"].items() if u["used"])
        console.print(f"Place and route (nextpnr, {p['board']}): fmax {p['fmax_mhz']:.1f} MHz for a "
                      f"{p['pll_mhz']:.2f} MHz clock (clock_mhz {p['requested_mhz']:g}): timing {verdict}; critical "
                      f"path {p['critical_path_ns']:.1f} ns (reports/timing_{p['board']}.txt)")
        console.print(f"  used: {used}")
        if p["bitstream"]:
            console.print(f"  bitstream: {p['bitstream']}")
