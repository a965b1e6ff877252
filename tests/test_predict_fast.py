"""predict's shortcuts against what they replace: the head as thresholds on the float input against the head in
the executor (at every threshold, its float neighbours and the ends of the float line), the whole of predict
against the reference's integers on models of every stage kind, and the stages' arithmetic at its edges (int8's
-128, ties, sums a float32 would round, thresholds past an int32 accumulator, narrow codes into adds and tables)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from streamc.datatypes import BIPOLAR, INT, UINT
from streamc.errors import ConfigError
from streamc.execute import execute
from streamc.frontend.load import load_onnx
from streamc.hw import to_hw
from streamc.input_thresholds import input_thresholds
from streamc.ir import Graph, Node, TensorInfo
from streamc.pipeline.steps import expected_hw_outputs, model_frames
from streamc.stages.add import AddStage
from streamc.stages.base import (
    COMPARE_LEVELS,
    TABLE_ENTRIES,
    activate,
    integer_matmul,
    thresholds_reached,
)
from streamc.stages.lut import LUTStage
from streamc.transforms.streamline import streamline
from streamc.transforms.tidy import tidy

MODELS = Path(__file__).resolve().parent / "models"
FLOAT_MAX = np.finfo(np.float32).max
#: A model of each stage kind and head: TFC's 2-level head, 8-bit heads (searched) with channels-last streams,
#: per-channel constants, a QDQ head, a residual add, a depthwise unit, a concat, a lookup table.
CASES = {
    "tfc_w2a2": MODELS / "tfc_w2a2.onnx",
    "cnv_w1a1": MODELS / "cnn/cnv_w1a1.onnx",
    "digits_cnn": MODELS / "cnn/digits_cnn.onnx",
    "narrow_per_channel": MODELS / "dialects/qonnx_attrs_narrow_per_channel.onnx",
    "ort_qdq_s8_mlp": MODELS / "dialects/ort_qdq_s8_mlp.onnx",
    "residual_block": MODELS / "cnn/residual_block.onnx",
    "depthwise_block": MODELS / "cnn/depthwise_block.onnx",
    "concat_block": MODELS / "cnn/concat_block.onnx",
    "ort_qdq_cnn_u8": MODELS / "cnn/ort_qdq_cnn_u8.onnx",
    "intop_tanh_int8": MODELS / "dialects/intop_tanh_int8.onnx",
}


def _head_in_executor(dataflow, frames: np.ndarray) -> np.ndarray:
    codes = execute(dataflow.head, {dataflow.head.inputs[0].name: frames})[dataflow.hw_input]
    return dataflow.to_stream_order(np.rint(codes).astype(np.int64))


def _frames_on_thresholds(thresholds: np.ndarray, shape: tuple[int, ...], rng) -> np.ndarray:
    """Frames whose every element is a threshold of the head, or the float just below or above one, or an end
    of the float line; positions drawn at random."""
    finite = thresholds[np.isfinite(thresholds)]
    size = int(np.prod(shape))
    picks = rng.choice(finite, (8, size)).astype(np.float32)
    below, above = np.nextafter(picks, np.float32(-np.inf)), np.nextafter(picks, np.float32(np.inf))
    ends = np.float32([[-FLOAT_MAX] * size, [FLOAT_MAX] * size, [-0.0] * size, [0.0] * size])
    return np.concatenate([picks, below, above, ends]).reshape(-1, *shape)


@pytest.fixture(scope="module", params=sorted(CASES))
def case(request):
    original = load_onnx(CASES[request.param])
    return request.param, original, to_hw(streamline(tidy(original)))


def test_predict_equals_the_reference_integers(case):
    name, original, dataflow = case
    given = original.inputs[0]
    rng = np.random.default_rng(0)
    shape = tuple(given.shape[1:])
    frames = rng.normal(0, 1, (6, *shape)).astype(np.float32)
    if name == "intop_tanh_int8":
        frames = rng.integers(-128, 128, (6, *shape)).astype(np.int8)
    else:
        dataflow.narrow_input_codes(frames[:1])
        assert dataflow.head_thresholds, f"{name}: its head is a monotonic chain, predict counts thresholds"
        frames = np.concatenate([frames, _frames_on_thresholds(dataflow.head_thresholds.thresholds, shape, rng)])
    wanted = expected_hw_outputs(dataflow, execute(tidy(original), {given.name: frames}, keep_all=True))
    assert np.array_equal(dataflow.integers(frames), wanted)
    assert np.array_equal(dataflow.input_codes(frames), _head_in_executor(dataflow, frames))


def _head(nodes: list[Node], constants: dict, size: int = 6) -> Graph:
    return Graph(nodes=nodes, constants={k: np.asarray(v, np.float32) for k, v in constants.items()},
                 inputs=[TensorInfo("x", (1, size))], outputs=[TensorInfo("codes", (1, size))])


def _quant(source: str, scale: float, bits: int, signed: int = 1) -> list[Node]:
    return [Node("Quant", "q", [source, "scale", "zero", "bits"], ["quantized"],
                 {"signed": signed, "narrow": 0, "rounding_mode": "ROUND"}),
            Node("Div", "d", ["quantized", "scale"], ["scaled"]), Node("Round", "r", ["scaled"], ["codes"])]


def _flat(values: np.ndarray) -> np.ndarray:
    return values.reshape(len(values), -1)


@pytest.mark.parametrize("scale", [-0.75, 0.1])
def test_a_head_falling_or_rising_with_per_position_constants_is_its_thresholds(scale):
    # A negative multiplier per position: codes fall as the input rises in some positions and rise in others.
    multiplier = np.float32([scale, -scale, 3.0, -1e-3, 7.5, 1.0])
    head = _head([Node("Mul", "m", ["x", "k"], ["scaled_x"]), Node("Sub", "s", ["scaled_x", "offset"], ["y"]),
                  *_quant("y", 0.25, 4)],
                 {"k": multiplier, "offset": np.float32([0.5, 0, -1, 0.125, 2, 0]), "scale": 0.25, "zero": 0.0,
                  "bits": 4.0})
    found = input_thresholds(head, _flat)
    assert found is not None and (found.sign < 0).any() and (found.sign > 0).any()
    rng = np.random.default_rng(1)
    frames = np.concatenate([rng.normal(0, 3, (100, 6)).astype(np.float32),
                             _frames_on_thresholds(found.thresholds, (6,), rng)])
    wanted = _flat(np.rint(execute(head, {"x": frames})["codes"]).astype(np.int64))
    assert np.array_equal(found.codes(frames), wanted)


@pytest.mark.parametrize("nodes, constants", [
    ([Node("Div", "d", ["k", "x"], ["y"])], {"k": 1.0}),                 # a dynamic divisor: not monotonic
    ([Node("Mul", "m", ["x", "k"], ["y"])], {"k": 0.0}),                 # inf * 0 is NaN in the middle
    ([Node("Add", "a", ["x", "k"], ["y"])], {"k": np.inf}),              # a constant that is not finite
    ([Node("Mul", "m", ["x", "x"], ["y"])], {}),                          # two dynamic inputs
    ([Node("Tanh", "t", ["x"], ["y"])], {}),                              # not among the ops checked
])
def test_a_head_that_is_not_a_monotonic_chain_runs_in_the_executor(nodes, constants):
    head = _head([*nodes, *_quant("y", 0.25, 4)], {"scale": 0.25, "zero": 0.0, "bits": 4.0, **constants})
    assert input_thresholds(head, _flat) is None


def test_frames_that_are_not_float32_take_the_executor_s_path():
    head = _head(_quant("x", 0.5, 3), {"scale": 0.5, "zero": 0.0, "bits": 3.0})
    found = input_thresholds(head, _flat)
    assert found.codes(np.float64([[0, 1, 2, 3, 4, 0]])) is None
    assert found.codes(np.zeros((0, 6), np.float32)).shape == (0, 6)
    assert np.array_equal(found.codes(np.float32([[0, 0.25, 0.75, -4, 4, -0.25]])), [[0, 0, 2, -4, 3, 0]])


@pytest.mark.parametrize("levels", [2, COMPARE_LEVELS, COMPARE_LEVELS + 1, 255])
@pytest.mark.parametrize("shared", [True, False])
@pytest.mark.parametrize("spread", [1, TABLE_ENTRIES])   # a table of every value's count, or a search
def test_thresholds_counted_or_searched_count_every_tie(levels, shared, spread):
    rng = np.random.default_rng(levels)
    channels = 5
    thresholds = np.sort(rng.integers(-300, 300, size=(1 if shared else channels, levels)), axis=1) * spread
    acc = rng.integers(-400, 400, size=(50, channels)) * spread
    acc[:levels, :] = np.resize(thresholds.T, (levels, channels))[:len(acc)]        # every threshold, a tie
    acc[-1], acc[-2] = thresholds.max() + 1, thresholds.min() - 1
    expected = (acc[:, :, None] >= np.broadcast_to(thresholds, (channels, levels))[None]).sum(axis=2)
    for dtype in (np.int32, np.int64):
        np.testing.assert_array_equal(thresholds_reached(acc.astype(dtype), thresholds, np.int16), expected)
    floats = acc.astype(np.float64)   # the head's float thresholds, exact values
    np.testing.assert_array_equal(thresholds_reached(floats, thresholds.astype(np.float64), np.int16), expected)


def test_codes_come_in_the_narrowest_integers_and_thresholds_past_int32_are_clipped():
    acc = integer_matmul(np.array([[3, -2]]), np.array([[5], [1]]))     # 13, in int32
    assert acc.dtype == np.int32
    thresholds = np.array([[-(1 << 40), 13, 14, 1 << 40]])              # past int32 both ways, and a tie
    codes = activate(acc, thresholds, None, UINT(3), 1)
    assert codes.dtype == np.int8 and codes.tolist() == [[1 + 2]]
    assert activate(acc, np.array([[14]]), None, BIPOLAR, 0).tolist() == [[-1]]
    assert activate(acc, np.array([[13]]), None, BIPOLAR, 0).tolist() == [[1]]


def test_int8_minus_128_bounds_the_products():
    # -128 has no int8 abs: a bound from np.abs would be -128 and pass every check.
    a = np.full((4, 1 << 10), -128, np.int8)
    b = np.full((1 << 10, 3), 127, np.int64)
    np.testing.assert_array_equal(integer_matmul(a, b), a.astype(np.int64) @ b)


@pytest.mark.parametrize("bits, rounds_in", [(12, np.float32), (26, np.float64)])
def test_sums_past_2_24_leave_float32_and_past_2_53_leave_float64(bits, rounds_in):
    # Odd operands: 12 bits make sums near 2**31, which float32 rounds; 26 bits near 2**60, which float64 rounds.
    rng = np.random.default_rng(bits)
    a = rng.integers(1 << (bits - 1), 1 << bits, size=(32, 256)) | 1
    b = rng.integers(1 << (bits - 1), 1 << bits, size=(256, 4)) | 1
    exact = [[sum(int(x) * int(y) for x, y in zip(row, column)) for column in b.T] for row in a]
    assert (a.astype(rounds_in) @ b.astype(rounds_in)).astype(np.int64).tolist() != exact
    assert integer_matmul(a, b).tolist() == exact


def test_narrow_codes_into_an_add_and_a_table_are_widened():
    add = AddStage(name="add", source="add", weights=(100, -3), in_dtypes=(INT(8), INT(8)),
                   thresholds=np.array([[-20000, 0, 12700]]), out_dtype=UINT(2), out_bias=0, channels=1, count=2)
    a, b = np.array([[127, -128]], np.int8), np.array([[-128, 127]], np.int8)
    assert add.emulate(a, b).tolist() == [[3, 1]]              # 12,700 + 384 and -12,800 - 381
    table = LUTStage(name="lut", source="lut", table=np.arange(256) * 2, in_dtype=INT(8), out_dtype=UINT(9), count=2)
    assert table.emulate(np.array([[-128, 127]], np.int8)).tolist() == [[0, 510]]


def test_no_frames_are_no_rows_and_a_frame_holding_nan_is_named():
    graph = load_onnx(CASES["tfc_w2a2"])
    shape = tuple(graph.inputs[0].shape[1:])
    assert model_frames(np.zeros((0, *shape), np.float32), graph, key="frames").shape == (0, *shape)
    frames = np.zeros((4, *shape), np.float32)
    frames[2].flat[5] = np.nan
    with pytest.raises(ConfigError, match="frames: frame 2 holds NaN"):
        model_frames(frames, graph, key="frames")
    frames[2].flat[5], frames[3].flat[0] = 0, -np.inf
    with pytest.raises(ConfigError, match="frames: frame 3 holds infinity"):
        model_frames(frames, graph, key="frames")
    # finite frames whose sum overflows float32 pass
    frames[:] = np.finfo(np.float32).max
    assert model_frames(frames, graph, key="frames") is not None
