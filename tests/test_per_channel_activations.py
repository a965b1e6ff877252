"""Per-channel activation scales (Brevitas' MobileNet-v1 quantizes some activations per channel) lower wherever
each output channel reads codes of one scale: depthwise convolutions, pools, residual adds, concats, grouped
convolutions whose groups each have one scale. Layers that mix channels of different scales are refused by name.

Every model here starts like a Brevitas block: an 8-bit input quantizer, a pointwise convolution, a batch norm
written as Mul/Add, a Relu and a 4-bit unsigned quantizer with one scale per channel; what follows differs."""

import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from streamc.errors import LoweringError
from streamc.frontend.load import graph_from_model
from streamc.hw import to_hw
from streamc.stages import MVAULayer, VVAULayer
from streamc.transforms.streamline import streamline
from streamc.transforms.tidy import tidy

sys.path.insert(0, str(Path(__file__).parent / "models"))
from qonnx_reference import execute_frames  # noqa: E402  (lives with the test models)

QDOMAIN = "qonnx.custom_op.general"
C, SIDE = 4, 6
#: qonnx's executor runs node by node, a frame at a time: a few frames per model.
FRAMES = 4


class _Builder:
    """A QONNX graph written node by node, shaped like a Brevitas export."""

    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)
        self.nodes, self.inits = [], []

    def const(self, name, value):
        self.inits.append(numpy_helper.from_array(np.asarray(value, np.float32), name))
        return name

    def quant(self, x, out, bits, scale, signed=True):
        self.nodes.append(helper.make_node(
            "Quant", [x, self.const(f"{out}_s", scale), self.const(f"{out}_z", 0.0), self.const(f"{out}_b", bits)],
            [out], name=out, domain=QDOMAIN, signed=int(signed), narrow=0, rounding_mode="ROUND"))
        return out

    def node(self, op, inputs, out, **attrs):
        self.nodes.append(helper.make_node(op, inputs, [out], name=out, **attrs))
        return out

    def conv(self, x, out, out_channels, in_per_group, kernel, group=1, pads=0):
        """A convolution with 4-bit weights, one weight scale per output channel."""
        w = self.rng.uniform(-1, 1, size=(out_channels, in_per_group, kernel, kernel))
        w_scale = self.rng.uniform(0.1, 0.2, size=(out_channels, 1, 1, 1))
        wq = self.quant(self.const(f"{out}_w", w), f"{out}_wq", 4, w_scale)
        return self.node("Conv", [x, wq], out, kernel_shape=[kernel, kernel], group=group, pads=[pads] * 4)

    def batchnorm(self, x, out, channels):
        """A batch norm as Brevitas' exports fold it: a Mul and an Add per channel."""
        mul = self.node("Mul", [x, self.const(f"{out}_g", self.rng.uniform(0.5, 1.5, (1, channels, 1, 1)))],
                        f"{out}_mul")
        return self.node("Add", [mul, self.const(f"{out}_b", self.rng.uniform(-0.3, 0.3, (1, channels, 1, 1)))], out)

    def per_channel_act(self, x, out, channels, scales=None):
        """Relu then a 4-bit unsigned quantizer with a scale per channel (Brevitas' per-channel QuantReLU)."""
        scales = self.rng.uniform(0.05, 0.2, channels) if scales is None else np.asarray(scales)
        relu = self.node("Relu", [x], f"{out}_relu")
        return self.quant(relu, out, 4, scales.reshape(1, channels, 1, 1), signed=False)

    def block(self, x, out, channels, scales=None):
        """Pointwise convolution, batch norm, per-channel activation."""
        conv = self.conv(x, f"{out}_pw", channels, self.shape_channels(x), 1)
        return self.per_channel_act(self.batchnorm(conv, f"{out}_bn", channels), out, channels, scales)

    def shape_channels(self, x):
        return C if x == "q_in" else self.channels[x]

    def start(self):
        self.channels = {}
        return self.quant("input", "q_in", 8, 1 / 32)

    def model(self, output, out_shape):
        graph = helper.make_graph(self.nodes, "per_channel",
                                  [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, C, SIDE, SIDE])],
                                  [helper.make_tensor_value_info(output, TensorProto.FLOAT, out_shape)], self.inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid(QDOMAIN, 1)])
        model.ir_version = 10
        return onnx.shape_inference.infer_shapes(model)


