"""streamc quantize: post-training quantization of the float digits models (tests/models/float) into QONNX
models that keep their accuracy, run in qonnx's executor, and that streamc lowers to hardware equal to it."""
import json
from pathlib import Path

import numpy as np
import onnx
import pytest
import yaml
from onnx import TensorProto, helper, numpy_helper

import streamc
from models.qonnx_reference import execute_frames
from streamc.cli import EXIT_ERROR, EXIT_OK, main
from streamc.errors import ConfigError
from streamc.frontend.load import load_onnx
from streamc.hw import to_hw
from streamc.pipeline.runner import run_build
from streamc.transforms.streamline import streamline
from streamc.transforms.tidy import tidy

FLOAT = Path(__file__).parent / "models" / "float"
FLOAT_ACCURACY = json.loads((FLOAT / "float.json").read_text())["test_accuracy"]
#: Accuracy a quantization may lose against the float model (fractions of the test split).
TOLERANCE = {"w8a8": 0.01, "w4a4": 0.05}
EMULATED_FRAMES = 8


def quantize(tmp_path: Path, name: str, bits: str = "w8a8", **options):
    output = tmp_path / f"{name}_{bits}.onnx"
    report = streamc.quantize(FLOAT / f"{name}.onnx", FLOAT / f"{name}_calib.npy", output, bits=bits,
                              test=FLOAT / f"{name}_test.npy", labels=FLOAT / f"{name}_test_labels.npy", **options)
    return output, report


def emulate(path: Path, frames: np.ndarray):
    dataflow = to_hw(streamline(tidy(load_onnx(path))))
    return dataflow, dataflow.emulate(frames)[1]


@pytest.mark.parametrize("bits", sorted(TOLERANCE))
@pytest.mark.parametrize("name", sorted(FLOAT_ACCURACY))
def test_quantized_model_keeps_accuracy_and_lowers_exactly(tmp_path, name, bits):
    output, report = quantize(tmp_path, name, bits)
    assert report.float_accuracy == pytest.approx(FLOAT_ACCURACY[name])
    assert report.quantized_accuracy >= FLOAT_ACCURACY[name] - TOLERANCE[bits]
    frames = np.load(FLOAT / f"{name}_test.npy")[:EMULATED_FRAMES]
    expected = execute_frames(output, frames)
    _, outputs = emulate(output, frames)
    # integers exact; the float32 logits of the host tail within 4 spacings of the largest (as tests/test_zoo.py)
    assert np.abs(outputs.reshape(expected.shape) - expected).max() <= 4 * np.spacing(np.abs(expected).max())
    bits_used = {row.bits for row in report.rows}
    assert bits_used == {int(bits[1])}


def test_power_of_two_scales_by_default_make_shifts(tmp_path):
    """The default scales (auto) on the w8a8 CNN, whose power-of-two scales lose no accuracy: every scale a
    power of two, so each hidden layer requantizes with a shift and no corrections, and the host tail
    equals qonnx's logits bit for bit."""
    output, report = quantize(tmp_path, "digits_float_cnn")
    assert report.quantized_accuracy >= FLOAT_ACCURACY["digits_float_cnn"] - TOLERANCE["w8a8"]
    assert report.scales.all_pow2.accuracy >= report.scales.float_scales.accuracy - 0.005
    assert report.scales.float_units == [] and all(row.pow2 for row in report.rows)
    assert all(layer.pow2 for layer in report.layers) and len(report.layers) == 3
    frames = np.load(FLOAT / "digits_float_cnn_test.npy")[:EMULATED_FRAMES]
    dataflow, outputs = emulate(output, frames)
    np.testing.assert_array_equal(outputs.reshape(-1, 10), execute_frames(output, frames))
    hidden = dataflow.layers[:-1]
    assert hidden and all(layer.requant is not None and layer.requant.corrections == 0 for layer in hidden)


def test_auto_scales_give_float_scales_back_where_power_of_two_loses_accuracy(tmp_path):
    """The w4a4 CNN loses accuracy with power-of-two scales everywhere: with a tolerance of 0, auto gives
    float scales back until it scores as float scales do; within the default 0.5 points it keeps more
    power-of-two scales; with 5 points all of them; scales=float none."""
    _, strict = quantize(tmp_path, "digits_float_cnn", "w4a4", tolerance=0)
    choice = strict.scales
    assert choice.metric == "accuracy" and choice.all_pow2.accuracy < choice.float_scales.accuracy
    assert choice.float_units and choice.chosen.accuracy >= choice.float_scales.accuracy
    assert strict.quantized_accuracy == choice.chosen.accuracy
    given_back = {t for unit in choice.float_units for t in unit}
    assert {row.tensor for row in strict.rows if not row.pow2} == given_back
    _, default = quantize(tmp_path, "digits_float_cnn", "w4a4")
    assert default.scales.tolerance == 0.5
    assert default.quantized_accuracy >= default.scales.float_scales.accuracy - 0.005
    assert len(default.scales.float_units) <= len(choice.float_units)
    _, loose = quantize(tmp_path, "digits_float_cnn", "w4a4", tolerance=5)
    assert loose.scales.float_units == [] and all(row.pow2 for row in loose.rows)
    _, plain = quantize(tmp_path, "digits_float_cnn", "w4a4", scales="float")
    assert plain.scales is None and not any(layer.pow2 for layer in plain.layers)


