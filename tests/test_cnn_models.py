"""The committed convolutional test models still give their recorded outputs.

The models, frames and recorded outputs are made by the scripts in ``tests/models/cnn/``
(Brevitas exports: CNV, a trained digits CNN, depthwise, residual and 1-D blocks, recorded with
qonnx's executor; onnxruntime's ``quantize_static`` CNNs, recorded with the exact reference of
``tests/exact_model.py``: exact integer kernels, every other node in onnxruntime). This
guards the fixtures, and the reference executor they were recorded with, against
changes in onnx, onnxruntime or qonnx.
"""
import json
from pathlib import Path
import sys

import numpy as np
import onnx
import pytest

MODELS = Path(__file__).resolve().parent / "models"
CNN = MODELS / "cnn"
# The reference executor lives with the test models; it needs no torch.
sys.path.insert(0, str(MODELS))
from qonnx_reference import execute_frames  # noqa: E402
from exact_model import cpu_has_vnni, run_frames  # noqa: E402

# qonnx runs node by node through onnxruntime: a few frames keep this test quick.
FRAMES_CHECKED = 4
FRAMES_OF = {
    "cnv_w1a1": "cnv_frames", "cnv_w1a1_legacy": "cnv_frames",
    "cnv_w1a2": "cnv_frames", "cnv_w2a2": "cnv_frames",
    "digits_cnn": "digits_cnn_frames", "digits_cnn_legacy": "digits_cnn_frames",
    "depthwise_block": "depthwise_block_frames", "depthwise_block_legacy": "depthwise_block_frames",
    "residual_block": "residual_block_frames", "residual_block_legacy": "residual_block_frames",
    "conv1d_kws": "conv1d_kws_frames", "conv1d_kws_legacy": "conv1d_kws_frames",
    "concat_block": "concat_block_frames", "concat_block_legacy": "concat_block_frames",
    "ort_qdq_cnn": "ort_qdq_cnn_frames", "ort_qdq_cnn_u8": "ort_qdq_cnn_u8_frames",
    "ort_qop_cnn": "ort_qop_cnn_frames", "ort_qop_cnn_float_head": "ort_qop_cnn_float_head_frames",
}


def test_every_model_file_is_listed():
    assert sorted(path.stem for path in CNN.glob("*.onnx")) == sorted(FRAMES_OF)


def _exact_frames(path: Path, frames: np.ndarray) -> np.ndarray:
    """The exact reference's outputs (com.microsoft's QGemm is beyond qonnx's executor)."""
    return run_frames(onnx.load(path), frames)


def _onnxruntime_frames(path: Path, frames: np.ndarray) -> np.ndarray:
    """A whole-model onnxruntime session's outputs, graph optimizations off, one frame at a time."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    name = session.get_inputs()[0].name
    return np.concatenate([session.run(None, {name: frame[None]})[0] for frame in frames])


@pytest.mark.parametrize("name", sorted(FRAMES_OF))
def test_model_reproduces_expected_outputs(name):
    frames = np.load(CNN / f"{FRAMES_OF[name]}.npy")[:FRAMES_CHECKED]
    expected = np.load(CNN / f"{name.removesuffix('_legacy')}_expected.npy")[:FRAMES_CHECKED]
    run = _exact_frames if name.startswith("ort_") else execute_frames
    outputs = run(CNN / f"{name}.onnx", frames)
    np.testing.assert_allclose(outputs, expected, rtol=1e-5, atol=1e-5)


#: onnxruntime kernels that multiply integer codes: inexact on CPUs without VNNI (saturating int16 pairs).
_INTEGER_KERNELS = {"MatMulInteger", "ConvInteger", "QLinearMatMul", "QLinearConv", "QGemm"}


@pytest.mark.parametrize("name", sorted(n for n in FRAMES_OF if n.startswith("ort_")))
def test_onnxruntime_reproduces_expected_outputs_where_it_is_exact(name):
    # the QDQ models run float kernels only; the operator-format ones need exact integer kernels
    model = onnx.load(CNN / f"{name}.onnx")
    if not cpu_has_vnni() and any(node.op_type in _INTEGER_KERNELS for node in model.graph.node):
        pytest.skip("onnxruntime's u8 x s8 kernels saturate pairs of products on CPUs without VNNI")
    frames = np.load(CNN / f"{FRAMES_OF[name]}.npy")[:FRAMES_CHECKED]
    expected = np.load(CNN / f"{name}_expected.npy")[:FRAMES_CHECKED]
    np.testing.assert_allclose(_onnxruntime_frames(CNN / f"{name}.onnx", frames), expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", sorted(FRAMES_OF))
def test_model_takes_one_frame_of_the_recorded_shape(name):
    model = onnx.load(CNN / f"{name}.onnx")
    dims = [dim.dim_value for dim in model.graph.input[0].type.tensor_type.shape.dim]
    frames = np.load(CNN / f"{FRAMES_OF[name]}.npy", mmap_mode="r")
    assert frames.dtype == np.float32
    assert dims == [1, *frames.shape[1:]]


def test_digits_cnn_classifies_as_recorded():
    labels = np.load(CNN / "digits_cnn_labels.npy")
    frames = np.load(CNN / "digits_cnn_frames.npy", mmap_mode="r")
    expected = np.load(CNN / "digits_cnn_expected.npy")
    assert frames.shape == (1797, 1, 8, 8) and labels.shape == (1797,) and labels.dtype == np.int64
    recorded = json.loads((CNN / "digits_cnn.json").read_text())
    assert recorded["torch_accuracy_test"] >= 0.9
    assert (expected.argmax(axis=1) == labels[:len(expected)]).mean() >= 0.9
