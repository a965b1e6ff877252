"""The sim step's verdicts: end to end against the original model, and against ``verify.expected``."""

from pathlib import Path

import numpy as np
from onnx import TensorProto, helper

from streamc.pipeline.verdict import (END_TO_END_RTOL, end_to_end_differing_frames, expected_differences,
                                   onnxruntime_note, output_steps)
from streamc.frontend.load import graph_from_model, load_onnx
from streamc.hw import to_hw
from streamc.transforms.streamline import streamline
from streamc.transforms.tidy import tidy

DIGITS = Path(__file__).parent.parent / "build_configs" / "models" / "digits_mlp.onnx"


def test_float_outputs_agree_within_rounding_of_the_frames_largest_output():
    reference = np.array([[10.0, -0.001, 3.0], [0.5, 0.25, 0.0]], dtype=np.float32)
    within = reference + np.float32(0.9 * END_TO_END_RTOL) * np.array([[10, 10, -10], [0.5, -0.5, 0.5]], np.float32)
    assert end_to_end_differing_frames(within, reference) == []
    beyond = reference.copy()
    beyond[1, 2] = 1.1 * END_TO_END_RTOL * 0.5
    assert end_to_end_differing_frames(beyond, reference) == [1]
    nan = reference.copy()
    nan[0, 1] = np.nan
    assert end_to_end_differing_frames(nan, reference) == [0]


def test_integer_outputs_must_be_equal():
    reference = np.array([[3, 4], [5, 6]], dtype=np.uint8)
    assert end_to_end_differing_frames(reference.copy(), reference) == []
    off = reference.copy()
    off[1, 0] += 1
    assert end_to_end_differing_frames(off, reference) == [1]


def test_differing_frames_say_how_many_output_steps_apart_they_are():
    dataflow = to_hw(streamline(tidy(load_onnx(DIGITS))))
    rng = np.random.default_rng(0)
    hw = rng.integers(-50, 50, size=(3, dataflow.stages[-1].out_count))
    steps = output_steps(dataflow, hw)
    scale = float(dataflow.boundary["scale"][0])
    # The digits MLP's tail is acc * scale + bias: every step is the accumulator's scale.
    np.testing.assert_allclose(steps, scale, rtol=1e-5)
    outputs = rng.normal(size=hw.shape).astype(np.float32)
    expected = outputs.copy()
    expected[2, 4] += 3 * scale
    (entry,) = expected_differences(outputs, expected, steps)
    assert entry["frame"] == 2 and entry["steps_apart"] == 3.0
    assert abs(entry["max_abs_diff"] - 3 * scale) < 1e-5


def test_a_float_layer_on_the_host_has_no_steps():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2])
    weights = helper.make_tensor("w", TensorProto.FLOAT, [4, 2], np.ones(8, np.float32))
    graph = graph_from_model(helper.make_model(helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])], "g", [x], [y], [weights]),
        opset_imports=[helper.make_opsetid("", 13)]))
    dataflow = to_hw(streamline(tidy(load_onnx(DIGITS))))
    dataflow.tail = graph
    dataflow.hw_output = "x"
    assert output_steps(dataflow, np.zeros((1, 4), np.int64)) is None
    (entry,) = expected_differences(np.zeros((1, 2)), np.ones((1, 2)), None)
    assert entry == {"frame": 0, "max_abs_diff": 1.0}


def test_onnxruntime_is_named_only_for_its_integer_ops_and_qdq_pairs():
    assert onnxruntime_note(load_onnx(DIGITS)) is None
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])
    constants = [helper.make_tensor("s", TensorProto.FLOAT, [], [0.5]),
                 helper.make_tensor("z", TensorProto.UINT8, [], [128])]
    graph = graph_from_model(helper.make_model(helper.make_graph(
        [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"]),
         helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"])], "g", [x], [y], constants),
        opset_imports=[helper.make_opsetid("", 13)]))
    note = onnxruntime_note(graph)
    assert note.startswith("this model holds QuantizeLinear/DequantizeLinear pairs: onnxruntime is not exact on "
                           "CPUs without VNNI")
    assert "graph_optimization_level=ORT_DISABLE_ALL" in note
