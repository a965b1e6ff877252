"""Bit widths under a device budget: the RFC's ``AnyQuantizedType`` resolved by the target.

Each layer (a logical kernel) takes one bit width from :data:`ALLOWED_BITS` for its weights and its input
activation. A choice is priced by the planner (``streamc.compile`` at the target frame rate: the folding
with the fewest LUTs and its estimate, all of the device's resources checked). Of the choices that fit,
the one kept has the best accuracy on the labelled frames where labels are given, ties (and runs without
labels) broken by the least summed noise-to-signal ratio of the layers' weights and inputs on the
calibration frames (the per-layer SQNR reported).

Up to :data:`EXHAUSTIVE_CHOICES` combinations every one is priced. Past that (more than 4 layers), a beam
search: from every uniform choice that fits, widen one layer one step at a time, and keep the
:data:`BEAM_WIDTH` best choices that still fit each round, until no widening fits. A greedy descent from the
widest choice, tried first, lowered the layer that lost least SQNR per LUT saved and ended worse than
uniform w4a4 on the digits MLP, as the limit there was block RAM, not LUTs; widening only ever prices
choices next to ones that fit, whatever resource binds.

Each choice is priced as it would be written: its scales by the constraints' policy (``auto`` decides them
for each choice, :mod:`streamc.ptq.scales`), since narrower bits can cost LUTs where they turn a
power-of-two shift into a threshold table.
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
from ..planner.cost import over_limits
from ..resources import ResourceEstimate
from .calibrate import Calibration
from .constraints import AtLeast, Constraints
from .emit import emit
from .fuse import Kernel, fold_batchnorms, logical_kernels
from .measure import Measure
from .propagate import Plan, plan, quantize_values
from .scales import scaled_plan

ALLOWED_BITS = (8, 4, 2)
#: 3**4: every combination of up to 4 layers is priced, a beam search past that.
EXHAUSTIVE_CHOICES = 81
BEAM_WIDTH = 3


@dataclass
class Choice:
    bits: tuple[int, ...]         # per layer
    lut: int | None               # the planner's estimate; None where no folding reaches the rate on the device
    over: tuple[str, ...]         # the device's resources the design exceeds
    noise: float                  # summed noise-to-signal ratio of the layers' weights and inputs
    accuracy: float | None = None  # on the labelled frames, where they are given and the choice fits

    @property
    def fits(self) -> bool:
        return not self.over

    @property
    def sqnr_db(self) -> float:
        return float(-10 * np.log10(self.noise))

    def rank(self) -> tuple[float, float]:
        """Larger is better: accuracy (where measured), then less noise."""
        return (-1.0 if self.accuracy is None else self.accuracy), -self.noise


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
                clock_mhz: float, measure: Measure | None = None) -> tuple[Choice, list[Choice]]:
    """The chosen per-layer bits and every choice priced on the way (the uniform ones among them).
    ``measure`` scores the choices for ``auto`` scales and, where it has labels, their accuracy (default:
    output SQNR on ``frames``)."""
    float_model = onnx.load(str(model_path))
    measure = measure or Measure(float_model, frames)
    fused = fold_batchnorms(float_model)
    kernels = logical_kernels(fused)
    inputs = _inputs(fused, kernels)
    calibration = Calibration(fused, frames)
    # the layers' inputs as calibrated, before any plan replaces a range
    stats = dict(calibration(inputs))
    inits = {t.name: numpy_helper.to_array(t) for t in fused.graph.initializer}
    target = get_device(device)
    budget = target.budget()
    priced: dict[tuple[int, ...], Choice] = {}

    def layer_noise(index: int, resolved: Plan) -> float:
        weight, seen = kernels[index].weight, stats[inputs[index]]
        if weight not in resolved.weights:  # a layer kept float on the host
            return 0.0
        # the weight type's scales are shaped to broadcast along the weight's channel axis
        return _noise(inits[weight], quantize_values(inits[weight], resolved.weights[weight])) + \
            _noise(seen.sample, quantize_values(seen.sample, resolved.activations[inputs[index]]))

    def price(bits: tuple[int, ...]) -> Choice:
        if bits not in priced:
            rules = layer_constraints(fused, kernels, bits, base)
            resolved, scales = scaled_plan(fused, lambda pow2: plan(fused, kernels, calibration, rules, pow2), rules,
                                           measure)
            quantized = emit(fused, resolved)
            with tempfile.TemporaryDirectory(prefix="streamc-bits-") as scratch:
                path = Path(scratch) / "model.onnx"
                onnx.save(quantized, str(path))
                try:
                    accelerator = compile_model(path, device=device, target_fps=target_fps, clock_mhz=clock_mhz,
                                                output_dir=Path(scratch) / "build")
                except FoldingError:
                    lut, over = None, ("target_fps",)
                else:
                    resources = accelerator.estimate()[device]
                    lut = resources["lut"]
                    over = tuple(over_limits(ResourceEstimate(**resources), budget, target.family))
            accuracy = None
            if measure.labels is not None and not over:
                accuracy = (scales.chosen if scales else measure.score(quantized)).accuracy
            priced[bits] = Choice(bits, lut, over, sum(layer_noise(i, resolved) for i in range(len(bits))), accuracy)
        return priced[bits]

    if len(ALLOWED_BITS) ** len(kernels) <= EXHAUSTIVE_CHOICES:
        for bits in itertools.product(ALLOWED_BITS, repeat=len(kernels)):
            price(bits)
    else:
        _beam(price, len(kernels))
    fitting = [c for c in priced.values() if c.fits]
    if not fitting:
        raise FoldingError(f"{model_path}: no bit widths from {ALLOWED_BITS} fit the {device} at "
                           f"{target_fps:g} frames/s")
    return max(fitting, key=Choice.rank), list(priced.values())


def _beam(price, layers: int) -> None:
    """Widen one layer one step at a time from the uniform choices that fit, keeping the best few."""
    frontier = [c for c in (price((b,) * layers) for b in ALLOWED_BITS) if c.fits]
    while frontier:
        wider = {choice.bits[:i] + (min(w for w in ALLOWED_BITS if w > b),) + choice.bits[i + 1:]
                 for choice in frontier for i, b in enumerate(choice.bits) if b < max(ALLOWED_BITS)}
        frontier = sorted((c for c in map(price, wider) if c.fits), key=Choice.rank, reverse=True)[:BEAM_WIDTH]

