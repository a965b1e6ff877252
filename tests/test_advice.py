"""Errors of a target the build cannot give say what to ask instead, and following that advice works."""

import re
from pathlib import Path

import pytest

import streamc.pnr
from streamc.cli import main
from streamc.pipeline import steps

DIGITS = Path(__file__).resolve().parents[1] / "build_configs" / "models" / "digits_mlp.onnx"
TO_FOLD = "[load, tidy, streamline, to_hw, fold]"


def config(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "build.yaml"
    path.write_text(f"model: {DIGITS}\noutput_dir: out\nclock_mhz: 30\n{body}")
    return path


def test_does_not_fit_gives_the_fastest_frames_per_second_that_fits(tmp_path, capsys):
    too_fast = config(tmp_path, f"devices: [ice40-up5k]\ntarget_fps: 3000000\nsteps: {TO_FOLD}\n")
    assert main(["build", str(too_fast)]) == 2
    err = capsys.readouterr().err
    found = re.search(r"does not fit the ice40-up5k .*\. The fastest that fits the ice40-up5k takes (\d+) cycles per "
                      r"frame: ([\d,]+) frames/s at clock_mhz 30 \(ask target_fps: (\d+), or budget: 1\.0 for the "
                      r"fastest folding within the device\)\n$", err)
    assert found, err
    cycles, fps = int(found[1]), int(found[3])
    assert fps == 30_000_000 // cycles
    # The advice builds, at those cycles.
    assert main(["build", str(config(tmp_path, f"devices: [ice40-up5k]\ntarget_fps: {fps}\nsteps: {TO_FOLD}\n"))]) == 0
    assert f"Predicted: {cycles} cycles/frame" in capsys.readouterr().out


def placed_at(fmax_mhz: float):
    def build_board(*, clock_mhz, **_):
        return streamc.pnr.PnrResult(board="icebreaker", requested_mhz=clock_mhz, pll_mhz=clock_mhz, fmax_mhz=fmax_mhz,
                                     timing_met=fmax_mhz >= clock_mhz, critical_path=[], critical_path_ns=1e3 / fmax_mhz,
                                     utilization={}, bitstream=None, report=Path("report.json"), log=Path("log"),
                                     seconds={})
    return build_board


@pytest.mark.parametrize("fmax, advice", [
    (20.04, r"at this folding \(512 cycles per frame\) clock_mhz 20 gives 39,062 frames/s, short of target_fps 50000: "
            r"give clock_mhz: 20 with target_fps: 39062 \(or folding: from reports/folding\.json, which pins these "
            r"registers too\), or budget: \(a share of the device\) for the fastest folding within it"),
    (28.0, r"at this folding \(512 cycles per frame\) clock_mhz 28 gives 54,687 frames/s, so clock_mhz: 28 with "
           r"target_fps: 50000 fits this design"),
])
def test_timing_not_met_says_which_clock_and_frames_per_second_work(tmp_path, capsys, monkeypatch, fmax, advice):
    for name in ("rtl", "sim", "synth"):
        monkeypatch.setitem(steps.STEP_FUNCTIONS, name, lambda state: None)
    monkeypatch.setattr(streamc.pnr, "build_board", placed_at(fmax))
    assert main(["build", str(config(tmp_path, "board: icebreaker\ndevices: [ice40-up5k]\ntarget_fps: 50000\n"))]) == 2
    err = capsys.readouterr().err
    assert re.fullmatch(rf"error: timing not met on icebreaker: .*; {advice}\n", err), err


def test_a_budget_that_fits_nothing_gives_the_fastest_that_fits_the_device(tmp_path, capsys):
    small = config(tmp_path, f"devices: [ice40-up5k]\nbudget: 0.05\nsteps: {TO_FOLD}\n")
    assert main(["build", str(small)]) == 2
    err = capsys.readouterr().err
    found = re.search(r"within budget=0\.05.*\. The fastest that fits the ice40-up5k takes (\d+) cycles per frame: "
                      r"[\d,]+ frames/s at clock_mhz 30 \(ask budget: 1\.0\)\n$", err)
    assert found, err
    assert main(["build", str(config(tmp_path, f"devices: [ice40-up5k]\nbudget: 1.0\nsteps: {TO_FOLD}\n"))]) == 0
    assert f"Predicted: {found[1]} cycles/frame" in capsys.readouterr().out
