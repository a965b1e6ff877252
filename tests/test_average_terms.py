"""An average of dequantized values whose float32 terms decide ties: the hardware sums each code's exact term.

``DequantizeLinear`` rounds every ``(q - z) * s`` to float32 on its own, so where a window's mean of codes is
a rounding tie, the sum of those roundings decides the output code, and it depends on which codes were
summed, not on their sum (onnxruntime's ResNet-8 of the zoo has such a tie). The reference here is the exact
one (``tests/exact_model.py``: the window's float32 terms summed exactly, the mean rounded once).
"""

from pathlib import Path

import numpy as np
import onnx
import pytest
import yaml
from onnx import TensorProto, helper, numpy_helper

from exact_model import run_frames

from streamc.execute import execute
from streamc.frontend.load import load_onnx
from streamc.hw import to_hw
from streamc.pipeline.runner import run_build
from streamc.transforms.streamline import streamline
from streamc.transforms.tidy import tidy

#: onnxruntime's scale of the zoo's ResNet-8 pool: many of its terms are not exact in float32.
SCALE = np.float32(0.06190813)
#: 64 taps, as that pool: its sums of terms outgrow float32, and the streamlined graph sums them in double.
CHANNELS, SIDE = 2, 8
TAPS = SIDE * SIDE


def _pool_model(scale: np.float32) -> onnx.ModelProto:
    """int8 codes -> DequantizeLinear -> GlobalAveragePool -> QuantizeLinear, one scale throughout."""
    s = numpy_helper.from_array(np.array(scale, np.float32), "s")
    z = numpy_helper.from_array(np.array(0, np.int8), "z")
    nodes = [helper.make_node("QuantizeLinear", ["input", "s", "z"], ["codes"]),
             helper.make_node("DequantizeLinear", ["codes", "s", "z"], ["values"]),
             helper.make_node("GlobalAveragePool", ["values"], ["mean"]),
             helper.make_node("QuantizeLinear", ["mean", "s", "z"], ["pooled"]),
             helper.make_node("DequantizeLinear", ["pooled", "s", "z"], ["output"])]
    graph = helper.make_graph(
        nodes, "pool", [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, CHANNELS, SIDE, SIDE])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, CHANNELS, 1, 1])], [s, z])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


def _tie_codes(count: int, seed: int) -> np.ndarray:
    """Windows of codes 0..127 whose sum is a tie (64 k + 32 over 64 taps), in every channel."""
    rng = np.random.default_rng(seed)
    codes = rng.integers(0, 128, size=(4 * count, CHANNELS, TAPS))
    codes[:, :, 0] += (TAPS // 2 - codes.sum(axis=2) % TAPS) % TAPS
    codes = codes[(codes <= 127).all(axis=(1, 2))]
    return codes[:count]


def _frames(codes: np.ndarray, scale: np.float32) -> np.ndarray:
    return (codes.astype(np.float32) * scale).reshape(len(codes), CHANNELS, SIDE, SIDE)


def _emulate(path: Path, frames: np.ndarray):
    dataflow = to_hw(streamline(tidy(load_onnx(path))))
    return dataflow, dataflow.emulate(frames)[1]


def test_the_terms_decide_ties_and_the_hardware_follows_them(tmp_path):
    model = _pool_model(SCALE)
    onnx.save(model, tmp_path / "pool.onnx")
    codes = _tie_codes(300, seed=1)
    frames = _frames(codes, SCALE)
    expected = run_frames(model, frames)
    # the frames exercise the rounding: equal sums of codes, different pooled codes
    pooled = np.rint(expected.reshape(-1, CHANNELS) / SCALE).astype(np.int64)
    above_mean = pooled - codes.sum(axis=2) // TAPS
    assert set(np.unique(above_mean)) == {0, 1}
    dataflow, outputs = _emulate(tmp_path / "pool.onnx", frames)
    assert [stage.output_stage.split(" (")[0] for stage in dataflow.stages][0] == "table"
    np.testing.assert_array_equal(outputs.reshape(expected.shape), expected)
    # the streamlined graph too, in streamc's executor: it sums the terms in double
    graph = streamline(tidy(load_onnx(tmp_path / "pool.onnx")))
    assert "Cast" in [node.op_type for node in graph.nodes if node.outputs[0] in {n.inputs[0] for n in graph.nodes
                                                                                   if n.op_type == "Conv"}]
    streamlined = np.concatenate([execute(graph, {graph.inputs[0].name: frame[None]})[graph.outputs[0].name]
                                  for frame in frames])
    np.testing.assert_array_equal(streamlined.reshape(expected.shape), expected)


def test_exact_terms_keep_the_plain_sum(tmp_path):
    """A power-of-two scale makes every term exact: the pool sums codes, no table before it."""
    scale = np.float32(2.0 ** -4)
    model = _pool_model(scale)
    onnx.save(model, tmp_path / "pool.onnx")
    frames = _frames(_tie_codes(64, seed=2), scale)
    dataflow, outputs = _emulate(tmp_path / "pool.onnx", frames)
    assert "table" not in [stage.output_stage for stage in dataflow.stages]
    np.testing.assert_array_equal(outputs.reshape(-1, CHANNELS, 1, 1), run_frames(model, frames))


@pytest.mark.parametrize("seed", [3, 4])
def test_the_accumulator_decodes_to_the_exact_sum_of_terms(seed):
    """RoundedTerms.total gives back the float64 sum of the window's float32 terms, for any window."""
    from streamc.transforms.linear_layers import Linear, rounded_terms
    from streamc.transforms.quantizers import Codes
    from streamc.datatypes import INT

    rng = np.random.default_rng(seed)
    scale = np.float32(rng.uniform(0.001, 2.0))
    taps, zero = 9, int(rng.integers(-5, 5))
    linear = Linear(np.ones((1, taps), np.int64), INT(2), np.array([scale], np.float64), np.array([zero * taps]),
                    depthwise=True, divisor=taps)
    codes = Codes("x", -128, 127, INT(8), None)
    terms = rounded_terms(linear, codes)
    windows = rng.integers(-128, 128, size=(500, taps))
    table = terms.table if terms.table.ndim == 1 else terms.table[0]
    acc = table[windows - terms.table_min].sum(axis=1)
    floats = ((windows - zero).astype(np.float32) * scale).astype(np.float64).sum(axis=1)
    np.testing.assert_array_equal(terms.total(acc[:, None])[:, 0], floats)


def test_the_pool_of_terms_is_bit_exact_in_verilator(tmp_path):
    model = _pool_model(SCALE)
    onnx.save(model, tmp_path / "pool.onnx")
    frames = _frames(_tie_codes(24, seed=5), SCALE)
    np.save(tmp_path / "frames.npy", frames)
    np.save(tmp_path / "expected.npy", run_frames(model, frames))
    config = {"model": str(tmp_path / "pool.onnx"), "output_dir": str(tmp_path / "out"), "devices": ["ecp5-85f"],
              "budget": 0.1, "steps": ["load", "tidy", "streamline", "to_hw", "fold", "rtl", "sim"],
              "verify": {"inputs": str(tmp_path / "frames.npy"), "expected": str(tmp_path / "expected.npy")}}
    (tmp_path / "build.yaml").write_text(yaml.safe_dump(config))
    report = run_build(tmp_path / "build.yaml").rtlsim
    assert report["frames"] == 24 and report["mismatches"] == 0 and report["expected_mismatches"] == 0
    assert report["measured_cycles_per_frame"] == report["predicted_cycles_per_frame"]
