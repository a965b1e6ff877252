"""``streamc quantize``: a float ONNX model and calibration frames to a QONNX model streamc builds."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from google.protobuf.message import DecodeError

from ..errors import ConfigError, FrontendError
from .budget import layer_constraints, search_bits
from .calibrate import Calibration, check_frames
from .constraints import Constraints, load_constraints
from .emit import emit
from .fuse import fold_batchnorms, logical_kernels
from .measure import Measure, sqnr_db
from .propagate import plan
from .report import QuantizeReport, tensor_rows
from .scales import layer_scales, scaled_plan


def _input_shape(model: onnx.ModelProto) -> tuple[int, ...]:
    dims = model.graph.input[0].type.tensor_type.shape.dim
    if len(model.graph.input) != 1 or not all(d.dim_value > 0 for d in dims):
        raise FrontendError(f"{model.graph.name}: streamc quantize reads models with one input of fixed shape")
    return tuple(d.dim_value for d in dims)


def quantize(model: str | Path, calibration: str | Path | np.ndarray, output: str | Path, *,
             test: str | Path | np.ndarray | None = None, labels: str | Path | np.ndarray | None = None,
             bits: str | None = None,
             constraints: str | Path | Constraints | None = None, scales: str | None = None,
             tolerance: float | None = None, tolerance_db: float | None = None,
             device: str | None = None, target_fps: float | None = None, clock_mhz: float = 100.0) -> QuantizeReport:
    """Quantize the float ONNX ``model`` after post-training calibration on ``calibration`` frames
    ((N, *input shape) .npy or array) and write a QONNX model to ``output``.

    ``bits`` is ``"w8a8"`` or ``"w4a4"`` (over the constraints' defaults), ``constraints`` a YAML file of
    :mod:`streamc.ptq.constraints`. ``scales`` (over the constraints' ``scales``) is ``auto`` (the default:
    power-of-two scales wherever the score stays within ``tolerance`` percentage points of accuracy, or
    without labels ``tolerance_db`` dB of output SQNR, of float scales; :mod:`streamc.ptq.scales`), ``pow2``
    or ``float``. The report compares the float and the quantized model on the ``test`` frames (default: the
    calibration frames): output SQNR, and accuracy where ``labels`` (one per frame compared) are given;
    ``auto`` decides on those frames too.

    With ``device`` and ``target_fps`` (at ``clock_mhz``), each layer's bits come from the search of
    :mod:`streamc.ptq.budget`: the combination from {2, 4, 8} that fits the device at that rate with the
    best accuracy where labels are given, else the best per-layer SQNR (the report lists the uniform ones).
    """
    try:
        float_model = onnx.load(str(model))
    except (OSError, DecodeError) as exc:
        raise FrontendError(f"{model}: cannot read the model ({exc})") from None
    rules = constraints if isinstance(constraints, Constraints) else load_constraints(
        constraints, bits=bits, scales=scales, tolerance=tolerance, tolerance_db=tolerance_db)
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
    measure = Measure(float_model, compared, truth)
    chosen, priced = None, []
    if device is not None:
        chosen, priced = search_bits(Path(model), frames, rules, device=device, target_fps=target_fps,
                                     clock_mhz=clock_mhz, measure=measure)
        rules = layer_constraints(fused, kernels, chosen.bits, rules)
    calibrated = Calibration(fused, frames)
    resolved, scale_choice = scaled_plan(fused, lambda pow2: plan(fused, kernels, calibrated, rules, pow2), rules,
                                         measure)
    quantized = emit(fused, resolved)
    onnx.save(quantized, str(output))
    result = measure.outputs(quantized)
    return QuantizeReport(str(output), len(compared), sqnr_db=sqnr_db(measure.reference, result),
                          float_accuracy=measure.accuracy(measure.reference), quantized_accuracy=measure.accuracy(result),
                          rows=tensor_rows(resolved, calibrated.stats), notes=resolved.notes, chosen=chosen,
                          priced=priced, device=device, target_fps=target_fps, scales=scale_choice,
                          layers=layer_scales(fused, kernels, resolved))


def _load_npy(path: str | Path, what: str) -> np.ndarray:
    try:
        return np.load(path, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{what}: cannot read {path} ({exc})") from None
