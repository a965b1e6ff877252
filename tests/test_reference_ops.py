"""streamc's reference executor against the executors models are written for.

QONNX ops are compared with qonnx 1.0's ``execute_onnx``, standard ops with onnxruntime,
each on a one-node model. Equality is bit-exact (same dtype, same bits) unless a case
says why it cannot be.

onnxruntime's integer kernels (MatMulInteger, ConvInteger, QLinearMatMul, QLinearConv, QGemm)
are not exact on x86 CPUs without VNNI: MLAS's AVX2 u8 x s8 kernel adds each pair of adjacent
products in saturating int16 (vpmaddubsw). Those ops are checked against ``exact_ops``, an
independent exact implementation; against onnxruntime on the same inputs only where the CPU has
VNNI; and, on every CPU, against onnxruntime and ``exact_ops`` together on inputs no pair sum can
saturate, which pins ``exact_ops`` to onnxruntime's rounding.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import exact_ops
from exact_model import cpu_has_vnni, run_model
from streamc.errors import FrontendError, UnsupportedOpError
from streamc.reference import SUPPORTED_OPS, run_node

onnxruntime = pytest.importorskip("onnxruntime")
qonnx_exec = pytest.importorskip("qonnx.core.onnx_exec")
qonnx_wrapper = pytest.importorskip("qonnx.core.modelwrapper")

QONNX_DOMAIN = "qonnx.custom_op.general"
ROUNDING_MODES = ["ROUND", "HALF_EVEN", "CEIL", "FLOOR", "UP", "DOWN", "HALF_UP", "HALF_DOWN"]


def _value_info(name: str, array: np.ndarray | None, elem_type: int = TensorProto.FLOAT):
    if array is None:
        return helper.make_tensor_value_info(name, elem_type, None)
    return helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(array.dtype), array.shape)


def _one_node_model(op_type, attrs, inputs, outputs, *, domain="", opset=13, qonnx_opset=1, initializers=()):
    """A model of one node; ``inputs`` with a name in ``initializers`` become initializers."""
    input_names = ["" if x is None else f"in{i}" for i, x in enumerate(inputs)]
    output_names = [f"out{i}" for i in range(len(outputs))]
    node = helper.make_node(op_type, input_names, output_names, domain=domain, **attrs)
    graph = helper.make_graph(
        [node],
        "one_node",
        [_value_info(n, x) for n, x in zip(input_names, inputs) if x is not None and n not in initializers],
        [_value_info(n, x) for n, x in zip(output_names, outputs)],
        initializer=[numpy_helper.from_array(x, n) for n, x in zip(input_names, inputs) if n in initializers],
    )
    opsets = [helper.make_opsetid("", opset)]
    if domain:
        opsets.append(helper.make_opsetid(domain, qonnx_opset))
    model = helper.make_model(graph, opset_imports=opsets)
    # onnxruntime 1.31 refuses the IR version onnx >= 1.21 writes by default
    model.ir_version = 10
    return model


def _run_qonnx(op_type, attrs, inputs, *, qonnx_opset=1):
    expected_shape = np.zeros(inputs[0].shape, dtype=np.float32)
    parameter_names = {f"in{i}" for i in range(1, len(inputs))}
    model = _one_node_model(
        op_type, attrs, inputs, [expected_shape], domain=QONNX_DOMAIN, qonnx_opset=qonnx_opset,
        initializers=parameter_names,
    )
    result = qonnx_exec.execute_onnx(qonnx_wrapper.ModelWrapper(model), {"in0": inputs[0]})
    return result["out0"]


def _run_onnxruntime(op_type, attrs, inputs, reference_outputs, *, opset=13, domain=""):
    # outputs are declared with the reference's dtypes: a wrong dtype fails the session
    outputs = [helper.make_tensor_value_info(f"out{i}", helper.np_dtype_to_tensor_dtype(y.dtype), None)
               for i, y in enumerate(reference_outputs)]
    model = _one_node_model(op_type, attrs, inputs, [None] * len(outputs), opset=opset, domain=domain)
    del model.graph.output[:]
    model.graph.output.extend(outputs)
    options = onnxruntime.SessionOptions()
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = onnxruntime.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    feed = {f"in{i}": x for i, x in enumerate(inputs) if x is not None}
    return session.run(None, feed)


def _plain(attrs: dict) -> dict:
    """Attributes as run_node takes them: tensors as numpy arrays."""
    return {k: numpy_helper.to_array(v) if isinstance(v, TensorProto) else v for k, v in attrs.items()}


def _assert_bit_exact(actual: np.ndarray, expected: np.ndarray):
    assert actual.dtype == expected.dtype
    assert actual.shape == expected.shape
    np.testing.assert_array_equal(actual, expected, strict=True)


# ----------------------------------------------------------------------------------------
# QONNX ops against qonnx 1.0
# ----------------------------------------------------------------------------------------

def _ties_and_noise(rng, scale: np.ndarray, shape, reach: float) -> np.ndarray:
    """Half exact ties (x / scale == k + 0.5, both signs), half random, out to +-reach * scale."""
    ties = (rng.integers(-int(reach), int(reach), size=shape) + 0.5) * scale
    noise = rng.uniform(-reach, reach, size=shape) * scale
    return np.where(rng.random(shape) < 0.5, ties, noise).astype(np.float32)


@pytest.mark.parametrize("bit_width", [1, 2, 3, 4, 5, 6, 7, 8, 7.5])
@pytest.mark.parametrize("signed,narrow", [(1, 0), (1, 1), (0, 0), (0, 1)])
@pytest.mark.parametrize("rounding_mode", ROUNDING_MODES)
def test_quant_matches_qonnx(rounding_mode, signed, narrow, bit_width):
    rng = np.random.default_rng(int(bit_width * 100) + signed * 10 + narrow)
    # per-channel power-of-two scales keep the ties exact after division
    scale = np.array([0.25, 0.5, 1.0, 0.125], dtype=np.float32).reshape(1, 4, 1, 1)
    x = _ties_and_noise(rng, scale, (2, 4, 6, 6), reach=2**bit_width + 4)
    inputs = [x, scale, np.array(0.0, dtype=np.float32), np.array(bit_width, dtype=np.float32)]
    attrs = {"signed": signed, "narrow": narrow, "rounding_mode": rounding_mode}
    expected = _run_qonnx("Quant", attrs, inputs)
    (actual,) = run_node("Quant", attrs, inputs)
    _assert_bit_exact(actual, expected)


def test_quant_half_up_rounds_in_float32_like_qonnx():
    # qonnx's HALF_UP is floor(|x| + 0.5) in float32: 0.49999997 + 0.5 rounds to 1.0
    x = np.array([0.49999997, -0.49999997, 1.5, -2.5], np.float32)
    inputs = [x, np.array(1.0, np.float32), np.array(0.0, np.float32), np.array(8.0, np.float32)]
    attrs = {"signed": 1, "narrow": 0, "rounding_mode": "HALF_UP"}
    (actual,) = run_node("Quant", attrs, inputs)
    _assert_bit_exact(actual, _run_qonnx("Quant", attrs, inputs))
    np.testing.assert_array_equal(actual, [1.0, -1.0, 2.0, -3.0])


@pytest.mark.parametrize("signed", [0, 1])
def test_quant_per_channel_bit_width_equals_qonnx_per_channel(signed):
    # qonnx 1.0 cannot run a per-channel bit width (it tests `bitwidth == 1` as a bool),
    # so each channel is compared with a per-tensor qonnx run
    rng = np.random.default_rng(5)
    bit_widths = np.array([1.0, 2.0, 4.0, 7.5], np.float32)
    x = rng.uniform(-200, 200, size=(3, 4)).astype(np.float32)
    scale, zero_point = np.array(1.0, np.float32), np.array(0.0, np.float32)
    attrs = {"signed": signed, "narrow": 0, "rounding_mode": "ROUND"}
    (actual,) = run_node("Quant", attrs, [x, scale, zero_point, bit_widths])
    for channel, bit_width in enumerate(bit_widths):
        inputs = [x[:, channel].copy(), scale, zero_point, np.array(bit_width)]
        _assert_bit_exact(actual[:, channel], _run_qonnx("Quant", attrs, inputs))


@pytest.mark.parametrize("rounding_mode", ["ROUND", "FLOOR", "HALF_UP"])
def test_quant_with_zero_point_and_inexact_scale_matches_qonnx(rounding_mode):
    rng = np.random.default_rng(7)
    x = rng.normal(0, 2, size=(3, 5)).astype(np.float32)
    scale = np.array([0.1, 0.3, 0.07, 1 / 3, 0.9], dtype=np.float32)
    inputs = [x, scale, np.array(3.0, dtype=np.float32), np.array(4.0, dtype=np.float32)]
    attrs = {"signed": 0, "narrow": 0, "rounding_mode": rounding_mode}
    (actual,) = run_node("Quant", attrs, inputs)
    _assert_bit_exact(actual, _run_qonnx("Quant", attrs, inputs))


def test_quant_of_float64_inputs_returns_float32_like_qonnx():
    x = np.linspace(-3, 3, 13)
    inputs = [x, np.array(0.5), np.array(0.0), np.array(3.0)]
    (actual,) = run_node("Quant", {"signed": 1, "narrow": 0}, inputs)
    assert actual.dtype == np.float32
    np.testing.assert_array_equal(actual, [-2, -2, -2, -1.5, -1, -0.5, 0, 0.5, 1, 1.5, 1.5, 1.5, 1.5])


def test_quant_without_signed_is_rejected():
    message = "Quant node requires attribute 'signed'; attributes given: ['narrow']"
    with pytest.raises(FrontendError, match=f"^{re.escape(message)}$"):
        run_node("Quant", {"narrow": 0}, [np.zeros(2, np.float32)] * 4)


def test_quant_with_unknown_rounding_mode_is_rejected():
    message = ("Quant rounding_mode must be one of ROUND, HALF_EVEN, CEIL, FLOOR, UP, DOWN, HALF_UP, HALF_DOWN "
               "(any case), not 'STOCHASTIC'")
    with pytest.raises(FrontendError, match=f"^{re.escape(message)}$"):
        run_node("Quant", {"signed": 1, "narrow": 0, "rounding_mode": "STOCHASTIC"},
                 [np.zeros(2, np.float32)] + [np.array(1.0, np.float32)] * 3)


@pytest.mark.parametrize("scale", [np.array(1.0, np.float32), np.array([0.5, 2.0, 3.0], np.float32)])
def test_bipolar_quant_matches_qonnx_at_zero(scale):
    x = np.array([[0.0, -0.0, 1e-30], [-1e-30, 2.5, -7.0]], dtype=np.float32).T.copy()
    inputs = [x, scale.reshape(-1, 1) if scale.ndim else scale]
    (actual,) = run_node("BipolarQuant", {}, inputs)
    _assert_bit_exact(actual, _run_qonnx("BipolarQuant", {}, inputs))
    assert actual[0, 0] > 0 and actual[1, 0] > 0


@pytest.mark.parametrize("rounding_mode", ROUNDING_MODES)
def test_trunc_v1_matches_qonnx(rounding_mode):
    rng = np.random.default_rng(11)
    scale = np.array(0.125, dtype=np.float32)
    x = (rng.integers(-128, 128, size=(4, 16)) * scale).astype(np.float32)
    inputs = [x, scale, np.array(0.0, np.float32), np.array(8.0, np.float32), np.array(4.0, np.float32)]
    attrs = {"rounding_mode": rounding_mode}
    (actual,) = run_node("Trunc", attrs, inputs, qonnx_opset=1)
    _assert_bit_exact(actual, _run_qonnx("Trunc", attrs, inputs, qonnx_opset=1))


@pytest.mark.parametrize("rounding_mode", ["FLOOR", "ROUND", "CEIL", "HALF_UP"])
@pytest.mark.parametrize("signed,narrow", [(1, 0), (1, 1), (0, 0)])
def test_trunc_v2_matches_qonnx(rounding_mode, signed, narrow):
    rng = np.random.default_rng(13)
    scale = np.array(0.125, dtype=np.float32)
    x = (rng.integers(-300 if signed else 0, 300, size=(4, 16)) * scale).astype(np.float32)
    inputs = [x, scale, np.array(0.0, np.float32), np.array(10.0, np.float32),
              np.array(2.0, np.float32), np.array(4.0, np.float32)]
    attrs = {"rounding_mode": rounding_mode, "signed": signed, "narrow": narrow}
    (actual,) = run_node("Trunc", attrs, inputs, qonnx_opset=2)
    _assert_bit_exact(actual, _run_qonnx("Trunc", attrs, inputs, qonnx_opset=2))


def test_trunc_v2_differs_from_v1():
    x = np.array([40.0], np.float32)
    common = [x, np.array(1.0, np.float32), np.array(0.0, np.float32), np.array(8.0, np.float32)]
    (v1,) = run_node("Trunc", {"rounding_mode": "FLOOR"}, common + [np.array(4.0, np.float32)], qonnx_opset=1)
    (v2,) = run_node("Trunc", {"rounding_mode": "FLOOR"},
                     common + [np.array(4.0, np.float32), np.array(3.0, np.float32)], qonnx_opset=2)
    assert v1[0] == 2.0 * 1  # floor(40 / 16) * scale 1
    assert v2[0] == 3.0 * 4  # floor(40 / 4) = 10 clamped to 3 (INT3), times output scale 4


def _thresholded_input(rng, thresholds, shape, channel_axis):
    """Random values, a third of them exactly equal to a threshold of their channel."""
    x = rng.normal(0, 4, size=shape).astype(np.float32)
    rows = np.moveaxis(np.indices(shape)[channel_axis], 0, 0) % thresholds.shape[0]
    picks = thresholds[rows, rng.integers(0, thresholds.shape[1], size=shape)]
    return np.where(rng.random(shape) < 0.33, picks, x).astype(np.float32)


@pytest.mark.parametrize(
    "shape,data_layout,channel_axis",
    [((2, 3, 4, 4), "", 1), ((2, 3, 4, 4), "NCHW", 1), ((2, 4, 4, 3), "NHWC", 3),
     ((5, 3), "", 1), ((2, 6, 3), "", 2), ((2, 3, 2, 2, 2), "", 1)],
)
@pytest.mark.parametrize("per_channel", [True, False])
def test_multithreshold_matches_qonnx(shape, data_layout, channel_axis, per_channel):
    rng = np.random.default_rng(len(shape) * 10 + channel_axis)
    rows = shape[channel_axis] if per_channel else 1
    # sorted integers, some rows shifted by 0.5 so that thresholds fall between integers
    thresholds = np.sort(rng.integers(-8, 8, size=(rows, 7)), axis=1) + 0.5 * (rng.random((rows, 1)) < 0.5)
    thresholds = thresholds.astype(np.float32)
    x = _thresholded_input(rng, thresholds, shape, channel_axis)
    attrs = {"out_dtype": "INT4", "out_scale": 0.5, "out_bias": -3.0}
    if data_layout:
        attrs["data_layout"] = data_layout
    (actual,) = run_node("MultiThreshold", attrs, [x, thresholds])
    _assert_bit_exact(actual, _run_qonnx("MultiThreshold", attrs, [x, thresholds]))


def test_multithreshold_counts_values_equal_to_a_threshold():
    thresholds = np.array([[-1.0, 0.0, 2.0]], np.float32)
    x = np.array([[-1.0, 0.0, 2.0, 1.999]], np.float32)
    (actual,) = run_node("MultiThreshold", {"out_dtype": "UINT2"}, [x, thresholds])
    np.testing.assert_array_equal(actual, [[1, 2, 3, 2]])


def test_multithreshold_with_wrong_threshold_rows_is_rejected():
    message = ("MultiThreshold thresholds must have shape (3, L) or (1, L) for an input of shape (1, 3) "
               "with channels on axis 1, not (2, 4)")
    with pytest.raises(FrontendError, match=f"^{re.escape(message)}$"):
        run_node("MultiThreshold", {"out_dtype": "UINT2"},
                 [np.zeros((1, 3), np.float32), np.zeros((2, 4), np.float32)])


# ----------------------------------------------------------------------------------------
# Standard ops against onnxruntime
# ----------------------------------------------------------------------------------------

RNG = np.random.default_rng(2024)


def _f(*shape, scale=3.0):
    return (RNG.normal(0, scale, size=shape)).astype(np.float32)


def _ints_as_float(*shape, high=16):
    return RNG.integers(-high, high, size=shape).astype(np.float32)


def _i64(*values):
    return np.array(values, dtype=np.int64)


def _positive(*shape):
    return (RNG.random(shape) * 4 + 0.1).astype(np.float32)


# (id, op, attrs, inputs, opset): compared bit-exactly
EXACT_CASES = [
    ("add_broadcast", "Add", {}, [_f(2, 3, 4), _f(4)], 13),
    ("sub", "Sub", {}, [_f(2, 3), _f(2, 3)], 13),
    ("mul", "Mul", {}, [_f(2, 3), _f(1, 3)], 13),
    ("div", "Div", {}, [_f(2, 3), _positive(2, 3)], 13),
    ("div_int_truncates", "Div", {},
     [np.array([7, -7, 7, -7, 6], np.int32), np.array([2, 2, -2, -2, 3], np.int32)], 13),
    ("neg", "Neg", {}, [_f(5)], 13),
    ("abs", "Abs", {}, [_f(5)], 13),
    ("sqrt", "Sqrt", {}, [_positive(10)], 13),
    ("reciprocal", "Reciprocal", {}, [_positive(10)], 13),
    ("pow_square", "Pow", {}, [_f(10), np.array(2.0, np.float32)], 13),
    ("pow_cube_int_exponent", "Pow", {}, [_f(10), np.array(3, np.int64)], 13),
    ("pow_int_exponents", "Pow", {}, [_f(10, scale=1.0), RNG.integers(-3, 6, 10)], 13),
    ("relu", "Relu", {}, [_f(3, 4)], 13),
    ("clip_attrs_opset6", "Clip", {"min": -1.5, "max": 2.0}, [_f(3, 4)], 6),
    ("clip_inputs_opset13", "Clip", {}, [_f(3, 4), np.array(-1.5, np.float32), np.array(2.0, np.float32)], 13),
    ("clip_max_only", "Clip", {}, [_f(3, 4), None, np.array(0.5, np.float32)], 13),
    ("clip_int8", "Clip", {}, [np.arange(-8, 8, dtype=np.int8), np.array(-3, np.int8), np.array(4, np.int8)], 13),
    ("max", "Max", {}, [_f(2, 3), _f(3), _f(2, 1)], 13),
    ("min", "Min", {}, [_f(2, 3), _f(3)], 13),
    ("sign", "Sign", {}, [np.array([-2.0, 0.0, 3.0], np.float32)], 13),
    ("floor", "Floor", {}, [_f(10)], 13),
    ("ceil", "Ceil", {}, [_f(10)], 13),
    ("round_ties_to_even", "Round", {}, [np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 0.49999997], np.float32)], 13),
    # Sigmoid replays MLAS's approximation (FMA kernel), including its 0 below x = -17
    ("sigmoid_float32", "Sigmoid", {},
     [np.concatenate([_f(2000, scale=8.0), np.linspace(-30, 30, 601)]).astype(np.float32)], 13),
    ("sigmoid_float16", "Sigmoid", {}, [np.arange(-12, 12, 1 / 256).astype(np.float16)], 13),
    ("tanh_float16", "Tanh", {}, [np.arange(-6, 6, 1 / 256).astype(np.float16)], 13),
    ("matmul_integer_valued", "MatMul", {}, [_ints_as_float(3, 64), _ints_as_float(64, 5)], 13),
    ("matmul_batched", "MatMul", {}, [_ints_as_float(2, 3, 8), _ints_as_float(8, 4)], 13),
    ("matmul_int32", "MatMul", {},
     [RNG.integers(-9, 9, (3, 4)).astype(np.int32), RNG.integers(-9, 9, (4, 2)).astype(np.int32)], 13),
    ("gemm_transB_bias", "Gemm", {"transB": 1},
     [_ints_as_float(3, 16), _ints_as_float(5, 16), _ints_as_float(5)], 13),
    ("gemm_alpha_beta", "Gemm", {"alpha": 0.5, "beta": 2.0, "transA": 1},
     [_ints_as_float(16, 3), _ints_as_float(16, 5), _ints_as_float(3, 5)], 13),
    ("gemm_no_bias", "Gemm", {}, [_ints_as_float(2, 8), _ints_as_float(8, 3)], 13),
    ("gemm_fused_alpha", "Gemm", {"alpha": 0.3, "beta": 0.7, "transB": 1},
     [_ints_as_float(16, 32), _ints_as_float(24, 32), _ints_as_float(24)], 13),
    ("gemm_alpha_no_bias", "Gemm", {"alpha": 0.3}, [_ints_as_float(4, 32), _ints_as_float(32, 5)], 13),
    ("reshape_opset4_attr", "Reshape", {"shape": [5, -1]}, [_f(10)], 4),
    ("batchnorm_negative_scale", "BatchNormalization", {"epsilon": 1e-3},
     [_f(2, 3, 4, 4), np.array([-1.5, 0.7, -0.01], np.float32), _f(3), _f(3), _positive(3)], 13),
    ("batchnorm_2d", "BatchNormalization", {}, [_f(4, 5), _f(5), _f(5), _f(5), _positive(5)], 9),
    ("reshape_zero_and_minus_one", "Reshape", {}, [_f(2, 3, 4), _i64(0, -1)], 13),
    ("reshape_allowzero", "Reshape", {"allowzero": 1}, [_f(0, 3), _i64(3, 0)], 14),
    ("flatten", "Flatten", {"axis": 2}, [_f(2, 3, 4, 5)], 13),
    ("flatten_negative_axis", "Flatten", {"axis": -1}, [_f(2, 3, 4)], 13),
    ("transpose", "Transpose", {"perm": [0, 2, 3, 1]}, [_f(2, 3, 4, 5)], 13),
    ("transpose_default", "Transpose", {}, [_f(2, 3, 4)], 13),
    ("identity", "Identity", {}, [_f(3)], 13),
    ("squeeze_input_axes", "Squeeze", {}, [_f(1, 3, 1, 2), _i64(0, -2)], 13),
    ("squeeze_attr_axes", "Squeeze", {"axes": [2]}, [_f(1, 3, 1, 2)], 11),
    ("squeeze_all", "Squeeze", {}, [_f(1, 3, 1, 2)], 13),
    ("unsqueeze_input_axes", "Unsqueeze", {}, [_f(3, 2), _i64(0, -1)], 13),
    ("unsqueeze_attr_axes", "Unsqueeze", {"axes": [1, 3]}, [_f(3, 2)], 11),
    ("concat", "Concat", {"axis": -1}, [_f(2, 3), _f(2, 1), _f(2, 2)], 13),
    ("shape", "Shape", {}, [_f(2, 3, 4)], 13),
    ("shape_start_end", "Shape", {"start": 1, "end": -1}, [_f(2, 3, 4, 5)], 15),
    ("gather_negative_indices", "Gather", {"axis": 1}, [_f(3, 5), _i64(0, -1, 2)], 13),
    ("gather_scalar_index", "Gather", {}, [_i64(4, 5, 6), np.array(1, np.int64)], 13),
    ("slice_steps", "Slice", {}, [_f(6, 8), _i64(1, -1), _i64(100, 0), _i64(0, 1), _i64(2, -2)], 13),
    ("slice_reverse_to_start", "Slice", {}, [_f(6), _i64(-1), _i64(-100), _i64(0), _i64(-1)], 13),
    ("slice_attrs_opset9", "Slice", {"starts": [0, 1], "ends": [2, 1000], "axes": [0, 1]}, [_f(4, 5)], 9),
    ("cast_float_to_int8_truncates", "Cast", {"to": TensorProto.INT8},
     [np.array([-3.7, -0.5, 0.5, 2.9], np.float32)], 13),
    ("cast_int_to_float", "Cast", {"to": TensorProto.FLOAT}, [np.array([16777217, -3], np.int64)], 13),
    ("cast_to_float16", "Cast", {"to": TensorProto.FLOAT16}, [_f(20)], 13),
    ("cast_to_bool", "Cast", {"to": TensorProto.BOOL}, [np.array([0.0, -0.0, 2.0], np.float32)], 13),
    ("constant_of_shape_default", "ConstantOfShape", {}, [_i64(2, 3)], 13),
    ("constant_of_shape_int", "ConstantOfShape", {"value": numpy_helper.from_array(np.array([7], np.int64))},
     [_i64(3)], 13),
    ("expand", "Expand", {}, [_f(3, 1), _i64(2, 1, 4)], 13),
    ("where", "Where", {}, [RNG.random((3, 4)) < 0.5, _f(3, 4), _f(4)], 13),
    ("equal", "Equal", {}, [_ints_as_float(10, high=2), _ints_as_float(10, high=2)], 13),
    ("less", "Less", {}, [_f(10), _f(10)], 13),
    ("greater", "Greater", {}, [_f(10), _f(1)], 13),
    ("not", "Not", {}, [RNG.random(5) < 0.5], 13),
    ("reduce_sum_input_axes", "ReduceSum", {"keepdims": 0}, [_ints_as_float(2, 3, 4), _i64(1)], 13),
    ("reduce_sum_attr_axes", "ReduceSum", {"axes": [0, 2]}, [_ints_as_float(2, 3, 4)], 11),
    ("reduce_sum_all", "ReduceSum", {}, [_ints_as_float(2, 3, 4)], 13),
    ("reduce_mean_global_pool", "ReduceMean", {"axes": [2, 3]}, [_ints_as_float(2, 3, 3, 3)], 13),
    ("reduce_mean_input_axes", "ReduceMean", {}, [_ints_as_float(2, 7), _i64(-1)], 18),
    ("reduce_max", "ReduceMax", {"axes": [1], "keepdims": 0}, [_f(3, 4)], 13),
    ("argmax", "ArgMax", {"axis": 1}, [_f(3, 5)], 13),
    ("argmax_last_index", "ArgMax", {"axis": 0, "keepdims": 0, "select_last_index": 1},
     [np.array([[1, 2], [1, 0], [0, 2]], np.float32)], 13),
    ("quantize_per_tensor_ties", "QuantizeLinear", {},
     [np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 300.0, -300.0], np.float32), np.array(1.0, np.float32),
      np.array(3, np.int8)], 13),
    ("quantize_uint8_default_zero_point", "QuantizeLinear", {},
     [_f(1000, scale=100), np.array(0.7, np.float32)], 13),
    ("quantize_per_axis", "QuantizeLinear", {"axis": 1},
     [_f(2, 3, 4, scale=20), np.array([0.1, 0.25, 0.3], np.float32), np.array([0, 5, -5], np.int8)], 13),
    ("quantize_saturate_opset19", "QuantizeLinear", {"saturate": 1},
     [_f(10, scale=500), np.array(0.5, np.float32), np.array(0, np.int8)], 19),
    ("dequantize_per_tensor", "DequantizeLinear", {},
     [np.arange(-128, 128, 16, dtype=np.int8), np.array(0.3, np.float32), np.array(-3, np.int8)], 13),
    ("dequantize_per_axis_uint8", "DequantizeLinear", {"axis": 0},
     [RNG.integers(0, 256, (3, 4)).astype(np.uint8), np.array([0.1, 0.2, 0.3], np.float32),
      np.array([128, 0, 255], np.uint8)], 13),
    ("dequantize_int32", "DequantizeLinear", {},
     [np.array([-70000, 3, 123456], np.int32), np.array(0.001, np.float32)], 13),
]

# (id, inputs): onnxruntime's integer kernels, see _check_integer_op
MATMUL_INTEGER_CASES = [
    ("zero_points",
     [RNG.integers(0, 256, (3, 8)).astype(np.uint8), RNG.integers(-128, 128, (8, 4)).astype(np.int8),
      np.array(128, np.uint8), np.array(3, np.int8)]),
    ("per_column_b",
     [RNG.integers(-128, 128, (2, 5)).astype(np.int8), RNG.integers(-128, 128, (5, 3)).astype(np.int8),
      None, np.array([1, -2, 3], np.int8)]),
]


@pytest.mark.parametrize("op_type,attrs,inputs,opset", [c[1:] for c in EXACT_CASES],
                         ids=[c[0] for c in EXACT_CASES])
def test_standard_op_matches_onnxruntime_exactly(op_type, attrs, inputs, opset):
    actual = run_node(op_type, _plain(attrs), inputs, opset=opset)
    expected = _run_onnxruntime(op_type, attrs, inputs, actual, opset=opset)
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected):
        _assert_bit_exact(a, e)


@pytest.mark.parametrize("opset,inputs",
                         [(13, [_f(3, 4), np.array(0.5, np.float32)]), (10, [_f(3, 4)]), (7, [_f(3, 4)])])
def test_dropout_is_identity_and_its_mask_follows_onnxruntime(opset, inputs):
    # onnxruntime's mask: all True from opset 12, zero-filled before (its Identity kernel)
    actual = run_node("Dropout", {}, inputs, opset=opset)
    expected = _run_onnxruntime("Dropout", {}, inputs, actual, opset=opset)
    for a, e in zip(actual, expected):
        _assert_bit_exact(a, e)


@pytest.mark.parametrize(
    "attrs",
    [{"value": numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(2, 3))},
     {"value_float": 0.1}, {"value_floats": [0.1, -2.0]}, {"value_int": -4}, {"value_ints": [1, 2, 3]}],
    ids=["value", "value_float", "value_floats", "value_int", "value_ints"],
)
def test_constant_matches_onnxruntime(attrs):
    actual = run_node("Constant", _plain(attrs), [])
    _assert_bit_exact(actual[0], _run_onnxruntime("Constant", attrs, [], actual)[0])


# Where onnxruntime uses its own approximations (MLAS polynomials for Tanh, Sigmoid, Erf,
# Exp and Softmax) or its own float accumulation order (MatMul, ReduceSum on arbitrary
# floats), the reference computes in float64 and rounds once. Measured differences: Exp,
# Erf 1 ulp, Tanh 3 ulp, Softmax 5 ulp.
APPROXIMATE_CASES = [
    ("tanh", "Tanh", {}, [_f(200)], 13, 4e-7, 0),
    ("exp", "Exp", {}, [_f(200, scale=4.0)], 13, 2e-7, 0),
    ("log", "Log", {}, [_positive(200)], 13, 2e-7, 0),
    ("erf", "Erf", {}, [_f(200, scale=1.0)], 13, 2e-7, 0),
    ("softmax_opset13", "Softmax", {}, [_f(4, 10)], 13, 8e-7, 0),
    ("softmax_opset11_coerced_2d", "Softmax", {"axis": 1}, [_f(2, 3, 4)], 11, 8e-7, 0),
    ("matmul_random_floats", "MatMul", {}, [_f(4, 50), _f(50, 3)], 13, 1e-5, 1e-5),
    ("reduce_sum_random_floats", "ReduceSum", {"axes": [1]}, [_f(3, 100)], 11, 1e-5, 1e-5),
    # glibc's powf (onnxruntime) vs float64 pow rounded: ~1 in 1000 results differ by an ulp
    ("pow_float_exponent", "Pow", {}, [_positive(200), _f(200, scale=2.0)], 13, 2e-7, 0),
]


@pytest.mark.parametrize("op_type,attrs,inputs,opset,rtol,atol", [c[1:] for c in APPROXIMATE_CASES],
                         ids=[c[0] for c in APPROXIMATE_CASES])
def test_standard_op_matches_onnxruntime_closely(op_type, attrs, inputs, opset, rtol, atol):
    (actual,) = run_node(op_type, attrs, inputs, opset=opset)
    (expected,) = _run_onnxruntime(op_type, attrs, inputs, [actual], opset=opset)
    assert actual.dtype == expected.dtype == np.float32
    np.testing.assert_allclose(actual, expected, rtol=rtol, atol=atol)


# ----------------------------------------------------------------------------------------
# Errors
# ----------------------------------------------------------------------------------------

def test_unsupported_op_names_the_op_and_lists_supported_ops():
    message = ("op 'ConvTranspose' is not supported by streamc's reference executor; supported ops: "
               + ", ".join(sorted(SUPPORTED_OPS)))
    with pytest.raises(UnsupportedOpError, match=f"^{re.escape(message)}$"):
        run_node("ConvTranspose", {}, [])


def test_supported_ops_cover_the_qonnx_ops():
    assert {"Quant", "BipolarQuant", "Trunc", "MultiThreshold"} <= SUPPORTED_OPS
    assert issubclass(UnsupportedOpError, FrontendError)


def test_every_family_module_registers_its_ops():
    # The ops are registered when streamc.reference imports each family module; a module it
    # stopped importing would drop its ops silently. This is the set before the package split.
    assert SUPPORTED_OPS == {
        "Abs", "Add", "ArgMax", "AveragePool", "BatchNormalization", "BipolarQuant", "Cast", "Ceil",
        "Clip", "Concat", "Constant", "ConstantOfShape", "Conv", "ConvInteger", "DequantizeLinear",
        "Div", "Dropout", "Equal", "Erf", "Exp", "Expand", "Flatten", "Floor", "Gather", "Gemm",
        "GlobalAveragePool", "GlobalMaxPool", "Greater", "HardSigmoid", "HardSwish", "Identity",
        "LeakyRelu", "Less", "Log", "MatMul", "MatMulInteger", "Max", "MaxPool", "Mean", "Min", "Mul",
        "MultiThreshold", "Neg", "Not", "Pad", "Pow", "QGemm", "QLinearConv", "QLinearMatMul", "Quant",
        "QuantizeLinear", "Reciprocal", "ReduceMax", "ReduceMean", "ReduceSum", "Relu", "Reshape",
        "Round", "Shape", "Sigmoid", "Sign", "Slice", "Softmax", "Softplus", "Sqrt", "Squeeze", "Sub",
        "Sum", "Tanh", "Transpose", "Trunc", "Unsqueeze", "Where",
    }


def test_blocked_quantization_is_rejected():
    message = "QuantizeLinear block_size=4 (blocked quantization) is not supported; only per-tensor and per-axis"
    with pytest.raises(FrontendError, match=f"^{re.escape(message)}$"):
        run_node("QuantizeLinear", {"block_size": 4}, [_f(8), np.ones(2, np.float32)], opset=21)


# ----------------------------------------------------------------------------------------
# Integer-operator and operator-oriented (QLinear*) ops, casts and float16 against onnxruntime
# ----------------------------------------------------------------------------------------

def _int8s(*shape):
    return RNG.integers(-128, 128, size=shape).astype(np.int8)


def _uint8s(*shape):
    return RNG.integers(0, 256, size=shape).astype(np.uint8)


def _scalar(value, dtype=np.float32):
    return np.array(value, dtype=dtype)


_NEEDS_VNNI = pytest.mark.skipif(not cpu_has_vnni(), reason="onnxruntime's u8 x s8 kernels saturate pairs of "
                                                           "products on CPUs without VNNI")
#: How a case of an integer kernel is checked: "exact", streamc against exact_ops on the inputs as
#: given; "onnxruntime", streamc against onnxruntime on the same inputs (where the CPU has VNNI);
#: "onnxruntime-unsaturated", the weights narrowed, streamc, exact_ops and onnxruntime all equal.
INTEGER_REFERENCES = ["exact", pytest.param("onnxruntime", marks=_NEEDS_VNNI), "onnxruntime-unsaturated"]


def _unsaturating(weights: np.ndarray) -> np.ndarray:
    """Weight codes with which no pair sum in MLAS's AVX2 kernel saturates.

    vpmaddubsw multiplies unsigned bytes by signed bytes and adds adjacent pairs in saturating int16;
    int8 activations enter as a + 128, so every unsigned operand is within [0, 255]. Weights within
    [-64, 63] (int8) or [0, 63] (uint8) keep |a_k * b_k + a_k+1 * b_k+1| <= 2 * 255 * 64 = 32640 <= 32767,
    whichever operand the kernel takes as the unsigned one.
    """
    return (weights // 2 if weights.dtype == np.int8 else weights // 4).astype(weights.dtype)


def _check_integer_op(reference, op_type, attrs, inputs, weight_index, *, domain="", opset=13):
    """streamc's ``op_type`` against exact_ops and, where it is exact, onnxruntime (see INTEGER_REFERENCES)."""
    inputs = list(inputs)
    if reference == "onnxruntime-unsaturated":
        inputs[weight_index] = _unsaturating(inputs[weight_index])
    actual = run_node(op_type, _plain(attrs), inputs, opset=opset)
    _assert_bit_exact(actual[0], exact_ops.OPS[(domain, op_type)](*inputs, **_plain(attrs)))
    if reference != "exact":
        (expected,) = _run_onnxruntime(op_type, attrs, inputs, actual, opset=opset, domain=domain)
        _assert_bit_exact(actual[0], expected)


