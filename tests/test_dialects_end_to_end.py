"""Every dialect of the seeds through the whole pipeline: Verilator agrees with the format's own reference."""

from pathlib import Path

import numpy as np
import onnx
import pytest
import yaml

import dialect_factory as factory
from exact_model import run_model
from rtl_helpers import assert_latency_predicted

from streamc.pipeline.runner import run_build
from streamc.frontend.load import load_onnx
from streamc.hw import to_hw
from streamc.transforms.streamline import streamline
from streamc.transforms.tidy import tidy

DIALECTS = Path(__file__).parent / "models" / "dialects"
STEPS_TO_SIM = ["load", "tidy", "streamline", "to_hw", "fold", "rtl", "sim"]

#: model -> the output stages it must get: the cheap ones where they are provably exact.
CASES = {
    "qcdq_digits": ["3 thresholds", "3 thresholds", "accumulator"],
    "ort_qdq_mlp": ["requant", "table", "requant", "table"],
    "ort_qoperator_mlp": ["requant", "table", "requant"],
    "intop_fc": ["requant", "requant"],
    "intop_tanh_int8": ["requant", "table", "requant"],
    # Trunc then Relu before the next layer: the Relu keeps the codes on Trunc's grid.
    "qonnx_attrs_trunc_v2": ["requant", "accumulator"],
}


def compile_front(name: str):
    return to_hw(streamline(tidy(load_onnx(DIALECTS / f"{name}.onnx"))))


@pytest.mark.parametrize("name", sorted(CASES))
def test_dialect_is_bit_exact_in_verilator(tmp_path, name):
    frames = "frames_int8.npy" if name.startswith("intop") else "frames.npy"
    config = {"model": str(DIALECTS / f"{name}.onnx"), "output_dir": str(tmp_path / "out"), "target_fps": 500_000,
              "steps": STEPS_TO_SIM,
              "verify": {"inputs": str(DIALECTS / frames), "expected": str(DIALECTS / f"{name}_expected.npy")}}
    path = tmp_path / "build.yaml"
    path.write_text(yaml.safe_dump(config))
    state = run_build(path)
    assert [stage.output_stage.split(" (")[0] for stage in state.dataflow.stages] == CASES[name]
    report = state.rtlsim
    assert report["frames"] == 64 and report["mismatches"] == 0
    assert report["measured_cycles_per_frame"] == report["predicted_cycles_per_frame"]
    assert_latency_predicted(report)
    assert report["expected_mismatches"] == 0


def test_a_table_per_channel_is_bit_exact_in_verilator(tmp_path):
    """A bias per channel between two quantizers (int8 codes -> + bias -> Tanh -> int8): one table per
    channel after the first layer, its lanes cycling through the channels, equal to the exact reference
    (exact integer kernels, onnxruntime's Tanh)."""
    case = factory.tanh_int8_case(3)
    onnx.save(case.model, tmp_path / "model.onnx")
    frames = case.frames[:32]
    np.save(tmp_path / "frames.npy", frames)
    np.save(tmp_path / "expected.npy", run_model(case.model, {"input": frames})[0])
    config = {"model": str(tmp_path / "model.onnx"), "output_dir": str(tmp_path / "out"), "devices": ["ecp5-85f"], "budget": 0.5,
              "steps": STEPS_TO_SIM,
              "verify": {"inputs": str(tmp_path / "frames.npy"), "expected": str(tmp_path / "expected.npy")}}
    path = tmp_path / "build.yaml"
    path.write_text(yaml.safe_dump(config))
    state = run_build(path)
    table = state.dataflow.stages[1]
    assert table.output_stage == "table" and table.table.shape == (5, 256) and table.elems > 1
    report = state.rtlsim
    assert report["frames"] == 32 and report["mismatches"] == 0 and report["expected_mismatches"] == 0
    assert report["measured_cycles_per_frame"] == report["predicted_cycles_per_frame"]


def test_qonnx_and_qcdq_exports_of_one_network_give_the_same_hardware():
    qonnx, qcdq = compile_front("qonnx_digits"), compile_front("qcdq_digits")
    assert len(qonnx.stages) == len(qcdq.stages)
    for a, b in zip(qonnx.stages, qcdq.stages):
        assert np.array_equal(a.weights, b.weights)
        assert (a.in_dtype, a.weight_dtype, a.out_dtype, a.out_bias) == (b.in_dtype, b.weight_dtype, b.out_dtype, b.out_bias)
        assert (a.thresholds is None) == (b.thresholds is None)
        if a.thresholds is not None:
            assert np.array_equal(a.thresholds, b.thresholds)


@pytest.mark.parametrize("name", ["qonnx_attrs_trunc_v1", "qonnx_attrs_trunc_v2"])
def test_a_relu_after_trunc_joins_the_quantizer(name):
    """Brevitas' Trunc then Relu before a MatMul: codes max(c, zero point) on Trunc's grid, so the first
    layer's output stage takes both and the hardware computes the model (float tail: one ulp)."""
    dataflow = compile_front(name)
    assert [stage.output_stage.split(" (")[0] for stage in dataflow.stages] == ["requant", "accumulator"]
    assert dataflow.stages[1].in_dtype.min == 0
    frames = np.load(DIALECTS / "frames.npy")
    expected = np.load(DIALECTS / f"{name}_expected.npy")
    _, outputs = dataflow.emulate(frames[:len(expected)])
    assert np.abs(outputs.reshape(expected.shape) - expected).max() <= np.spacing(np.abs(expected).max())
