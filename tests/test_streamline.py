"""The streamlined integer graph equals the float32 reference, exactly, on QONNX MLPs."""

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from models.qonnx_reference import execute_frames
from qonnx_factory import LayerSpec, MlpSpec, make_mlp, random_frames
from streamc.pipeline.steps import expected_hw_outputs
from streamc.errors import LoweringError
from streamc.execute import execute
from streamc.frontend.load import graph_from_model
from streamc.hw import to_hw
from streamc.transforms.streamline import streamline
from streamc.transforms.tidy import tidy

SPECS = {
    "w2a2-bn": MlpSpec(20, [LayerSpec(16), LayerSpec(12), LayerSpec(5, act_bits=None)]),
    "bipolar": MlpSpec(24, [LayerSpec(16, weight_bits=1, act_bits=1), LayerSpec(8, weight_bits=1, act_bits=1),
                            LayerSpec(4, weight_bits=1, act_bits=None)], in_bits=1, seed=3),
    "mixed": MlpSpec(20, [LayerSpec(16, bias=True, gemm=False), LayerSpec(12, weight_bits=1, act_bits=1),
                          LayerSpec(8, act_bits=3, act_signed=False, relu=True, per_channel_weight_scale=True),
                          LayerSpec(5, weight_bits=4, act_bits=None, batchnorm=False)], seed=5),
    "uint-in-4bit": MlpSpec(10, [LayerSpec(12, weight_bits=4, act_bits=4, relu=True, narrow_weights=False),
                                 LayerSpec(6, act_bits=3)], in_bits=4, in_signed=False, seed=7, extra_tail=False),
}


def compile_graph(model):
    tidied = tidy(graph_from_model(model))
    return tidied, streamline(tidied)


def hw_values(streamlined, frames):
    """Run head, integer layers and tail separately, as the hardware build does."""
    df = to_hw(streamlined)
    name = streamlined.inputs[0].name
    x = np.rint(execute(df.head, {name: frames})[df.hw_input]).reshape(len(frames), -1).astype(np.int64)
    for layer in df.layers:
        acc = x @ layer.weights.T
        x = acc if layer.thresholds is None else _threshold(acc, layer)
    return df, x


def _assert_hardware_equals_model(dataflow, model, frames):
    """The emulated hardware gives the model's outputs on ``frames`` (input ``x``, output ``y``): the integer
    parts exactly, the float32 tail within a few ulps."""
    _, outputs = dataflow.emulate(frames)
    reference = execute(graph_from_model(model), {"x": frames})["y"]
    assert np.abs(outputs - reference.reshape(outputs.shape)).max() <= 4 * np.spacing(np.abs(reference).max())


def _threshold(acc, layer):
    count = (acc[:, :, None] >= layer.thresholds[None]).sum(axis=2)
    return np.where(count > 0, 1, -1) if layer.out_dtype.bipolar else count + layer.out_bias


@pytest.mark.parametrize("key", sorted(SPECS))
def test_integer_pipeline_equals_reference(key):
    spec = SPECS[key]
    model = make_mlp(spec)
    tidied, streamlined = compile_graph(model)
    frames = random_frames(spec, 400)[:, 0, :]
    original = graph_from_model(model)
    reference = execute(original, {"input": frames})["output"]
    assert np.array_equal(execute(streamlined, {"input": frames})["output"], reference)
    df, hw = hw_values(streamlined, frames)
    expected = expected_hw_outputs(df, execute(tidied, {"input": frames}, keep_all=True))
    assert np.array_equal(hw, expected)
    for layer in df.layers:
        assert layer.weight_dtype.contains(layer.weights)


