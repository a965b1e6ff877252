"""The host side of a board: transports to a board, and the driver around them.

The bytes on the wire are :mod:`streamc.protocol`'s (``docs/board_protocol.md``). A transport moves bytes: :class:`SerialTransport` to a board on a serial port (``pyserial``, imported
when opened), :class:`SimTransport` to the board shell and the accelerator in Verilator. A
:class:`Board` runs frames through a transport, with the model's head (float input to integer codes)
and tail (hardware integers to the model's output) on the host.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np

from .errors import BoardError, BuildError, ConfigError
from .protocol import DEFAULT_BAUD, FrameFormat

__all__ = ["SIM_BIT_CYCLES", "SIM_CLOCK_HZ", "Board", "SerialTransport", "SimRun", "SimTransport", "Transport"]

#: The simulated board: a 100 MHz clock (the testbench's 10 ns period) and 4 cycles per UART bit, to
#: keep simulations short; the divider at real rates is tested on its own.
SIM_CLOCK_HZ = 100e6
SIM_BIT_CYCLES = 4


class Transport(Protocol):
    """What :class:`Board` needs of a connection: bytes out, an exact number of bytes in."""

    def write(self, data: bytes) -> None: ...

    def read(self, size: int) -> bytes:
        """Exactly ``size`` bytes; raises :class:`BoardError` when they do not come."""

    def close(self) -> None: ...


class SerialTransport:
    """A board on a serial port, 8N1 at ``baud``.

    Parameters
    ----------
    port : str
        The port, e.g. ``/dev/ttyUSB1`` or ``COM3``.
    baud : int
        The rate the bitstream's UART runs at.
    timeout_s : float
        How long a read waits for its bytes.

    Raises
    ------
    BoardError
        If ``pyserial`` is missing or the port cannot be opened.
    """

    def __init__(self, *, port: str, baud: int = DEFAULT_BAUD, timeout_s: float = 2.0):
        try:
            import serial
        except ImportError:
            raise BoardError("talking to a board needs the Python package 'pyserial', which is not installed; "
                             "install it with: pip install pyserial") from None
        try:
            self._serial = serial.Serial(port, baudrate=baud, timeout=timeout_s)
        except serial.SerialException as exc:
            raise BoardError(f"cannot open serial port {port!r}: {exc}") from None
        self._port, self._timeout_s = port, timeout_s

    def write(self, data: bytes) -> None:
        self._serial.write(data)
        self._serial.flush()

    def read(self, size: int) -> bytes:
        data = self._serial.read(size)
        if len(data) != size:
            raise BoardError(f"{self._port}: {len(data)} of {size} bytes arrived within {self._timeout_s:g} s "
                             "(is the board programmed with this model's bitstream, at this baud rate?)")
        return data

    def drain(self) -> bytes:
        """Whatever the board sent that nobody read (after a resync)."""
        time.sleep(self._timeout_s / 4)
        return self._serial.read(self._serial.in_waiting)

    def close(self) -> None:
        self._serial.close()


@dataclass
class SimRun:
    """What one simulation of :class:`SimTransport` measured.

    Attributes
    ----------
    sent, received : int
        Bytes sent to the shell and received from it.
    cycles : int
        Clock cycles simulated after reset.
    seconds : float
        Wall-clock time of the simulation, Verilator build excluded.
    """

    sent: int
    received: int
    cycles: int
    seconds: float


class SimTransport:
    """The board shell and the accelerator in Verilator, behind a cocotb UART model.

    The shell runs at :data:`SIM_CLOCK_HZ` with ``bit_cycles`` clock cycles per UART bit. Bytes
    written are kept until the next :meth:`read`, which simulates the board from reset: it sends
    them all, back to back, and returns the first ``size`` bytes the board sends back. (A real
    board keeps its state between reads; a frame-aligned exchange cannot tell the difference.)

    Parameters
    ----------
    accelerator_verilog : Path
        The accelerator's Verilog (``verilog/streamc_top.v`` of a build), with the ROM files it reads beside it.
    frame_format : FrameFormat
        Its stream geometry.
    build_dir : Path
        Folder of the Verilator build (reused while the Verilog is unchanged) and of the run files.
    bit_cycles : int
        Clock cycles per UART bit.
    frame_cycles : int
        The accelerator's cycles per frame, for the cycle budget of a simulation.

    Attributes
    ----------
    runs : list of SimRun
        One per :meth:`read`.
    """

    TOP = "streamc_board"
    TEST_MODULE = "streamc.sim.uart_tb"

    def __init__(self, *, accelerator_verilog: Path, frame_format: FrameFormat, build_dir: Path,
                 bit_cycles: int = SIM_BIT_CYCLES, frame_cycles: int = 0):
        from .rtl.shell import shell_verilog

        self._format, self._frame_cycles, self._bit_cycles = frame_format, frame_cycles, bit_cycles
        self._build_dir = Path(build_dir).resolve()
        self._build_dir.mkdir(parents=True, exist_ok=True)
        self._accelerator_verilog = Path(accelerator_verilog)
        shell = shell_verilog(frame_format=frame_format, clock_hz=SIM_CLOCK_HZ, baud=SIM_CLOCK_HZ / bit_cycles,
                              name=self.TOP)
        # One file: the runner's build cache keys on one Verilog file's contents.
        self._verilog = self._build_dir / "board_sim.v"
        text = shell + "\n" + Path(accelerator_verilog).read_text()
        if not self._verilog.exists() or self._verilog.read_text() != text:
            self._verilog.write_text(text)
        self._pending = bytearray()
        self.runs: list[SimRun] = []

    def write(self, data: bytes) -> None:
        self._pending += data

    def read(self, size: int) -> bytes:
        from .rtl.rom_files import copy_rom_files
        from .sim import cocotb_engine, toolchain

        sent, self._pending = bytes(self._pending), bytearray()
        tools = cocotb_engine.simulation_tools()
        sim = tools.get_runner("verilator")
        cocotb_engine.build_model(sim, tools, verilog=self._verilog, top=self.TOP, build_dir=self._build_dir,
                                  timeout_s=toolchain.BUILD_TIMEOUT_S)
        run_dir = self._build_dir / "uart_run"
        run_dir.mkdir(exist_ok=True)
        copy_rom_files(self._accelerator_verilog, run_dir)   # the model reads them from where it runs
        files = {"rx_file": "rx.bin", "tx_file": "tx.bin", "result_file": "result.json"}
        for name in files.values():
            (run_dir / name).unlink(missing_ok=True)
        (run_dir / files["rx_file"]).write_bytes(sent)
        frames = len(sent) // self._format.frame_bytes + 1
        wire_cycles = 10 * self._bit_cycles * (len(sent) + size)
        config = {**files, "bit_cycles": self._bit_cycles, "expect_bytes": size,
                  "timeout_cycles": 20_000 + 2 * (wire_cycles + frames * self._frame_cycles)}
        config_path = run_dir / "config.json"
        config_path.write_text(json.dumps(config, indent=1))
        log_path = run_dir / "sim.log"
        started = time.perf_counter()
        from .sim.uart_tb import CONFIG_ENV

        with toolchain.verilator_environment(tools.verilator):
            try:
                sim.test(test_module=self.TEST_MODULE, hdl_toplevel=self.TOP, hdl_toplevel_lang="verilog",
                         build_dir=self._build_dir, test_dir=run_dir, results_xml=str(run_dir / "results.xml"),
                         extra_env={CONFIG_ENV: str(config_path)}, log_file=log_path)
            except (SystemExit, RuntimeError):
                pass  # the result file decides (runner.test exits on a failed test under pytest only)
        seconds = time.perf_counter() - started
        result_path = run_dir / files["result_file"]
        if not result_path.exists():
            raise BuildError(f"simulation of the board shell ended without a result: {toolchain.last_line(log_path)}; "
                             f"see {log_path}")
        result = json.loads(result_path.read_text())
        received = (run_dir / files["tx_file"]).read_bytes()
        self.runs.append(SimRun(sent=len(sent), received=len(received), cycles=result["cycles"], seconds=seconds))
        if len(received) < size:
            raise BoardError(f"the simulated board sent {len(received)} of {size} bytes within "
                             f"{result['cycles']} cycles (framing errors: {result['framing_errors']}, "
                             f"receive overrun: {bool(result['overrun'])}); see {log_path}")
        return received[:size]

    def close(self) -> None:
        self._pending.clear()


class Board:
    """Runs frames of a compiled model on a board (or its simulation) through a transport.

    Parameters
    ----------
    dataflow : Dataflow
        The folded dataflow the board's bitstream was built from.
    transport : Transport
        The connection to the board.

    Attributes
    ----------
    transport : Transport
    frame_format : FrameFormat
    frames_in_flight : int or None
        Frames sent before their results are read: all of them (None) when a result is no longer
        than a frame, so the board's transmitter keeps up with its receiver; else one, so that the
        board never receives faster than it can answer.
    """

    def __init__(self, *, dataflow, transport: Transport):
        self._dataflow, self.transport = dataflow, transport
        self.frame_format = FrameFormat.from_dataflow(dataflow)
        fmt = self.frame_format
        self.frames_in_flight = None if fmt.result_bytes <= fmt.frame_bytes else 1

    def run_codes(self, codes: np.ndarray) -> np.ndarray:
        """Hardware input integers ``(N, n_in)`` in stream order to hardware output integers ``(N, n_out)``."""
        stages = self._dataflow.stages
        in_dtype, out_dtype = stages[0].in_dtype, stages[-1].out_dtype
        codes = np.asarray(codes)
        if len(codes) == 0:
            return np.empty((0, self.frame_format.n_out), dtype=np.int64)
        if codes.min() < in_dtype.min or codes.max() > in_dtype.max:
            raise ConfigError(f"input codes must be {in_dtype} values in [{in_dtype.min}, {in_dtype.max}], "
                              f"not values in [{codes.min()}, {codes.max()}]")
        bits = in_dtype.to_hw(codes)
        step = self.frames_in_flight or len(bits)
        results = []
        for start in range(0, len(bits), step):
            chunk = bits[start:start + step]
            self.transport.write(self.frame_format.encode(chunk))
            data = self.transport.read(len(chunk) * self.frame_format.result_bytes)
            results.append(self.frame_format.decode(data, len(chunk)))
        return out_dtype.from_hw(np.concatenate(results))

    def run(self, frames: np.ndarray) -> np.ndarray:
        """Model inputs (float, the model's input shape after the batch axis) to model outputs: the head
        on the host, the stages on the board, the tail on the host."""
        dataflow = self._dataflow
        return dataflow.outputs_of(self.run_codes(dataflow.input_codes(frames)))


def compile_design(config_path: Path, work_dir: Path, *, verilog: bool = False):
    """The folded :class:`~streamc.hw.Dataflow` of a build config, and the path of its accelerator Verilog.

    Runs the build's own steps up to ``fold`` (and ``rtl`` when ``verilog`` is true, else the path is
    None) in ``work_dir``, so that the build's output folder and its resume record stay untouched. The
    folding is a function of the config and the model, so the design is the one the config's bitstream
    holds.
    """
    from .pipeline.config import load_config
    from .pipeline.runner import run_through, steps_through
    from .pipeline.steps import TOP

    last = "rtl" if verilog else "fold"
    # Only the steps that run, so that the load step reads no verification data: the design needs none.
    config = load_config(config_path).model_copy(update={"steps": steps_through(last), "output_dir": Path(work_dir)})
    state = run_through(config, config_path, last)
    return state.dataflow, state.folder.path("verilog", f"{TOP}.v") if verilog else None


def load_frames(path: Path, dataflow) -> np.ndarray:
    """Model inputs from an ``.npy`` file, shaped ``(N, *input shape without the batch axis)``."""
    given = dataflow.head.inputs[0]
    shape = tuple(given.shape[1:])
    try:
        frames = np.load(path)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read frames from '{path}' as .npy: {exc}") from None
    size = int(np.prod(shape))
    if frames.ndim == 0 or frames.size % size or frames.size == 0 or (frames.ndim > 1 and frames[0].size != size):
        raise ConfigError(f"'{path}' holds an array of shape {frames.shape}; the model input {given.name!r} "
                          f"takes frames of shape {shape}: give an array of shape (N, {', '.join(map(str, shape))})")
    from .pipeline.steps import model_frames

    return model_frames(frames.reshape(-1, *shape), dataflow.head, key="frames", origin=f" of '{path}'")


def run_frames(config_path: Path, frames_path: Path, *, port: str | None = None, sim: bool = False,
               baud: int = DEFAULT_BAUD, board: str | None = None, work_dir: Path) -> tuple[np.ndarray, Board]:
    """Run the frames of ``frames_path`` through the board of ``config_path``: on ``port``, or in Verilator.

    Returns the model outputs and the :class:`Board` (whose transport's ``runs`` hold the simulation's
    figures). ``board``, if given, must be the config's ``board`` (where the config names one).
    ``work_dir`` holds the scratch build and, with ``sim``, the Verilator build, reused from one run to
    the next while the design is unchanged.
    """
    if sim == (port is not None):
        raise ConfigError("give either a serial port (--port) or --sim, not both or neither")
    if board is not None:
        from .pipeline.config import load_config

        configured = getattr(load_config(config_path), "board", None)
        if configured is not None and configured != board:
            raise ConfigError(f"--board {board} differs from the board {configured!r} that {config_path} builds for")
    work_dir = Path(work_dir)
    dataflow, accelerator = compile_design(config_path, work_dir / "design", verilog=sim)
    frames = load_frames(frames_path, dataflow)
    fmt = FrameFormat.from_dataflow(dataflow)
    if sim:
        transport = SimTransport(accelerator_verilog=accelerator, frame_format=fmt, build_dir=work_dir / "verilator",
                                 frame_cycles=dataflow.cycles_per_frame())
    else:
        transport = SerialTransport(port=port, baud=baud)
        transport.write(fmt.resync_bytes())
        transport.drain()
    try:
        board = Board(dataflow=dataflow, transport=transport)
        return board.run(frames), board
    finally:
        transport.close()
