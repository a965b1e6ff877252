"""Bit widths under a device budget: the RFC's ``AnyQuantizedType`` resolved by the target.

Each layer (a logical kernel) takes one bit width from :data:`ALLOWED_BITS` for its weights and its input
activation. Every combination is priced by the planner (``streamc.compile`` at the target frame rate: the
folding with the fewest LUTs and its estimate, all of the device's resources checked), and of those that
fit the one with the least summed noise-to-signal ratio of the layers' weights and inputs (per-layer SQNR
on the calibration frames) is chosen. A greedy descent from the widest choice, tried first, lowered the
layer that lost least SQNR per LUT saved and ended worse than uniform w4a4 on the digits MLP, as the
limit there was block RAM, not LUTs; the exhaustive search is kept to :data:`MAX_LAYERS` layers.
"""

from __future__ import annotations

import itertools
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper

from ..api import compile as compile_model
from ..devices import get_device
from ..errors import FoldingError
from .calibrate import collect
from .constraints import AtLeast, Constraints
from .emit import emit
from .fuse import Kernel, fold_batchnorms, logical_kernels
from .propagate import activation_type, plan, quantize_values, weight_type

ALLOWED_BITS = (8, 4, 2)
#: 3**4 = 81 plannings at most.
MAX_LAYERS = 4


@dataclass
class Choice:
    bits: tuple[int, ...]         # per layer
    lut: int | None               # the planner's estimate; None where no folding reaches the rate on the device
    over: tuple[str, ...]         # the device's resources the design exceeds
    noise: float                  # summed noise-to-signal ratio of the layers' weights and inputs

    @property
    def fits(self) -> bool:
        return not self.over

    @property
    def sqnr_db(self) -> float:
        return float(-10 * np.log10(self.noise))


def _noise(values: np.ndarray, quantized: np.ndarray) -> float:
    return float(np.sum((values - quantized) ** 2) / max(np.sum(values.astype(np.float64) ** 2), 1e-30))


def _inputs(model: onnx.ModelProto, kernels: list[Kernel]) -> list[str]:
    """The quantized tensor each kernel reads: the model input or the previous kernel's output."""
    return [model.graph.input[0].name] + [k.output for k in kernels[:-1]]


def layer_constraints(model: onnx.ModelProto, kernels: list[Kernel], bits: tuple[int, ...],
                      base: Constraints) -> Constraints:
    """``base`` with each layer's weights and input at (at least) its bits, the defaults at the least."""
    tensors = dict(base.tensors)
    for kernel, tensor, b in zip(kernels, _inputs(model, kernels), bits):
        tensors[kernel.weight] = tensors[tensor] = AtLeast(kind="at_least", bits=b)
    least = min(ALLOWED_BITS)
    return base.model_copy(update={"weight_bits": least, "activation_bits": least, "tensors": tensors})


def search_bits(model_path: Path, frames: np.ndarray, base: Constraints, *, device: str, target_fps: float,
                clock_mhz: float) -> tuple[Choice, list[Choice]]:
    """The chosen per-layer bits and every choice priced on the way (the uniform ones among them)."""
    fused = fold_batchnorms(onnx.load(str(model_path)))
    kernels = logical_kernels(fused)
    inputs = _inputs(fused, kernels)
    calibrated: dict[tuple[str, ...], dict] = {}

    def stats_for(names) -> dict:
        # The float model runs once per set of tensors, not once per choice; a copy, as plan replaces entries.
        if tuple(names) not in calibrated:
            calibrated[tuple(names)] = collect(fused, frames, list(names))
        return dict(calibrated[tuple(names)])

    stats = stats_for(inputs)
    inits = {t.name: numpy_helper.to_array(t) for t in fused.graph.initializer}
    budget = get_device(device).budget()
    priced: dict[tuple[int, ...], Choice] = {}

    def layer_noise(index: int, b: int) -> float:
        weight, seen = inits[kernels[index].weight], stats[inputs[index]]
        # the weight type's scales are shaped to broadcast along the weight's channel axis
        weight_noise = _noise(weight, quantize_values(weight, weight_type(weight, kernels[index].channel_axis, b,
                                                                          base.pow2)))
        input_type = activation_type([seen], b, seen.low < 0, base)
        return weight_noise + _noise(seen.sample, quantize_values(seen.sample, input_type))

    def price(bits: tuple[int, ...]) -> Choice:
        if bits not in priced:
            rules = layer_constraints(fused, kernels, bits, base)
            with tempfile.TemporaryDirectory(prefix="streamc-bits-") as scratch:
                path = Path(scratch) / "model.onnx"
                resolved = plan(fused, kernels, stats_for, rules)
                onnx.save(emit(fused, resolved), str(path))
                try:
                    accelerator = compile_model(path, device=device, target_fps=target_fps, clock_mhz=clock_mhz,
                                                output_dir=Path(scratch) / "build")
                except FoldingError:
                    lut, over = None, ("target_fps",)
                else:
                    resources = accelerator.estimate()[device]
                    lut, over = resources["lut"], tuple(k for k in budget if resources[k] > budget[k])
            noise = sum(layer_noise(i, b) for i, b in enumerate(bits))
            priced[bits] = Choice(bits, lut, over, noise)
        return priced[bits]

    if len(kernels) > MAX_LAYERS:
        raise FoldingError(f"{model_path}: {len(kernels)} layers; the bit-width search takes at most {MAX_LAYERS} "
                           f"(give bits per tensor in the constraints instead)")
    fitting = [c for c in map(price, itertools.product(ALLOWED_BITS, repeat=len(kernels))) if c.fits]
    if not fitting:
        raise FoldingError(f"{model_path}: no bit widths from {ALLOWED_BITS} fit the {device} at "
                           f"{target_fps:g} frames/s")
    return min(fitting, key=lambda c: c.noise), list(priced.values())

