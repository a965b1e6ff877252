"""``streamc quantize``: a float ONNX model and calibration frames to a QONNX model streamc builds."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from google.protobuf.message import DecodeError

from ..errors import ConfigError, FrontendError
from ..execute import execute
from ..frontend.load import load_onnx
from .budget import layer_constraints, search_bits
from .calibrate import check_frames, collect
from .constraints import Constraints, load_constraints
from .emit import emit
from .fuse import fold_batchnorms, logical_kernels
from .propagate import plan
from .report import QuantizeReport, sqnr_db, tensor_rows


def _input_shape(model: onnx.ModelProto) -> tuple[int, ...]:
    dims = model.graph.input[0].type.tensor_type.shape.dim
    if len(model.graph.input) != 1 or not all(d.dim_value > 0 for d in dims):
        raise FrontendError(f"{model.graph.name}: streamc quantize reads models with one input of fixed shape")
    return tuple(d.dim_value for d in dims)


def _float_outputs(model: onnx.ModelProto, frames: np.ndarray) -> np.ndarray:
    options = ort.SessionOptions()
    options.log_severity_level = 3  # the float export's unused initializers are no news to the user
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    name = session.get_inputs()[0].name
    return np.concatenate([session.run(None, {name: frame[None]})[0] for frame in frames])


def quantize(model: str | Path, calibration: str | Path | np.ndarray, output: str | Path, *,
             test: str | Path | np.ndarray | None = None, labels: str | Path | np.ndarray | None = None,
             bits: str | None = None,
             constraints: str | Path | Constraints | None = None, pow2: bool | None = None,
             device: str | None = None, target_fps: float | None = None, clock_mhz: float = 100.0) -> QuantizeReport:
    """Quantize the float ONNX ``model`` after post-training calibration on ``calibration`` frames
    ((N, *input shape) .npy or array) and write a QONNX model to ``output``.

    ``bits`` is ``"w8a8"`` or ``"w4a4"`` (over the constraints' defaults), ``constraints`` a YAML file of
    :mod:`streamc.ptq.constraints`, ``pow2`` rounds every scale to a power of two. The report
    compares the float and the quantized model on the ``test`` frames (default: the calibration frames):
    output SQNR, and accuracy where ``labels`` (one per frame compared) are given.

    With ``device`` and ``target_fps`` (at ``clock_mhz``), each layer's bits come from the search of
    :mod:`streamc.ptq.budget`: the combination from {2, 4, 8} that fits the device at that rate
    with the best per-layer SQNR (the report lists every combination priced).
    """
    try:
        float_model = onnx.load(str(model))
    except (OSError, DecodeError) as exc:
        raise FrontendError(f"{model}: cannot read the model ({exc})") from None
    rules = constraints if isinstance(constraints, Constraints) else load_constraints(constraints, bits=bits, pow2=pow2)
    shape = _input_shape(float_model)
    frames = calibration if isinstance(calibration, np.ndarray) else _load_npy(calibration, "calibration")
    frames = check_frames(frames, shape, "calibration")
    compared = frames if test is None else check_frames(
        test if isinstance(test, np.ndarray) else _load_npy(test, "test"), shape, "test")
    truth = None
    if labels is not None:
        truth = labels if isinstance(labels, np.ndarray) else _load_npy(labels, "labels")
        if truth.shape != (len(compared),):
            raise ConfigError(f"labels: shape {truth.shape}; give one label per frame compared ({len(compared)},)")
    if (device is None) != (target_fps is None):
        raise ConfigError("give device and target_fps together for the bit-width search")
    fused = fold_batchnorms(float_model)
    kernels = logical_kernels(fused)
    chosen, priced = None, []
    if device is not None:
        chosen, priced = search_bits(Path(model), frames, rules, device=device, target_fps=target_fps,
                                     clock_mhz=clock_mhz)
        rules = layer_constraints(fused, kernels, chosen.bits, rules)
    stats = {}

    def stats_for(names):
        stats.update(collect(fused, frames, names))
        return stats

    resolved = plan(fused, kernels, stats_for, rules)
    quantized = emit(fused, resolved)
    output = Path(output)
    onnx.save(quantized, str(output))
    graph = load_onnx(output)
    reference = _float_outputs(float_model, compared)
    result = execute(graph, {graph.inputs[0].name: compared})[graph.outputs[0].name].reshape(reference.shape)
    report = QuantizeReport(str(output), len(compared), sqnr_db=sqnr_db(reference, result),
                            rows=tensor_rows(resolved, stats), notes=resolved.notes, chosen=chosen, priced=priced,
                            device=device, target_fps=target_fps)
    if truth is not None:
        report.float_accuracy = float((reference.reshape(len(compared), -1).argmax(1) == truth).mean())
        report.quantized_accuracy = float((result.reshape(len(compared), -1).argmax(1) == truth).mean())
    return report


def _load_npy(path: str | Path, what: str) -> np.ndarray:
    try:
        return np.load(path, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{what}: cannot read {path} ({exc})") from None
