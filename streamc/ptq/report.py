"""What a quantization did: float against quantized accuracy (with labels) or output SQNR, and each
quantized tensor's range, scale and bit width."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .calibrate import TensorStats
from .propagate import Plan


@dataclass
class TensorRow:
    tensor: str
    role: str          # "weight", "activation" or "rescale"
    bits: int
    signed: bool
    scale_min: float
    scale_max: float
    low: float | None  # the calibrated range (activations)
    high: float | None

    @property
    def pow2(self) -> bool:
        return all(float(np.log2(s)).is_integer() for s in (self.scale_min, self.scale_max))


@dataclass
class QuantizeReport:
    output: str
    frames: int
    float_accuracy: float | None = None
    quantized_accuracy: float | None = None
    sqnr_db: float | None = None
    rows: list[TensorRow] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: the bit-width search's choice and every combination it priced (streamc.ptq.budget.Choice)
    chosen: object | None = None
    priced: list = field(default_factory=list)
    device: str | None = None
    target_fps: float | None = None
    #: what the ``auto`` scale policy measured and kept (streamc.ptq.scales.ScaleChoice), None for pow2/float
    scales: object | None = None
    #: per layer, which scales are powers of two (streamc.ptq.scales.LayerScales)
    layers: list = field(default_factory=list)

    def lines(self) -> list[str]:
        lines = [f"wrote {self.output}"]
        if self.float_accuracy is not None:
            lines.append(f"accuracy on {self.frames} frames: float {self.float_accuracy:.4f}, "
                         f"quantized {self.quantized_accuracy:.4f}")
        lines.append(f"output SQNR on {self.frames} frames: {self.sqnr_db:.1f} dB")
        for row in self.rows:
            scale = f"{row.scale_min:.4g}" if row.scale_min == row.scale_max else f"{row.scale_min:.4g}..{row.scale_max:.4g}"
            span = "" if row.low is None else f" range {row.low:.4g}..{row.high:.4g}"
            lines.append(f"{row.role} {row.tensor}: {'INT' if row.signed else 'UINT'}{row.bits} scale {scale}"
                         f"{' (2^k)' if row.pow2 else ''}{span}")
        if self.scales is not None:
            lines += self.scales.lines()
        pow2 = [layer.name for layer in self.layers if layer.pow2]
        lines.append(f"layers whose input, weight and output scales are all powers of two: "
                     f"{', '.join(pow2) or 'none'} of {len(self.layers)}")
        if self.chosen is not None:
            lines.append(f"bits per layer (weights and input) for the {self.device} at {self.target_fps:g} frames/s: "
                         f"{choice_line(self.chosen)}")
            for choice in self.priced:
                if len(set(choice.bits)) == 1:
                    lines.append(f"  uniform: {choice_line(choice)}")
        return lines + self.notes


def choice_line(choice) -> str:
    """One priced bit-width choice (streamc.ptq.budget.Choice): its bits, LUTs, fit, SQNR and accuracy."""
    if choice.lut is None:
        priced = "no folding reaches target_fps"
    else:
        priced = f"{choice.lut:,} LUTs estimated, " + ("fits" if choice.fits else f"over on {', '.join(choice.over)}")
    accuracy = "" if choice.accuracy is None else f", accuracy {choice.accuracy:.4f}"
    return f"{'/'.join(map(str, choice.bits))}, {priced}, per-layer SQNR {choice.sqnr_db:.1f} dB{accuracy}"


def tensor_rows(plan: Plan, stats: dict[str, TensorStats]) -> list[TensorRow]:
    rows = []
    for role, types in (("weight", plan.weights), ("activation", plan.activations)):
        for tensor, qtype in types.items():
            scale = np.asarray(qtype.scale, np.float64)
            known = stats.get(tensor) if role == "activation" else None
            rows.append(TensorRow(tensor, role, qtype.bits, qtype.signed, float(scale.min()), float(scale.max()),
                                  None if known is None else known.low, None if known is None else known.high))
    for node, index, qtype in plan.rescales:
        scale = float(qtype.scale)
        rows.append(TensorRow(f"{node} input {index}", "rescale", qtype.bits, qtype.signed, scale, scale, None, None))
    return rows