def depthwise_model(seed=0, multiplier=1):
    """(a) per-channel activation -> depthwise 3x3 (groups = channels, times ``multiplier``) -> BN -> 4-bit quantizer."""
    b = _Builder(seed)
    act = b.block(b.start(), "act", C)
    dw = b.conv(act, "dw", C * multiplier, 1, 3, group=C, pads=1)
    out = b.quant(b.node("Relu", [b.batchnorm(dw, "dw_bn", C * multiplier)], "dw_relu"), "output", 4, 0.25,
                  signed=False)
    return b.model(out, [1, C * multiplier, SIDE, SIDE])


def input_depthwise_model(seed=9):
    """The input quantizer itself per channel (Relu, 4-bit unsigned) -> depthwise 3x3 -> BN -> 4-bit quantizer:
    the host divides each channel by its own scale."""
    b = _Builder(seed)
    b.channels = {}
    act = b.per_channel_act("input", "act", C)
    dw = b.conv(act, "dw", C, 1, 3, group=C, pads=1)
    out = b.quant(b.batchnorm(dw, "dw_bn", C), "output", 4, 0.25)
    return b.model(out, [1, C, SIDE, SIDE])


def maxpool_model(seed=1):
    """(b) per-channel activation -> 2x2 max pool -> depthwise 3x3 -> BN -> 4-bit signed quantizer."""
    b = _Builder(seed)
    act = b.block(b.start(), "act", C)
    pool = b.node("MaxPool", [act], "pool", kernel_shape=[2, 2], strides=[2, 2])
    dw = b.conv(pool, "dw", C, 1, 3, group=C, pads=1)
    out = b.quant(b.batchnorm(dw, "dw_bn", C), "output", 4, 0.25)
    return b.model(out, [1, C, SIDE // 2, SIDE // 2])


def global_pool_model(seed=2, per_channel_out=False):
    """(c) per-channel activation -> global average pool -> 4-bit quantizer (per tensor, or per channel: then
    the host tail dequantizes each channel with its own scale)."""
    b = _Builder(seed)
    act = b.block(b.start(), "act", C)
    pool = b.node("GlobalAveragePool", [act], "gap")
    scale = np.linspace(0.05, 0.12, C).reshape(1, C, 1, 1) if per_channel_out else 0.1
    out = b.quant(pool, "output", 4, scale, signed=False)
    return b.model(out, [1, C, 1, 1])


def residual_model(seed=3, ratio=0.5):
    """(d) a residual Add of the per-channel activation and a depthwise branch quantized per channel, with
    scales ``ratio`` times the skip's in each channel (``None``: scales of their own) -> 4-bit quantizer."""
    b = _Builder(seed)
    scales = b.rng.uniform(0.05, 0.2, C)
    act = b.block(b.start(), "act", C, scales)
    dw = b.conv(act, "dw", C, 1, 3, group=C, pads=1)
    branch_scales = None if ratio is None else scales * ratio
    branch = b.per_channel_act(b.batchnorm(dw, "dw_bn", C), "branch", C, branch_scales)
    total = b.node("Add", [act, branch], "residual")
    out = b.quant(total, "output", 4, 0.25, signed=False)
    return b.model(out, [1, C, SIDE, SIDE])


def concat_model(seed=4):
    """(e) two per-channel activations side by side on channels -> depthwise 3x3 -> BN -> 4-bit quantizer."""
    b = _Builder(seed)
    x = b.start()
    left, right = b.block(x, "left", C), b.block(x, "right", 2)
    cat = b.node("Concat", [left, right], "cat", axis=1)
    dw = b.conv(cat, "dw", C + 2, 1, 3, group=C + 2, pads=1)
    out = b.quant(b.batchnorm(dw, "dw_bn", C + 2), "output", 4, 0.25)
    return b.model(out, [1, C + 2, SIDE, SIDE])


def grouped_model(seed=5, same_within_groups=True):
    """A grouped 3x3 convolution (2 groups of 2 channels) after a per-channel activation whose scale is
    constant within each group (or not) -> 4-bit quantizer."""
    b = _Builder(seed)
    scales = np.array([0.07, 0.07, 0.13, 0.13]) if same_within_groups else np.array([0.07, 0.09, 0.13, 0.11])
    act = b.block(b.start(), "act", C, scales)
    conv = b.conv(act, "grouped", C, 2, 3, group=2, pads=1)
    out = b.quant(b.batchnorm(conv, "grouped_bn", C), "output", 4, 0.25)
    return b.model(out, [1, C, SIDE, SIDE])


def dense_conv_model(seed=6):
    """(f) an ordinary 3x3 convolution after the per-channel activation: it mixes channels of different scales."""
    b = _Builder(seed)
    act = b.block(b.start(), "act", C)
    conv = b.conv(act, "mixing", C, C, 3, pads=1)
    out = b.quant(conv, "output", 4, 0.25)
    return b.model(out, [1, C, SIDE, SIDE])


def flatten_matmul_model(seed=7):
    """(f) the per-channel activation flattened into a dense layer."""
    b = _Builder(seed)
    act = b.block(b.start(), "act", C)
    flat = b.node("Flatten", [act], "flatten")
    w = b.quant(b.const("fc_w", b.rng.uniform(-1, 1, (C * SIDE * SIDE, 3))), "fc_wq", 4, 0.1)
    out = b.node("MatMul", [flat, w], "fc")
    return b.model(out, [1, 3])


def dense_matmul_model(seed=8):
    """(f) features (N, K) quantized per feature after a dense layer, then another dense layer."""
    rng = np.random.default_rng(seed)
    b = _Builder(seed)
    b.quant("input", "q_in", 8, 1 / 32)
    w1 = b.quant(b.const("fc1_w", rng.uniform(-1, 1, (8, 6))), "fc1_wq", 4, 0.1)
    h = b.node("Relu", [b.node("MatMul", ["q_in", w1], "fc1")], "fc1_relu")
    act = b.quant(h, "act", 4, rng.uniform(0.05, 0.2, (1, 6)), signed=False)
    w2 = b.quant(b.const("fc2_w", rng.uniform(-1, 1, (6, 3))), "fc2_wq", 4, 0.1)
    out = b.node("MatMul", [act, w2], "fc2")
    graph = helper.make_graph(b.nodes, "dense", [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 8])],
                              [helper.make_tensor_value_info(out, TensorProto.FLOAT, [1, 3])], b.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid(QDOMAIN, 1)])
    model.ir_version = 10
    return model


