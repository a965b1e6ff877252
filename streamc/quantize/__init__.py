"""Post-training quantization of float ONNX models into QONNX models streamc builds, after the MLIR
quantization RFC: kernel fusion (:mod:`.fuse`), calibration (:mod:`.calibrate`), the user's per-tensor
constraints (:mod:`.constraints`), propagation of the target's constraints (:mod:`.propagate`), the QONNX
model (:mod:`.emit`) and the report (:mod:`.report`); :func:`.run.quantize` drives them."""

import sys
import types

from .run import quantize

__all__ = ["quantize"]


class _CallableModule(types.ModuleType):
    # Importing this package makes ``streamc.quantize`` the package, not the function streamc exports:
    # calling the package calls the function, so ``streamc.quantize(...)`` works either way.
    def __call__(self, *args, **kwargs):
        return quantize(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
