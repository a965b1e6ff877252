"""``clock_mhz: auto``: the planner chooses the clock with the folding in budget mode (issue 23)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import streamc
from streamc.boards import get_board
from streamc.devices import get_device
from streamc.errors import ConfigError
from streamc.estimate import run_estimate
from streamc.frontend.load import load_onnx
from streamc.hw import to_hw
from streamc.pipeline.config import BOARDS, config_from_mapping
from streamc.planner import plan_clock_for_budget, plan_for_budget
from streamc.planner.search import closing_clocks
from streamc.rtl.pll import ecp5_pll_settings, gowin_pll_settings, ice40_pll_settings
from streamc.timing import CLOCK_CANDIDATES_MHZ, Clock, delay_model
from streamc.transforms.streamline import streamline
from streamc.transforms.tidy import tidy

ROOT = Path(__file__).parent.parent
TFC = ROOT / "tests" / "models" / "tfc_w1a1.onnx"
CNN = ROOT / "tests" / "models" / "cnn" / "digits_cnn.onnx"
UP5K = get_device("ice40-up5k")


def config(**keys):
    return config_from_mapping({"model": "m.onnx", "output_dir": "out", **keys}, base=Path("."), source="x")


@pytest.mark.parametrize("keys, message", [
    (dict(clock_mhz="auto", target_fps=1000), "clock_mhz: auto chooses the clock with the folding: it needs budget"),
    (dict(clock_mhz="auto", budget=0.5, pipelining="none"), "clock_mhz: auto chooses the clock with the folding"),
    (dict(clock_mhz="fast", budget=0.5), "clock_mhz must be a positive number of MHz or auto (with budget), not 'fast'"),
    (dict(clock_mhz=-50, budget=0.5), "clock_mhz must be a positive number of MHz or auto (with budget), not -50"),
    (dict(clock_mhz=[40, 50], budget=0.5), "clock_mhz must be a positive number of MHz or auto (with budget), not [40"),
])
def test_a_bad_clock_is_one_line_naming_it(keys, message):
    with pytest.raises(ConfigError) as info:
        config(**keys)
    assert info.value.args[0].startswith(f"x: {message}") and "\n" not in str(info.value)
    assert config(clock_mhz="auto", budget=0.5).clock_mhz == "auto"


@pytest.mark.parametrize("board", BOARDS)
def test_every_candidate_clock_is_one_the_boards_pll_makes_exactly(board):
    target = get_board(board)
    make = {"ice40": lambda mhz: ice40_pll_settings(input_mhz=target.oscillator_mhz, requested_mhz=mhz),
            "ecp5": lambda mhz: ecp5_pll_settings(input_mhz=target.oscillator_mhz, requested_mhz=mhz),
            "gowin": lambda mhz: gowin_pll_settings(chip=target.nextpnr_device, input_mhz=target.oscillator_mhz,
                                                    requested_mhz=mhz)}[target.family]
    assert all(make(mhz).achieved_mhz == mhz for mhz in CLOCK_CANDIDATES_MHZ[target.family])


def test_the_chosen_clock_is_the_best_of_the_candidates_by_the_model():
    flow = to_hw(streamline(tidy(load_onnx(TFC))))
    clocks = closing_clocks(flow, "ice40")
    # The control paths bound the clock: no candidate past their delay.
    assert clocks and max(clocks) <= 1000 / delay_model("ice40").control_ns < max(CLOCK_CANDIDATES_MHZ["ice40"])
    chosen = plan_clock_for_budget(flow, device=UP5K, budget=0.9)
    assert chosen.clock_mhz in clocks and chosen.fits
    # Every candidate planned on its own, with the registers it needs: none gives more frames/s.
    fps = {mhz: plan_for_budget(flow, device=UP5K, budget=0.9, clock=Clock(mhz=mhz, family="ice40")).fps(mhz)
           for mhz in clocks}
    assert chosen.fps(chosen.clock_mhz) == max(fps.values())
    assert chosen.clock_mhz == min(mhz for mhz, value in fps.items() if value == max(fps.values()))


def test_a_design_with_a_sliding_window_plans_its_clock_below_the_windows_control_path():
    # The digits CNN at a tenth of the ECP5-85F: 145 MHz chosen, 131.4 reached on a FIFO's level into its window's
    # count of freed rows (7.6 ns). With a window the ECP5's candidates stop at 130 MHz; TFC's, without, at 145.
    cnn, tfc = (to_hw(streamline(tidy(load_onnx(path)))) for path in (CNN, TFC))
    assert max(closing_clocks(cnn, "ecp5")) == 130.0
    assert max(closing_clocks(tfc, "ecp5")) == 145.0


def test_an_auto_clock_flows_through_estimate_and_the_api(tmp_path):
    path = tmp_path / "auto.yaml"
    path.write_text(f"model: {TFC}\noutput_dir: out\ndevices: [ice40-up5k]\nboard: icebreaker\n"
                    "clock_mhz: auto\nbudget: 0.9\n")
    report = run_estimate(path)
    assert report["clock_chosen"] and report["clock_mhz"] in CLOCK_CANDIDATES_MHZ["ice40"]
    assert report["predicted_fps"] == report["clock_mhz"] * 1e6 / report["predicted_cycles_per_frame"]
    acc = streamc.compile(TFC, device="ice40-up5k", board="icebreaker", clock_mhz="auto", budget=0.9,
                          output_dir=tmp_path / "api")
    assert acc.clock_mhz == report["clock_mhz"] and acc.cycles_per_frame == report["predicted_cycles_per_frame"]
    estimates = json.loads((tmp_path / "api" / "reports" / "estimates.json").read_text())
    assert estimates["clock_mhz"] == acc.clock_mhz and estimates["clock_chosen"]
    # The layers are pipelined for the clock chosen, as a build given that clock pipelines them.
    fixed = streamc.compile(TFC, device="ice40-up5k", board="icebreaker", clock_mhz=acc.clock_mhz, budget=0.9,
                            output_dir=tmp_path / "fixed")
    assert fixed.folding == acc.folding
