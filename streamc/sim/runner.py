"""Simulate a stream accelerator's Verilog on Verilator, frame by frame.

:func:`simulate` builds the Verilog with Verilator (reusing the build while the Verilog is
unchanged), streams frames through it with an engine, and compares what comes out with the expected
outputs. The engines run the same phases with the same random semantics and write the same files
(:mod:`streamc.sim.run_files`), which are judged here:

- ``harness`` (the default): a C++ program built with the model (:mod:`streamc.sim.harness`); no
  Python runs while it simulates.
- ``cocotb``: the cocotb test :mod:`streamc.sim.stream_tb`, a Python call per cycle.

Data goes to and from the simulation through files in the build folder, so frame counts are not
limited by the size of the environment. One build folder serves one simulation at a time.
"""

import json
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np

from streamc.errors import BuildError, ConfigError
from streamc.rtl.rom_files import copy_rom_files

from . import cocotb_engine, harness, run_files
from .beats import pack_words, unpack_words, words_per_beat
from .toolchain import BUILD_TIMEOUT_S, RUN_TIMEOUT_S, last_line

#: How each engine builds the model (returning what its run needs) and runs it on a run folder.
ENGINES = {
    "harness": (harness.build, harness.run),
    "cocotb": (cocotb_engine.build_stream, cocotb_engine.run_stream),
}
#: Frames re-sent at full rate to measure cycles per frame and latency.
FULL_RATE_FRAMES = 32
RESET_CYCLES = 4
_PHASES = {"randomized": "random gaps and back-pressure", "full_rate": "full rate"}


class Mismatch(NamedTuple):
    """The first output element that differs from the expected one."""

    frame: int
    element: int
    got: int
    expected: int


@dataclass
class SimResult:
    """What a simulation produced and measured.

    Attributes
    ----------
    outputs : numpy.ndarray
        uint64, shape ``(frames, n_out)``: the raw output bit patterns of the randomized run.
    mismatches : int
        Frames whose output differed from the expected one, in the randomized run or in
        the full-rate re-run; 0 when no expected outputs were given.
    first_mismatch : Mismatch or None
        The first differing element, preferring the randomized run.
    frames : int
        Frames streamed in the randomized run.
    measured_cycles_per_frame : float or None
        Median clock cycles between successive frames' last output beats at full rate
        (None when only one frame was simulated).
    latency_cycles : int
        Cycles from a frame's first input beat accepted to its first output beat, through
        an empty pipeline.
    sim_seconds : float
        Wall-clock time of the simulation run, build excluded.
    simulated_cycles : int
        Clock cycles simulated after reset, both runs together.
    """

    outputs: np.ndarray
    mismatches: int
    first_mismatch: Mismatch | None
    frames: int
    measured_cycles_per_frame: float | None
    latency_cycles: int
    sim_seconds: float
    simulated_cycles: int