@pytest.mark.parametrize("mode", ["ROUND", "HALF_UP", "HALF_DOWN", "FLOOR", "CEIL", "UP", "DOWN"])
def test_ties_follow_the_rounding_mode(mode):
    """acc * 2^-1 lands on k + 0.5 for every odd accumulator value: every tie is exercised."""
    rng = np.random.default_rng(0)
    q = "qonnx.custom_op.general"
    inits = [numpy_helper.from_array(np.asarray(v, np.float32), n) for n, v in [
        ("s_in", 1.0), ("z", 0.0), ("b_in", 4.0), ("W", rng.integers(-1, 2, size=(6, 3))), ("s_w", 1.0),
        ("b_w", 2.0), ("s_out", 2.0), ("b_out", 4.0), ("bias", [0.0, 1.0, -0.5])]]
    nodes = [
        helper.make_node("Quant", ["x", "s_in", "z", "b_in"], ["xq"], domain=q, signed=1, narrow=0, rounding_mode="ROUND"),
        helper.make_node("Quant", ["W", "s_w", "z", "b_w"], ["Wq"], domain=q, signed=1, narrow=1, rounding_mode="ROUND"),
        helper.make_node("MatMul", ["xq", "Wq"], ["mm"]),
        helper.make_node("Add", ["mm", "bias"], ["mmb"]),
        helper.make_node("Quant", ["mmb", "s_out", "z", "b_out"], ["y"], domain=q, signed=1, narrow=0, rounding_mode=mode),
    ]
    graph = helper.make_graph(nodes, "ties", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 6])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid(q, 1)])
    _, streamlined = compile_graph(model)
    frames = rng.integers(-8, 8, size=(4000, 6)).astype(np.float32)
    reference = execute(graph_from_model(model), {"x": frames})["y"]
    assert np.array_equal(execute(streamlined, {"x": frames})["y"], reference)


def test_qonnx_executes_the_streamlined_model():
    spec = SPECS["mixed"]
    _, streamlined = compile_graph(make_mlp(spec))
    frames = random_frames(spec, 5)[:, 0, :]
    ours = execute(streamlined, {"input": frames})["output"]
    assert np.array_equal(execute_frames(streamlined.to_onnx(), frames), ours)


def test_decreasing_channels_get_negated_weights():
    spec = MlpSpec(8, [LayerSpec(32), LayerSpec(4, act_bits=None)], seed=11)
    _, streamlined = compile_graph(make_mlp(spec))
    first = to_hw(streamlined).layers[0]
    tidied_weights = tidy(graph_from_model(make_mlp(spec))).quantized
    codes = next(q.codes for q in tidied_weights.values() if q.codes.shape == (8, 32)).T
    negated = np.all(first.weights == -codes, axis=1) & np.any(codes != 0, axis=1)
    assert negated.any() and not negated.all()


def _replace(model, index, node):
    model.graph.node[index].CopyFrom(node)
    return model


def test_unquantized_weight_is_rejected():
    model = make_mlp(SPECS["w2a2-bn"])
    gemm = next(i for i, n in enumerate(model.graph.node) if n.op_type == "Gemm")
    node = model.graph.node[gemm]
    _replace(model, gemm, helper.make_node("Gemm", [node.input[0], "W0"], node.output, name="Gemm0", transB=1))
    with pytest.raises(LoweringError, match=r"^node 'Gemm0' \(MatMul\): its weight 'W0_transposed' is not quantized"):
        compile_graph(model)


def test_non_monotonic_op_is_rejected():
    model = make_mlp(MlpSpec(6, [LayerSpec(4, batchnorm=False), LayerSpec(2, act_bits=None)]))
    i = next(i for i, n in enumerate(model.graph.node) if n.op_type == "Gemm")
    out = model.graph.node[i].output[0]
    model.graph.node.insert(i + 1, helper.make_node("Abs", [out], [out + "_abs"], name="AbsNode"))
    nxt = model.graph.node[i + 2]
    nxt.input[0] = out + "_abs"
    with pytest.raises(LoweringError, match=r"^node 'AbsNode' \(Abs\) lies between node 'Gemm0' \(MatMul\) and "
                                            r"quantizer 'ActQuant0'; supported there: "):
        compile_graph(model)