def test_auto_scales_without_labels_keep_the_output_sqnr_within_its_tolerance(tmp_path):
    """Without labels auto weighs output SQNR: the w4a4 MLP loses 3.6 dB with power-of-two scales
    everywhere, more than the default 3 dB, so some float scales come back."""
    report = streamc.quantize(FLOAT / "digits_mlp.onnx", FLOAT / "digits_mlp_calib.npy", tmp_path / "q.onnx",
                              bits="w4a4", test=FLOAT / "digits_mlp_test.npy")
    choice = report.scales
    assert choice.metric == "output SQNR" and choice.tolerance == 3.0
    assert choice.all_pow2.sqnr_db < choice.float_scales.sqnr_db - 3.0
    assert choice.float_units and choice.chosen.sqnr_db >= choice.float_scales.sqnr_db - 3.0
    assert report.sqnr_db == choice.chosen.sqnr_db


@pytest.mark.parametrize("name, bits, count", [("digits_mlp", "w4a4", 40), ("digits_float_cnn", "w8a8", 8)])
def test_quantized_model_is_bit_exact_in_verilator(tmp_path, name, bits, count):
    """``streamc build`` of the quantized model (default auto scales: all powers of two on both) against
    qonnx's executor, frame by frame in Verilator."""
    output, _ = quantize(tmp_path, name, bits)
    frames = np.load(FLOAT / f"{name}_test.npy")[:count]
    np.save(tmp_path / "frames.npy", frames)
    np.save(tmp_path / "expected.npy", execute_frames(output, frames))
    config = {"model": str(output), "output_dir": str(tmp_path / "out"), "clock_mhz": 100, "target_fps": 100_000,
              "steps": ["load", "tidy", "streamline", "to_hw", "fold", "rtl", "sim"],
              "verify": {"inputs": str(tmp_path / "frames.npy"), "expected": str(tmp_path / "expected.npy"),
                         "frames": count, "seed": 7}}
    (tmp_path / "build.yaml").write_text(yaml.safe_dump(config))
    report = run_build(tmp_path / "build.yaml").rtlsim
    assert report["frames"] == count
    assert report["mismatches"] == 0 and report["expected_mismatches"] == 0
    assert report["end_to_end_differing_frames"] == []


def _with_softmax(tmp_path: Path) -> Path:
    model = onnx.load(str(FLOAT / "digits_mlp.onnx"))
    logits = model.graph.output[0].name
    model.graph.node.append(helper.make_node("Softmax", [logits], ["probabilities"], name="Softmax", axis=1))
    model.graph.output[0].name = "probabilities"
    path = tmp_path / "softmax.onnx"
    onnx.save(model, str(path))
    return path


def test_an_op_without_kernel_stays_float_on_the_host(tmp_path):
    path = _with_softmax(tmp_path)
    report = streamc.quantize(path, FLOAT / "digits_mlp_calib.npy", tmp_path / "q.onnx")
    assert report.notes == ["Softmax (Softmax): no streamc kernel; it and the 0 nodes after it stay float on the host"]
    quantized = onnx.load(str(tmp_path / "q.onnx"))
    assert [n.op_type for n in quantized.graph.node][-2:] == ["Gemm", "Softmax"]
    frames = np.load(FLOAT / "digits_mlp_test.npy")[:4]
    _, outputs = emulate(tmp_path / "q.onnx", frames)
    np.testing.assert_allclose(outputs.reshape(4, 10), execute_frames(tmp_path / "q.onnx", frames), atol=1e-6)


def test_constraints_in_the_rfc_terms(tmp_path):
    """A fixed type, at least N bits, a calibrated range and keep-float, each where the YAML puts it."""
    rules = {"activation_bits": 4, "weight_bits": 4, "scales": "float", "tensors": {
        "input": {"kind": "uniform", "bits": 5, "scale": 1 / 16},
        "0.weight": {"kind": "at_least", "bits": 6},
        "/2/Relu_output_0": {"kind": "calibrated", "min": 0.0, "max": 3.0},
        "/5/Relu_output_0": {"kind": "float"}}}
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(rules))
    report = streamc.quantize(FLOAT / "digits_mlp.onnx", FLOAT / "digits_mlp_calib.npy", tmp_path / "q.onnx",
                              constraints=tmp_path / "rules.yaml")
    rows = {row.tensor: row for row in report.rows}
    assert (rows["input"].bits, rows["input"].scale_min) == (5, 1 / 16)
    assert rows["0.weight"].bits == 6 and rows["3.weight"].bits == 4
    assert rows["/2/Relu_output_0"].scale_min == pytest.approx(3.0 / 15)
    assert "/5/Relu_output_0" not in rows and "6.weight" not in rows
    assert report.notes == ["/6/Gemm (Gemm): reads /5/Relu_output_0, kept float; it and the 0 nodes after it "
                            "stay float on the host"]