@pytest.mark.parametrize("reference", INTEGER_REFERENCES)
@pytest.mark.parametrize("inputs", [c[1] for c in MATMUL_INTEGER_CASES], ids=[c[0] for c in MATMUL_INTEGER_CASES])
def test_matmul_integer_is_exact(inputs, reference):
    _check_integer_op(reference, "MatMulInteger", {}, inputs, weight_index=1)


def test_unsaturating_weights_span_the_unsaturating_range():
    # the "onnxruntime-unsaturated" cases still use most of the range vpmaddubsw can take exactly
    int8, uint8 = np.arange(-128, 128).astype(np.int8), np.arange(256).astype(np.uint8)
    assert (_unsaturating(int8).min(), _unsaturating(int8).max()) == (-64, 63)
    assert (_unsaturating(uint8).min(), _unsaturating(uint8).max()) == (0, 63)
    assert 2 * 255 * 64 <= np.iinfo(np.int16).max


def _qlinear_matmul_inputs(a, b, a_scale, b_scale, y_scale, a_zero, b_zero, y_zero, y_dtype):
    b_zero = np.asarray(b_zero, dtype=b.dtype)
    return [a, _scalar(a_scale), _scalar(a_zero, a.dtype), b, np.asarray(b_scale, dtype=np.float32), b_zero,
            _scalar(y_scale), _scalar(y_zero, y_dtype)]


