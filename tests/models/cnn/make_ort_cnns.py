"""Quantize small float CNNs with onnxruntime's ``quantize_static`` as test models.

Run from the repository root with torch and onnxruntime installed::

    python tests/models/cnn/make_ort_cnns.py

or, to record the expected outputs again from the committed models and frames (no torch needed)::

    python tests/models/cnn/make_ort_cnns.py --expected-only

In onnxruntime's QDQ format every activation is ``QuantizeLinear -> DequantizeLinear``, the
``MaxPool`` and ``Flatten`` included: each sits between two quantizers of the same scale.

- ``ort_qdq_cnn``, input (1, 3, 12, 12) in [-1, 1]: Conv 3->8 3x3 pad 1 -> ReLU -> MaxPool 2 ->
  Conv 8->8 3x3 stride 2 -> ReLU -> Flatten (32) -> Linear 32->4. Per-channel int8 weights,
  symmetric int8 activations (zero point 0, so padding is exact).
- ``ort_qdq_cnn_u8``, input (1, 3, 11, 9) in [-1, 1]: Conv 3->6 3x3 pad 1 -> ReLU -> Conv 6->6 3x3
  stride 2 -> ReLU -> Flatten (120) -> Linear 120->4. Per-tensor int8 weights, asymmetric uint8
  activations as ``quantize_static`` makes by default (nonzero zero points: the padding is the
  zero point's code), only Conv and Gemm quantized: the ReLU and Flatten read a dequantized
  tensor and the Linear's input quantizer requantizes it.

- ``ort_qop_cnn``, input (1, 3, 12, 12) in [-1, 1]: the network of ``ort_qdq_cnn`` in onnxruntime's
  operator format, as ``quantize_static`` makes it by default: ``QLinearConv`` (per-channel int8
  weights, uint8 activations with zero points, the first padded), float ReLU between
  ``DequantizeLinear`` and ``QuantizeLinear``, MaxPool on uint8, and com.microsoft's ``QGemm``.
- ``ort_qop_cnn_float_head``: the same with only the convolutions quantized, so the Linear stays
  in float (on the host).

Writes, next to this script, ``<name>.onnx``, ``<name>_frames.npy`` (16 frames) and
``<name>_expected.npy`` and ``<name>.onnx.txt``. The expected outputs are the exact reference's
(``tests/exact_model.py``, one frame at a time): exact integer kernels for the quantized ops, every
other node in onnxruntime with graph optimizations off (its QDQ fusions compute some layers in other
float arithmetic). A whole-model onnxruntime session is not exact on CPUs without VNNI: its u8 x s8
kernels (QLinearConv, QGemm) add pairs of products in saturating int16. onnxruntime's float Gemm
(``ort_qop_cnn_float_head``'s head) sums in an order its CPU's kernel picks: recordings on other
CPUs differ from these by an ulp or two, which the test's tolerance allows.
"""
import sys
from pathlib import Path

import numpy as np
import onnx

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))  # tests/, for the exact reference
from exact_model import run_frames  # noqa: E402

SEED = 20261123
NAMES = ("ort_qdq_cnn", "ort_qdq_cnn_u8", "ort_qop_cnn", "ort_qop_cnn_float_head")


def record_expected(name: str) -> None:
    """``<name>_expected.npy``: the exact reference's outputs for the committed model and frames."""
    frames = np.load(HERE / f"{name}_frames.npy")
    np.save(HERE / f"{name}_expected.npy", run_frames(onnx.load(HERE / f"{name}.onnx"), frames))


def _export(name: str, net, shape: tuple, **options) -> None:
    import torch
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    class _Frames(CalibrationDataReader):
        def __init__(self, frames: np.ndarray):
            self._batches = iter([{"x": f[None]} for f in frames])

        def get_next(self):
            return next(self._batches, None)

    rng = np.random.default_rng(SEED)
    float_path = HERE / f"{name}_float.onnx"
    torch.onnx.export(net.eval(), torch.zeros(1, *shape), str(float_path), opset_version=13, dynamo=False,
                      input_names=["x"], output_names=["y"])
    calibration = rng.uniform(-1, 1, (32, *shape)).astype(np.float32)
    path = HERE / f"{name}.onnx"
    quantize_static(str(float_path), str(path), _Frames(calibration), weight_type=QuantType.QInt8,
                    **{"quant_format": QuantFormat.QDQ, **options})
    float_path.unlink()
    frames = rng.uniform(-1, 1, (16, *shape)).astype(np.float32)
    np.save(HERE / f"{name}_frames.npy", frames)
    record_expected(name)
    (HERE / f"{name}.onnx.txt").write_text(onnx.printer.to_text(onnx.load(path).graph) + "\n")


def main() -> None:
    if sys.argv[1:] == ["--expected-only"]:
        for name in NAMES:
            record_expected(name)
        return
    import torch
    from onnxruntime.quantization import QuantFormat, QuantType

    torch.manual_seed(SEED)
    cnn = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
                              torch.nn.Conv2d(8, 8, 3, stride=2), torch.nn.ReLU(), torch.nn.Flatten(),
                              torch.nn.Linear(32, 4))
    _export("ort_qdq_cnn", cnn, (3, 12, 12), per_channel=True, activation_type=QuantType.QInt8,
            extra_options={"ActivationSymmetric": True})
    _export("ort_qdq_cnn_u8",
            torch.nn.Sequential(torch.nn.Conv2d(3, 6, 3, padding=1), torch.nn.ReLU(), torch.nn.Conv2d(6, 6, 3, stride=2),
                                torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Linear(120, 4)),
            (3, 11, 9), per_channel=False, activation_type=QuantType.QUInt8, op_types_to_quantize=["Conv", "Gemm"])
    _export("ort_qop_cnn", cnn, (3, 12, 12), quant_format=QuantFormat.QOperator, per_channel=True,
            activation_type=QuantType.QUInt8)
    _export("ort_qop_cnn_float_head", cnn, (3, 12, 12), quant_format=QuantFormat.QOperator, per_channel=True,
            activation_type=QuantType.QUInt8, op_types_to_quantize=["Conv"])


if __name__ == "__main__":
    main()