def simulate(
    *,
    verilog: Path,
    top: str = "streamc_top",
    build_dir: Path,
    in_elems: int,
    in_width: int,
    out_elems: int,
    out_width: int,
    frames: np.ndarray,
    expected: np.ndarray | None,
    n_out: int,
    seed: int = 0,
    input_gap_prob: float = 0.3,
    output_stall_prob: float = 0.3,
    timeout_cycles: int | None = None,
    build_timeout_s: float | None = BUILD_TIMEOUT_S,
    run_timeout_s: float | None = RUN_TIMEOUT_S,
    engine: str = "harness",
    shards: int = 1,
) -> SimResult:
    """Stream ``frames`` through the Verilog module ``top`` and compare the outputs.

    The module must have ports ``clk``, ``rst`` (synchronous, active high),
    ``s_axis_tdata`` (``in_elems * in_width`` bits), ``s_axis_tvalid``, ``s_axis_tready``,
    ``m_axis_tdata`` (``out_elems * out_width`` bits), ``m_axis_tvalid`` and
    ``m_axis_tready``. Element ``j`` of a beat sits at bits ``[j*width, (j+1)*width)``.

    All frames are first streamed with random input gaps and output back-pressure; then
    up to 32 of them are streamed again at full rate to measure cycles per frame and
    latency.

    Parameters
    ----------
    verilog
        The Verilog file, with the ROM files it reads (:mod:`streamc.rtl.rom_files`) beside it.
    top
        Name of the top module.
    build_dir
        Folder for the Verilator builds (a folder for each engine) and the data files (``run``); a
        build is reused while the Verilog, the top and the tool versions stay the same.
    in_elems, in_width, out_elems, out_width
        Elements per beat and bits per element of the input and output streams.
    frames
        Raw unsigned element bit patterns, shape ``(N, n_in)``.
    expected
        Expected raw outputs, shape ``(N, n_out)``, or None to only collect outputs.
    n_out
        Output elements per frame.
    seed
        Seed of the random gaps and back-pressure.
    input_gap_prob, output_stall_prob
        Probability per cycle of offering no input beat, and of refusing an output beat.
    timeout_cycles
        Cycle budget of each phase; by default 1000 + 50 per beat of that phase.
    build_timeout_s, run_timeout_s
        Wall-clock limits in seconds of the Verilator build and of the simulation (None: no
        limit). The cocotb engine keeps them only in the main thread, with no other ``SIGALRM``
        timer running.
    engine
        ``"harness"`` or ``"cocotb"`` (see the module's description).
    shards
        Runs of the one built model side by side, each on its share of the frames (consecutive frames,
        its own random gaps and stalls from ``seed`` plus its index, its own full-rate re-run); their
        outputs are merged in frame order, cycles per frame is the median over every shard's frames and
        latency the first shard's. The harness engine only.

    Returns
    -------
    SimResult

    Raises
    ------
    ConfigError
        If the shapes, widths, values or probabilities are inconsistent.
    BuildError
        If a tool is missing (the message says what to install), Verilator cannot build the
        design, a limit is exceeded, or the simulation fails (a deadlock that exhausts the cycle
        budget, a missing port): the message is one line and says how far it got.
    """
    frames = np.asarray(frames)
    _check_stream_arguments(
        in_elems=in_elems,
        in_width=in_width,
        out_elems=out_elems,
        out_width=out_width,
        frames=frames,
        expected=expected,
        n_out=n_out,
        input_gap_prob=input_gap_prob,
        output_stall_prob=output_stall_prob,
        timeout_cycles=timeout_cycles,
    )
    if engine not in ENGINES:
        raise ConfigError(f"engine must be one of {', '.join(map(repr, ENGINES))}, not {engine!r}")
    if shards < 1 or (shards > 1 and engine != "harness"):
        raise ConfigError(f"shards must be a positive count, and more than 1 only with the harness engine; got "
                          f"{shards!r} with {engine!r}")
    build, run = ENGINES[engine]
    build_dir = Path(build_dir).resolve()
    verilog = Path(verilog).resolve()
    built = build(verilog=verilog, top=top, build_dir=build_dir / engine, timeout_s=build_timeout_s)
    parts = np.array_split(np.arange(len(frames)), min(shards, len(frames)))

    def run_shard(index: int, rows: np.ndarray):
        """One shard's frames through its own copy of the model: outputs, full-rate outputs and result."""
        run_dir = build_dir / ("run" if len(parts) == 1 else f"run_{index}")
        where = "" if len(parts) == 1 else f" (shard {index}: frames {rows[0]}-{rows[-1]})"
        geometry = _Geometry(frames=len(rows), in_beats=frames.shape[1] // in_elems, out_beats=n_out // out_elems,
                             full_rate_frames=min(len(rows), FULL_RATE_FRAMES), timeout_cycles=timeout_cycles)
        _prepare_run(run_dir, verilog=verilog, words=pack_words(frames[rows], in_elems, in_width), config={
            "in_words": words_per_beat(in_elems, in_width),
            "out_words": words_per_beat(out_elems, out_width),
            "in_beats_per_frame": geometry.in_beats,
            "out_beats_per_frame": geometry.out_beats,
            "frames": geometry.frames,
            "full_rate_frames": geometry.full_rate_frames,
            # Any Python int seeds the same run; the harness takes 64 bits. Each shard draws its own gaps.
            "seed": (seed + index) % (1 << 64),
            "input_gap_prob": float(input_gap_prob),
            "output_stall_prob": float(output_stall_prob),
            "randomized_budget": geometry.budget("randomized"),
            "full_rate_budget": geometry.budget("full_rate"),
            "reset_cycles": RESET_CYCLES,
        })
        log_path, _ = run(built, top=top, run_dir=run_dir, timeout_s=run_timeout_s)
        result_path = run_dir / run_files.RESULT
        if not result_path.exists():
            raise BuildError(f"simulation of {top!r} ended without a result{where}: {last_line(log_path)}; "
                             f"see {log_path}")
        result = json.loads(result_path.read_text())
        if result["failure"] is not None:
            raise BuildError(f"simulation of {top!r} failed after {result['cycles']} cycles{where}: "
                             f"{geometry.failure(result)}")

        def outputs_of(name: str) -> np.ndarray:
            words = np.fromfile(run_dir / name, dtype="<u4")
            return unpack_words(words, out_elems, out_width).reshape(-1, n_out)

        return outputs_of(run_files.OUTPUTS), outputs_of(run_files.RERUN_OUTPUTS), result

    started = time.perf_counter()
    if len(parts) == 1:
        shard_results = [run_shard(0, parts[0])]
    else:  # the harness runs as a process of its own: threads only wait for them
        with ThreadPoolExecutor(len(parts)) as pool:
            shard_results = list(pool.map(run_shard, range(len(parts)), parts))
    sim_seconds = time.perf_counter() - started

    mismatches, first_mismatch, gaps = 0, None, []
    for rows, (outputs, rerun_outputs, result) in zip(parts, shard_results):
        count, first = _compare(outputs, rerun_outputs, None if expected is None else expected[rows])
        mismatches += count
        if first_mismatch is None and first is not None:
            first_mismatch = first._replace(frame=first.frame + int(rows[0]))
        ends = result["frame_end_cycles"]
        gaps += [later - earlier for earlier, later in zip(ends, ends[1:])]
    first_result = shard_results[0][2]
    return SimResult(
        outputs=np.concatenate([outputs for outputs, _, _ in shard_results]),
        mismatches=mismatches,
        first_mismatch=first_mismatch,
        frames=len(frames),
        measured_cycles_per_frame=float(statistics.median(gaps)) if gaps else None,
        latency_cycles=first_result["first_output_cycle"] - first_result["first_input_cycle"],
        sim_seconds=sim_seconds,
        simulated_cycles=sum(result["cycles"] for _, _, result in shard_results),
    )


