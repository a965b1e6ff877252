"""The committed test models still load and still give the committed outputs.

Guards the fixtures and the reference executor (its onnxruntime IR-version
workaround) against changes in onnx, onnxruntime or qonnx.
"""
import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from qonnx_reference import execute_frames

HERE = Path(__file__).resolve().parent
DIGITS = HERE.parents[1] / "build_configs" / "models"
# qonnx runs node by node through onnxruntime: a few frames keep this test quick.
FRAMES_CHECKED = 4


@pytest.mark.parametrize("stem", ["tfc_w1a1", "tfc_w2a2"])
@pytest.mark.parametrize("suffix", ["", "_legacy"])
def test_tfc_reproduces_expected_outputs(stem, suffix):
    frames = np.load(HERE / "tfc_frames.npy")[:FRAMES_CHECKED]
    expected = np.load(HERE / f"{stem}_expected.npy")[:FRAMES_CHECKED]
    outputs = execute_frames(HERE / f"{stem}{suffix}.onnx", frames)
    np.testing.assert_allclose(outputs, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", ["digits_mlp.onnx", "digits_mlp_legacy.onnx"])
def test_digits_classifies_first_frames_as_recorded(name):
    frames = np.load(DIGITS / "digits_frames.npy")
    labels = np.load(DIGITS / "digits_labels.npy")
    assert frames.shape == (1797, 64) and frames.dtype == np.float32
    assert labels.shape == (1797,) and labels.dtype == np.int64
    logits = execute_frames(DIGITS / name, frames[:FRAMES_CHECKED])
    assert logits.shape == (FRAMES_CHECKED, 10)
    recorded = json.loads((DIGITS / "digits_mlp.json").read_text())
    assert recorded["onnx_accuracy_all"] >= 0.9
    # The recorded training set is classified almost perfectly, so the first frames are too.
    np.testing.assert_array_equal(logits.argmax(axis=1), labels[:FRAMES_CHECKED])


def test_external_data_copy_holds_the_same_weights():
    inline = onnx.load(DIGITS / "digits_mlp.onnx")
    external_path = HERE / "external" / "digits_mlp.onnx"
    unloaded = onnx.load(external_path, load_external_data=False)
    assert any(init.data_location == onnx.TensorProto.EXTERNAL for init in unloaded.graph.initializer)
    loaded = onnx.load(external_path)
    for ours, theirs in zip(inline.graph.initializer, loaded.graph.initializer, strict=True):
        assert ours.name == theirs.name
        np.testing.assert_array_equal(numpy_helper.to_array(ours), numpy_helper.to_array(theirs))
