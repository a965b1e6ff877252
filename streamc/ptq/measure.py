"""Measuring a quantization on the frames compared: the QONNX model a plan makes, run in streamc's
executor, against the float model run in onnxruntime: output SQNR, and accuracy where labels are given."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort

from ..execute import execute
from ..frontend.load import load_onnx


@dataclass(frozen=True, order=True)
class Score:
    """Ordered as a search ranks it: accuracy first where there are labels, then output SQNR."""

    accuracy: float | None  # a fraction of the frames; None without labels
    sqnr_db: float

    def value(self) -> float:
        """What a tolerance is taken off: percentage points of accuracy, else dB of SQNR."""
        return self.sqnr_db if self.accuracy is None else 100 * self.accuracy

    def __str__(self) -> str:
        accuracy = "" if self.accuracy is None else f"accuracy {self.accuracy:.4f}, "
        return f"{accuracy}output SQNR {self.sqnr_db:.1f} dB"


def sqnr_db(reference: np.ndarray, approximation: np.ndarray) -> float:
    noise = float(np.sum((reference.astype(np.float64) - approximation) ** 2))
    signal = float(np.sum(reference.astype(np.float64) ** 2))
    return float("inf") if noise == 0 else 10 * np.log10(signal / noise)


def float_outputs(model: onnx.ModelProto, frames: np.ndarray) -> np.ndarray:
    options = ort.SessionOptions()
    options.log_severity_level = 3  # the float export's unused initializers are no news to the user
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    name = session.get_inputs()[0].name
    return np.concatenate([session.run(None, {name: frame[None]})[0] for frame in frames])


class Measure:
    """The float model's outputs on ``frames`` (and their ``labels``), against which quantized models score."""

    def __init__(self, float_model: onnx.ModelProto, frames: np.ndarray, labels: np.ndarray | None = None):
        self.frames, self.labels = frames, labels
        self.reference = float_outputs(float_model, frames)

    @property
    def metric(self) -> str:
        return "output SQNR" if self.labels is None else "accuracy"

    def outputs(self, quantized: onnx.ModelProto) -> np.ndarray:
        """``quantized`` run on the frames in streamc's executor, shaped as the float outputs."""
        with tempfile.TemporaryDirectory(prefix="streamc-ptq-") as scratch:
            path = Path(scratch) / "quantized.onnx"
            onnx.save(quantized, str(path))
            graph = load_onnx(path)
        result = execute(graph, {graph.inputs[0].name: self.frames})[graph.outputs[0].name]
        return result.reshape(self.reference.shape)

    def accuracy(self, outputs: np.ndarray) -> float | None:
        if self.labels is None:
            return None
        return float((outputs.reshape(len(self.frames), -1).argmax(1) == self.labels).mean())

    def score(self, quantized: onnx.ModelProto) -> Score:
        outputs = self.outputs(quantized)
        return Score(self.accuracy(outputs), sqnr_db(self.reference, outputs))