QLINEAR_CASES = [
    ("u8_u8_u8", _qlinear_matmul_inputs(_uint8s(5, 64), _uint8s(64, 7), 0.02, 0.013, 0.7, 128, 120, 3, np.uint8)),
    ("u8_s8_u8", _qlinear_matmul_inputs(_uint8s(5, 64), _int8s(64, 7), 0.02, 0.013, 0.3, 7, 0, 128, np.uint8)),
    ("s8_s8_s8", _qlinear_matmul_inputs(_int8s(5, 64), _int8s(64, 7), 0.011, 0.021, 0.9, -3, 0, -5, np.int8)),
    ("s8_saturating", _qlinear_matmul_inputs(_int8s(5, 64), _int8s(64, 7), 0.5, 0.5, 0.01, 0, 0, 0, np.int8)),
    # multiplier exactly 0.5: every odd accumulator is a tie, which rounds to even
    ("s8_ties", _qlinear_matmul_inputs(_int8s(9, 3), _int8s(3, 20), 0.5, 1.0, 1.0, 0, 0, 0, np.int8)),
    ("u8_ties_zero_point", _qlinear_matmul_inputs(_uint8s(9, 3), _uint8s(3, 20), 0.25, 2.0, 1.0, 1, 2, 9, np.uint8)),
    ("s8_per_column_b", _qlinear_matmul_inputs(
        _int8s(4, 32), _int8s(32, 6), 0.03, np.linspace(0.005, 0.03, 6), 0.4, 2, np.arange(-3, 3), 1, np.int8)),
    ("u8_per_column_b_row_shaped", _qlinear_matmul_inputs(
        _uint8s(4, 32), _int8s(32, 6), 0.03, np.linspace(0.005, 0.03, 6).reshape(1, 6), 0.4, 100,
        np.zeros((1, 6)), 10, np.uint8)),
    ("s8_batched", _qlinear_matmul_inputs(_int8s(2, 3, 16), _int8s(16, 5), 0.1, 0.05, 0.25, 0, 0, 0, np.int8)),
]


