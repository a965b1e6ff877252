"""The boards streamc builds bitstreams for: device, package, oscillator and the pins of the shell.

Pin assignments are those of amaranth-boards 0.0.21 (PyPI), ``amaranth_boards/icebreaker.py``
(``ICEBreakerPlatform``), ``amaranth_boards/ulx3s.py`` (``_ULX3SPlatform`` and its 25F/45F/85F
subclasses), ``amaranth_boards/tang_nano_9k.py`` (``TangNano9kPlatform``) and
``amaranth_boards/tang_primer_20k.py`` (``TangPrimer20kDockPlatform``: the Dock carries the LEDs);
``tests/test_pnr.py`` and ``tests/test_gowin.py`` check them against the installed package. UART directions are the
FPGA's: ``uart_rx`` is the pin the FPGA receives on (the USB bridge's TX).
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import ConfigError

AMARANTH_BOARDS = "amaranth-boards 0.0.21"


@dataclass(frozen=True)
class Pin:
    """One FPGA pin: its site (package ball or pin number) and I/O standard.

    Attributes
    ----------
    site : str
        iCE40 and Gowin QFN: the package pin number (``"35"``); ECP5 and Gowin BGA: the ball (``"G2"``).
    io_standard : str
        iCE40: ``SB_LVCMOS`` or ``SB_LVTTL`` (a PCF comment only; the pin's bank voltage decides);
        ECP5: the LPF ``IO_TYPE``; Gowin: the CST ``IO_TYPE``.
    inverted : bool
        True where the pin is active low (the iCEBreaker's LEDs).
    pullup : bool
        True where the pin needs its pull-up (an idle-high UART receive line).
    """

    site: str
    io_standard: str
    inverted: bool = False
    pullup: bool = False


@dataclass(frozen=True)
class Board:
    """A development board with a UART to a host.

    Attributes
    ----------
    name : str
        streamc's name for it, as build configs give it (``board: icebreaker``).
    family : str
        ``"ice40"``, ``"ecp5"`` or ``"gowin"``: which nextpnr, packer and PLL apply.
    device : str
        streamc's device name (:mod:`streamc.devices`), for the synthesis flow and capacities.
    part : str
        The vendor's part name, e.g. ``"iCE40UP5K-SG48"``, ``"LFE5U-85F-6BG381C"`` or ``"GW1NR-LV9QN88PC6/I5"``
        (nextpnr-himbaechel's ``--device`` on Gowin).
    nextpnr_device, nextpnr_package : str
        iCE40 and ECP5: nextpnr's ``--up5k``/``--85k`` style device option (without dashes) and ``--package``.
        Gowin: the chip database (``--vopt family=``, gowin_pack's ``-d``, e.g. ``"GW1N-9C"``) and the
        package, which ``part`` already names.
    speed_grade : int or None
        ECP5 speed grade (nextpnr ``--speed``); None on iCE40 and Gowin (the part names it).
    oscillator_mhz : float
        The board's clock oscillator, the PLL's input.
    pins : dict of str to Pin
        ``clk`` (the oscillator), ``uart_rx``, ``uart_tx`` and ``led`` (the heartbeat).
    source : str
        Where the pins come from.
    packer_options : tuple of str
        Gowin: gowin_pack's options for the board, as amaranth-boards passes them (dual-purpose configuration
        pins kept as I/O).
    """

    name: str
    family: str
    device: str
    part: str
    nextpnr_device: str
    nextpnr_package: str
    speed_grade: int | None
    oscillator_mhz: float
    pins: dict[str, Pin]
    source: str
    packer_options: tuple[str, ...] = ()


_ICEBREAKER = Board(
    name="icebreaker", family="ice40", device="ice40-up5k", part="iCE40UP5K-SG48", nextpnr_device="up5k",
    nextpnr_package="sg48", speed_grade=None, oscillator_mhz=12.0,
    pins={"clk": Pin("35", "SB_LVCMOS"), "uart_rx": Pin("6", "SB_LVTTL", pullup=True),
          "uart_tx": Pin("9", "SB_LVTTL"), "led": Pin("37", "SB_LVCMOS", inverted=True)},
    source=f"{AMARANTH_BOARDS}, amaranth_boards/icebreaker.py: clk12 pin 35, uart rx 6 / tx 9, led_g 37 (active low)")


def _ulx3s(size: str, dsp_device: str) -> Board:
    return Board(
        name=f"ulx3s-{size}f", family="ecp5", device=dsp_device, part=f"LFE5U-{size.upper()}F-6BG381C",
        nextpnr_device=f"{size}k", nextpnr_package="CABGA381", speed_grade=6, oscillator_mhz=25.0,
        pins={"clk": Pin("G2", "LVCMOS33"), "uart_rx": Pin("M1", "LVCMOS33", pullup=True),
              "uart_tx": Pin("L4", "LVCMOS33"), "led": Pin("B2", "LVCMOS33")},
        source=f"{AMARANTH_BOARDS}, amaranth_boards/ulx3s.py: clk25 G2, FTDI uart rx M1 / tx L4, led 0 B2")


_TANG_NANO_9K = Board(
    name="tangnano9k", family="gowin", device="gowin-gw1nr-9", part="GW1NR-LV9QN88PC6/I5", nextpnr_device="GW1N-9C",
    nextpnr_package="QN88", speed_grade=None, oscillator_mhz=27.0,
    pins={"clk": Pin("52", "LVCMOS33"), "uart_rx": Pin("18", "LVCMOS33", pullup=True),
          "uart_tx": Pin("17", "LVCMOS33"), "led": Pin("10", "LVCMOS33", inverted=True)},
    source=f"{AMARANTH_BOARDS}, amaranth_boards/tang_nano_9k.py: clk27 pin 52, uart rx 18 / tx 17, led 0 pin 10 "
           "(active low)", packer_options=("--sspi_as_gpio", "--mspi_as_gpio"))

_TANG_PRIMER_20K = Board(
    name="tangprimer20k", family="gowin", device="gowin-gw2a-18", part="GW2A-LV18PG256C8/I7",
    nextpnr_device="GW2A-18C", nextpnr_package="PG256", speed_grade=None, oscillator_mhz=27.0,
    pins={"clk": Pin("H11", "LVCMOS33"), "uart_rx": Pin("T13", "LVCMOS33", pullup=True),
          "uart_tx": Pin("M11", "LVCMOS33"), "led": Pin("C13", "LVCMOS33", inverted=True)},
    source=f"{AMARANTH_BOARDS}, amaranth_boards/tang_primer_20k.py: clk27 H11, uart rx T13 / tx M11, "
           "the Dock's led 0 C13 (active low)",
    packer_options=("--mspi_as_gpio", "--sspi_as_gpio", "--ready_as_gpio", "--done_as_gpio"))

BOARDS: dict[str, Board] = {
    "icebreaker": _ICEBREAKER,
    "ulx3s-85f": _ulx3s("85", "ecp5-85f"),
    "ulx3s-45f": _ulx3s("45", "ecp5-45f"),
    "ulx3s-25f": _ulx3s("25", "ecp5-25f"),
    "tangnano9k": _TANG_NANO_9K,
    "tangprimer20k": _TANG_PRIMER_20K,
}


def get_board(name: str) -> Board:
    """The board called ``name``.

    Raises
    ------
    ConfigError
        If streamc does not know the board; the message lists those it knows.
    """
    try:
        return BOARDS[name]
    except KeyError:
        valid = ", ".join(sorted(BOARDS))
        raise ConfigError(f"board must be one of {valid}, not {name!r}") from None


#: The shell's logic besides its byte FIFO (UART, heartbeat, frame assembler and result serializer), per
#: family: (intercept, per bit of the beat registers) for LUTs and flip-flops. Fitted by
#: ``benchmarks/calibrate_shell.py`` on Yosys 0.70 syntheses of the shell alone (beats of 24 and 88 bits:
#: iCE40 LUT 192 and 223, FF 153 and 232; ECP5 LUT 210 and 231, FF 139 and 218, FIFO included). On the GW1NR-9 the
#: LUTs came out 273 and 246, FF 139 and 218: ABC maps the narrow shell's logic less well, so the larger of its LUTs
#: (the byte FIFO's estimated 41 taken away) is kept for both, with no slope.
SHELL_LOGIC = {"ice40": dict(lut=(139.4, 0.484), ff=(89.4, 1.234)),
               "ecp5": dict(lut=(160.1, 0.328), ff=(86.4, 1.234)),
               "gowin": dict(lut=(232.0, 0.0), ff=(87.4, 1.234))}


def shell_fifo_spec():
    """The resource-model spec of the shell's byte FIFO (on the iCE40 it takes a block RAM)."""
    from .resources import FIFOSpec
    from .rtl.shell import RX_FIFO_DEPTH

    return FIFOSpec(width=8, depth=RX_FIFO_DEPTH)


def shell_beat_bits(frame_format) -> int:
    """Bits of the shell's beat registers: an input beat and an output beat, each in whole bytes."""
    return 8 * (frame_format.in_beat_bytes + frame_format.out_beat_bytes)


def shell_resources(board: Board, frame_format):
    """What the board shell around an accelerator of ``frame_format`` takes of ``board``'s device
    (:class:`~streamc.resources.ResourceEstimate`): the planner keeps it free."""
    from .resources import ResourceEstimate, estimate_kernel

    fifo = estimate_kernel(shell_fifo_spec(), board.family)
    bits = shell_beat_bits(frame_format)
    lut, ff = ((a + b * bits) for a, b in (SHELL_LOGIC[board.family]["lut"], SHELL_LOGIC[board.family]["ff"]))
    return fifo + ResourceEstimate(lut=round(lut), ff=round(ff))


def constraints(board: Board, ports: dict[str, str]) -> str:
    """The pin constraints file (iCE40 PCF, ECP5 LPF or Gowin CST) for the top module's ``ports``.

    Parameters
    ----------
    board
        The board.
    ports
        Top-module port name for each of the board's pin roles used (``{"clk": "clk_pad", ...}``).
    """
    lines = []
    for role, port in ports.items():
        pin = board.pins[role]
        if board.family == "ice40":
            pullup = " -pullup yes" if pin.pullup else ""
            lines.append(f"set_io -nowarn{pullup} {port} {pin.site}")
        elif board.family == "gowin":
            pull_mode = " PULL_MODE=UP" if pin.pullup else ""
            lines += [f'IO_LOC "{port}" {pin.site};', f'IO_PORT "{port}" IO_TYPE={pin.io_standard}{pull_mode};']
        else:
            pullmode = " PULLMODE=UP" if pin.pullup else ""
            lines += [f'LOCATE COMP "{port}" SITE "{pin.site}";',
                      f'IOBUF PORT "{port}" IO_TYPE={pin.io_standard}{pullmode};']
    # The oscillator's frequency lets nextpnr derive the PLL output's from the PLL's dividers. A CST has no
    # clock constraint: nextpnr-himbaechel times the PLL's output at --freq (streamc.pnr).
    if board.family == "ice40":
        lines.append(f"set_frequency {ports['clk']} {board.oscillator_mhz:g}")
    elif board.family == "ecp5":
        lines.append(f'FREQUENCY PORT "{ports["clk"]}" {board.oscillator_mhz:g} MHZ;')
    return "\n".join(lines) + "\n"
