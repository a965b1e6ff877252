"""Calibration: run the float graph with onnxruntime on the calibration frames and keep, per tensor, a
sample of its values, from which a range is chosen per bit width (min/max, percentile or MSE-optimal)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import onnx
import onnxruntime as ort

from ..errors import ConfigError

#: Fewer frames than this do not show a tensor's range.
MIN_FRAMES = 16
#: Values kept per tensor for the percentile and MSE searches.
SAMPLE = 200_000
METHODS = ("minmax", "percentile", "mse")


@dataclass
class TensorStats:
    """A tensor's values over the calibration frames (the RFC's CalibratedQuantizedType before its range
    is chosen)."""

    low: float
    high: float
    sample: np.ndarray
    #: A range the user gave (a ``calibrated`` constraint): taken as it is, whatever the method.
    given: bool = False

    def clip_range(self, method: str, bits: int, signed: bool, percentile: float = 99.99) -> tuple[float, float]:
        """The range the quantizer covers: all values (``minmax``), the ``percentile``-th of |x|, or the clip
        value that minimizes the mean squared quantization error at ``bits`` (``mse``)."""
        if method == "minmax" or self.given:
            return self.low, self.high
        magnitude = np.abs(self.sample)
        if method == "percentile":
            top = float(np.percentile(magnitude, percentile))
        else:
            peak = max(abs(self.low), abs(self.high))
            levels = 2 ** (bits - 1) - 1 if signed else 2 ** bits - 1
            candidates = peak * np.linspace(0.3, 1.0, 71)
            errors = [_mse(self.sample, clip / levels, levels, signed) for clip in candidates]
            top = float(candidates[int(np.argmin(errors))])
        return (-top if signed else 0.0), top


def _mse(values: np.ndarray, scale: float, levels: int, signed: bool) -> float:
    low = -levels if signed else 0
    return float(np.mean((np.clip(np.round(values / scale), low, levels) * scale - values) ** 2))


def check_frames(frames: np.ndarray, input_shape: tuple[int, ...], what: str) -> np.ndarray:
    """``frames`` as float32 (N, *input shape without its batch of 1), or a ConfigError naming the fault."""
    frames = np.asarray(frames)
    want = tuple(input_shape[1:])
    if frames.ndim >= 1 and tuple(frames.shape[1:]) != want and tuple(frames.shape[1:]) == tuple(input_shape):
        frames = frames.reshape((len(frames),) + want)
    if frames.ndim < 1 or tuple(frames.shape[1:]) != want:
        raise ConfigError(f"{what}: frames of shape {frames.shape} do not fit the model's input {tuple(input_shape)}; "
                          f"give (N, {', '.join(map(str, want))})")
    if not np.issubdtype(frames.dtype, np.number):
        raise ConfigError(f"{what}: frames of dtype {frames.dtype}; give numbers")
    if not np.isfinite(frames).all():
        bad = int((~np.isfinite(frames)).reshape(len(frames), -1).any(axis=1).sum())
        raise ConfigError(f"{what}: {bad} frames hold NaN or infinite values")
    return frames.astype(np.float32)


def collect(model: onnx.ModelProto, frames: np.ndarray, tensors: list[str]) -> dict[str, TensorStats]:
    """Run ``model`` (float) on every frame and gather the statistics of ``tensors``."""
    if len(frames) < MIN_FRAMES:
        raise ConfigError(f"calibration: {len(frames)} frames; give at least {MIN_FRAMES}")
    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    listed = {out.name for out in probe.graph.output}
    probe.graph.output.extend(onnx.ValueInfoProto(name=name) for name in tensors if name not in listed)
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(probe.SerializeToString(), options, providers=["CPUExecutionProvider"])
    name = session.get_inputs()[0].name
    names = [out.name for out in session.get_outputs()]
    runs = [dict(zip(names, session.run(None, {name: frame[None]}))) for frame in frames]
    rng = np.random.default_rng(0)
    stats = {}
    for tensor in tensors:
        values = np.concatenate([run[tensor].ravel() for run in runs]).astype(np.float64)
        sample = values if values.size <= SAMPLE else rng.choice(values, SAMPLE, replace=False)
        stats[tensor] = TensorStats(float(values.min()), float(values.max()), sample)
    return stats


class Calibration:
    """:func:`collect` for the sets of tensors a plan asks for, each set run through the float model once (``auto``
    scales and the bit-width search plan many times over the same tensors). A call returns :attr:`stats`: every
    tensor's statistics, those asked for as calibrated, the others as the last plan left them (a plan replaces
    the range of a tensor its constraints calibrate)."""

    def __init__(self, model: onnx.ModelProto, frames: np.ndarray):
        self.model, self.frames = model, frames
        self.stats: dict[str, TensorStats] = {}
        self._runs: dict[tuple[str, ...], dict[str, TensorStats]] = {}

    def __call__(self, names) -> dict[str, TensorStats]:
        key = tuple(names)
        if key not in self._runs:
            self._runs[key] = collect(self.model, self.frames, list(key))
        self.stats.update(self._runs[key])
        return self.stats