@dataclass(frozen=True)
class _Geometry:
    """The frames and beats of the two phases of a run."""

    frames: int
    in_beats: int
    out_beats: int
    full_rate_frames: int
    timeout_cycles: int | None

    def frame_count(self, phase: str) -> int:
        return self.frames if phase == "randomized" else self.full_rate_frames

    def budget(self, phase: str) -> int:
        """The phase's cycle budget: by default 1000 + 50 per beat."""
        return self.timeout_cycles or 1000 + 50 * self.frame_count(phase) * (self.in_beats + self.out_beats)

    def failure(self, result: dict) -> str:
        """What went wrong in the failed phase of an engine's ``result``, and how far it got."""
        phase = result["phase"]
        frames = self.frame_count(phase)
        inputs, outputs = frames * self.in_beats, frames * self.out_beats
        if result["failure"] == "timeout":
            detail = (f"did not finish within {self.budget(phase)} cycles: {result['inputs_accepted']} of {inputs} "
                      f"input beats accepted, {result['outputs_received']} of {outputs} output beats received")
        else:
            detail = f"more than the {outputs} output beats expected arrived"
        whole = result["outputs_received"] // self.out_beats
        return f"{_PHASES[phase]}, {frames} frames ({whole} came out whole): {detail}"


def _prepare_run(run_dir: Path, *, verilog: Path, words: np.ndarray, config: dict) -> None:
    """The run folder with the input beats, the configuration and the ROM files, and no earlier run's results."""
    run_dir.mkdir(parents=True, exist_ok=True)
    for name in (run_files.OUTPUTS, run_files.RERUN_OUTPUTS, run_files.RESULT):
        (run_dir / name).unlink(missing_ok=True)
    # The model reads its ROM files when it starts, from the folder it runs in.
    copy_rom_files(verilog, run_dir)
    words.tofile(run_dir / run_files.FRAMES)
    run_files.write_config(run_dir / run_files.CONFIG, config)