def test_float_weights_everywhere_are_rejected():
    model = make_mlp(MlpSpec(6, [LayerSpec(4, act_bits=None, batchnorm=False)]))
    gemm = next(i for i, n in enumerate(model.graph.node) if n.op_type == "Gemm")
    node = model.graph.node[gemm]
    _replace(model, gemm, helper.make_node("Gemm", [node.input[0], "W0"], node.output, name="Gemm0", transB=1))
    with pytest.raises(LoweringError, match=r"^nothing to put in hardware after the input quantizer: node 'Gemm0' "
                                            r"\(MatMul\) has float weights; quantize them"):
        compile_graph(model)


def test_missing_input_quantizer_is_rejected():
    model = make_mlp(SPECS["w2a2-bn"])
    first = model.graph.node[0]
    model.graph.node.remove(first)
    for node in model.graph.node:
        node.input[:] = ["input" if t == "q0" else t for t in node.input]
    with pytest.raises(LoweringError, match=r"^node 'Gemm0' \(MatMul\) reads an unquantized input; put an activation "
                                            r"quantizer \(Quant, BipolarQuant or QuantizeLinear\) before the first "
                                            r"linear layer, or give an int8/uint8 input to a MatMulInteger or ConvInteger$"):
        compile_graph(model)


def test_a_branch_of_float_ops_is_rejected():
    model = make_mlp(SPECS["w2a2-bn"])
    model.graph.node.append(helper.make_node("Relu", ["q0"], ["side"], name="SideBranch"))
    with pytest.raises(LoweringError, match=r"^node 'SideBranch' \(Relu\) follows quantizer 'QuantIn'; streamc expects"):
        compile_graph(model)


def _conv_chain(act_scale: np.ndarray):
    """Quant -> Conv1d -> Quant (scale ``act_scale``) -> Conv1d, QONNX, weights quantized to 2 bits."""
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(np.asarray(v, np.float32), name) for name, v in [
        ("s_in", 0.25), ("s_act", act_scale), ("zero", 0.0), ("bits", 2.0), ("s_w", 0.5),
        ("w1", rng.integers(-1, 2, (4, 2, 3))), ("w2", rng.integers(-1, 2, (3, 4, 3)))]]
    quant = dict(domain="qonnx.custom_op.general", signed=1, narrow=0, rounding_mode="ROUND")
    nodes = [
        helper.make_node("Quant", ["x", "s_in", "zero", "bits"], ["q0"], name="QuantIn", **quant),
        helper.make_node("Quant", ["w1", "s_w", "zero", "bits"], ["w1q"], name="W1", **quant),
        helper.make_node("Conv", ["q0", "w1q"], ["c1"], name="Conv1", kernel_shape=[3]),
        helper.make_node("Quant", ["c1", "s_act", "zero", "bits"], ["q1"], name="ActQuant", **quant),
        helper.make_node("Quant", ["w2", "s_w", "zero", "bits"], ["w2q"], name="W2", **quant),
        helper.make_node("Conv", ["q1", "w2q"], ["y"], name="Conv2", kernel_shape=[3]),
    ]
    graph = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, 4])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13),
                                                   helper.make_opsetid("qonnx.custom_op.general", 1)])


def test_per_channel_activation_scale_before_a_convolution_is_refused_by_name():
    with pytest.raises(LoweringError, match=r"^quantizer 'ActQuant': its scale must be one value per tensor here"):
        compile_graph(_conv_chain(np.linspace(0.5, 1.0, 4).reshape(1, 4, 1)))
    compile_graph(_conv_chain(np.float32(0.5)))  # the same chain with one scale compiles


