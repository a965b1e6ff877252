"""The Python API: compile, predict against the reference executor and against Verilator, the README's examples
(the component in Amaranth's simulator among them), run as written."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import streamc
from streamc.errors import ConfigError
from streamc.execute import execute
from streamc.frontend.load import load_onnx
from streamc.pipeline.steps import expected_hw_outputs
from streamc.pipeline.verdict import end_to_end_differing_frames
from streamc.transforms.tidy import tidy

ROOT = Path(__file__).resolve().parent.parent
MODELS = ROOT / "tests" / "models"
DIGITS = ROOT / "build_configs" / "digits.yaml"


def _python_blocks(section: str) -> list[str]:
    readme = (ROOT / "README.md").read_text()
    text = readme[readme.index(f"## {section}\n"):]
    text = text[:text.index("\n## ", 1)]
    return re.findall(r"```python\n(.*?)```", text, flags=re.S)


def test_the_readme_from_python_examples_run_as_written(tmp_path, monkeypatch):
    # The API example simulates 8 digits in Verilator and asserts them equal to predict, bit for bit; the
    # component example simulates the user's design in Amaranth and asserts it equal to predict.
    (tmp_path / "build_configs").symlink_to(ROOT / "build_configs")
    monkeypatch.chdir(tmp_path)
    blocks = _python_blocks("From Python")
    assert len(blocks) == 2
    scope: dict = {}
    exec(compile(blocks[0], "README: the API example", "exec"), scope)
    assert scope["sim"].report["mismatches"] == 0 and scope["sim"].failure is None
    assert (tmp_path / "out/digits_api/rtl/streamc_top.v").is_file()
    exec(compile(blocks[1], "README: the component example", "exec"), scope)
    assert len(scope["received"]) == 4 * scope["acc"].out_beats


def test_predict_equals_verilator_on_tfc_w1a1(tmp_path):
    acc = streamc.compile(MODELS / "tfc_w1a1.onnx", device="ice40-up5k", clock_mhz=30, budget=0.5,
                          output_dir=tmp_path)
    frames = np.load(MODELS / "tfc_frames.npy")[:4]
    sim = acc.simulate(frames)
    assert sim.report["mismatches"] == 0
    assert np.array_equal(sim.hardware, acc.predict(frames, hardware=True))
    assert np.array_equal(sim.outputs, acc.predict(frames))
    assert sim.report["measured_cycles_per_frame"] == acc.cycles_per_frame


@pytest.mark.parametrize("compiled, frames", [
    (lambda out: streamc.compile(config=DIGITS, devices=["ice40-up5k"], output_dir=out),
     ROOT / "build_configs/models/digits_frames.npy"),
    (lambda out: streamc.compile(MODELS / "tfc_w1a1.onnx", device="ice40-up5k", clock_mhz=30, budget=0.5,
                                 output_dir=out), MODELS / "tfc_frames.npy"),
], ids=["digits", "tfc_w1a1"])
def test_predict_equals_the_reference_executor(compiled, frames, tmp_path):
    acc = compiled(tmp_path)
    frames = np.load(frames)
    original = load_onnx(acc.config.model)
    name, out = original.inputs[0].name, original.outputs[0].name
    # The integers as the sim step reads them off the reference's own tensors; the outputs as its verdict judges.
    wanted_hw = expected_hw_outputs(acc.dataflow, execute(tidy(original), {name: frames}, keep_all=True))
    assert np.array_equal(acc.predict(frames, hardware=True), wanted_hw)
    assert end_to_end_differing_frames(acc.predict(frames), execute(original, {name: frames})[out]) == []


def test_compile_errors_are_the_cli_s_one_line_errors(tmp_path):
    with pytest.raises(ConfigError, match=r"^streamc.compile\(\): unknown key 'colck_mhz' \(did you mean 'clock_mhz'\?\)$"):
        streamc.compile(MODELS / "tfc_w1a1.onnx", colck_mhz=30, target_fps=1000, output_dir=tmp_path)
    with pytest.raises(ConfigError, match="not both"):
        streamc.compile(MODELS / "tfc_w1a1.onnx", device="ice40-up5k", devices=["ecp5-85f"], target_fps=1000)
    with pytest.raises(ConfigError, match="frames of shape"):
        streamc.compile(config=DIGITS, output_dir=tmp_path).predict(np.zeros((2, 3)))


def test_keywords_override_the_config_and_the_folding_pins_the_design(tmp_path):
    acc = streamc.compile(config=DIGITS, budget=0.5, output_dir=tmp_path / "a")
    assert acc.config.target_fps is None and acc.config.budget == 0.5 and acc.config.clock_mhz == 30
    pinned = streamc.compile(config=DIGITS, folding=acc.folding, output_dir=tmp_path / "b")
    assert pinned.folding == acc.folding and pinned.estimate() == acc.estimate()
    assert "cycles/frame" in repr(acc) and "Estimated resources" in repr(acc)


def test_build_for_a_board_compile_was_not_given_leaves_its_shell_room(tmp_path, monkeypatch):
    # Planned for the UP5K alone, onnxruntime's int8 MLP puts its tables in every block RAM; the iCEBreaker's
    # shell needs some of them, so nextpnr could not place it. build(board=) plans again with the shell's room
    # kept. The synth and pnr steps (Yosys, nextpnr: minutes) are not what this checks, so they are left out.
    from streamc.boards import get_board, shell_resources
    from streamc.devices import get_device
    from streamc.protocol import FrameFormat

    acc = streamc.compile(MODELS / "dialects/ort_qdq_mlp.onnx", device="ice40-up5k", clock_mhz=30,
                          target_fps=50_000, output_dir=tmp_path)
    shell = shell_resources(get_board("icebreaker"), FrameFormat.from_dataflow(acc.dataflow))
    have = get_device("ice40-up5k").bram
    assert acc.estimate()["ice40-up5k"]["bram"] + shell.bram > have
    ran = []
    monkeypatch.setitem(streamc.api.STEP_FUNCTIONS, "synth", lambda state: ran.append("synth"))
    monkeypatch.setitem(streamc.api.STEP_FUNCTIONS, "pnr", lambda state: ran.append(state.config.board))
    acc.build(board="icebreaker")
    assert ran == ["synth", "icebreaker"]
    assert acc.estimate()["ice40-up5k"]["bram"] + shell.bram <= have
    assert (tmp_path / "verilog" / "streamc_top.v").is_file()
