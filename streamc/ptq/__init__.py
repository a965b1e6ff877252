"""Post-training quantization of float ONNX models into QONNX models streamc builds, after the MLIR
quantization RFC: kernel fusion (:mod:`.fuse`), calibration (:mod:`.calibrate`), the user's per-tensor
constraints (:mod:`.constraints`), propagation of the target's constraints (:mod:`.propagate`), the QONNX
model (:mod:`.emit`) and the report (:mod:`.report`); :func:`.run.quantize` (``streamc.quantize``) drives them."""

from .run import quantize

__all__ = ["quantize"]