def _qcdq_residual():
    """QCDQ (QuantizeLinear -> Clip -> DequantizeLinear): x -> MatMul -> quantizer of its own scale -> Add x ->
    Relu -> quantizer -> MatMul. The branches' scales are 0.3 and 0.077, no small-integer ratio."""
    rng = np.random.default_rng(1)
    inits = [numpy_helper.from_array(np.asarray(v, dtype), name) for name, v, dtype in [
        ("s_x", 0.3, np.float32), ("s_b", 0.077, np.float32), ("s_o", 0.7, np.float32), ("s_w", 0.05, np.float32),
        ("z8", 0, np.int8), ("lo", -8, np.int8), ("hi", 7, np.int8), ("lo_o", 0, np.int8),
        ("w1", rng.integers(-7, 8, (6, 6)), np.int8), ("w2", rng.integers(-7, 8, (6, 3)), np.int8)]]

    def qcdq(x, scale, lo, name):
        return [helper.make_node("QuantizeLinear", [x, scale, "z8"], [f"{name}_q"], name=name),
                helper.make_node("Clip", [f"{name}_q", lo, "hi"], [f"{name}_c"], name=f"{name}_clip"),
                helper.make_node("DequantizeLinear", [f"{name}_c", scale, "z8"], [f"{name}_dq"], name=f"{name}_dq")]

    nodes = [*qcdq("x", "s_x", "lo", "QX"),
             helper.make_node("DequantizeLinear", ["w1", "s_w", "z8"], ["w1f"], name="W1"),
             helper.make_node("MatMul", ["QX_dq", "w1f"], ["mm"], name="MatMul1"),
             *qcdq("mm", "s_b", "lo", "QB"),
             helper.make_node("Add", ["QX_dq", "QB_dq"], ["sum"], name="Residual"),
             helper.make_node("Relu", ["sum"], ["relu"], name="Relu"),
             *qcdq("relu", "s_o", "lo_o", "QO"),
             helper.make_node("DequantizeLinear", ["w2", "s_w", "z8"], ["w2f"], name="W2"),
             helper.make_node("MatMul", ["QO_dq", "w2f"], ["y"], name="MatMul2")]
    graph = helper.make_graph(nodes, "residual", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 6])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def test_a_qcdq_residual_add_of_two_scales_equals_the_model():
    model = _qcdq_residual()
    _, streamlined = compile_graph(model)
    frames = np.random.default_rng(2).uniform(-3, 3, (2000, 6)).astype(np.float32)
    reference = execute(graph_from_model(model), {"x": frames})["y"]
    # The last MatMul's float32 sum and the integer one times its scale differ by rounding only; one code
    # more or less in a channel would move an output by 0.7 * 0.05 at least.
    assert np.abs(execute(streamlined, {"x": frames})["y"] - reference).max() <= 4 * np.spacing(np.abs(reference).max())


def test_a_matmul_over_the_rows_of_a_matrix_is_refused():
    """One vector per frame is what the unit reads: a (1, 4, 8) input would need four."""
    rng = np.random.default_rng(3)
    inits = [numpy_helper.from_array(np.asarray(v, np.float32), name) for name, v in [
        ("s", 0.25), ("zero", 0.0), ("bits", 4.0), ("w", rng.integers(-7, 8, (8, 6)))]]
    quant = dict(domain="qonnx.custom_op.general", signed=1, narrow=0, rounding_mode="ROUND")
    nodes = [helper.make_node("Quant", ["x", "s", "zero", "bits"], ["q0"], name="QuantIn", **quant),
             helper.make_node("Quant", ["w", "s", "zero", "bits"], ["wq"], name="W", **quant),
             helper.make_node("MatMul", ["q0", "wq"], ["mm"], name="Rows"),
             helper.make_node("Quant", ["mm", "s", "zero", "bits"], ["y"], name="QuantOut", **quant)]
    graph = helper.make_graph(nodes, "rows", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 6])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13),
                                                    helper.make_opsetid("qonnx.custom_op.general", 1)])
    with pytest.raises(LoweringError, match=r"^node 'Rows' \(MatMul\): its input has shape \(1, 4, 8\); streamc maps "
                                            r"a MatMul on \(batch, features\) inputs"):
        compile_graph(model)