@pytest.mark.parametrize("reference", INTEGER_REFERENCES)
@pytest.mark.parametrize("inputs", [c[1] for c in QLINEAR_CASES], ids=[c[0] for c in QLINEAR_CASES])
def test_qlinear_matmul_is_exact(inputs, reference):
    _check_integer_op(reference, "QLinearMatMul", {}, inputs, weight_index=3)


@pytest.mark.parametrize("signed", [False, True])
@pytest.mark.parametrize("per_column", [False, True])
@pytest.mark.parametrize("output", ["quantized", "float"])
@pytest.mark.parametrize("alpha,trans_b", [(1.0, 1), (0.37, 0)])
@pytest.mark.parametrize("reference", INTEGER_REFERENCES)
def test_qgemm_is_exact(reference, signed, per_column, output, alpha, trans_b):
    """onnxruntime's contrib QGemm: requantized or float output, per-column B scales, bias, alpha, transB."""
    rng = np.random.default_rng(7)
    dtype = np.int8 if signed else np.uint8
    info = np.iinfo(dtype)
    a = rng.integers(info.min, info.max + 1, (16, 24)).astype(dtype)
    b = rng.integers(-128, 128, (24, 6)).astype(np.int8)
    b_scale = rng.uniform(0.001, 0.01, 6).astype(np.float32) if per_column else _scalar(0.004)
    b_zero = np.zeros(6 if per_column else (), np.int8)
    inputs = [a, _scalar(0.02), np.array(3, dtype), b.T.copy() if trans_b else b, b_scale, b_zero,
              rng.integers(-3000, 3000, 6).astype(np.int32)]
    if output == "quantized":
        inputs += [_scalar(0.25), np.array(5, dtype)]
    attrs = {"alpha": alpha, "transB": trans_b}
    _check_integer_op(reference, "QGemm", attrs, inputs, weight_index=3, domain="com.microsoft")