def _frames(model, count=FRAMES, seed=10):
    shape = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
    return np.random.default_rng(seed).uniform(-2, 2, size=(count, *shape[1:])).astype(np.float32)


def _compile(model):
    return to_hw(streamline(tidy(graph_from_model(model))))


def _check_against_qonnx(model, frames=None):
    """The emulated hardware and host against qonnx's executor: the hardware's integers equal the codes of the
    reference's output quantizer, and the float output after the host tail equals the reference."""
    dataflow = _compile(model)
    frames = _frames(model) if frames is None else frames
    integers, outputs = dataflow.emulate(frames)
    reference = execute_frames(model, frames).reshape(outputs.shape)
    boundary = dataflow.boundary
    value = reference.astype(np.float64)
    channels = (-1,) + (1,) * (value.ndim - 2)
    codes = value / np.reshape(boundary["scale"], channels) + np.reshape(boundary["offset"], channels)
    np.testing.assert_array_equal(integers, dataflow.to_output_stream_order(np.rint(codes)))
    assert np.abs(outputs - reference).max() <= 4 * np.spacing(np.abs(reference).max())
    return dataflow


def _per_channel_scales(model, name):
    return next(numpy_helper.to_array(t) for t in model.graph.initializer if t.name == f"{name}_s")


def test_a_depthwise_convolution_reads_per_channel_scales():
    model = depthwise_model()
    assert np.unique(_per_channel_scales(model, "act")).size == C
    dataflow = _check_against_qonnx(model)
    units = [s for s in dataflow.stages if isinstance(s, VVAULayer)]
    assert [(u.channels, u.taps) for u in units] == [(C, 9)]


def test_a_depthwise_convolution_with_a_channel_multiplier_reads_per_channel_scales():
    # Two output channels per input channel: each still reads codes of one scale (a dense unit, zeros across groups).
    dataflow = _check_against_qonnx(depthwise_model(seed=11, multiplier=2))
    assert any(isinstance(s, MVAULayer) and s.mh == 2 * C for s in dataflow.stages)