@pytest.mark.parametrize("size", [5, 6])
def test_ceil_mode_max_pool_equals_the_model(size):
    """A 3x3 pool of stride 2 on 5x5 has 2x2 windows either way; on 6x6, ceil_mode adds a third, which
    reaches one row and column past the image."""
    rng = np.random.default_rng(4)
    out = (size - 3 + (1 if size % 2 == 0 else 0)) // 2 + 1
    inits = [numpy_helper.from_array(np.asarray(v, np.float32), name) for name, v in [
        ("s", 0.25), ("zero", 0.0), ("bits", 4.0), ("w", rng.integers(-7, 8, (2 * out * out, 3)))]]
    quant = dict(domain="qonnx.custom_op.general", signed=1, narrow=0, rounding_mode="ROUND")
    nodes = [helper.make_node("Quant", ["x", "s", "zero", "bits"], ["q0"], name="QuantIn", **quant),
             helper.make_node("MaxPool", ["q0"], ["p"], name="Pool", kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1),
             helper.make_node("Flatten", ["p"], ["f"], name="Flat"),
             helper.make_node("Quant", ["w", "s", "zero", "bits"], ["wq"], name="W", **quant),
             helper.make_node("MatMul", ["f", "wq"], ["y"], name="Dense")]
    graph = helper.make_graph(nodes, "pool", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, size, size])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13),
                                                    helper.make_opsetid("qonnx.custom_op.general", 1)])
    _, streamlined = compile_graph(model)
    frames = rng.uniform(-2, 2, (6, 2, size, size)).astype(np.float32)
    _assert_hardware_equals_model(to_hw(streamlined), model, frames)


@pytest.mark.parametrize("keepdims", [0, 1])
def test_reduce_max_over_the_image_is_a_global_max_pool(keepdims):
    rng = np.random.default_rng(5)
    inits = [numpy_helper.from_array(np.asarray(v, np.float32), name) for name, v in [
        ("s", 0.25), ("zero", 0.0), ("bits", 4.0), ("w", rng.integers(-7, 8, (3, 2)))]]
    inits.append(numpy_helper.from_array(np.array([2, 3], np.int64), "axes"))
    quant = dict(domain="qonnx.custom_op.general", signed=1, narrow=0, rounding_mode="ROUND")
    nodes = [helper.make_node("Quant", ["x", "s", "zero", "bits"], ["q0"], name="QuantIn", **quant),
             helper.make_node("ReduceMax", ["q0", "axes"], ["m"], name="GlobalMax", keepdims=keepdims),
             helper.make_node("Flatten", ["m"], ["f"], name="Flat"),
             helper.make_node("Quant", ["w", "s", "zero", "bits"], ["wq"], name="W", **quant),
             helper.make_node("MatMul", ["f", "wq"], ["y"], name="Dense")]
    graph = helper.make_graph(nodes, "gmax", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 4, 5])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18),
                                                    helper.make_opsetid("qonnx.custom_op.general", 1)])
    _, streamlined = compile_graph(model)
    frames = rng.uniform(-2, 2, (6, 3, 4, 5)).astype(np.float32)
    _assert_hardware_equals_model(to_hw(streamlined), model, frames)


def _same_padded_model(conv_pad: str, pool_pad: str, size: tuple[int, int], pool_strides: list[int]):
    """Quant -> Conv 3x3 stride 2 (``conv_pad``) -> Quant -> MaxPool 2x2 (``pool_pad``) -> Flatten -> MatMul."""
    rng = np.random.default_rng(6)
    conv_out = [-(-s // 2) for s in size] if conv_pad.startswith("SAME") else [(s - 3) // 2 + 1 for s in size]
    pool_out = [-(-s // t) for s, t in zip(conv_out, pool_strides)]
    inits = [numpy_helper.from_array(np.asarray(v, np.float32), name) for name, v in [
        ("s", 0.25), ("zero", 0.0), ("bits", 3.0), ("wc", rng.integers(-3, 4, (4, 2, 3, 3))),
        ("wd", rng.integers(-3, 4, (4 * pool_out[0] * pool_out[1], 3)))]]
    quant = dict(domain="qonnx.custom_op.general", signed=1, narrow=0, rounding_mode="ROUND")
    nodes = [helper.make_node("Quant", ["x", "s", "zero", "bits"], ["q0"], name="QuantIn", **quant),
             helper.make_node("Quant", ["wc", "s", "zero", "bits"], ["wcq"], name="WC", **quant),
             helper.make_node("Conv", ["q0", "wcq"], ["c"], name="Conv", kernel_shape=[3, 3], strides=[2, 2],
                              auto_pad=conv_pad),
             helper.make_node("Quant", ["c", "s", "zero", "bits"], ["q1"], name="Act", **quant),
             helper.make_node("MaxPool", ["q1"], ["p"], name="Pool", kernel_shape=[2, 2], strides=pool_strides,
                              auto_pad=pool_pad),
             helper.make_node("Flatten", ["p"], ["f"], name="Flat"),
             helper.make_node("Quant", ["wd", "s", "zero", "bits"], ["wdq"], name="WD", **quant),
             helper.make_node("MatMul", ["f", "wdq"], ["y"], name="Dense")]
    graph = helper.make_graph(nodes, "same", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, *size])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13),
                                                   helper.make_opsetid("qonnx.custom_op.general", 1)])


