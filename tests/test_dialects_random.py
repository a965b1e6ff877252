"""Random small models of every dialect: the compiled hardware computes what the format's reference does.

Each case from :mod:`dialect_factory` goes ``graph_from_model -> tidy -> streamline -> to_hw`` and
:meth:`Dataflow.emulate` runs the hardware's integer stages and the host tail on random frames
(ties included). The reference is qonnx's executor (QONNX, on the first frames: it runs one frame
at a time) and streamc's own executor, or, for the formats written for onnxruntime, the exact
reference of :mod:`exact_model` (exact integer kernels, every other node in onnxruntime with graph
optimizations off), or, for the float16 models, streamc's executor alone: onnxruntime removes the
Cast(float32 -> float16) -> Cast(float16 -> float32) pair it wraps around its float32-only
Tanh/Sigmoid kernels even with optimizations off, so it never rounds to float16 as the model says.

A whole-model onnxruntime session is compared too where it is exact: models without integer
kernels (its float kernels give the same bits on every CPU), or any model on a CPU with VNNI.
Without VNNI its u8 x s8 kernels add pairs of products in saturating int16.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime
import pytest
from onnx import helper

import dialect_factory as factory
from exact_model import cpu_has_vnni, run_model
from models.qonnx_reference import execute_frames
from streamc.errors import FrontendError, LoweringError
from streamc.execute import execute
from streamc.frontend.load import graph_from_model
from streamc.hw import to_hw
from streamc.transforms.streamline import MAX_THRESHOLDS, streamline
from streamc.transforms.tidy import tidy

#: Seeds per dialect: consecutive seeds cycle through each maker's variants (see dialect_factory).
SEEDS = {"qonnx": 48, "qcdq": 24, "qdq": 16, "qoperator": 16, "intop": 16, "tanh-int8": 12, "fp16": 12}
CASES = [(dialect, seed) for dialect, count in SEEDS.items() for seed in range(count)]
#: qonnx's executor runs a frame at a time through onnxruntime sessions: a few frames per model.
QONNX_FRAMES = 12
#: onnxruntime kernels that multiply integer codes (MLAS's, inexact on CPUs without VNNI).
INTEGER_KERNELS = frozenset({"MatMulInteger", "ConvInteger", "QLinearMatMul", "QLinearConv", "QGemm"})


def compile_case(case: factory.DialectCase):
    graph = graph_from_model(case.model)
    return graph, to_hw(streamline(tidy(graph)))


def run_onnxruntime(model: onnx.ModelProto, frames: np.ndarray) -> np.ndarray:
    options = onnxruntime.SessionOptions()
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = onnxruntime.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return session.run(None, {"input": frames})[0]


def onnxruntime_is_exact_on(model: onnx.ModelProto) -> bool:
    return cpu_has_vnni() or not any(node.op_type in INTEGER_KERNELS for node in model.graph.node)


def assert_matches(actual: np.ndarray, expected: np.ndarray, exact: bool, *, ulps: int = 1) -> None:
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    if exact:
        np.testing.assert_array_equal(actual, expected, strict=True)
        return
    # The tail starts from the exact integer accumulator and rounds once (acc * scale); streamc's
    # executor sums the MatMul's float32 products in float64 and rounds once too: they are within
    # one ulp of the largest output. The factory puts no rounding op after an inexact MatMul (a
    # power-of-two Mul at most), so the difference is not amplified on the way to the output.
    bound = ulps * np.spacing(np.abs(expected).max())
    assert np.abs(actual.astype(np.float64) - expected).max() <= bound


def check_stages(case: factory.DialectCase, dataflow) -> None:
    """Each stage's kind where the model determines it (see the constants in dialect_factory)."""
    kinds = [stage.output_stage.split(" ")[0] if stage.output_stage.startswith("requant") else
             stage.output_stage.split(" ")[-1] for stage in dataflow.stages]
    expected = list(case.stages)
    if case.dialect == "tanh-int8" and len(kinds) == 2:
        # The table exists only where the first quantizer's thresholds fit a requantization;
        # otherwise the thresholds absorb the whole Tanh chain up to the second quantizer.
        assert kinds[0] == "thresholds" and dataflow.stages[0].thresholds.shape[1] > MAX_THRESHOLDS
        expected = [factory.UNDETERMINED, factory.UNDETERMINED]
    assert len(kinds) == len(expected), (kinds, expected)
    for stage, kind, wanted in zip(dataflow.stages, kinds, expected):
        if wanted == factory.REQUANT_IF_MANY:
            many = stage.thresholds is not None and stage.thresholds.shape[1] > MAX_THRESHOLDS
            assert kind == ("requant" if many else "thresholds"), (kinds, expected)
        elif wanted == factory.TABLE:
            assert kind == "table"
        elif wanted == factory.THRESHOLDS:
            assert kind == "thresholds" and stage.thresholds.shape[1] <= MAX_THRESHOLDS
        elif wanted == factory.ACCUMULATOR:
            assert kind == "accumulator"
        else:
            assert kind in ("thresholds", "requant")


