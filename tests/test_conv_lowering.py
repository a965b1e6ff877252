"""Convolutional networks lower to sliding windows, MVAUs and max pools that compute the model exactly."""

import sys
from pathlib import Path

import numpy as np
import pytest

from streamc.execute import execute
from streamc.frontend.load import load_onnx
from streamc.hw import to_hw
from streamc.stages import (
    AddStage,
    ConcatStage,
    MVAULayer,
    PoolStage,
    VVAULayer,
    WindowStage,
)
from streamc.transforms.streamline import streamline
from streamc.transforms.tidy import tidy

CNN = Path(__file__).parent / "models" / "cnn"
sys.path.insert(0, str(CNN.parent))
from qonnx_reference import execute_frames  # noqa: E402  (lives with the test models)
from rtl_helpers import assert_latency_predicted  # noqa: E402

#: qonnx's executor runs a frame at a time, node by node: a few frames per model.
QONNX_FRAMES = 3
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


@pytest.mark.parametrize("name", sorted(name for name in CASES if not name.startswith("ort_")))
def test_emulated_hardware_equals_qonnxs_executor(name):
    """The Brevitas exports (the three CNVs among them) against an executor that is not streamc's."""
    frames_file, _ = CASES[name]
    _, dataflow = compile_front(name)
    frames = np.load(CNN / frames_file)[:QONNX_FRAMES]
    _, outputs = dataflow.emulate(frames)
    reference = execute_frames(CNN / f"{name}.onnx", frames).reshape(outputs.shape)
    if name.startswith("cnv_"):
        # Power-of-two scales up to the logits: the host tail's float32 is exact.
        np.testing.assert_array_equal(outputs, reference)
    assert np.abs(outputs - reference).max() <= 4 * np.spacing(np.abs(reference).max())


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

    from streamc.pipeline.runner import run_build

    config = tmp_path / "build.yaml"
    config.write_text(yaml.safe_dump({
        "model": str(CNN / f"{name}.onnx"), "output_dir": str(tmp_path / "out"), "target_fps": target_fps,
        "steps": ["load", "tidy", "streamline", "to_hw", "fold", "rtl", "sim"],
        "verify": {k: v if k == "frames" else str(CNN / v) for k, v in verify.items()}}))
    report = run_build(config).rtlsim
    assert report["mismatches"] == 0
    assert report.get("expected_mismatches", 0) == 0
    assert report["end_to_end_differing_frames"] == []
    assert report.get("accuracy_hw") == report.get("accuracy_reference")
    assert report["measured_cycles_per_frame"] == report["predicted_cycles_per_frame"]
    assert_latency_predicted(report)


def _conv_bias_tanh_model(bias_shape: tuple[int, ...], seed: int = 0):
    """QONNX: 4-bit codes -> Conv (3-bit weights, 4 channels) -> 8-bit quantizer -> + bias -> Tanh -> 8-bit
    quantizer. The bias between the two quantizers makes the ops after the convolution differ per channel;
    at 8 bits a table after the first quantizer (a requantization) is cheaper than 255 thresholds."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)
    inits = []

    def const(name, value):
        inits.append(numpy_helper.from_array(np.asarray(value, np.float32), name))
        return name

    def quant(x, out, bits, scale):
        return helper.make_node("Quant", [x, const(f"{out}_s", scale), const(f"{out}_z", 0.0), const(f"{out}_b", bits)],
                                [out], name=out, domain="qonnx.custom_op.general", signed=1, narrow=0,
                                rounding_mode="ROUND")

    nodes = [quant("input", "x_q", 4, 0.125),
             quant(const("w", rng.uniform(-1, 1, size=(4, 2, 3, 3))), "w_q", 3, 0.25),
             helper.make_node("Conv", ["x_q", "w_q"], ["conv"], name="conv", kernel_shape=[3, 3]),
             quant("conv", "act", 8, 1 / 16),
             helper.make_node("Add", ["act", const("bias", rng.uniform(-0.6, 0.6, size=bias_shape))], ["biased"],
                              name="bias_add"),
             helper.make_node("Tanh", ["biased"], ["tanh"], name="tanh"),
             quant("tanh", "output", 8, 1 / 128)]
    graph = helper.make_graph(nodes, "conv_bias_tanh", [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 2, 6, 6])],
                              [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 4, 4, 4])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13),
                                                    helper.make_opsetid("qonnx.custom_op.general", 1)])
    return onnx.shape_inference.infer_shapes(model)


def test_ops_that_differ_per_channel_after_a_convolution_are_a_table_per_channel(tmp_path):
    import onnx

    onnx.save(_conv_bias_tanh_model((1, 4, 1, 1)), tmp_path / "model.onnx")
    graph = load_onnx(tmp_path / "model.onnx")
    dataflow = to_hw(streamline(tidy(graph)))
    table = dataflow.stages[-1]
    assert table.output_stage == "table" and table.table.shape == (4, 256)
    assert len({tuple(row) for row in table.table}) == 4
    frames = np.random.default_rng(1).uniform(-1, 1, size=(16, 2, 6, 6)).astype(np.float32)
    _, outputs = dataflow.emulate(frames)
    reference = execute(graph, {"input": frames})["output"]
    np.testing.assert_array_equal(outputs, reference.reshape(outputs.shape))


def test_a_constant_per_pixel_between_quantizers_is_refused_by_name(tmp_path):
    import onnx

    from streamc.errors import LoweringError

    onnx.save(_conv_bias_tanh_model((1, 4, 4, 4)), tmp_path / "model.onnx")
    with pytest.raises(LoweringError, match=r"to quantizer 'output' differ within a channel \(a constant per "
                                            r"pixel\); streamc takes ops that are the same for every pixel"):
        to_hw(streamline(tidy(load_onnx(tmp_path / "model.onnx"))))


def test_a_table_per_channel_after_a_convolution_is_bit_exact_in_verilator(tmp_path):
    """The lanes of a table per channel cycle through the channels of each pixel of a feature map."""
    import onnx
    import yaml

    from streamc.pipeline.runner import run_build

    onnx.save(_conv_bias_tanh_model((1, 4, 1, 1), seed=2), tmp_path / "model.onnx")
    graph = load_onnx(tmp_path / "model.onnx")
    frames = np.random.default_rng(3).uniform(-1, 1, size=(8, 2, 6, 6)).astype(np.float32)
    np.save(tmp_path / "frames.npy", frames)
    np.save(tmp_path / "expected.npy", execute(graph, {"input": frames})["output"])
    config = {"model": str(tmp_path / "model.onnx"), "output_dir": str(tmp_path / "out"), "devices": ["ecp5-85f"],
              "budget": 0.2, "steps": ["load", "tidy", "streamline", "to_hw", "fold", "rtl", "sim"],
              "verify": {"inputs": str(tmp_path / "frames.npy"), "expected": str(tmp_path / "expected.npy")}}
    (tmp_path / "build.yaml").write_text(yaml.safe_dump(config))
    state = run_build(tmp_path / "build.yaml")
    table = state.dataflow.stages[-1]
    assert table.output_stage == "table" and table.table.shape == (4, 256) and table.elems > 1
    report = state.rtlsim
    assert report["frames"] == 8 and report["mismatches"] == 0 and report["expected_mismatches"] == 0
    assert report["measured_cycles_per_frame"] == report["predicted_cycles_per_frame"]