@pytest.mark.parametrize("conv_pad,pool_pad", [("SAME_UPPER", "SAME_LOWER"), ("SAME_LOWER", "SAME_UPPER"),
                                               ("VALID", "SAME_UPPER")])
def test_auto_pad_compiles_as_the_pads_onnxruntime_applies(conv_pad, pool_pad):
    """Odd totals on a 7x8 image: SAME_UPPER puts the extra row and column at the end, SAME_LOWER at the start."""
    model = _same_padded_model(conv_pad, pool_pad, (7, 8), [1, 1])
    _, streamlined = compile_graph(model)
    frames = np.random.default_rng(7).uniform(-1, 1, (6, 2, 7, 8)).astype(np.float32)
    _assert_hardware_equals_model(to_hw(streamlined), model, frames)


def test_auto_pad_that_would_cut_the_input_is_refused_by_name():
    # A 2x2 pool of stride 4 on the conv's 4x4: onnxruntime pads by -2 in total, cutting the input.
    with pytest.raises(LoweringError, match=r"^node 'Pool' \(MaxPool\): auto_pad SAME_UPPER with strides \[4, 4\]"):
        compile_graph(_same_padded_model("SAME_UPPER", "SAME_UPPER", (7, 8), [4, 4]))


def _conv_then(shape_ops: list, after: str, size=(4, 5)):
    """Quant -> Conv 3x3 (4 channels, padded) -> Quant -> ``shape_ops`` -> ``after`` ("dense": Flatten ->
    MatMul; "conv": another Conv), QONNX."""
    rng = np.random.default_rng(8)
    inits = [numpy_helper.from_array(np.asarray(v, np.float32), name) for name, v in [
        ("s", 0.25), ("zero", 0.0), ("bits", 3.0), ("wc", rng.integers(-3, 4, (4, 2, 3, 3))),
        ("wd", rng.integers(-3, 4, (4 * size[0] * size[1], 3))), ("wc2", rng.integers(-3, 4, (3, 4, 1, 1)))]]
    quant = dict(domain="qonnx.custom_op.general", signed=1, narrow=0, rounding_mode="ROUND")
    nodes = [helper.make_node("Quant", ["x", "s", "zero", "bits"], ["q0"], name="QuantIn", **quant),
             helper.make_node("Quant", ["wc", "s", "zero", "bits"], ["wcq"], name="WC", **quant),
             helper.make_node("Conv", ["q0", "wcq"], ["c"], name="Conv", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             helper.make_node("Quant", ["c", "s", "zero", "bits"], ["t0"], name="Act", **quant)]
    for k, (op, attrs) in enumerate(shape_ops):
        nodes.append(helper.make_node(op, [f"t{k}"], [f"t{k + 1}"], name=f"{op}{k}", **attrs))
    last = f"t{len(shape_ops)}"
    if after == "dense":
        nodes += [helper.make_node("Flatten", [last], ["f"], name="Flat"),
                  helper.make_node("Quant", ["wd", "s", "zero", "bits"], ["wdq"], name="WD", **quant),
                  helper.make_node("MatMul", ["f", "wdq"], ["y"], name="Dense")]
        out_shape = [1, 3]
    else:
        nodes += [helper.make_node("Quant", ["wc2", "s", "zero", "bits"], ["wc2q"], name="WC2", **quant),
                  helper.make_node("Conv", [last, "wc2q"], ["y"], name="Conv2", kernel_shape=[1, 1])]
        out_shape = None
    graph = helper.make_graph(nodes, "t", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, *size])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, out_shape)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13),
                                                   helper.make_opsetid("qonnx.custom_op.general", 1)])


