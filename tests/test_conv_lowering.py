"""Convolutional networks lower to sliding windows, MVAUs and max pools that compute the model exactly."""

from pathlib import Path

import numpy as np
import pytest

from streamc.execute import execute
from streamc.frontend.load import load_onnx
from streamc.hw import AddStage, ConcatStage, MVAULayer, PoolStage, VVAULayer, WindowStage, to_hw
from streamc.transforms.streamline import streamline
from streamc.transforms.tidy import tidy

CNN = Path(__file__).parent / "models" / "cnn"
CASES = {
    "digits_cnn": ("digits_cnn_frames.npy", 0),
    "conv1d_kws": ("conv1d_kws_frames.npy", 0),
    "conv1d_kws_legacy": ("conv1d_kws_frames.npy", 0),   # its Conv pads with auto_pad SAME_UPPER
    "cnv_w1a1": ("cnv_frames.npy", 0),
    "cnv_w1a2": ("cnv_frames.npy", 0),
    "cnv_w2a2": ("cnv_frames.npy", 0),
    "depthwise_block": ("depthwise_block_frames.npy", 0),
    "depthwise_block_legacy": ("depthwise_block_frames.npy", 0),
    "residual_block": ("residual_block_frames.npy", 0),
    "residual_block_legacy": ("residual_block_frames.npy", 0),
    "concat_block": ("concat_block_frames.npy", 0),
    "concat_block_legacy": ("concat_block_frames.npy", 0),
    "ort_qdq_cnn": ("ort_qdq_cnn_frames.npy", 0),
    "ort_qdq_cnn_u8": ("ort_qdq_cnn_u8_frames.npy", 0),
    "ort_qop_cnn": ("ort_qop_cnn_frames.npy", 0),
    "ort_qop_cnn_float_head": ("ort_qop_cnn_float_head_frames.npy", 0),
}


def compile_front(name: str):
    graph = load_onnx(CNN / f"{name}.onnx")
    return graph, to_hw(streamline(tidy(graph)))


@pytest.mark.parametrize("name", sorted(CASES))
def test_emulated_hardware_equals_the_model(name):
    frames_file, _ = CASES[name]
    graph, dataflow = compile_front(name)
    frames = np.load(CNN / frames_file)[:8]
    _, outputs = dataflow.emulate(frames)
    reference = execute(graph, {graph.inputs[0].name: frames})[graph.outputs[0].name]
    # The logits come from float32 tails; the integer parts are exact (see docs/architecture.md).
    assert np.abs(outputs - reference.reshape(outputs.shape)).max() <= 4 * np.spacing(np.abs(reference).max())
    for stage in dataflow.stages:
        for source in stage.sources:
            if source >= 0 and not isinstance(stage, ConcatStage):
                assert dataflow.stages[source].out_count == stage.in_count


def test_cnv_has_the_finn_structure():
    _, dataflow = compile_front("cnv_w2a2")
    kinds = [type(stage) for stage in dataflow.stages]
    assert kinds.count(PoolStage) == 2
    assert kinds.count(WindowStage) == 8  # six convolutions and two pools
    convs = [s for before, s in zip(dataflow.stages, dataflow.stages[1:])
             if isinstance(s, MVAULayer) and isinstance(before, WindowStage)]
    assert [(c.mh, c.mw, c.vectors) for c in convs] == [
        (64, 27, 900), (64, 576, 784), (128, 576, 144), (128, 1152, 100), (256, 1152, 9), (256, 2304, 1)]


def test_depthwise_convolutions_and_averages_are_vector_units():
    _, dataflow = compile_front("depthwise_block")
    units = [s for s in dataflow.stages if isinstance(s, VVAULayer)]
    # the 3x3 depthwise convolution, and the 8x8 average over the stream as it comes (no window)
    assert [(u.channels, u.taps, u.vectors) for u in units] == [(8, 9, 64), (16, 64, 1)]
    assert not isinstance(dataflow.stages[dataflow.stages.index(units[1]) - 1], WindowStage)
    assert np.all(units[1].weights == 1)


def test_a_residual_add_joins_the_block_input_and_the_branch():
    _, dataflow = compile_front("residual_block")
    (add,) = [s for s in dataflow.stages if isinstance(s, AddStage)]
    assert -1 in add.sources  # the skip path is the quantized input itself
    # the branch scales 0.125 and 0.1209 are aligned by integer weights close to their ratio
    assert abs(add.weights[0] / add.weights[1] - 0.12093161791563034 / 0.125) < 0.05


@pytest.mark.parametrize("name,target_fps,verify", [
    ("digits_cnn", 150_000, {"inputs": "digits_cnn_frames.npy", "labels": "digits_cnn_labels.npy", "frames": 64}),
    ("conv1d_kws", 150_000, {"inputs": "conv1d_kws_frames.npy", "expected": "conv1d_kws_expected.npy"}),
    ("depthwise_block", 150_000, {"inputs": "depthwise_block_frames.npy",
                                  "expected": "depthwise_block_expected.npy", "frames": 8}),
    ("residual_block", 150_000, {"inputs": "residual_block_frames.npy", "expected": "residual_block_expected.npy",
                                 "frames": 8}),
    ("concat_block", 150_000, {"inputs": "concat_block_frames.npy", "expected": "concat_block_expected.npy",
                               "frames": 8}),
    # onnxruntime's QDQ: max pool and flatten between quantizers (the first window needs 1,296 cycles a frame)
    ("ort_qdq_cnn", 50_000, {"inputs": "ort_qdq_cnn_frames.npy", "expected": "ort_qdq_cnn_expected.npy", "frames": 8}),
    ("ort_qdq_cnn_u8", 50_000, {"inputs": "ort_qdq_cnn_u8_frames.npy", "expected": "ort_qdq_cnn_u8_expected.npy",
                                "frames": 8}),
    # its operator format: QLinearConv and QGemm
    ("ort_qop_cnn", 50_000, {"inputs": "ort_qop_cnn_frames.npy", "expected": "ort_qop_cnn_expected.npy", "frames": 8}),
])
def test_cnn_is_bit_exact_in_verilator(tmp_path, name, target_fps, verify):
    import yaml

    from streamc.build.runner import run_build

    config = tmp_path / "build.yaml"
    config.write_text(yaml.safe_dump({
        "model": str(CNN / f"{name}.onnx"), "output_dir": str(tmp_path / "out"), "target_fps": target_fps,
        "steps": ["load", "tidy", "streamline", "to_hw", "fold", "rtl", "sim"],
        "verify": {k: v if k == "frames" else str(CNN / v) for k, v in verify.items()}}))
    report = run_build(config).rtlsim
    assert report["mismatches"] == 0
    assert report.get("expected_mismatches", 0) == 0
    assert report.get("accuracy_hw") == report.get("accuracy_reference")
    assert report["measured_cycles_per_frame"] == report["predicted_cycles_per_frame"]
