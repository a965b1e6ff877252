"""Propagation (the RFC's pass): which tensors get a quantizer, which kernels stay float on the host, and
the type of each quantized tensor, with the target's constraints applied.

Target constraints of streamc's kernels: a linear kernel (MVAU/VVAU) takes any input and weight scales
(per-channel weights); shape ops and max pools keep their input's type (they move codes); ``Add`` and
``Concat`` need the same scale on every input (``same_scale``), so their inputs share one type resolved
from all their ranges; where a fixed type of the user's conflicts with it, a requantizing ``Quant``
(the RFC's rescale) is put on that edge.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import numpy_helper

from ..errors import ConfigError
from .calibrate import TensorStats
from .constraints import Calibrated, Constraints, KeepFloat, Uniform
from .fuse import Kernel, consumers

SAME_TYPE_OPS = ("MaxPool", "GlobalMaxPool", "Flatten", "Reshape", "Transpose", "Squeeze", "Unsqueeze", "Relu")
SAME_SCALE_OPS = ("Add", "Concat")
NEW_GRID_OPS = ("Add", "AveragePool", "GlobalAveragePool")
HARDWARE_OPS = ("Gemm", "MatMul", "Conv", "Concat") + SAME_TYPE_OPS + NEW_GRID_OPS


@dataclass(frozen=True)
class UniformType:
    """A resolved quantized type (the RFC's UniformQuantizedType); ``scale`` per channel for weights."""

    bits: int
    scale: np.ndarray
    signed: bool
    narrow: bool = False
    zero_point: float = 0.0

    @property
    def pow2(self) -> bool:
        """Every scale a power of two."""
        return bool(np.all(np.exp2(np.round(np.log2(self.scale))) == self.scale))

    def same(self, other: "UniformType") -> bool:
        return (self.bits, self.signed, self.narrow, self.zero_point) == \
            (other.bits, other.signed, other.narrow, other.zero_point) and np.array_equal(self.scale, other.scale)


@dataclass
class Plan:
    weights: dict[str, UniformType] = field(default_factory=dict)
    activations: dict[str, UniformType] = field(default_factory=dict)
    #: (node name, input index, the type that input is requantized to)
    rescales: list[tuple[str, int, UniformType]] = field(default_factory=list)
    host_nodes: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: The activations that share one calibrated type (a same-scale group), the user's fixed types left out:
    #: with each weight, the units whose scales are powers of two or not (streamc.ptq.scales).
    activation_groups: list[tuple[str, ...]] = field(default_factory=list)


def quantize_values(values: np.ndarray, qtype: UniformType) -> np.ndarray:
    """What qonnx's ``Quant`` (ROUND, zero point 0) makes of ``values``, dequantized."""
    top = 2 ** (qtype.bits - 1) - 1 if qtype.signed else 2 ** qtype.bits - 1
    low = (-top if qtype.narrow else -top - 1) if qtype.signed else 0
    return np.clip(np.round(values / qtype.scale), low, top) * qtype.scale


def _levels(bits: int, signed: bool) -> int:
    return 2 ** (bits - 1) - 1 if signed else 2 ** bits - 1


def _pow2_scale(scale: np.ndarray, values: np.ndarray, make) -> np.ndarray:
    """The power of two next below or above each ``scale`` whose quantization of ``values`` errs least."""
    down = 2.0 ** np.floor(np.log2(scale))
    choices = [down, down * 2]
    errors = [np.mean((quantize_values(values, make(c)) - values) ** 2, axis=-1, keepdims=True) for c in choices]
    return np.where(errors[0] <= errors[1], choices[0], choices[1]).reshape(scale.shape)


def weight_type(weight: np.ndarray, axis: int, bits: int, pow2: bool) -> UniformType:
    """Per-output-channel symmetric narrow type whose clip value minimizes each channel's squared error."""
    rows = np.moveaxis(weight, axis, 0).reshape(weight.shape[axis], -1).astype(np.float64)
    shape = [1] * weight.ndim
    shape[axis] = -1
    levels = _levels(bits, True)
    peak = np.maximum(np.abs(rows).max(axis=1, keepdims=True), 1e-12)
    best, best_error = peak / levels, np.full((len(rows), 1), np.inf)
    for fraction in np.linspace(0.5, 1.0, 51):
        scale = peak * fraction / levels
        error = np.mean((quantize_values(rows, UniformType(bits, scale, True, True)) - rows) ** 2, axis=1, keepdims=True)
        better = error < best_error
        best, best_error = np.where(better, scale, best), np.where(better, error, best_error)
    if pow2:
        best = _pow2_scale(best, rows, lambda s: UniformType(bits, s, True, True))
    return UniformType(bits, best.reshape(shape).astype(np.float32), True, True)


def activation_type(stats: list[TensorStats], bits: int, signed: bool, constraints: Constraints,
                    pow2: bool) -> UniformType:
    """One per-tensor type over the ranges of ``stats`` (tensors that must share it)."""
    top = max(max(abs(v) for v in s.clip_range(constraints.method, bits, signed, constraints.percentile)) for s in stats)
    scale = np.float64(top / _levels(bits, signed) if top > 0 else 1.0)
    if pow2:
        values = np.concatenate([s.sample for s in stats])
        scale = _pow2_scale(np.array([scale]), values[None], lambda s: UniformType(bits, s, signed))[0]
    return UniformType(bits, np.float32(scale), signed)


class _Groups:
    """Union-find over tensor names: the tensors that must carry one type."""

    def __init__(self):
        self.parent: dict[str, str] = {}

    def find(self, name: str) -> str:
        self.parent.setdefault(name, name)
        while self.parent[name] != name:
            name = self.parent[name]
        return name

    def join(self, a: str, b: str) -> None:
        self.parent[self.find(a)] = self.find(b)


def _host_start(model: onnx.ModelProto, kernels: list[Kernel], constraints: Constraints) -> tuple[int, str]:
    """Index of the first node that stays float, with the note saying why (len(nodes) when none)."""
    weights = {k.node.name: k.weight for k in kernels}
    members = {name for k in kernels for name in k.members}
    kept = {name for name, c in constraints.tensors.items() if isinstance(c, KeepFloat)}
    for index, node in enumerate(model.graph.node):
        if node.op_type not in HARDWARE_OPS and node.name not in members:
            return index, "no streamc kernel"
        if node.op_type in ("Gemm", "MatMul", "Conv") and node.name not in weights:
            return index, "weights not constant"
        if kept & (set(node.input) | {weights.get(node.name)}):
            return index, f"reads {', '.join(sorted(kept & (set(node.input) | {weights.get(node.name)})))}, kept float"
    return len(model.graph.node), ""


def plan(model: onnx.ModelProto, kernels: list[Kernel], stats_for, constraints: Constraints,
         pow2: Collection[str] | None = None) -> Plan:
    """Resolve every quantized tensor's type. ``stats_for(names)`` calibrates the tensors it is given;
    ``pow2`` names the weights and activations whose scales are powers of two (an activation group's when
    all its tensors are named); without it, all of them where the constraints' ``scales`` is ``pow2``."""
    def in_pow2(tensors: Collection[str]) -> bool:
        return constraints.scales == "pow2" if pow2 is None else all(t in pow2 for t in tensors)

    known = {name for node in model.graph.node for name in (*node.input, *node.output)} | \
        {t.name for t in model.graph.input}
    unknown = sorted(set(constraints.tensors) - known)
    if unknown:
        raise ConfigError(f"tensors: {unknown[0]} is not a tensor of the model (after BatchNorm folding); "
                          f"give a weight, the input or a kernel's output")
    result = Plan()
    nodes = list(model.graph.node)
    start, why = _host_start(model, kernels, constraints)
    result.host_nodes = [n.name for n in nodes[start:]]
    if start < len(nodes):
        node = nodes[start]
        result.notes.append(f"{node.name} ({node.op_type}): {why}; it and the {len(nodes) - start - 1} nodes after it "
                            f"stay float on the host")
    hardware = nodes[:start]
    in_hardware = {n.name for n in hardware}
    readers = consumers(model)
    outputs = {o.name for o in model.graph.output}
    kernel_outputs = {k.output: k for k in kernels if k.node.name in in_hardware}
    inits = {t.name: t for t in model.graph.initializer}

    def quantizable(tensor: str) -> bool:
        read_by = readers.get(tensor, [])
        return bool(read_by) and tensor not in outputs and all(r.name in in_hardware for r in read_by)

    points = [model.graph.input[0].name] if hardware else []
    points += [k.output for k in kernel_outputs.values()]
    points += [n.output[0] for n in hardware if n.op_type in NEW_GRID_OPS and n.output[0] not in kernel_outputs
               and not any(n.name in k.members for k in kernels)]
    points = [p for p in points if quantizable(p)]
    stats = stats_for(points)
    for point in points:
        given = constraints.tensors.get(point)
        if isinstance(given, Calibrated):
            stats[point] = TensorStats(given.min, given.max, np.clip(stats[point].sample, given.min, given.max), True)

    groups = _Groups()
    for node in hardware:
        if node.op_type in SAME_TYPE_OPS and node.output[0] not in kernel_outputs:
            groups.join(node.output[0], node.input[0])
        elif node.op_type in SAME_SCALE_OPS and not any(node.name in k.members for k in kernels):
            for name in node.input[1:]:
                groups.join(name, node.input[0])
            if node.op_type == "Concat":
                groups.join(node.output[0], node.input[0])
    members: dict[str, list[str]] = {}
    for point in points:
        members.setdefault(groups.find(point), []).append(point)
    for group in members.values():
        fixed = [p for p in group if isinstance(constraints.tensors.get(p), Uniform)]
        for p in fixed:
            c = constraints.tensors[p]
            result.activations[p] = UniformType(c.bits, np.float32(c.scale), c.signed, zero_point=c.zero_point)
        free = [p for p in group if p not in fixed]
        if fixed:
            shared = result.activations[fixed[0]]
        else:
            bits = max(constraints.bits_for(p, constraints.activation_bits) for p in group)
            signed = any(stats[p].low < 0 for p in group)
            shared = activation_type([stats[p] for p in group], bits, signed, constraints, in_pow2(free))
            result.activation_groups.append(tuple(free))
        for p in free:
            result.activations[p] = shared
        for node in hardware:
            if node.op_type in SAME_SCALE_OPS and groups.find(node.input[0]) == groups.find(group[0]) \
                    and not any(node.name in k.members for k in kernels):
                for index, name in enumerate(node.input):
                    source = source_point(name, model, result.activations)
                    if source is not None and not result.activations[source].same(shared):
                        result.rescales.append((node.name, index, shared))
    for kernel in kernels:
        if kernel.node.name in in_hardware:
            given = constraints.tensors.get(kernel.weight)
            weight = numpy_helper.to_array(inits[kernel.weight])
            if isinstance(given, Uniform):
                result.weights[kernel.weight] = UniformType(given.bits, np.float32(given.scale), True, True)
            else:
                bits = constraints.bits_for(kernel.weight, constraints.weight_bits)
                result.weights[kernel.weight] = weight_type(weight, kernel.channel_axis, bits,
                                                            in_pow2([kernel.weight]))
    return result


def source_point(tensor: str, model: onnx.ModelProto, points: dict) -> str | None:
    """The quantized tensor ``tensor`` is a shape op or max pool of (itself, if it is one)."""
    producers = {out: node for node in model.graph.node for out in node.output}
    while tensor not in points:
        node = producers.get(tensor)
        if node is None or node.op_type not in SAME_TYPE_OPS:
            return None
        tensor = node.input[0]
    return tensor
