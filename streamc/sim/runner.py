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

import contextlib
import statistics
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np

from streamc.cluster import dask_client
from streamc.errors import ConfigError

from . import cocotb_engine, harness
from .beats import pack_words, words_per_beat
from .cluster_shards import Design, run_on_cluster
from .shard import Geometry, Progress, Shard, ShardOutput, run_shard
from .toolchain import BUILD_TIMEOUT_S, RUN_TIMEOUT_S

#: How each engine builds the model (returning what its run needs) and runs it on a run folder.
ENGINES = {
    "harness": (harness.build, harness.run),
    "cocotb": (cocotb_engine.build_stream, cocotb_engine.run_stream),
}
#: Frames re-sent at full rate to measure cycles per frame and latency.
FULL_RATE_FRAMES = 32
RESET_CYCLES = 4


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
        Wall-clock time of the simulation run, the local build excluded (the builds on a Dask cluster's
        machines included).
    simulated_cycles : int
        Clock cycles simulated after reset, both runs together, over all shards.
    shards : int
        Runs the frames were shared among.
    """

    outputs: np.ndarray
    mismatches: int
    first_mismatch: Mismatch | None
    frames: int
    measured_cycles_per_frame: float | None
    latency_cycles: int
    sim_seconds: float
    simulated_cycles: int
    shards: int


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
    shards: int | None = None,
    scheduler: str | None = None,
    progress: Progress | None = None,
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
        latency the first shard's. The harness engine only. Default: 1, or one per worker with ``scheduler``.
    scheduler
        A Dask scheduler's address (``tcp://HOST:PORT``): each shard runs as a task of its cluster, whose workers
        build the model from the Verilog, once per machine (:mod:`streamc.sim.cluster_shards`). By default the
        shards run as local processes of the one model built in ``build_dir``.
    progress
        Called now and then while the frames stream, with the frames that came out whole in the randomized
        run so far and the cycles simulated, over all shards; last with the totals. The harness engine only.

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
    if scheduler is not None and engine != "harness":
        raise ConfigError(f"a scheduler runs the harness engine only, not {engine!r}")
    build_dir = Path(build_dir).resolve()
    verilog = Path(verilog).resolve()
    with contextlib.ExitStack() as stack:
        client = None if scheduler is None else stack.enter_context(dask_client(scheduler))
        if shards is None:
            shards = 1 if client is None else len(client.scheduler_info()["workers"])
        if shards < 1 or (shards > 1 and engine != "harness"):
            raise ConfigError(f"shards must be a positive count, and more than 1 only with the harness engine; "
                              f"got {shards!r} with {engine!r}")
        parts = np.array_split(np.arange(len(frames)), min(shards, len(frames)))
        in_beats, out_beats = frames.shape[1] // in_elems, n_out // out_elems
        shard_list = []
        for index, rows in enumerate(parts):
            geometry = Geometry(frames=len(rows), in_beats=in_beats, out_beats=out_beats,
                                full_rate_frames=min(len(rows), FULL_RATE_FRAMES), timeout_cycles=timeout_cycles)
            shard_list.append(Shard(index=index, first_frame=int(rows[0]), last_frame=int(rows[-1]),
                                    words=pack_words(frames[rows], in_elems, in_width), geometry=geometry,
                                    out_elems=out_elems, out_width=out_width, n_out=n_out, config={
                "in_words": words_per_beat(in_elems, in_width),
                "out_words": words_per_beat(out_elems, out_width),
                "in_beats_per_frame": in_beats,
                "out_beats_per_frame": out_beats,
                "frames": geometry.frames,
                "full_rate_frames": geometry.full_rate_frames,
                # Any Python int seeds the same run; the harness takes 64 bits. Each shard draws its own gaps.
                "seed": (seed + index) % (1 << 64),
                "input_gap_prob": float(input_gap_prob),
                "output_stall_prob": float(output_stall_prob),
                "randomized_budget": geometry.budget("randomized"),
                "full_rate_budget": geometry.budget("full_rate"),
                "reset_cycles": RESET_CYCLES,
            }))
        counts = _Counts(len(shard_list), progress)
        started = time.perf_counter()
        if client is not None:
            outputs = run_on_cluster(client, Design.read(verilog, top), shard_list, build_timeout_s=build_timeout_s,
                                     run_timeout_s=run_timeout_s, progress=counts.update if progress else None)
        else:
            outputs = _run_locally(shard_list, engine=engine, verilog=verilog, top=top, build_dir=build_dir,
                                   build_timeout_s=build_timeout_s, run_timeout_s=run_timeout_s,
                                   progress=counts.update if progress else None)
    sim_seconds = time.perf_counter() - started
    if progress is not None:
        # The counts the runs end with, whatever reached the callback on the way.
        progress(len(frames), sum(output.result["cycles"] for output in outputs))

    mismatches, first_mismatch, gaps = 0, None, []
    for rows, output in zip(parts, outputs):
        count, first = _compare(output.outputs, output.rerun_outputs, None if expected is None else expected[rows])
        mismatches += count
        if first_mismatch is None and first is not None:
            first_mismatch = first._replace(frame=first.frame + int(rows[0]))
        ends = output.result["frame_end_cycles"]
        gaps += [later - earlier for earlier, later in zip(ends, ends[1:])]
    first_result = outputs[0].result
    return SimResult(
        outputs=np.concatenate([output.outputs for output in outputs]),
        mismatches=mismatches,
        first_mismatch=first_mismatch,
        frames=len(frames),
        measured_cycles_per_frame=float(statistics.median(gaps)) if gaps else None,
        latency_cycles=first_result["first_output_cycle"] - first_result["first_input_cycle"],
        sim_seconds=sim_seconds,
        simulated_cycles=sum(output.result["cycles"] for output in outputs),
        shards=len(outputs),
    )


class _Counts:
    """Every shard's latest frames and cycles, passed on summed to ``progress`` as any of them moves."""

    def __init__(self, shards: int, progress: Progress | None):
        self.frames, self.cycles = [0] * shards, [0] * shards
        self.progress, self.lock = progress, threading.Lock()

    def update(self, shard: int, frames: int, cycles: int) -> None:
        with self.lock:
            self.frames[shard], self.cycles[shard] = frames, cycles
            self.progress(sum(self.frames), sum(self.cycles))


def _run_locally(shards: list[Shard], *, engine: str, verilog: Path, top: str, build_dir: Path,
                 build_timeout_s: float | None, run_timeout_s: float | None, progress) -> list[ShardOutput]:
    """The shards through the one model built in ``build_dir``, side by side; ``progress`` gets each shard's
    index, frames and cycles."""
    build, run = ENGINES[engine]
    built = build(verilog=verilog, top=top, build_dir=build_dir / engine, timeout_s=build_timeout_s)

    def local(shard: Shard) -> ShardOutput:
        return run_shard(shard, run, built, top=top, verilog=verilog, timeout_s=run_timeout_s,
                         run_dir=build_dir / ("run" if len(shards) == 1 else f"run_{shard.index}"),
                         sharded=len(shards) > 1,
                         progress=None if progress is None else lambda f, c: progress(shard.index, f, c))

    if len(shards) == 1:  # in this thread: the cocotb engine's wall-clock limit needs the main thread
        return [local(shards[0])]
    with ThreadPoolExecutor(len(shards)) as pool:  # the harness runs as a process of its own: threads only wait
        return list(pool.map(local, shards))


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