@pytest.mark.parametrize("dialect, seed", CASES, ids=[f"{d}-{s}" for d, s in CASES])
def test_hardware_computes_the_reference(dialect, seed):
    case = factory.MAKERS[dialect](seed)
    graph, dataflow = compile_case(case)
    hw, outputs = dataflow.emulate(case.frames)
    check_stages(case, dataflow)
    assert hw.dtype == np.int64 and np.all(hw == np.rint(hw))
    ours = execute(graph, {"input": case.frames})["output"]
    assert_matches(outputs, ours, case.exact)
    if case.reference == "qonnx":
        few = case.frames[:QONNX_FRAMES]
        # qonnx runs the MatMul in onnxruntime, which rounds every float32 partial sum: up to 24 of
        # them add up to more than one ulp of the largest output (1.5 seen), two suffice here
        assert_matches(outputs[:QONNX_FRAMES], execute_frames(case.model, few), case.exact, ulps=2)
    elif case.reference == "onnxruntime":
        assert_matches(outputs, run_model(case.model, {"input": case.frames})[0], case.exact)
        if onnxruntime_is_exact_on(case.model):
            assert_matches(outputs, run_onnxruntime(case.model, case.frames), case.exact)


def test_the_cases_cover_every_variant():
    features = set().union(*(factory.MAKERS[d](s).features for d, s in CASES))
    wanted = {f"rounding-{mode}" for mode in factory.ROUNDING_MODES} | {
        "act-bits-7.5", "act-bits-1", "act-bits-8", "act-bipolar", "act-zero-point", "act-narrow", "act-signed",
        "act-unsigned", "input-zero-point", "input-bipolar", "weight-bipolar", "weight-bits-1", "weight-bits-8",
        "weight-scale-per-channel", "weight-scale-per-tensor", "weight-scale-float", "trunc-v1", "trunc-v2",
        "batchnorm-negative", "relu", "bias", "float-tail-exact", "float-tail-rounded",
        "qcdq-int8", "qcdq-uint8", "clip-symmetric", "clip-asymmetric", "weights-per-axis",
        "qdq-int8", "qdq-uint8", "qoperator-int8", "qoperator-uint8", "weights-per-column", "weights-per-tensor",
        "input-int8", "input-uint8", "output-int8", "output-uint8", "one-mul", "two-muls", "a-zero-point",
        "tanh-int8", "tanh-bias-per-channel", "fp16-tanh", "fp16-sigmoid"}
    assert wanted <= features, sorted(wanted - features)


def test_the_cases_reach_every_output_stage():
    kinds = set()
    for dialect, seed in CASES[::3]:
        kinds.update(s.output_stage.split(" ")[0] for s in compile_case(factory.MAKERS[dialect](seed))[1].stages)
    assert {"requant", "table", "accumulator"} <= kinds and any(k.isdigit() for k in kinds)


# ------------------------------------------------------------------------------------------------
# Unsupported combinations name the node
# ------------------------------------------------------------------------------------------------

def _node(model: onnx.ModelProto, op_type: str, index: int = 0) -> onnx.NodeProto:
    return [n for n in model.graph.node if n.op_type == op_type][index]


