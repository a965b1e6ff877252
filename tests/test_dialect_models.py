"""streamc's reference executor on a real model of every quantized-ONNX dialect.

The models, frames and outputs recorded from onnxruntime or qonnx are made by
``tests/models/dialects/make_dialect_models.py``; ``models.json`` there lists each model's
nodes and executor. Integer and operator-oriented models must agree bit for bit. Models
whose output comes from a float MatMul over non-integer values (QONNX, QCDQ) differ from
onnxruntime's float32 accumulation order by at most one ulp of the largest output: the
reference sums in float64 and rounds once.

The onnxruntime recordings are also checked against the exact reference of ``tests/exact_model.py``
(exact integer kernels, every other node in onnxruntime): a whole-model onnxruntime session is no
reference on CPUs without VNNI, where its u8 x s8 kernels add pairs of products in saturating int16.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest

from exact_model import run_frames
from streamc.execute import execute
from streamc.frontend.load import load_onnx

DIALECTS = Path(__file__).resolve().parent / "models" / "dialects"
CATALOGUE = json.loads((DIALECTS / "models.json").read_text())
# models whose output is a float MatMul of non-integer values, so accumulation order shows
FLOAT_ACCUMULATING = sorted(name for name, entry in CATALOGUE.items()
                            if entry["executor"] == "qonnx" or name == "qcdq_digits")
EXACT = sorted(set(CATALOGUE) - set(FLOAT_ACCUMULATING))
LABELS = np.load(DIALECTS.parents[2] / "build_configs" / "models" / "digits_labels.npy")


def _run(name: str) -> tuple[np.ndarray, np.ndarray]:
    graph = load_onnx(DIALECTS / f"{name}.onnx")
    frames = np.load(DIALECTS / CATALOGUE[name]["input"])
    actual = execute(graph, {graph.inputs[0].name: frames})[graph.outputs[0].name]
    return actual, np.load(DIALECTS / f"{name}_expected.npy")


def test_every_model_file_is_catalogued():
    assert sorted(p.stem for p in DIALECTS.glob("*.onnx")) == sorted(CATALOGUE)
    assert {"qcdq_digits", "qonnx_digits", "ort_qdq_mlp", "ort_qdq_s8_mlp", "ort_qoperator_mlp", "intop_fc",
            "intop_fc_relu", "intop_tanh_int8", "intop_tanh_fp16", "intop_sigmoid_fp16"} <= set(CATALOGUE)


@pytest.mark.parametrize("name", sorted(CATALOGUE))
def test_catalogue_describes_the_model(name):
    model = onnx.load(DIALECTS / f"{name}.onnx")
    assert [node.op_type for node in model.graph.node] == CATALOGUE[name]["nodes"]


@pytest.mark.parametrize("name", EXACT)
def test_reference_executor_reproduces_onnxruntime_bit_for_bit(name):
    actual, expected = _run(name)
    assert actual.dtype == expected.dtype
    np.testing.assert_array_equal(actual, expected, strict=True)


@pytest.mark.parametrize("name", FLOAT_ACCUMULATING)
def test_reference_executor_is_within_one_ulp_of_the_largest_output(name):
    actual, expected = _run(name)
    assert actual.dtype == expected.dtype == np.float32
    assert actual.shape == expected.shape
    bound = np.spacing(np.abs(expected).max())
    assert np.abs(actual - expected).max() <= bound
    np.testing.assert_array_equal(actual.argmax(axis=-1), expected.argmax(axis=-1))


@pytest.mark.parametrize("name", sorted(n for n, entry in CATALOGUE.items() if entry["executor"] == "onnxruntime"))
def test_exact_reference_reproduces_the_onnxruntime_recordings(name):
    # one frame at a time where the model's input takes one, as recorded: onnxruntime's float
    # MatMul sums in another order for a batch of frames
    expected = np.load(DIALECTS / f"{name}_expected.npy")
    actual = run_frames(onnx.load(DIALECTS / f"{name}.onnx"), np.load(DIALECTS / CATALOGUE[name]["input"]))
    assert actual.dtype == expected.dtype
    if name in FLOAT_ACCUMULATING:
        assert np.abs(actual - expected).max() <= np.spacing(np.abs(expected).max())
    else:
        np.testing.assert_array_equal(actual, expected, strict=True)


@pytest.mark.parametrize("name", sorted(n for n in CATALOGUE if n.startswith(("qcdq", "qonnx_digits", "ort_", "intop_fc"))))
def test_model_classifies_the_digits(name):
    # the recorded outputs are a working classifier, not saturated or constant values
    expected = np.load(DIALECTS / f"{name}_expected.npy").reshape(len(LABELS[:64]), -1)
    assert np.mean(expected.argmax(axis=1) == LABELS[:64]) >= 0.9


def test_qcdq_and_qonnx_exports_of_the_demo_network_agree():
    qcdq = np.load(DIALECTS / "qcdq_digits_expected.npy")
    qonnx = np.load(DIALECTS / "qonnx_digits_expected.npy")
    np.testing.assert_array_equal(qcdq, qonnx)


def test_qonnx_export_has_the_demo_models_weights():
    demo = {t.name: onnx.numpy_helper.to_array(t)
            for t in onnx.load(DIALECTS.parents[2] / "build_configs" / "models" / "digits_mlp.onnx").graph.initializer}
    ours = onnx.load(DIALECTS / "qonnx_digits.onnx").graph.initializer
    assert len(ours) == len(demo)
    for tensor in ours:
        np.testing.assert_array_equal(onnx.numpy_helper.to_array(tensor), demo[tensor.name])