@pytest.mark.parametrize("perm", [[0, 2, 3, 1], [0, 1, 3, 2], [0, 3, 1, 2]])
def test_a_transpose_into_a_dense_layer_reorders_its_weights(perm):
    """Keras-style ``permute(0, 2, 3, 1)`` before the flatten, and other orders: the dense layer's weights
    follow the stream's order, the stream is not reordered."""
    model = _conv_then([("Transpose", {"perm": perm})], "dense")
    _, streamlined = compile_graph(model)
    frames = np.random.default_rng(9).uniform(-1, 1, (6, 2, 4, 5)).astype(np.float32)
    _assert_hardware_equals_model(to_hw(streamlined), model, frames)


def test_a_transpose_between_convolutions_is_refused_by_name():
    _, streamlined = compile_graph(_conv_then([("Transpose", {"perm": [0, 1, 3, 2]})], "conv"))
    with pytest.raises(LoweringError, match=r"^node 'Conv2': its input is a stream reordered by shape ops"):
        to_hw(streamlined)


@pytest.mark.parametrize("layout", ["nhwc", "flat"])
def test_a_shape_op_on_the_input_codes_runs_on_the_host(layout):
    """An NHWC model's Transpose, or a Reshape of a flat input into an image, right after the input quantizer:
    the host hands the stream over in the order the first convolution reads."""
    rng = np.random.default_rng(10)
    in_shape = [1, 4, 5, 2] if layout == "nhwc" else [1, 40]
    inits = [numpy_helper.from_array(np.asarray(v, np.float32), name) for name, v in [
        ("s", 0.25), ("zero", 0.0), ("bits", 3.0), ("wc", rng.integers(-3, 4, (3, 2, 3, 3))),
        ("wd", rng.integers(-3, 4, (3 * 2 * 3, 2)))]]
    inits.append(numpy_helper.from_array(np.array([1, 2, 4, 5], np.int64), "image"))
    quant = dict(domain="qonnx.custom_op.general", signed=1, narrow=0, rounding_mode="ROUND")
    to_image = (helper.make_node("Transpose", ["q0"], ["img"], name="ToNCHW", perm=[0, 3, 1, 2]) if layout == "nhwc"
                else helper.make_node("Reshape", ["q0", "image"], ["img"], name="ToImage"))
    nodes = [helper.make_node("Quant", ["x", "s", "zero", "bits"], ["q0"], name="QuantIn", **quant), to_image,
             helper.make_node("Quant", ["wc", "s", "zero", "bits"], ["wcq"], name="WC", **quant),
             helper.make_node("Conv", ["img", "wcq"], ["c"], name="Conv", kernel_shape=[3, 3]),
             helper.make_node("Quant", ["c", "s", "zero", "bits"], ["a"], name="Act", **quant),
             helper.make_node("Flatten", ["a"], ["f"], name="Flat"),
             helper.make_node("Quant", ["wd", "s", "zero", "bits"], ["wdq"], name="WD", **quant),
             helper.make_node("MatMul", ["f", "wdq"], ["y"], name="Dense")]
    graph = helper.make_graph(nodes, "in", [helper.make_tensor_value_info("x", TensorProto.FLOAT, in_shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13),
                                                    helper.make_opsetid("qonnx.custom_op.general", 1)])
    _, streamlined = compile_graph(model)
    dataflow = to_hw(streamlined)
    assert [node.op_type for node in dataflow.head.nodes][-1] == ("Transpose" if layout == "nhwc" else "Reshape")
    frames = rng.uniform(-1, 1, (6, *in_shape[1:])).astype(np.float32)
    _assert_hardware_equals_model(dataflow, model, frames)