def test_an_input_quantized_per_channel():
    _check_against_qonnx(input_depthwise_model())


def test_a_max_pool_then_a_depthwise_convolution():
    _check_against_qonnx(maxpool_model())


@pytest.mark.parametrize("per_channel_out", [False, True])
def test_a_global_average_pool_scales_each_channel_by_its_own_scale(per_channel_out):
    dataflow = _check_against_qonnx(global_pool_model(per_channel_out=per_channel_out))
    assert isinstance(dataflow.stages[-1], VVAULayer)


def test_a_residual_add_of_per_channel_branches_is_checked_in_every_channel():
    dataflow = _check_against_qonnx(residual_model())
    (add,) = [s for s in dataflow.stages if type(s).__name__ == "AddStage"]
    assert add.weights == (2, 1)  # the skip's scales are twice the branch's in every channel


def test_a_residual_add_with_a_different_scale_ratio_per_channel_is_refused_by_name():
    """The hardware add weights its inputs alike in every channel; ratios that differ per channel (each by more
    than the output quantizer's resolution can hide) have no such weighting."""
    with pytest.raises(LoweringError, match=r"^node 'residual' \(Add\): no integer weighting of its inputs \(per-channel "
                                            r"scale ratios from .* to .*; the hardware add weights its inputs alike in "
                                            r"every channel\) reproduces quantizer 'output' on every pair of input "
                                            r"codes in every channel$"):
        _compile(residual_model(seed=12, ratio=None))


def test_a_concat_of_per_channel_branches_then_a_depthwise_convolution():
    _check_against_qonnx(concat_model())


def test_a_grouped_convolution_whose_groups_each_have_one_scale():
    _check_against_qonnx(grouped_model())


def test_a_grouped_convolution_mixing_scales_within_a_group_is_refused_by_name():
    with pytest.raises(LoweringError, match=r"^quantizer 'act': its scale must be one value per tensor here \(node "
                                            r"'grouped' \(Conv\) mixes its input channels within each of its 2 groups"):
        _compile(grouped_model(same_within_groups=False))


@pytest.mark.parametrize("make,node", [(dense_conv_model, r"node 'mixing' \(Conv\)"),
                                       (dense_matmul_model, r"node 'fc2' \(MatMul\)")])
def test_a_layer_mixing_channels_of_different_scales_is_refused_by_name(make, node):
    with pytest.raises(LoweringError, match=rf"^quantizer 'act': its scale must be one value per tensor here \({node} "
                                            r"mixes its input channels, so its accumulator would sum codes of different "
                                            r"scales\); it has \d+ values; per-channel activation scales are supported "
                                            r"into depthwise convolutions, pools, adds and concats"):
        _compile(make())


def test_a_flatten_of_per_channel_codes_into_a_dense_layer_is_refused_by_name():
    with pytest.raises(LoweringError, match=r"^node 'flatten' \(Flatten\): it moves the channels of codes with "
                                            r"per-channel scales \(quantizer 'act'\) where the next layer would mix "
                                            r"them; per-channel activation scales are supported into depthwise"):
        _compile(flatten_matmul_model())


def test_the_depthwise_case_is_bit_exact_in_verilator(tmp_path):
    import yaml

    from streamc.pipeline.runner import run_build

    model = depthwise_model(seed=13)
    onnx.save(model, tmp_path / "model.onnx")
    frames = _frames(model, 8, seed=14)
    np.save(tmp_path / "frames.npy", frames)
    np.save(tmp_path / "expected.npy", execute_frames(model, frames))
    config = {"model": str(tmp_path / "model.onnx"), "output_dir": str(tmp_path / "out"), "target_fps": 50_000,
              "steps": ["load", "tidy", "streamline", "to_hw", "fold", "rtl", "sim"],
              "verify": {"inputs": str(tmp_path / "frames.npy"), "expected": str(tmp_path / "expected.npy")}}
    (tmp_path / "build.yaml").write_text(yaml.safe_dump(config))
    report = run_build(tmp_path / "build.yaml").rtlsim
    assert report["frames"] == 8 and report["mismatches"] == 0 and report["expected_mismatches"] == 0
    assert report["end_to_end_differing_frames"] == []
    assert report["measured_cycles_per_frame"] == report["predicted_cycles_per_frame"]