@pytest.mark.parametrize("reference", INTEGER_REFERENCES)
def test_qgemm_with_transposed_a_is_exact(reference):
    rng = np.random.default_rng(3)
    inputs = [rng.integers(0, 256, (24, 16)).astype(np.uint8), _scalar(0.02), np.array(3, np.uint8),
              rng.integers(-128, 128, (24, 6)).astype(np.int8), _scalar(0.004), np.array(0, np.int8),
              rng.integers(-3000, 3000, 6).astype(np.int32), _scalar(0.25), np.array(5, np.uint8)]
    _check_integer_op(reference, "QGemm", {"transA": 1, "alpha": 0.5}, inputs, weight_index=3, domain="com.microsoft")


def test_qlinear_matmul_ties_round_to_even():
    a = np.array([[1, 3, 5, -1, -3, 2]], np.int8).T.copy()
    inputs = _qlinear_matmul_inputs(a, np.array([[1]], np.int8), 0.5, 1.0, 1.0, 0, 0, 0, np.int8)
    (actual,) = run_node("QLinearMatMul", {}, inputs)
    np.testing.assert_array_equal(actual.reshape(-1), [0, 2, 2, 0, -2, 1])


def _integer_requantize_model(a_dtype, b_dtype, y_dtype, *, qlinear: bool):
    """QLinearMatMul, or MatMulInteger -> Cast -> Mul(multiplier) -> QuantizeLinear(1, y_zero_point),
    with every scale and zero point a graph input so that one session serves many cases."""
    def tensor(name, dtype, shape=()):
        return helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(np.dtype(dtype)), shape)

    if qlinear:
        nodes = [helper.make_node("QLinearMatMul", ["a", "a_scale", "a_zero", "b", "b_scale", "b_zero", "y_scale",
                                                    "y_zero"], ["y"])]
        inputs = [tensor("a", a_dtype, [4, 48]), tensor("a_scale", np.float32), tensor("a_zero", a_dtype),
                  tensor("b", b_dtype, [48, 8]), tensor("b_scale", np.float32), tensor("b_zero", b_dtype),
                  tensor("y_scale", np.float32), tensor("y_zero", y_dtype)]
    else:
        nodes = [helper.make_node("MatMulInteger", ["a", "b", "a_zero", "b_zero"], ["accumulator"]),
                 helper.make_node("Cast", ["accumulator"], ["wide"], to=TensorProto.FLOAT),
                 helper.make_node("Mul", ["wide", "multiplier"], ["scaled"]),
                 helper.make_node("QuantizeLinear", ["scaled", "one", "y_zero"], ["y"])]
        inputs = [tensor("a", a_dtype, [4, 48]), tensor("a_zero", a_dtype), tensor("b", b_dtype, [48, 8]),
                  tensor("b_zero", b_dtype), tensor("multiplier", np.float32), tensor("one", np.float32),
                  tensor("y_zero", y_dtype)]
    graph = helper.make_graph(nodes, "requantize", inputs, [tensor("y", y_dtype, [4, 8])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 10
    return model


def _session(model):
    options = onnxruntime.SessionOptions()
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
    return onnxruntime.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


@pytest.mark.parametrize("a_dtype,b_dtype,y_dtype", [(np.uint8, np.int8, np.uint8), (np.int8, np.int8, np.int8),
                                                     (np.uint8, np.uint8, np.uint8)])
def test_qlinear_matmul_equals_matmul_integer_cast_mul_quantize_in_onnxruntime(a_dtype, b_dtype, y_dtype):
    # the multiplier float32(float32(a_scale * b_scale) / y_scale) makes the integer-operator
    # form bit-identical to QLinearMatMul; random scales over five decades, ties included.
    # Full-range codes: both forms in the exact reference (exact integer kernels, onnxruntime's
    # Cast and Mul) and streamc agree. Codes that cannot saturate (see _unsaturating): both
    # forms in onnxruntime's own kernels, end to end, agree with them too.
    rng = np.random.default_rng(99)
    qlinear_model = _integer_requantize_model(a_dtype, b_dtype, y_dtype, qlinear=True)
    integer_model = _integer_requantize_model(a_dtype, b_dtype, y_dtype, qlinear=False)
    qlinear, integer = _session(qlinear_model), _session(integer_model)
    differences = 0
    for case in range(300):
        a = rng.integers(np.iinfo(a_dtype).min, np.iinfo(a_dtype).max + 1, (4, 48)).astype(a_dtype)
        b = rng.integers(np.iinfo(b_dtype).min, np.iinfo(b_dtype).max + 1, (48, 8)).astype(b_dtype)
        a_scale, b_scale, y_scale = (_scalar(10.0 ** rng.uniform(-3, 0)) for _ in range(3))
        if case % 3 == 0:
            a_scale, b_scale, y_scale = _scalar(2.0 ** -rng.integers(6, 12)), _scalar(1.0), _scalar(1.0)
        zeros = [np.array(rng.integers(np.iinfo(t).min, np.iinfo(t).max + 1), t) for t in (a_dtype, b_dtype, y_dtype)]
        multiplier = np.asarray(a_scale * b_scale / y_scale, dtype=np.float32)
        for weights, run in ((b, run_model), (_unsaturating(b), lambda session, feeds: session.run(None, feeds))):
            qlinear_feeds = {"a": a, "a_scale": a_scale, "a_zero": zeros[0], "b": weights, "b_scale": b_scale,
                             "b_zero": zeros[1], "y_scale": y_scale, "y_zero": zeros[2]}
            integer_feeds = {"a": a, "a_zero": zeros[0], "b": weights, "b_zero": zeros[1], "multiplier": multiplier,
                             "one": _scalar(1.0), "y_zero": zeros[2]}
            sessions = (qlinear_model, integer_model) if run is run_model else (qlinear, integer)
            (expected,) = run(sessions[0], qlinear_feeds)
            (integer_form,) = run(sessions[1], integer_feeds)
            (reference,) = run_node("QLinearMatMul", {}, list(qlinear_feeds.values()))
            differences += int(np.count_nonzero(integer_form != expected))
            _assert_bit_exact(reference, expected)
    assert differences == 0


def _conv_inputs(x, w, *, x_zero=None, w_zero=None):
    return [x, w] + ([x_zero, w_zero] if x_zero is not None or w_zero is not None else [])


CONV_CASES = [
    ("plain", {}, _uint8s(1, 3, 6, 6), _int8s(4, 3, 3, 3), 0, 0),
    ("pads_strides", {"pads": [1, 2, 0, 1], "strides": [2, 1]}, _uint8s(2, 3, 7, 6), _int8s(4, 3, 3, 2), 128, 0),
    ("groups_dilations", {"group": 2, "dilations": [2, 1], "pads": [1, 1, 1, 1]}, _uint8s(1, 4, 7, 7),
     _uint8s(6, 2, 2, 3), 3, 5),
    ("depthwise", {"group": 3, "pads": [1, 1, 1, 1]}, _int8s(1, 3, 5, 5), _int8s(3, 1, 3, 3), -2, 0),
    ("auto_pad_valid", {"auto_pad": "VALID"}, _int8s(1, 2, 4, 4), _int8s(2, 2, 2, 2), 0, 0),
]


@pytest.mark.parametrize("reference", INTEGER_REFERENCES)
@pytest.mark.parametrize("attrs,x,w,x_zero,w_zero", [c[1:] for c in CONV_CASES], ids=[c[0] for c in CONV_CASES])
def test_conv_integer_is_exact(attrs, x, w, x_zero, w_zero, reference):
    inputs = [x, w, np.array(x_zero, x.dtype), np.array(w_zero, w.dtype)]
    if x.dtype == np.int8 and w.dtype == np.int8 and x_zero == 0:
        inputs = [x, w]
    _check_integer_op(reference, "ConvInteger", attrs, inputs, weight_index=1)


@pytest.mark.parametrize("reference", INTEGER_REFERENCES)
@pytest.mark.parametrize("attrs,x,w,x_zero,w_zero", [c[1:] for c in CONV_CASES], ids=[c[0] for c in CONV_CASES])
@pytest.mark.parametrize("per_channel", [False, True])
@pytest.mark.parametrize("with_bias", [False, True])
def test_qlinear_conv_is_exact(attrs, x, w, x_zero, w_zero, per_channel, with_bias, reference):
    if x.dtype != w.dtype and x.dtype == np.int8:
        pytest.skip("onnxruntime has no int8-input, uint8-weight QLinearConv kernel")
    w = w.astype(np.int8) if x.dtype == np.int8 else w
    out_channels = w.shape[0]
    w_scale = np.linspace(0.01, 0.05, out_channels).astype(np.float32) if per_channel else _scalar(0.02)
    w_zero_point = np.full(out_channels, w_zero, w.dtype) if per_channel else np.array(w_zero, w.dtype)
    inputs = [x, _scalar(0.05), np.array(x_zero, x.dtype), w, w_scale, w_zero_point, _scalar(0.3),
              np.array(7, x.dtype)]
    if with_bias:
        inputs.append(RNG.integers(-2000, 2000, out_channels).astype(np.int32))
    _check_integer_op(reference, "QLinearConv", attrs, inputs, weight_index=3)


_OUT_OF_RANGE = np.array([-1e10, -300.0, -129.5, -128.6, -1.5, -0.5, 0.5, 1.5, 2.7, 127.9, 128.5, 255.9, 256.5,
                          300.0, 70000.7, 3e9, 1e10, np.inf, -np.inf, np.nan], np.float32)

CAST_CASES = [
    (f"float32_to_{np.dtype(t).name}", TensorProto.__dict__[name], _OUT_OF_RANGE, 13)
    for name, t in [("INT8", np.int8), ("UINT8", np.uint8), ("INT16", np.int16), ("UINT16", np.uint16),
                    ("INT32", np.int32), ("INT64", np.int64)]
] + [
    ("float16_to_int8", TensorProto.INT8, _OUT_OF_RANGE[~(np.abs(_OUT_OF_RANGE) > 65000)].astype(np.float16), 13),
    ("float64_to_int8", TensorProto.INT8, np.array([300.7, -1e10, -2.5, 2.5], np.float64), 13),
    ("int32_to_int8_wraps", TensorProto.INT8, np.array([300, -129, 70000, -5], np.int32), 13),
    ("int32_to_float16_rounds", TensorProto.FLOAT16,
     np.concatenate([RNG.integers(-70000, 70000, 500), [2049, 2051, 65519, 65520, -65520]]).astype(np.int32), 13),
    ("float16_to_float32", TensorProto.FLOAT, np.arange(-600, 600, 0.37).astype(np.float16), 13),
    ("float32_to_float16_overflow", TensorProto.FLOAT16, np.array([65519.0, 65520.0, -1e6, 1e-8, 6e-8], np.float32), 13),
    ("int8_to_float16", TensorProto.FLOAT16, np.arange(-128, 128, dtype=np.int8), 19),
]


@pytest.mark.parametrize("to,x,opset", [c[1:] for c in CAST_CASES], ids=[c[0] for c in CAST_CASES])
def test_cast_matches_onnxruntime_including_out_of_range_values(to, x, opset):
    actual = run_node("Cast", {"to": to}, [x], opset=opset)
    _assert_bit_exact(actual[0], _run_onnxruntime("Cast", {"to": to}, [x], actual, opset=opset)[0])


def test_cast_out_of_range_keeps_the_low_bits_of_int32_truncation():
    (actual,) = run_node("Cast", {"to": TensorProto.INT8}, [np.array([300.7, 255.9, np.nan, 1e10], np.float32)])
    np.testing.assert_array_equal(actual, [44, -1, 0, 0])


_HALVES = RNG.normal(0, 3, 4000).astype(np.float16)

FLOAT16_CASES = [
    ("mul", "Mul", [_HALVES, RNG.normal(0, 3, 4000).astype(np.float16)], 13),
    ("mul_by_power_of_two", "Mul", [_HALVES, np.array(2.0 ** -7, np.float16)], 13),
    ("add", "Add", [_HALVES, RNG.normal(0, 3, 4000).astype(np.float16)], 13),
    ("relu", "Relu", [_HALVES], 14),
    ("tanh", "Tanh", [_HALVES], 13),
    ("sigmoid", "Sigmoid", [_HALVES], 13),
]


@pytest.mark.parametrize("op_type,inputs,opset", [c[1:] for c in FLOAT16_CASES], ids=[c[0] for c in FLOAT16_CASES])
def test_float16_op_matches_onnxruntime_exactly(op_type, inputs, opset):
    # onnxruntime computes these through float32 and rounds once to float16, which is what
    # numpy's float16 arithmetic and the float64 Tanh rounded to float16 give
    actual = run_node(op_type, {}, inputs, opset=opset)
    _assert_bit_exact(actual[0], _run_onnxruntime(op_type, {}, inputs, actual, opset=opset)[0])


QDQ_VARIANT_CASES = [
    ("quantize_float16_input_in_float32", "QuantizeLinear", {},
     [RNG.normal(0, 40, 2000).astype(np.float16), np.array(0.3, np.float16), np.array(3, np.int8)], 19),
    ("quantize_output_dtype_int8", "QuantizeLinear", {"output_dtype": TensorProto.INT8},
     [_f(200, scale=50), np.array(0.3, np.float32)], 21),
    ("quantize_output_dtype_default", "QuantizeLinear", {}, [_f(200, scale=50), np.array(0.3, np.float32)], 21),
    ("quantize_int16", "QuantizeLinear", {},
     [_f(200, scale=5000), np.array(0.3, np.float32), np.array(-7, np.int16)], 21),
    ("quantize_uint16_saturate_ignored", "QuantizeLinear", {"saturate": 0},
     [_f(200, scale=50000), np.array(0.5, np.float32), np.array(100, np.uint16)], 21),
    ("dequantize_float16_scale", "DequantizeLinear", {},
     [_int8s(500), np.array(0.3, np.float16), np.array(3, np.int8)], 19),
    ("dequantize_int16_per_axis", "DequantizeLinear", {"axis": 0},
     [RNG.integers(-30000, 30000, (3, 4)).astype(np.int16), np.array([0.1, 0.2, 0.3], np.float32),
      np.array([5, 0, -5], np.int16)], 21),
]


@pytest.mark.parametrize("op_type,attrs,inputs,opset", [c[1:] for c in QDQ_VARIANT_CASES],
                         ids=[c[0] for c in QDQ_VARIANT_CASES])
def test_quantize_dequantize_opset_19_21_variants_match_onnxruntime(op_type, attrs, inputs, opset):
    actual = run_node(op_type, attrs, inputs, opset=opset)
    _assert_bit_exact(actual[0], _run_onnxruntime(op_type, attrs, inputs, actual, opset=opset)[0])


_QDQ_CASES = [c for c in EXACT_CASES if c[1] in ("QuantizeLinear", "DequantizeLinear")] + QDQ_VARIANT_CASES


@pytest.mark.parametrize("op_type,attrs,inputs,opset", [c[1:] for c in _QDQ_CASES], ids=[c[0] for c in _QDQ_CASES])
def test_exact_quantize_dequantize_match_onnxruntime(op_type, attrs, inputs, opset):
    # float kernels, exact in onnxruntime on every CPU: they pin exact_ops' division, rounding,
    # saturation, per-axis broadcasting and output types
    expected = exact_ops.OPS[("", op_type)](*inputs, **attrs)
    _assert_bit_exact(expected, _run_onnxruntime(op_type, attrs, inputs, [expected], opset=opset)[0])


def test_quantize_to_int4_is_rejected_with_the_supported_types():
    with pytest.raises(FrontendError, match=r"^QuantizeLinear to data type 22 is not supported; supported "):
        run_node("QuantizeLinear", {"output_dtype": TensorProto.INT4}, [_f(4), np.array(1.0, np.float32)], opset=21)


def test_round_to_zero_is_rejected_like_qonnx():
    # Brevitas names a ROUND_TO_ZERO float-to-int mode; qonnx 1.0 (and so streamc) accepts only
    # the names it can resolve, DOWN being the one that rounds toward zero
    inputs = [_f(4), np.array(1.0, np.float32), np.array(0.0, np.float32), np.array(4.0, np.float32)]
    attrs = {"signed": 1, "narrow": 0, "rounding_mode": "ROUND_TO_ZERO"}
    with pytest.raises(ValueError, match="Could not resolve rounding mode"):
        _run_qonnx("Quant", attrs, inputs)
    with pytest.raises(FrontendError, match=r"^Quant rounding_mode must be one of "):
        run_node("Quant", attrs, inputs)


@pytest.mark.parametrize("op_type,inputs,message", [
    ("QLinearMatMul", [_int8s(2, 3), np.ones(2, np.float32), np.zeros((), np.int8), _int8s(3, 4),
                       _scalar(1.0), np.zeros((), np.int8), _scalar(1.0), np.zeros((), np.int8)],
     "QLinearMatMul a_scale must be per-tensor (a scalar or one-element vector), not of shape (2,)"),
    ("QLinearMatMul", [_int8s(2, 3), _scalar(1.0), np.zeros((), np.int8), _int8s(3, 4),
                       np.ones(3, np.float32), np.zeros((), np.int8), _scalar(1.0), np.zeros((), np.int8)],
     "QLinearMatMul b_scale of shape (3,) must be per-tensor or hold one value per column of b (4)"),
    ("ConvInteger", [_int8s(1, 3, 4), _int8s(2, 3, 2, 2)],
     "ConvInteger weights of shape (2, 3, 2, 2) must have the input's rank 3 (M, C/group and one kernel size "
     "per spatial axis of input shape (1, 3, 4))"),
])
def test_integer_op_errors_name_the_offending_value(op_type, inputs, message):
    with pytest.raises(FrontendError, match=f"^{re.escape(message)}$"):
        run_node(op_type, {}, inputs)


# ----------------------------------------------------------------------------------------
# Convolution, pooling and padding against onnxruntime
# ----------------------------------------------------------------------------------------

def _conv_case(name, attrs, x_shape, w_shape, *, bias=False, opset=13):
    inputs = [_ints_as_float(*x_shape), _ints_as_float(*w_shape, high=8)]
    if bias:
        inputs.append(_ints_as_float(w_shape[0], high=100))
    return (name, "Conv", attrs, inputs, opset)


def _pool_case(name, op_type, attrs, x_shape, *, opset=19, high=16):
    return (name, op_type, attrs, [_ints_as_float(*x_shape, high=high)], opset)


# integer-valued operands: onnxruntime's float32 sums are exact, so the results are equal
WINDOW_CASES = [
    _conv_case("conv1d", {}, (2, 3, 11), (4, 3, 3)),
    _conv_case("conv1d_strides_dilations_asymmetric_pads",
               {"strides": [2], "dilations": [2], "pads": [3, 1]}, (1, 2, 13), (3, 2, 3), bias=True),
    _conv_case("conv2d", {}, (1, 3, 6, 7), (5, 3, 3, 3)),
    _conv_case("conv2d_bias_kernel_shape_attribute", {"kernel_shape": [3, 2]}, (2, 3, 6, 6), (4, 3, 3, 2),
               bias=True),
    _conv_case("conv2d_strides_dilations_asymmetric_pads",
               {"strides": [2, 3], "dilations": [2, 1], "pads": [0, 2, 1, 0]}, (1, 2, 9, 10), (3, 2, 3, 3)),
    _conv_case("conv2d_valid", {"auto_pad": "VALID", "strides": [2, 2]}, (1, 2, 7, 8), (2, 2, 3, 3)),
    _conv_case("conv2d_same_upper_odd_padding", {"auto_pad": "SAME_UPPER", "strides": [2, 2]}, (1, 2, 8, 7),
               (3, 2, 4, 4)),
    _conv_case("conv2d_same_lower_odd_padding", {"auto_pad": "SAME_LOWER", "strides": [2, 2]}, (1, 2, 8, 7),
               (3, 2, 4, 4)),
    _conv_case("conv2d_same_upper_even_kernel", {"auto_pad": "SAME_UPPER"}, (1, 2, 5, 5), (2, 2, 2, 2)),
    _conv_case("conv2d_same_lower_stride_beyond_kernel", {"auto_pad": "SAME_LOWER", "strides": [3, 3]},
               (1, 2, 7, 8), (2, 2, 1, 1)),
    _conv_case("conv2d_depthwise", {"group": 4, "pads": [1, 1, 1, 1]}, (2, 4, 6, 6), (4, 1, 3, 3), bias=True),
    _conv_case("conv2d_depthwise_multiplier", {"group": 3, "strides": [2, 1]}, (1, 3, 7, 5), (6, 1, 3, 3)),
    _conv_case("conv2d_groups", {"group": 2, "pads": [1, 0, 1, 2]}, (1, 4, 5, 6), (6, 2, 3, 3), bias=True),
    _conv_case("conv2d_pointwise", {}, (1, 16, 4, 4), (8, 16, 1, 1), bias=True),
    _conv_case("conv3d", {"pads": [1, 0, 1, 0, 1, 1], "strides": [1, 2, 1]}, (1, 2, 4, 5, 4), (3, 2, 2, 3, 2),
               bias=True),
    _pool_case("maxpool1d", "MaxPool", {"kernel_shape": [3], "strides": [2]}, (2, 3, 11)),
    _pool_case("maxpool2d_pads_strides", "MaxPool", {"kernel_shape": [3, 3], "strides": [2, 2],
                                                     "pads": [1, 0, 2, 1]}, (1, 3, 8, 9), high=3),
    _pool_case("maxpool2d_dilations", "MaxPool", {"kernel_shape": [2, 3], "dilations": [2, 2]}, (1, 2, 8, 9)),
    # the dilated windows of the one output row read padding only
    _pool_case("maxpool2d_window_of_padding_only", "MaxPool", {"kernel_shape": [2, 2], "pads": [1, 1, 1, 1],
                                                               "dilations": [3, 3]}, (2, 3, 2, 4)),
    _pool_case("maxpool2d_ceil_mode", "MaxPool", {"kernel_shape": [2, 2], "strides": [2, 2], "ceil_mode": 1},
               (1, 2, 7, 5)),
    # the last window would start in the end padding: onnxruntime drops it
    _pool_case("maxpool1d_ceil_mode_drops_window_in_padding", "MaxPool",
               {"kernel_shape": [3], "strides": [2], "pads": [0, 2], "ceil_mode": 1}, (1, 1, 4)),
    _pool_case("maxpool2d_same_upper", "MaxPool", {"kernel_shape": [3, 3], "strides": [2, 2],
                                                   "auto_pad": "SAME_UPPER"}, (1, 2, 8, 7)),
    # strides beyond the kernel: the SAME padding is negative, which onnxruntime's pooling
    # loops apply as it is (MaxPool's MLAS path, one output, rejects it)
    _pool_case("averagepool2d_same_upper_negative_padding", "AveragePool",
               {"kernel_shape": [1, 2], "strides": [3, 3], "auto_pad": "SAME_UPPER", "count_include_pad": 1},
               (1, 2, 6, 7)),
    _pool_case("maxpool2d_same_lower", "MaxPool", {"kernel_shape": [2, 2], "auto_pad": "SAME_LOWER"}, (1, 2, 5, 6)),
    _pool_case("maxpool2d_storage_order_column_major", "MaxPool",
               {"kernel_shape": [2, 3], "strides": [1, 2], "pads": [1, 1, 0, 1], "storage_order": 1}, (2, 2, 5, 7),
               high=2),
    _pool_case("maxpool3d", "MaxPool", {"kernel_shape": [2, 2, 2], "strides": [2, 1, 2], "pads": [0, 1, 1, 0, 0, 1]},
               (1, 2, 4, 5, 5)),
    ("maxpool2d_int8_padded_windows_of_minimum", "MaxPool",
     {"kernel_shape": [3, 3], "pads": [2, 2, 2, 2], "strides": [2, 2]},
     [np.where(RNG.random((1, 2, 6, 6)) < 0.6, -128, _int8s(1, 2, 6, 6)).astype(np.int8)], 12),
    _pool_case("averagepool1d_exclude_pad", "AveragePool", {"kernel_shape": [3], "pads": [1, 2]}, (2, 3, 9)),
    _pool_case("averagepool2d_include_pad", "AveragePool",
               {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "count_include_pad": 1}, (1, 3, 7, 7)),
    _pool_case("averagepool2d_exclude_pad_strides", "AveragePool",
               {"kernel_shape": [3, 2], "pads": [2, 1, 0, 1], "strides": [2, 3]}, (1, 3, 8, 9)),
    # count_include_pad counts the end padding but not the positions past it that ceil_mode adds
    _pool_case("averagepool2d_ceil_mode_include_pad", "AveragePool",
               {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 0, 1, 2], "ceil_mode": 1,
                "count_include_pad": 1}, (1, 2, 8, 7)),
    _pool_case("averagepool2d_ceil_mode_exclude_pad", "AveragePool",
               {"kernel_shape": [2, 2], "strides": [2, 2], "ceil_mode": 1}, (1, 2, 7, 5)),
    _pool_case("averagepool1d_ceil_mode_drops_window_in_padding", "AveragePool",
               {"kernel_shape": [3], "strides": [2], "pads": [0, 2], "ceil_mode": 1, "count_include_pad": 1},
               (1, 1, 4)),
    _pool_case("averagepool2d_dilations_include_pad", "AveragePool",
               {"kernel_shape": [2, 2], "dilations": [2, 3], "pads": [1, 1, 0, 1], "count_include_pad": 1},
               (1, 2, 7, 8)),
    _pool_case("averagepool2d_same_upper", "AveragePool",
               {"kernel_shape": [3, 3], "strides": [2, 2], "auto_pad": "SAME_UPPER"}, (1, 2, 8, 7)),
    _pool_case("averagepool2d_same_lower_include_pad", "AveragePool",
               {"kernel_shape": [2, 2], "auto_pad": "SAME_LOWER", "count_include_pad": 1}, (1, 2, 5, 6)),
    _pool_case("averagepool3d", "AveragePool", {"kernel_shape": [2, 3, 2], "pads": [1, 1, 0, 0, 1, 1]},
               (1, 2, 4, 5, 4)),
    _pool_case("averagepool2d_opset11", "AveragePool", {"kernel_shape": [2, 2], "strides": [2, 2]}, (1, 2, 6, 6),
               opset=11),
    _pool_case("global_average_pool2d", "GlobalAveragePool", {}, (2, 3, 7, 7), opset=13, high=128),
    _pool_case("global_average_pool1d", "GlobalAveragePool", {}, (2, 3, 9), opset=13),
    _pool_case("global_max_pool2d", "GlobalMaxPool", {}, (2, 3, 5, 6), opset=13),
    _pool_case("global_max_pool3d", "GlobalMaxPool", {}, (1, 2, 3, 4, 5), opset=13),
    ("pad_constant_inputs", "Pad", {}, [_f(2, 3, 4), _i64(0, 1, 2, 0, 1, 0), np.array(1.5, np.float32)], 13),
    ("pad_constant_default_value", "Pad", {}, [_f(1, 2, 3, 3), _i64(0, 0, 1, 1, 0, 0, 2, 1)], 11),
    ("pad_constant_attributes_opset2", "Pad", {"pads": [0, 0, 2, 1, 0, 0, 1, 3], "value": -2.0}, [_f(1, 2, 3, 3)], 2),
    ("pad_negative_crops_first", "Pad", {}, [_f(3, 6), _i64(1, -2, -1, 3), np.array(9.0, np.float32)], 13),
    ("pad_int8_constant", "Pad", {}, [_int8s(2, 5), _i64(1, 2, 0, 1), np.array(-7, np.int8)], 13),
    ("pad_reflect", "Pad", {"mode": "reflect"}, [_f(1, 2, 4, 5), _i64(0, 0, 3, 1, 0, 0, 2, 4)], 13),
    ("pad_edge", "Pad", {"mode": "edge"}, [_f(1, 2, 4, 5), _i64(0, 0, 5, 1, 0, 0, 2, 7)], 13),
    ("pad_wrap_beyond_length", "Pad", {"mode": "wrap"}, [_f(2, 4), _i64(0, 9, 0, 5)], 19),
    ("pad_reflect_after_cropping", "Pad", {"mode": "reflect"}, [_f(6), _i64(2, -2)], 13),
    ("pad_axes_input", "Pad", {}, [_f(2, 3, 4), _i64(1, 2, 3, 0), np.array(0.5, np.float32), _i64(-1, 0)], 18),
]


@pytest.mark.parametrize("op_type,attrs,inputs,opset", [c[1:] for c in WINDOW_CASES],
                         ids=[c[0] for c in WINDOW_CASES])
def test_window_op_matches_onnxruntime_exactly(op_type, attrs, inputs, opset):
    actual = run_node(op_type, attrs, inputs, opset=opset)
    # MaxPool's Indices output switches onnxruntime from MLAS to its own loops: check both
    for outputs in ([actual[:1], actual] if op_type == "MaxPool" else [actual]):
        expected = _run_onnxruntime(op_type, attrs, inputs, outputs, opset=opset)
        for a, e in zip(outputs, expected):
            _assert_bit_exact(a, e)


@pytest.mark.parametrize("reference", INTEGER_REFERENCES)
@pytest.mark.parametrize("x_dtype,w_dtype", [(np.uint8, np.int8), (np.int8, np.int8)])
@pytest.mark.parametrize("attrs,x_shape,w_shape", [
    ({"pads": [1, 2], "strides": [2], "dilations": [2]}, (2, 4, 12), (6, 4, 3)),
    ({"auto_pad": "SAME_UPPER", "strides": [2, 2], "group": 2}, (1, 4, 7, 6), (4, 2, 3, 3)),
    ({"pads": [0, 1, 1, 1, 0, 0]}, (1, 3, 4, 4, 3), (2, 3, 2, 3, 2)),
    # strides beyond the kernel: SAME pads the width by -1 in total, halved as onnxruntime does
    ({"auto_pad": "SAME_LOWER", "strides": [3, 3]}, (1, 2, 7, 8), (2, 2, 1, 1)),
    ({"auto_pad": "SAME_UPPER", "strides": [3, 3]}, (1, 2, 7, 8), (2, 2, 1, 1)),
], ids=["1d", "2d_same_upper_groups", "3d", "2d_same_lower_negative_padding", "2d_same_upper_negative_padding"])
def test_integer_convolutions_of_any_rank_are_exact(attrs, x_shape, w_shape, x_dtype, w_dtype, reference):
    x = RNG.integers(np.iinfo(x_dtype).min, np.iinfo(x_dtype).max + 1, x_shape).astype(x_dtype)
    w = RNG.integers(-128, 128, w_shape).astype(w_dtype)
    x_zero, w_zero = np.array(3, x_dtype), np.array(0, w_dtype)
    _check_integer_op(reference, "ConvInteger", attrs, [x, w, x_zero, w_zero], weight_index=1)
    w_scale = np.linspace(0.01, 0.03, w_shape[0]).astype(np.float32)
    qlinear_inputs = [x, _scalar(0.05), x_zero, w, w_scale, np.zeros(w_shape[0], w_dtype), _scalar(0.2),
                      np.array(-1 if x_dtype == np.int8 else 120, x_dtype),
                      RNG.integers(-500, 500, w_shape[0]).astype(np.int32)]
    _check_integer_op(reference, "QLinearConv", attrs, qlinear_inputs, weight_index=3)


def test_maxpool_of_minus_infinity_follows_onnxruntimes_indices_path():
    # with the Indices output onnxruntime keeps the first input tap, padding aside, so a
    # window of -inf gives -inf; its single-output MLAS path gives the lowest finite float
    # where such a window touches the padding (streamc does not follow that path)
    x, attrs = np.full((1, 1, 3, 3), -np.inf, np.float32), {"kernel_shape": [2, 2], "pads": [1, 1, 1, 1]}
    actual = run_node("MaxPool", attrs, [x])
    for a, e in zip(actual, _run_onnxruntime("MaxPool", attrs, [x], actual, opset=12)):
        _assert_bit_exact(a, e)
    assert np.all(actual[0] == -np.inf)


def _float_sum_bound(op_type, attrs, inputs):
    """|reference - onnxruntime| allowed where onnxruntime sums random floats in its own order:
    one float32 rounding per addition, on the sum of the magnitudes of the terms."""
    (magnitude,) = run_node(op_type, attrs, [np.abs(x) for x in inputs])
    terms = inputs[1][0].size if op_type == "Conv" else math.prod(attrs["kernel_shape"])
    return (terms + 2) * 2.0**-24 * magnitude.astype(np.float64)


@pytest.mark.parametrize("op_type,attrs,shapes", [
    ("Conv", {"pads": [1, 1, 1, 1]}, [(1, 8, 6, 6), (4, 8, 3, 3), (4,)]),
    ("Conv", {"group": 8, "strides": [2, 2]}, [(1, 8, 7, 7), (8, 1, 3, 3)]),
    ("Conv", {"auto_pad": "SAME_UPPER", "dilations": [1]}, [(2, 16, 20), (5, 16, 5), (5,)]),
    ("AveragePool", {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "count_include_pad": 1}, [(1, 4, 7, 7)]),
    ("AveragePool", {"kernel_shape": [2, 5], "ceil_mode": 1, "strides": [2, 2]}, [(1, 4, 7, 9)]),
], ids=["conv2d_bias", "conv2d_depthwise", "conv1d_same_upper", "averagepool_include_pad", "averagepool_ceil"])
def test_window_op_on_random_floats_is_within_the_float32_summation_bound(op_type, attrs, shapes):
    # float64 accumulation rounded once versus onnxruntime's float32 accumulation
    inputs = [_f(*shape, scale=1.0) for shape in shapes]
    (actual,) = run_node(op_type, attrs, inputs, opset=19)
    (expected,) = _run_onnxruntime(op_type, attrs, inputs, [actual], opset=19)
    assert actual.dtype == expected.dtype == np.float32 and actual.shape == expected.shape
    bound = _float_sum_bound(op_type, attrs, inputs)
    assert np.all(np.abs(actual.astype(np.float64) - expected) <= bound)


_ACTIVATION_INPUT = np.concatenate([_f(4000, scale=4.0), np.arange(-8, 8, 1 / 64), [0.0, -0.0]]).astype(np.float32)

ELEMENTWISE_CASES = [
    ("leaky_relu_default_alpha", "LeakyRelu", {}, [_ACTIVATION_INPUT], 16),
    ("leaky_relu_alpha", "LeakyRelu", {"alpha": 0.1}, [_ACTIVATION_INPUT], 6),
    ("hard_sigmoid_default", "HardSigmoid", {}, [_ACTIVATION_INPUT], 6),
    ("hard_sigmoid_alpha_beta", "HardSigmoid", {"alpha": 0.3, "beta": 0.6}, [_ACTIVATION_INPUT], 6),
    ("hard_swish", "HardSwish", {}, [_ACTIVATION_INPUT], 14),
    ("sum_three_broadcast", "Sum", {}, [_f(3, 1, 4), _f(5, 1), _f(4)], 13),
    ("sum_one", "Sum", {}, [_f(3, 4)], 13),
    ("mean_three", "Mean", {}, [_f(400), _f(400), _f(1)], 13),
    ("mean_seven", "Mean", {}, [_f(2, 300) for _ in range(7)], 13),
]


@pytest.mark.parametrize("op_type,attrs,inputs,opset", [c[1:] for c in ELEMENTWISE_CASES],
                         ids=[c[0] for c in ELEMENTWISE_CASES])
def test_elementwise_op_matches_onnxruntime_exactly(op_type, attrs, inputs, opset):
    actual = run_node(op_type, attrs, inputs, opset=opset)
    _assert_bit_exact(actual[0], _run_onnxruntime(op_type, attrs, inputs, actual, opset=opset)[0])


def _ulp_distance(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    # float32 bit patterns ordered as integers (both of one sign here: Softplus is positive)
    return np.abs(a.view(np.int32).astype(np.int64) - b.view(np.int32).astype(np.int64))


def test_softplus_is_within_4_ulp_of_onnxruntime():
    # onnxruntime evaluates Softplus with Eigen's float32 exp and log1p; the reference is
    # float64 rounded once. Measured: up to 4 ulp, near x = -1.3
    x = np.concatenate([_ACTIVATION_INPUT, np.linspace(-80, 80, 2001, dtype=np.float32)])
    (actual,) = run_node("Softplus", {}, [x])
    (expected,) = _run_onnxruntime("Softplus", {}, [x], [actual])
    assert _ulp_distance(actual, expected).max() <= 4


@pytest.mark.parametrize("op_type,attrs,inputs,message", [
    ("Conv", {"auto_pad": "SAME_UPPER", "dilations": [2, 2]}, [_f(1, 1, 5, 5), _f(1, 1, 3, 3)],
     "Conv auto_pad=SAME_UPPER with dilations [2, 2] is not supported; write explicit pads"),
    ("Conv", {"auto_pad": "SAME"}, [_f(1, 1, 5, 5), _f(1, 1, 3, 3)],
     "Conv auto_pad must be one of NOTSET, VALID, SAME_UPPER, SAME_LOWER, not 'SAME'"),
    ("Conv", {"pads": [1, 1]}, [_f(1, 1, 5, 5), _f(1, 1, 3, 3)],
     "Conv pads must hold 4 values for an input of shape (1, 1, 5, 5) (2 spatial axes), not [1, 1]"),
    ("Conv", {"kernel_shape": [3, 2]}, [_f(1, 1, 5, 5), _f(1, 1, 3, 3)],
     "Conv kernel_shape [3, 2] does not match weights of shape (1, 1, 3, 3)"),
    ("Conv", {"group": 2}, [_f(1, 4, 5, 5), _f(3, 2, 3, 3)],
     "Conv with group=2: input channels 4 must equal weight channels 2 x group, and output channels 3 must be "
     "divisible by group"),
    ("Conv", {}, [_f(1, 1, 2, 5), _f(1, 1, 3, 3)],
     "Conv window (kernel [3, 3], dilations [1, 1]) does not fit input shape (1, 1, 2, 5) padded by [0, 0] + [0, 0]"),
    ("MaxPool", {"kernel_shape": [2]}, [_f(1, 1, 5, 5)],
     "MaxPool kernel shape [2] must have one size per spatial axis of input shape (1, 1, 5, 5)"),
    ("MaxPool", {"kernel_shape": [2, 2], "storage_order": 2}, [_f(1, 1, 5, 5)],
     "MaxPool storage_order must be 0 (row major) or 1 (column major), not 2"),
    ("AveragePool", {"kernel_shape": [2, 2]}, [_f(5, 5)],
     "AveragePool input must have rank >= 3 (N, C and spatial axes), not shape (5, 5)"),
    ("Mean", {}, [np.arange(3, dtype=np.int32)], "Mean inputs must be floating point, not int32"),
    ("Pad", {"mode": "reflect"}, [_f(2, 3), _i64(0, 3, 0, 0)],
     "Pad mode 'reflect' cannot pad axis 1 of length 3 by (3, 0); reflect pads must be smaller than the axis length"),
    ("Pad", {"mode": "symmetric"}, [_f(2, 3), _i64(0, 1, 0, 0)],
     "Pad mode must be one of constant, reflect, edge, wrap, not 'symmetric'"),
    ("Pad", {}, [_f(2, 3), _i64(0, 1, 0)],
     "Pad pads must hold 2 values per padded axis (4 for axes [0, 1] of input shape (2, 3)), not [0, 1, 0]"),
], ids=["same_with_dilations", "unknown_auto_pad", "pads_length", "kernel_shape_mismatch", "group_channels",
        "window_too_large", "pool_kernel_rank", "storage_order", "pool_input_rank", "mean_of_integers",
        "reflect_too_far", "pad_mode", "pad_amounts_length"])
def test_window_and_activation_errors_name_the_offending_value(op_type, attrs, inputs, message):
    with pytest.raises(FrontendError, match=f"^{re.escape(message)}$"):
        run_node(op_type, attrs, inputs)
