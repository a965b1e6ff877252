"""Whole builds through Verilator: real Brevitas exports, bit-exact, cycles as predicted."""

from pathlib import Path

import numpy as np
import pytest
import yaml
from rtl_helpers import assert_latency_predicted

from streamc.pipeline.config import load_config
from streamc.pipeline.folder import BuildFolder
from streamc.pipeline.runner import run_build
from streamc.pipeline.steps import STEP_FUNCTIONS, BuildState
from streamc.cli import main
from streamc.ir import Node
from streamc.execute import execute

MODELS = Path(__file__).parent / "models"
DIGITS = Path(__file__).parent.parent / "build_configs" / "models"
STEPS_TO_SIM = ["load", "tidy", "streamline", "to_hw", "fold", "rtl", "sim"]

CASES = {
    "tfc_w1a1-fast": ("tfc_w1a1.onnx", {"target_fps": 2_000_000}),
    "tfc_w1a1-folded": ("tfc_w1a1.onnx", {"folding": {"node_linear": {"pe": 4, "simd": 49},
                                                      "node_linear_1": {"pe": 2, "simd": 16},
                                                      "node_linear_2": {"pe": 16, "simd": 2},
                                                      "node_linear_3": {"pe": 1, "simd": 4}}}),
    "tfc_w2a2-fast": ("tfc_w2a2_legacy.onnx", {"target_fps": 1_000_000}),
    "tfc_w2a2-folded": ("tfc_w2a2.onnx", {"target_fps": 200_000}),
}


def expected_outputs(model: str) -> Path:
    return MODELS / model.replace("_legacy", "").replace(".onnx", "_expected.npy")


def build(tmp_path: Path, model: str, extra: dict) -> dict:
    verify = {"inputs": str(MODELS / "tfc_frames.npy"), "expected": str(expected_outputs(model)), "frames": 100, "seed": 7}
    config = {"model": str(MODELS / model), "output_dir": str(tmp_path / "out"), "clock_mhz": 100,
              "steps": STEPS_TO_SIM, "verify": verify, **extra}
    path = tmp_path / "build.yaml"
    path.write_text(yaml.safe_dump(config))
    run_build(path)
    return yaml.safe_load((tmp_path / "out" / "reports" / "rtlsim.json").read_text())


def test_sharded_verification_equals_one_run(tmp_path):
    """verify.shards: three simulations of the one Verilator model, each on a third of the frames, give the
    outputs and the verdict of one run (the second build reuses the first's model: only the sim step reruns)."""
    verify = {"inputs": str(DIGITS / "digits_frames.npy"), "labels": str(DIGITS / "digits_labels.npy"), "frames": 60}
    config = {"model": str(DIGITS / "digits_mlp.onnx"), "output_dir": str(tmp_path / "out"), "target_fps": 50_000,
              "clock_mhz": 30, "steps": STEPS_TO_SIM, "verify": verify}
    reports = []
    for shards in (1, 3):
        (tmp_path / "build.yaml").write_text(yaml.safe_dump({**config, "verify": {**verify, "shards": shards}}))
        reports.append(run_build(tmp_path / "build.yaml").rtlsim)
        reports[-1]["hw"] = np.load(tmp_path / "out" / "reports" / "rtlsim_hw_outputs.npy")
    whole, sharded = reports
    np.testing.assert_array_equal(sharded["hw"], whole["hw"])
    assert sharded["frames"] == 60 and sharded["mismatches"] == 0
    assert sharded["accuracy_hw"] == whole["accuracy_hw"] == sharded["accuracy_reference"]
    assert sharded["measured_cycles_per_frame"] == sharded["predicted_cycles_per_frame"]
    assert sorted(path.name for path in (tmp_path / "out" / "sim_build").glob("run_*")) == ["run_0", "run_1", "run_2"]


@pytest.mark.parametrize("case", sorted(CASES))
def test_tfc_is_bit_exact_in_verilator(tmp_path, case):
    model, extra = CASES[case]
    report = build(tmp_path, model, extra)
    assert report["frames"] == 100
    assert report["mismatches"] == 0
    assert report["measured_cycles_per_frame"] == report["predicted_cycles_per_frame"]
    assert_latency_predicted(report)
    assert report["expected_mismatches"] == 0
    assert report["end_to_end_differing_frames"] == []
    # Powers-of-two scales: the host tail reproduces qonnx's float outputs exactly.
    outputs = np.load(tmp_path / "out" / "reports" / "rtlsim_outputs.npy")
    expected = np.load(expected_outputs(model))[:100]
    assert np.array_equal(outputs.reshape(expected.shape), expected)


def test_a_wrong_threshold_is_caught(tmp_path):
    """Shift one threshold of the first layer by one: the simulation must report mismatches."""
    config = tmp_path / "build.yaml"
    config.write_text(yaml.safe_dump({
        "model": str(DIGITS / "digits_mlp.onnx"), "output_dir": str(tmp_path / "out"), "target_fps": 1_000_000,
        "verify": {"inputs": str(DIGITS / "digits_frames.npy"), "frames": 300}}))
    state = BuildState(config=load_config(config), folder=BuildFolder(tmp_path / "out"), config_path=str(config))
    for name in STEPS_TO_SIM[:-2]:
        STEP_FUNCTIONS[name](state)
    layer = state.dataflow.layers[0]
    reached = np.rint(execute(state.dataflow.head, {"global_in": np.load(DIGITS / "digits_frames.npy")[:300]})
                      [state.dataflow.hw_input]).reshape(300, -1) @ layer.weights.T
    channel, level = np.unravel_index(np.argmin(np.abs(reached[:, :, None] - layer.thresholds[None]).min(axis=0)),
                                      layer.thresholds.shape)
    layer.thresholds[channel, level:] += 1  # stays sorted; moves the boundary some frame sits on
    STEP_FUNCTIONS["rtl"](state)
    STEP_FUNCTIONS["sim"](state)
    assert state.rtlsim["mismatches"] > 0


def test_a_wrong_host_tail_fails_the_build(tmp_path, monkeypatch, capsys):
    """The hardware equals streamc's executor, but the host tail scales the logits by 1 + 2^-6: the
    build's end-to-end check against the original model must fail it (exit 1) and say where."""
    lower = STEP_FUNCTIONS["to_hw"]

    def lower_with_a_wrong_tail(state):
        lower(state)
        tail = state.dataflow.tail
        out = tail.outputs[0].name
        tail.constants["wrong_gain"] = np.float32(1 + 2 ** -6)
        tail.nodes[-1].outputs = [f"{out}_before_gain"]
        tail.nodes.append(Node("Mul", "wrong_gain", [f"{out}_before_gain", "wrong_gain"], [out]))

    monkeypatch.setitem(STEP_FUNCTIONS, "to_hw", lower_with_a_wrong_tail)
    config = tmp_path / "build.yaml"
    config.write_text(yaml.safe_dump({
        # A folded design: a small Verilator model, quick to compile.
        "model": str(DIGITS / "digits_mlp.onnx"), "output_dir": str(tmp_path / "out"), "target_fps": 20_000,
        "steps": STEPS_TO_SIM, "verify": {"inputs": str(DIGITS / "digits_frames.npy"), "frames": 16}}))
    assert main(["build", str(config)]) == 1
    report = yaml.safe_load((tmp_path / "out" / "reports" / "rtlsim.json").read_text())
    assert report["mismatches"] == 0
    assert len(report["end_to_end_differing_frames"]) == 16
    err = " ".join(capsys.readouterr().err.split())
    assert "the hardware equals streamc's executor, but after the host tail 16 of 16 frames differ from the " \
           "original model" in err