def _compile(model: onnx.ModelProto):
    return to_hw(streamline(tidy(graph_from_model(model))))


def _qonnx_with_hidden_quant(seed: int = 2) -> onnx.ModelProto:
    case = factory.qonnx_case(seed)
    assert [n.op_type for n in case.model.graph.node].count("MatMul") >= 2
    return case.model


def test_per_channel_activation_scale_is_rejected():
    model = _qonnx_with_hidden_quant()
    second = _node(model, "MatMul", 1)
    quant = next(n for n in model.graph.node if n.output[0] == second.input[0])
    scale = next(t for t in model.graph.initializer if t.name == quant.input[1])
    weights = next(n for n in model.graph.node if n.output[0] == second.input[1])
    fan_in = onnx.numpy_helper.to_array(next(t for t in model.graph.initializer if t.name == weights.input[0])).shape[0]
    values = np.linspace(1, 2, fan_in).astype(np.float32) * onnx.numpy_helper.to_array(scale)
    scale.CopyFrom(onnx.numpy_helper.from_array(values, scale.name))
    with pytest.raises(LoweringError, match=rf"^quantizer '{quant.name}': its scale must be one value per tensor "
                                            rf"here \(node '{second.name}' \(MatMul\) mixes its input channels, so its "
                                            rf"accumulator would sum codes of different scales\); it has {fan_in} values; "
                                            rf"per-channel activation scales are supported into depthwise convolutions, "
                                            rf"pools, adds and concats .*, not into layers that mix channels$"):
        _compile(model)


def test_linear_layers_without_a_quantizer_between_are_rejected():
    model = factory.qcdq_case(1).model
    first, second = _node(model, "MatMul", 0), _node(model, "MatMul", 1)
    quantize = next(n for n in model.graph.node if n.op_type == "QuantizeLinear" and n.input[0] != "input")
    dequantize = next(n for n in model.graph.node if n.input and n.input[0] == _node(model, "Clip", 1).output[0])
    second.input[0] = quantize.input[0]  # read the float value before the quantizer
    for node in (quantize, _node(model, "Clip", 1), dequantize):
        model.graph.node.remove(node)
    with pytest.raises(LoweringError, match=rf"^node '{second.name}' \(MatMul\) follows node '{first.name}' "
                                            r"\(MatMul\) with no activation quantizer between them; streamc needs "
                                            r"quantized activations between linear layers$"):
        _compile(model)


def test_per_row_a_zero_point_is_rejected():
    model = factory.intop_case(0).model
    matmul = _node(model, "MatMulInteger")
    model.graph.initializer.append(onnx.numpy_helper.from_array(np.array([1, 2], np.int8), "a_zero_rows"))
    del matmul.input[2:]
    matmul.input.append("a_zero_rows")
    with pytest.raises(LoweringError, match=rf"^node '{matmul.name}' \(MatMulInteger\): a per-row A zero point is "
                                            r"not supported$"):
        _compile(model)


def test_int16_quantizer_is_rejected():
    model = factory.qcdq_case(2).model
    quantize = _node(model, "QuantizeLinear")
    old_name = quantize.input[2]
    zero = next(t for t in model.graph.initializer if t.name == old_name)
    zero.CopyFrom(onnx.numpy_helper.from_array(np.int16(0), "int16_zero"))
    for node in model.graph.node:
        node.input[:] = ["int16_zero" if t == old_name else t for t in node.input]
    with pytest.raises(LoweringError, match=rf"^node '{quantize.name}' \(QuantizeLinear\): zero point of type int16 "
                                            r"is not supported; int8 and uint8 are$"):
        _compile(model)


def test_onnxruntime_contrib_op_is_rejected():
    model = factory.qoperator_case(0).model
    node = _node(model, "QLinearMatMul")
    node.op_type, node.domain = "QLinearAdd", "com.microsoft"
    model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    with pytest.raises(FrontendError, match=rf"^node '{node.name}' \(QLinearAdd, domain com.microsoft\) is not "
                                            r"supported; from onnxruntime's contrib ops streamc reads QGemm$"):
        _compile(model)

