"""The ``auto`` scale policy: power-of-two scales wherever they keep the model within a tolerance of its
float-scale quantization.

A layer whose input, weight and output scales are all powers of two requantizes with a shift at 8 bits,
where float scales cost a multiplier and corrections (at 4 bits streamc compares with 15 thresholds
whatever the scales). The units decided
are each layer's weights and each group of activations that share one type (a layer's output is the next
layer's input, so a layer is a shift only where both its activations are). Start with every unit a power of
two; while the score (accuracy with labels, else output SQNR) is more than the tolerance below the
float-scale one, give float scales back to the unit whose return scores best, one at a time (greedy: the
two variants scored, then at most units x (units + 1) / 2 more evaluations; none when all power-of-two
scales already score within it).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import onnx

from .constraints import Constraints
from .emit import emit
from .fuse import Kernel
from .measure import Measure, Score
from .propagate import Plan, source_point


@dataclass
class LayerScales:
    """Which of a layer's scales are powers of two; ``output`` None where its output stays float (host)."""

    name: str
    input: bool
    weight: bool
    output: bool | None

    @property
    def pow2(self) -> bool:
        """All its scales powers of two: at 8 bits streamc requantizes it with a shift (the last layer's
        float tail is then exact on the host); at 4 bits it keeps its 15 thresholds either way."""
        return self.input and self.weight and self.output is not False


@dataclass
class ScaleChoice:
    """What ``auto`` measured and kept."""

    metric: str              # "accuracy" or "output SQNR"
    tolerance: float         # percentage points of accuracy or dB of SQNR
    float_scales: Score
    all_pow2: Score
    chosen: Score
    float_units: list[tuple[str, ...]] = field(default_factory=list)  # the units given float scales back

    def lines(self) -> list[str]:
        unit = "points" if self.metric == "accuracy" else "dB"
        kept = "; ".join(", ".join(u) for u in self.float_units) or "none"
        return [f"scales auto (tolerance {self.tolerance:g} {unit} of {self.metric} against float scales): "
                f"float scales {self.float_scales}; all power-of-two {self.all_pow2}; chosen {self.chosen}",
                f"  float scales given back to: {kept}"]


def layer_scales(model: onnx.ModelProto, kernels: list[Kernel], plan: Plan) -> list[LayerScales]:
    layers = []
    for kernel in kernels:
        if kernel.weight not in plan.weights:
            continue
        source = source_point(kernel.node.input[0], model, plan.activations)
        output = plan.activations.get(kernel.output)
        layers.append(LayerScales(kernel.node.name, source is not None and plan.activations[source].pow2,
                                  plan.weights[kernel.weight].pow2, None if output is None else output.pow2))
    return layers


def choose_scales(model: onnx.ModelProto, resolve, measure: Measure,
                  tolerance: float) -> tuple[Plan, ScaleChoice]:
    """The plan ``resolve(pow2)`` (``pow2``: the tensors with power-of-two scales) that ``auto`` keeps."""
    def score(pow2: frozenset[str]) -> tuple[Plan, Score]:
        resolved = resolve(pow2)
        return resolved, measure.score(emit(model, resolved))

    float_plan, float_score = score(frozenset())
    units = [(weight,) for weight in float_plan.weights] + float_plan.activation_groups
    current = frozenset(t for unit in units for t in unit)
    resolved, best = score(current)
    all_pow2, given_back = best, []
    while best.value() < float_score.value() - tolerance:
        options = [(unit, *score(current - set(unit))) for unit in units if unit not in given_back]
        unit, resolved, best = max(options, key=lambda option: option[2])
        given_back.append(unit)
        current -= set(unit)
    return resolved, ScaleChoice(measure.metric, tolerance, float_score, all_pow2, best, given_back)


def scaled_plan(model: onnx.ModelProto, resolve, constraints: Constraints,
                measure: Measure) -> tuple[Plan, ScaleChoice | None]:
    """The plan with the scales the constraints ask for; ``auto``'s decided by :func:`choose_scales` with
    the tolerance of the score ``measure`` gives (accuracy with labels, else output SQNR)."""
    if constraints.scales != "auto":
        return resolve(None), None
    tolerance = constraints.tolerance if measure.labels is not None else constraints.tolerance_db
    return choose_scales(model, resolve, measure, tolerance)