def _check_stream_arguments(
    *,
    in_elems: int,
    in_width: int,
    out_elems: int,
    out_width: int,
    frames: np.ndarray,
    expected: np.ndarray | None,
    n_out: int,
    input_gap_prob: float,
    output_stall_prob: float,
    timeout_cycles: int | None,
) -> None:
    for name, value in [("in_elems", in_elems), ("out_elems", out_elems)]:
        if value < 1:
            raise ConfigError(f"{name} must be at least 1, not {value!r}")
    for name, value in [("in_width", in_width), ("out_width", out_width)]:
        if not 1 <= value <= 64:
            raise ConfigError(f"{name} must be between 1 and 64 bits, not {value!r}")
    if frames.ndim != 2 or len(frames) == 0:
        raise ConfigError(f"frames must have shape (N, n_in) with N >= 1, not {frames.shape!r}")
    n_in = frames.shape[1]
    if n_in == 0 or n_in % in_elems:
        raise ConfigError(f"n_in (frames.shape[1]) must be a positive multiple of in_elems={in_elems}, not {n_in}")
    if n_out <= 0 or n_out % out_elems:
        raise ConfigError(f"n_out must be a positive multiple of out_elems={out_elems}, not {n_out}")
    _check_bit_patterns("frames", frames, in_width)
    if expected is not None:
        if expected.shape != (len(frames), n_out):
            raise ConfigError(f"expected must have shape {(len(frames), n_out)!r}, not {expected.shape!r}")
        _check_bit_patterns("expected", expected, out_width)
    for name, value in [("input_gap_prob", input_gap_prob), ("output_stall_prob", output_stall_prob)]:
        if not 0 <= value < 1:
            raise ConfigError(f"{name} must be in [0, 1), not {value!r}")
    if timeout_cycles is not None and timeout_cycles < 1:
        raise ConfigError(f"timeout_cycles must be positive or None, not {timeout_cycles!r}")


def _check_bit_patterns(name: str, values: np.ndarray, width: int) -> None:
    if values.dtype.kind not in "ui":
        raise ConfigError(f"{name} must hold unsigned integer bit patterns, not dtype {values.dtype}")
    if values.size and (values.min() < 0 or int(values.max()) >> width):
        raise ConfigError(
            f"{name} must hold raw {width}-bit patterns in [0, {(1 << width) - 1}], "
            f"not values in [{values.min()}, {values.max()}]; pack signed values first"
        )


def _compare(
    outputs: np.ndarray, rerun_outputs: np.ndarray, expected: np.ndarray | None
) -> tuple[int, Mismatch | None]:
    """Count frames differing from ``expected`` in either run and find the first difference."""
    if expected is None:
        return 0, None
    expected = expected.astype(np.uint64)
    differs = outputs != expected
    rerun_differs = rerun_outputs != expected[: len(rerun_outputs)]
    bad_frames = differs.any(axis=1)
    bad_frames[: len(rerun_outputs)] |= rerun_differs.any(axis=1)
    first = None
    for run_outputs, run_differs in [(outputs, differs), (rerun_outputs, rerun_differs)]:
        if run_differs.any():
            frame, element = (int(i) for i in np.argwhere(run_differs)[0])
            first = Mismatch(frame, element, int(run_outputs[frame, element]), int(expected[frame, element]))
            break
    return int(bad_frames.sum()), first
