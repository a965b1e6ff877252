"""The networks users bring lower to hardware that computes them: the model zoo at emulation level.

The models, frames and expected outputs are made by ``tests/models/zoo/make_zoo.py`` (random
weights, Brevitas' MobileNet-v1, MLPerf Tiny's ResNet-8 (Brevitas and onnxruntime QDQ), DS-CNN and
autoencoder, hls4ml's jet-tagging MLP); the expected outputs come from references that are not
streamc's: qonnx's executor for the QONNX exports, ``tests/exact_model.py`` for the QDQ model.
Models streamc refuses today are marked ``xfail(strict=True)`` with the refusal they raise, so that
the mark must go when the refusal is lifted.
"""
from pathlib import Path

import numpy as np
import onnx
import pytest

from streamc.frontend.load import load_onnx
from streamc.hw import to_hw
from streamc.transforms.streamline import streamline
from streamc.transforms.tidy import tidy

ZOO = Path(__file__).resolve().parent / "models" / "zoo"
#: A few frames: the big models emulate slowly in Python.
FRAMES = 4

#: name -> pytest marks (the refusals streamc raises today, or none).
CASES = {
    "mobilenet_v1_w025": [],
    "resnet8": [],
    # The average pool 8x8 (QDQ, same scale in and out) sums dequantized values, each rounded to float32
    # on its own; where the mean of the codes is a tie (frame 3, pooled channel 48: 32 / 64 = 0.5 codes)
    # those roundings decide it, so the pool sums each code's exact term (a table before it).
    "resnet8_ort_qdq": [],
    "ds_cnn": [],
    "autoencoder": [],
    "jet_tagging_mlp": [],
    "autoencoder_8bit": [],
    "autoencoder_8bit_qcdq": [],
}


def test_every_zoo_model_is_listed():
    assert sorted(path.stem for path in ZOO.glob("*.onnx")) == sorted(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_zoo_model_fixture_is_consistent(name):
    """Frames fit the model's input, and there is an expected output for each (guards the fixtures)."""
    model = onnx.load(ZOO / f"{name}.onnx", load_external_data=False)
    dims = [dim.dim_value for dim in model.graph.input[0].type.tensor_type.shape.dim]
    frames = np.load(ZOO / f"{name}_frames.npy")
    expected = np.load(ZOO / f"{name}_expected.npy")
    assert frames.dtype == np.float32 and dims == [1, *frames.shape[1:]]
    assert len(expected) == len(frames) and np.isfinite(expected).all()
    # random weights must still give frames that differ: equal outputs would hide a wrong lowering
    assert len({row.tobytes() for row in expected.reshape(len(expected), -1)}) > 1


def _emulate(name: str):
    graph = load_onnx(ZOO / f"{name}.onnx")
    dataflow = to_hw(streamline(tidy(graph)))
    frames = np.load(ZOO / f"{name}_frames.npy")[:FRAMES]
    _, outputs = dataflow.emulate(frames)
    return outputs


@pytest.mark.parametrize("name", [pytest.param(name, marks=marks) for name, marks in CASES.items()])
def test_emulated_hardware_equals_the_reference(name):
    outputs = _emulate(name)
    expected = np.load(ZOO / f"{name}_expected.npy")[:FRAMES]
    outputs = outputs.reshape(expected.shape)
    # The integer part is exact; the logits come from a float32 tail on the host, which computes
    # in another order than the reference: within 4 float32 spacings of the largest output.
    assert np.abs(outputs - expected).max() <= 4 * np.spacing(np.abs(expected).max())