def _residual(tmp_path: Path) -> Path:
    """input -> Gemm+Relu (a) -> Gemm+Relu (b); Add(a, b) -> Gemm -> output, float."""
    rng = np.random.default_rng(3)
    inits = [numpy_helper.from_array(rng.normal(size=shape).astype(np.float32) * 0.3, name)
             for name, shape in (("w1", (16, 8)), ("w2", (16, 16)), ("w3", (4, 16)))]
    nodes = [helper.make_node("Gemm", ["x", "w1"], ["g1"], name="gemm1", transB=1),
             helper.make_node("Relu", ["g1"], ["a"], name="relu1"),
             helper.make_node("Gemm", ["a", "w2"], ["g2"], name="gemm2", transB=1),
             helper.make_node("Relu", ["g2"], ["b"], name="relu2"),
             helper.make_node("Add", ["a", "b"], ["s"], name="add"),
             helper.make_node("Gemm", ["s", "w3"], ["y"], name="gemm3", transB=1)]
    graph = helper.make_graph(nodes, "residual", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])], inits)
    path = tmp_path / "residual.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8), str(path))
    return path


def test_add_inputs_share_a_scale_and_conflicts_get_a_rescale(tmp_path):
    path = _residual(tmp_path)
    frames = np.random.default_rng(4).uniform(-1, 1, size=(64, 8)).astype(np.float32)
    report = streamc.quantize(path, frames, tmp_path / "q.onnx")
    rows = {row.tensor: row for row in report.rows}
    assert rows["a"].scale_min == rows["b"].scale_min and not any(r.role == "rescale" for r in report.rows)
    rules = {"tensors": {"a": {"kind": "uniform", "bits": 8, "scale": 1 / 64},
                         "b": {"kind": "uniform", "bits": 8, "scale": 1 / 32}}}
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(rules))
    report = streamc.quantize(path, frames, tmp_path / "q2.onnx", constraints=tmp_path / "rules.yaml")
    assert [row.tensor for row in report.rows if row.role == "rescale"] == ["add input 1"]
    quantized = onnx.load(str(tmp_path / "q2.onnx"))
    add = next(n for n in quantized.graph.node if n.op_type == "Add")
    assert add.input[1] == "add_rescaled_1"
    _, outputs = emulate(tmp_path / "q2.onnx", frames[:8])
    expected = execute_frames(tmp_path / "q2.onnx", frames[:8])
    assert np.abs(outputs.reshape(expected.shape) - expected).max() <= 4 * np.spacing(np.abs(expected).max())


@pytest.mark.parametrize("frames, message", [
    (np.zeros((64, 63), np.float32), "calibration: frames of shape (64, 63) do not fit the model's input (1, 64)"),
    (np.full((64, 64), np.nan, np.float32), "calibration: 64 frames hold NaN or infinite values"),
    (np.zeros((3, 64), np.float32), "calibration: 3 frames; give at least 16"),
])
def test_bad_calibration_frames_give_one_clear_error(tmp_path, frames, message):
    with pytest.raises(ConfigError) as error:
        streamc.quantize(FLOAT / "digits_mlp.onnx", frames, tmp_path / "q.onnx")
    assert str(error.value).startswith(message)


@pytest.mark.parametrize("rules, message", [
    ({"tensors": {"nonesuch": {"kind": "float"}}}, "tensors: nonesuch is not a tensor of the model"),
    ({"tensors": {"input": {"kind": "fixed"}}}, "tensors.input"),
    ({"weight_bits": 1}, "weight_bits"),
])
def test_bad_constraints_give_one_clear_error(tmp_path, rules, message):
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(rules))
    with pytest.raises(ConfigError, match=message.replace(".", r"\.")):
        streamc.quantize(FLOAT / "digits_mlp.onnx", FLOAT / "digits_mlp_calib.npy", tmp_path / "q.onnx",
                         constraints=tmp_path / "rules.yaml")


def test_cli(tmp_path, capsys):
    args = ["quantize", str(FLOAT / "digits_mlp.onnx"), "--calibration", str(FLOAT / "digits_mlp_calib.npy"),
            "--test", str(FLOAT / "digits_mlp_test.npy"), "--labels", str(FLOAT / "digits_mlp_test_labels.npy"),
            "--bits", "w4a4", "--pow2", "-o", str(tmp_path / "q.onnx")]
    assert main(args) == EXIT_OK
    printed = capsys.readouterr().out
    assert "accuracy on 360 frames: float 0.9889" in printed and "UINT4 scale 0.0625 (2^k)" in printed
    assert main(args[:4] + ["--labels", str(FLOAT / "digits_mlp_calib.npy"), "-o", str(tmp_path / "q.onnx")]) \
        == EXIT_ERROR
    error = capsys.readouterr().err.strip()
    assert error.startswith("error: labels: shape (200, 64)") and "\n" not in error
    assert main(args[:-3] + ["--scales", "auto", "--tolerance", "0", "-o", str(tmp_path / "q.onnx")]) == EXIT_OK
    assert "scales auto (tolerance 0 points of accuracy against float scales)" in capsys.readouterr().out
