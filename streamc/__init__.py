"""streamc: quantized ONNX to streaming dataflow accelerators. From Python: ``streamc.compile`` and
``streamc.run_sweep`` (:mod:`streamc.api`), ``streamc.quantize`` (:mod:`streamc.ptq`)."""

__all__ = ["Accelerator", "Simulation", "SweepResult", "compile", "quantize", "run_sweep"]


def __getattr__(name: str):
    # Imported when first used: ``import streamc.rtl`` (the hardware library) and the CLI's start stay light.
    if name == "quantize":
        from .ptq import quantize

        return quantize
    if name in __all__:
        from . import api

        return getattr(api, name)
    raise AttributeError(f"module 'streamc' has no attribute {name!r}")
