"""The build steps, in pipeline order. Each takes the build state and writes its results.

A step reads what earlier steps left in :class:`BuildState` and adds its own product; every
file goes through the :class:`~streamc.pipeline.folder.BuildFolder`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field

import numpy as np
from onnx import helper

from ..devices import get_device
from ..errors import BuildError, ConfigError, FoldingError
from ..execute import execute
from ..fifo_sizing import fifo_depths
from ..folding import apply_folding, fold_streaming_stages, fold_vector_units
from ..frontend.load import load_onnx
from ..hw import Dataflow, to_hw
from ..ir import Graph
from ..kernels import estimate_design, stitch
from ..latency import predicted_latency, stage_latencies
from ..planner import LIMITED, plan_folding
from ..progress import relay
from ..protocol import FrameFormat
from ..resources import ResourceEstimate
from ..stages import Stage
from ..timing import Clock
from ..transforms.streamline import streamline
from ..transforms.tidy import tidy
from .advice import fastest_that_fits, timing_advice
from .config import BuildConfig
from .folder import BuildFolder
from .verdict import (END_TO_END_RTOL, end_to_end_differing_frames, expected_differences, onnxruntime_note,
                      output_steps)

TOP = "streamc_top"
RANDOM_FRAMES = 32


@dataclass
class BuildState:
    config: BuildConfig
    folder: BuildFolder
    config_path: str
    graphs: dict[str, Graph] = field(default_factory=dict)
    dataflow: Dataflow | None = None
    verilog: str | None = None
    fifo_depths: list[list[int]] = field(default_factory=list)
    rtlsim: dict | None = None
    synth: dict[str, dict] = field(default_factory=dict)
    pnr: dict | None = None
    resources: dict[str, dict] = field(default_factory=dict)
    frames: np.ndarray | None = None
    expected: np.ndarray | None = None
    labels: np.ndarray | None = None
    #: The clock the fold step pipelined and planned for: the config's clock_mhz, or the one it chose (auto).
    clock_mhz: float | None = None
    #: Where the sim step's shards run: a Dask scheduler's address, or None for local processes. Not in the
    #: config: where a build runs changes nothing it makes.
    scheduler: str | None = None


Step = Callable[[BuildState], None]
STEP_FUNCTIONS: dict[str, Step] = {}


def step(name: str) -> Callable[[Step], Step]:
    def register(function: Step) -> Step:
        STEP_FUNCTIONS[name] = function
        return function

    return register


@step("load")
def load_step(state: BuildState) -> None:
    graph = state.graphs["load"] = load_onnx(state.config.model)
    state.folder.write_model("load", graph)
    if "sim" in state.config.steps:
        # Read the verification data now: a bad file should stop the build before hours of work.
        state.frames = _frames(state, graph)
        state.expected = _expected(state, graph, len(state.frames))
        state.labels = _labels(state, len(state.frames))


@step("tidy")
def tidy_step(state: BuildState) -> None:
    state.graphs["tidy"] = tidy(state.graphs["load"])
    state.folder.write_model("tidy", state.graphs["tidy"])


@step("streamline")
def streamline_step(state: BuildState) -> None:
    state.graphs["streamline"] = streamline(state.graphs["tidy"])
    state.folder.write_model("streamline", state.graphs["streamline"])


@step("to_hw")
def to_hw_step(state: BuildState) -> None:
    state.dataflow = to_hw(state.graphs["streamline"])


@step("fold")
def fold_step(state: BuildState) -> None:
    config, dataflow = state.config, state.dataflow
    layers = dataflow.layers
    # Before planning: each folding is priced as it is built for the device family, and with the registers its
    # clock needs (an auto clock: each candidate's, as the planner tries it).
    family = get_device(config.devices[0] if config.devices else "ice40-up5k").family
    for stage in dataflow.stages:
        stage.build_for(family)
    state.clock_mhz = None if config.clock_mhz == "auto" else config.clock_mhz
    if config.pipelining == "clock" and state.clock_mhz is not None:
        clock = Clock(mhz=state.clock_mhz, family=family)
        for stage in dataflow.stages:
            stage.pipeline_for(clock)
    if config.folding is not None:
        apply_folding(layers, {k: v.model_dump() for k, v in config.folding.items()}, source=state.config_path,
                      tables=dataflow.tables, thresholded=_thresholded(dataflow))
        fold_vector_units(dataflow.stages, max(layer.cycles() for layer in layers) if layers else 0)
    else:
        try:
            plan = plan_folding(dataflow, config)
            state.clock_mhz = plan.clock_mhz or state.clock_mhz
        except FoldingError as exc:
            raise FoldingError(f"{exc}{fastest_that_fits(dataflow, config)}") from None
    fold_streaming_stages(dataflow)
    state.folder.write_report("folding", folding_of(dataflow))
    cycles = dataflow.cycles_per_frame()
    rows = estimate_design(dataflow.stages, [get_device(d) for d in config.devices], config.fifo_depth)
    state.resources = {d: sum((row.resources[d] for row in rows), ResourceEstimate()).to_dict() for d in config.devices}
    if config.folding is not None:
        _check_explicit_folding_fits(state.resources)
    latencies = stage_latencies(dataflow, fifo_depths(dataflow, config.fifo_depth))
    state.folder.write_report("estimates", {
        "clock_mhz": state.clock_mhz,
        "clock_chosen": config.clock_mhz == "auto",
        "predicted_cycles_per_frame": cycles,
        "predicted_fps": state.clock_mhz * 1e6 / cycles,
        "predicted_latency_cycles": latencies[-1].first,
        "target_fps": config.target_fps,
        "stages": [{**_stage_estimate(stage), "latency": asdict(latency)}
                   for stage, latency in zip(dataflow.stages, latencies)],
        "resources": state.resources,
    })


def _check_explicit_folding_fits(resources: dict[str, dict]) -> None:
    """An explicit folding is built as given, but not onto no device at all: one that needs more LUTs, flip-flops,
    block RAMs or DSPs than every device of ``devices`` has is refused with the numbers (the planner never
    gives one)."""
    if not resources:
        return  # no device named: nothing to hold it against
    overs = {}
    for name, used in resources.items():
        device = get_device(name)
        over = [f"{used[key]:,} {key.upper()} of {getattr(device, key):,}" for key in LIMITED
                if used[key] > getattr(device, key)]
        if not over:
            return
        overs[name] = over
    raise FoldingError("folding: the explicit folding needs more than the device has: "
                       + "; ".join(f"{name}: {', '.join(over)}" for name, over in overs.items())
                       + " (fold the largest layers more: a smaller pe or simd, or ask target_fps or budget)")


def folding_of(dataflow: Dataflow) -> dict[str, dict]:
    """The folded design's choices in the shape a config's ``folding`` takes, to pin or edit them."""
    return {
        **{layer.name: {"pe": layer.pe, "simd": layer.simd, "ram_style": layer.ram_style,
                        "ram_style_thresholds": layer.ram_style_thresholds, "res_type": layer.res_type,
                        **layer.pipelining(), **layer.adder_choice()}
           for layer in dataflow.layers},
        **{table.name: {"ram_style": table.ram_style} for table in dataflow.tables},
        **{stage.name: {"threshold_style": stage.folding()["threshold_style"]} for stage in _thresholded(dataflow)}}


def _thresholded(dataflow: Dataflow) -> list[Stage]:
    """The stages whose thresholds may be searched (vector units, residual adds): a folding may name them."""
    return [stage for stage in dataflow.stages
            if hasattr(stage, "threshold_style") and getattr(stage, "thresholds", None) is not None]


def accelerator_top(dataflow: Dataflow, fifo_depth: int):
    """The accelerator's top component the rtl step writes as Verilog, and its links' FIFO depths."""
    depths = fifo_depths(dataflow, fifo_depth)
    return stitch(dataflow.stages, [stage.components() for stage in dataflow.stages], depths), depths


def _stage_estimate(stage: Stage) -> dict:
    common = dict(name=stage.name, source=stage.source, cycles=stage.cycles(), in_dtype=stage.in_dtype.name,
                  out_dtype=stage.out_dtype.name, output_stage=stage.output_stage, in_elems=stage.in_elems,
                  out_elems=stage.out_elems)
    return {**stage.report(), **common}


@step("rtl")
def rtl_step(state: BuildState) -> None:
    from ..rtl.rom_files import RomFiles
    from ..rtl.top import to_verilog

    top, state.fifo_depths = accelerator_top(state.dataflow, state.config.fifo_depth)
    roms = RomFiles()
    state.verilog = to_verilog(top, name=TOP, roms=roms)
    for stale in state.folder.path("verilog", "x").parent.glob("*.hex"):
        if stale.name not in roms.files:
            stale.unlink()
    for name, data in roms.files.items():
        state.folder.write_bytes("verilog", name, data=data)
    state.folder.write_text("verilog", f"{TOP}.v", text=state.verilog)
    # The ROM files after the Verilog, for tools that take data files in a file list (Vivado, Quartus).
    state.folder.write_text("verilog", "filelist.f", text="".join(f"{name}\n" for name in [f"{TOP}.v", *roms.files]))


def _load_npy(path, key: str) -> np.ndarray:
    try:
        array = np.load(path)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"verify.{key}: cannot read '{path}' as .npy: {exc}") from None
    if not (np.issubdtype(array.dtype, np.number) or array.dtype == np.bool_):
        raise ConfigError(f"verify.{key}: '{path}' holds {array.dtype.str}, not numbers; give a numeric array")
    return array


def _frames(state: BuildState, graph: Graph) -> np.ndarray:
    verify = state.config.verify
    given = graph.inputs[0]
    shape, dtype = given.shape, helper.tensor_dtype_to_np_dtype(given.elem_type)
    if verify.inputs is None:
        rng = np.random.default_rng(verify.seed)
        size = (verify.frames or RANDOM_FRAMES, *shape[1:])
        if np.issubdtype(dtype, np.integer):
            info = np.iinfo(dtype)
            return rng.integers(info.min, info.max, size=size, endpoint=True).astype(dtype)
        return rng.uniform(-1, 1, size=size).astype(dtype)
    frames = _load_npy(verify.inputs, "inputs")
    return model_frames(frames, graph, key="verify.inputs", origin=f" of '{verify.inputs}'", count=verify.frames)


def model_frames(frames: np.ndarray, graph: Graph, *, key: str, origin: str = "", count: int | None = None) -> np.ndarray:
    """``frames`` (N, *the model's input shape, with or without its batch axis of 1) as the model's input
    takes them, the first ``count`` of them (None: all).

    Raises
    ------
    ConfigError
        Naming ``key`` (and the frames' ``origin``) when the frames do not fit the input, are not finite
        or do not fit its integer type.
    """
    given = graph.inputs[0]
    shape, dtype = given.shape, helper.tensor_dtype_to_np_dtype(given.elem_type)
    if frames.shape[1:] == tuple(shape):
        frames = frames.reshape(frames.shape[0], *shape[1:])
    if frames.shape[1:] != tuple(shape[1:]):
        raise ConfigError(f"{key}: frames of shape {frames.shape[1:]} do not fit the model input "
                          f"{given.name!r} of shape {tuple(shape)} (give an array of shape "
                          f"(N, {', '.join(map(str, shape[1:]))}))")
    frames = frames[:count] if count else frames
    flat = frames.reshape(len(frames), int(np.prod(frames.shape[1:])))
    # A sum carries a NaN or an infinity through in one pass, with no mask of the whole set (predict's frames are
    # read once more, by the head: this pass is a fifth of its time on TFC); the mask finds which frame, and
    # clears a sum that only overflowed.
    with np.errstate(over="ignore"):
        overflowed = np.issubdtype(flat.dtype, np.floating) and not np.isfinite(flat.sum())
    if overflowed:
        finite = np.isfinite(flat).all(axis=1)
        if not finite.all():
            bad = int(np.argmin(finite))
            what = "NaN" if np.isnan(flat[bad]).any() else "infinity"
            raise ConfigError(f"{key}: frame {bad}{origin} holds {what}; frames must be finite")
    if np.issubdtype(dtype, np.integer) and not np.array_equal(frames, frames.astype(dtype)):
        raise ConfigError(f"{key}: the model input {given.name!r} is {np.dtype(dtype).name}, and the frames "
                          "hold values it cannot represent")
    return frames.astype(dtype, copy=False)


def _expected(state: BuildState, graph: Graph, count: int) -> np.ndarray | None:
    path = state.config.verify.expected
    if path is None:
        return None
    expected = _load_npy(path, "expected")
    size = int(np.prod(graph.outputs[0].shape[1:]))
    if len(expected) < count or expected[0].size != size:
        raise ConfigError(f"verify.expected: '{path}' holds {len(expected)} outputs of {expected[0].size} values; "
                          f"need {count} of {size}")
    return expected[:count].reshape(count, -1)


def _labels(state: BuildState, count: int) -> np.ndarray | None:
    path = state.config.verify.labels
    if path is None:
        return None
    labels = _load_npy(path, "labels").reshape(-1)
    if len(labels) < count:
        raise ConfigError(f"verify.labels: '{path}' holds {len(labels)} labels; need one per frame ({count})")
    return labels[:count]


def expected_hw_outputs(dataflow: Dataflow, reference_values: dict[str, np.ndarray]) -> np.ndarray:
    """The integers the hardware must produce, read off the reference execution of the model."""
    boundary = dataflow.boundary
    value = reference_values[boundary["tensor"]].astype(np.float64)
    channels = (-1,) + (1,) * (value.ndim - 2)
    exact = value / np.reshape(boundary["scale"], channels) + np.reshape(boundary["offset"], channels)
    integers = dataflow.to_output_stream_order(np.rint(exact))
    if not np.allclose(dataflow.to_output_stream_order(exact), integers, atol=1e-3):
        raise BuildError(f"tensor {boundary['tensor']!r} of the reference is not an integer multiple of its scale; "
                         "the hardware boundary was derived wrongly (a streamc bug)")
    return integers.astype(np.int64)


def _timeout_cycles(dataflow: Dataflow, frames: int, verify) -> int:
    """Generous for random stalls, yet a deadlock ends the simulation in seconds."""
    slowdown = 1 / ((1 - verify.input_gap_prob) * (1 - verify.output_stall_prob))
    return int(10_000 + 4 * slowdown * frames * dataflow.cycles_per_frame())


@step("sim")
def sim_step(state: BuildState) -> None:
    from ..sim.runner import simulate

    dataflow, verify, folder = state.dataflow, state.config.verify, state.folder
    original, tidied = state.graphs["load"], state.graphs["tidy"]
    frames = state.frames
    n = len(frames)
    in_name, out_name = original.inputs[0].name, original.outputs[0].name
    reference = execute(original, {in_name: frames})[out_name]
    expected_hw = expected_hw_outputs(dataflow, execute(tidied, {in_name: frames}, keep_all=True))
    codes = dataflow.input_codes(frames)
    send = relay()
    send("building the Verilator model, or reusing its last build")

    def progress(done: int, cycles: int) -> None:
        send(f"{done:,} of {n:,} frames, {cycles:,} cycles")

    first, last = dataflow.stages[0], dataflow.stages[-1]
    result = simulate(verilog=folder.path("verilog", f"{TOP}.v"), top=TOP, build_dir=folder.path("sim_build", "x").parent,
                      in_elems=first.in_elems, in_width=first.in_dtype.bitwidth, out_elems=last.out_elems,
                      out_width=last.out_dtype.bitwidth, frames=first.in_dtype.to_hw(codes),
                      expected=last.out_dtype.to_hw(expected_hw), n_out=last.out_count, seed=verify.seed,
                      input_gap_prob=verify.input_gap_prob, output_stall_prob=verify.output_stall_prob,
                      timeout_cycles=_timeout_cycles(dataflow, n, verify), shards=verify.shards,
                      scheduler=state.scheduler, progress=progress)
    hw = last.out_dtype.from_hw(result.outputs)
    outputs = dataflow.outputs_of(hw)
    folder.save_array("reports", "rtlsim_outputs.npy", array=outputs)
    folder.save_array("reports", "rtlsim_hw_outputs.npy", array=hw)

    report = dict(frames=n, mismatches=int(result.mismatches),
                  first_mismatch=result.first_mismatch._asdict() if result.first_mismatch else None,
                  measured_cycles_per_frame=result.measured_cycles_per_frame,
                  predicted_cycles_per_frame=dataflow.cycles_per_frame(), latency_cycles=result.latency_cycles,
                  predicted_latency_cycles=predicted_latency(dataflow, state.fifo_depths),
                  simulated_cycles=result.simulated_cycles, sim_seconds=round(result.sim_seconds, 3),
                  shards=result.shards,
                  fifo_depths=state.fifo_depths, host_tail_ops=[n.op_type for n in dataflow.tail.nodes],
                  end_to_end_max_abs_diff=float(np.abs(outputs - reference).max()),
                  input_gap_prob=verify.input_gap_prob, output_stall_prob=verify.output_stall_prob)
    report["end_to_end_differing_frames"] = end_to_end_differing_frames(outputs, reference)
    report["end_to_end_rtol"] = END_TO_END_RTOL
    if state.expected is not None:
        differing = expected_differences(outputs, state.expected, output_steps(dataflow, hw))
        report["expected_mismatches"] = len(differing)
        report["expected_differing_frames"] = differing
        if differing and (note := onnxruntime_note(original)):
            report["expected_note"] = note
    if state.labels is not None:
        report["accuracy_hw"] = float(np.mean(np.argmax(outputs.reshape(n, -1), axis=1) == state.labels))
        report["accuracy_reference"] = float(np.mean(np.argmax(reference.reshape(n, -1), axis=1) == state.labels))
    state.rtlsim = report
    folder.write_report("rtlsim", report)


@step("synth")
def synth_step(state: BuildState) -> None:
    from ..synth import synthesize

    for device in state.config.devices:
        result = synthesize(verilog=state.folder.path("verilog", f"{TOP}.v"), top=TOP, device=device,
                            workdir=state.folder.path("synth", device, "x").parent)
        state.synth[device] = asdict(result)
        state.folder.write_report(f"synth_{device}", state.synth[device])


@step("pnr")
def pnr_step(state: BuildState) -> None:
    from ..pnr import build_board, require_timing, timing_report

    config, folder = state.config, state.folder
    result = build_board(accelerator_verilog=folder.path("verilog", f"{TOP}.v"),
                         frame_format=FrameFormat.from_dataflow(state.dataflow), board=config.board,
                         clock_mhz=state.clock_mhz, seed=config.pnr_seed, seeds=config.pnr_seeds,
                         workdir=folder.path("pnr", config.board, "x").parent)
    state.pnr = asdict(result)
    if result.timing_met:
        state.pnr["bitstream"] = folder.write_bytes("bitstream", f"{config.board}{result.bitstream.suffix}",
                                                    data=result.bitstream.read_bytes())
    folder.write_report(f"pnr_{config.board}", state.pnr)
    folder.write_text("reports", f"timing_{config.board}.txt", text=timing_report(result))
    # The reports come first: a build that misses timing still says where the time goes.
    try:
        require_timing(result)
    except BuildError as exc:
        raise BuildError(f"{exc}; {timing_advice(result.fmax_mhz, state.dataflow.cycles_per_frame(), config)}") from None
