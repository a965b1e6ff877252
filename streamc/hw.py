"""The hardware view of a streamlined graph: host head, a chain of hardware stages, host tail."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from .datatypes import DataType
from .errors import LoweringError
from .ir import Graph, TensorInfo
from .execute import execute, tensor_shapes
from .rtl.requant import Requant, requantize

#: Nodes that become hardware stages, and those that may sit between them (they only reorder or pool codes).
HW_OPS = frozenset({"MatMul", "Conv", "MultiThreshold", "LookupTable"})
BETWEEN_OPS = frozenset({"MaxPool", "Flatten", "Reshape", "Squeeze", "Unsqueeze", "Identity"})


@dataclass
class MVAULayer:
    """One matrix-vector unit: integer weights, an output stage (thresholds, requantization or
    none: the accumulator), and its folding."""

    name: str
    source: str
    weights: np.ndarray
    in_dtype: DataType
    weight_dtype: DataType
    thresholds: np.ndarray | None
    out_dtype: DataType
    out_bias: int
    acc_lo: np.ndarray
    acc_hi: np.ndarray
    requant: Requant | None = None
    vectors: int = 1          # input vectors per frame: output pixels of a convolution
    pe: int = 1
    simd: int = 1

    @property
    def mh(self) -> int:
        return self.weights.shape[0]

    @property
    def mw(self) -> int:
        return self.weights.shape[1]

    @property
    def in_count(self) -> int:
        return self.vectors * self.mw

    @property
    def out_count(self) -> int:
        return self.vectors * self.mh

    @property
    def in_elems(self) -> int:
        return self.simd

    @property
    def out_elems(self) -> int:
        return self.pe

    def cycles(self, pe: int | None = None, simd: int | None = None) -> int:
        return self.vectors * (self.mh // (pe or self.pe)) * (self.mw // (simd or self.simd))

    def describe(self) -> str:
        return f"node {self.source!r} (MatMul {self.mh}x{self.mw})"

    def emulate(self, x: np.ndarray) -> np.ndarray:
        acc = x.reshape(-1, self.mw) @ self.weights.T
        if self.requant is not None:
            out = requantize(acc, self.requant)
        elif self.thresholds is None:
            out = acc
        else:
            count = (acc[:, :, None] >= self.thresholds[None]).sum(axis=2)
            out = np.where(count > 0, 1, -1) if self.out_dtype.bipolar else count + self.out_bias
        return out.reshape(len(x), -1)

    @property
    def output_stage(self) -> str:
        if self.requant is not None:
            return f"requant (x{self.requant.multiplier.max()} >> {self.requant.shift})"
        if self.thresholds is not None:
            return f"{self.thresholds.shape[1]} thresholds"
        return "accumulator"


@dataclass
class LUTStage:
    """An elementwise lookup table between two quantizers; ``elems`` elements per cycle."""

    name: str
    source: str
    table: np.ndarray
    in_dtype: DataType
    out_dtype: DataType
    count: int
    elems: int = 1

    in_count = out_count = property(lambda self: self.count)
    in_elems = out_elems = property(lambda self: self.elems)

    def cycles(self) -> int:
        return self.count // self.elems

    def emulate(self, x: np.ndarray) -> np.ndarray:
        index = (x + 1) // 2 if self.in_dtype.bipolar else x - self.in_dtype.min
        return self.table[index]

    def describe(self) -> str:
        return f"lookup table {self.source!r} ({self.in_dtype} -> {self.out_dtype})"

    output_stage = "table"


@dataclass
class WindowStage:
    """A sliding-window generator: each output pixel's (kh, kw, c) patch, channels-last, ``elems`` per cycle."""

    name: str
    source: str
    in_shape: tuple[int, int, int]          # (H, W, C)
    out_shape: tuple[int, int]              # (OH, OW)
    kernel: tuple[int, int]
    strides: tuple[int, int]
    padding: tuple[int, int, int, int]      # top, left, bottom, right
    dilations: tuple[int, int]
    dtype: DataType
    pad_value: int
    elems: int = 1

    in_elems = out_elems = property(lambda self: self.elems)
    in_dtype = out_dtype = property(lambda self: self.dtype)
    output_stage = "window"

    @property
    def in_count(self) -> int:
        return int(np.prod(self.in_shape))

    @property
    def out_count(self) -> int:
        return int(np.prod(self.out_shape) * np.prod(self.kernel) * self.in_shape[2])

    def cycles(self) -> int:
        return max(self.in_count, self.out_count) // self.elems

    def emulate(self, x: np.ndarray) -> np.ndarray:
        frames = x.reshape(len(x), *self.in_shape)
        top, left, bottom, right = self.padding
        padded = np.pad(frames, ((0, 0), (top, bottom), (left, right), (0, 0)), constant_values=self.pad_value)
        (oh, ow), (kh, kw), (sh, sw), (dh, dw) = self.out_shape, self.kernel, self.strides, self.dilations
        patches = [padded[:, i * sh + a * dh, j * sw + b * dw, :]
                   for i in range(oh) for j in range(ow) for a in range(kh) for b in range(kw)]
        return np.stack(patches, axis=1).reshape(len(x), -1)

    def describe(self) -> str:
        return f"sliding window of {self.source!r}"


@dataclass
class PoolStage:
    """Max over each window of ``window`` pixels, per channel: what follows a sliding window in a max pool."""

    name: str
    source: str
    channels: int
    window: int
    vectors: int
    dtype: DataType
    elems: int = 1

    in_elems = out_elems = property(lambda self: self.elems)
    in_dtype = out_dtype = property(lambda self: self.dtype)
    output_stage = "max pool"

    @property
    def in_count(self) -> int:
        return self.vectors * self.window * self.channels

    @property
    def out_count(self) -> int:
        return self.vectors * self.channels

    def cycles(self) -> int:
        return self.in_count // self.elems

    def emulate(self, x: np.ndarray) -> np.ndarray:
        return x.reshape(len(x), self.vectors, self.window, self.channels).max(axis=2).reshape(len(x), -1)

    def describe(self) -> str:
        return f"max pool {self.source!r}"


Stage = MVAULayer | LUTStage | WindowStage | PoolStage


@dataclass
class Dataflow:
    """What runs where: ``head`` on the host (float input to integer codes), ``stages`` in
    hardware, ``tail`` on the host (hardware output to the model's output)."""

    head: Graph
    stages: list[Stage]
    tail: Graph
    hw_input: str
    hw_output: str
    boundary: dict = field(default_factory=dict)
    input_chw: tuple[int, ...] | None = None    # the head's codes are (C, *spatial): streamed channels-last
    output_chw: tuple[int, ...] | None = None   # the tail takes (C, *spatial), the hardware gives channels-last

    def to_stream_order(self, values: np.ndarray) -> np.ndarray:
        """Head output (N, C, *spatial) or (N, K) as the hardware streams it, one row per frame."""
        values = values.reshape(len(values), -1)
        if self.input_chw is None:
            return values
        return np.moveaxis(values.reshape(len(values), *self.input_chw), 1, -1).reshape(len(values), -1)

    def to_output_stream_order(self, values: np.ndarray) -> np.ndarray:
        """The model's tensor at the hardware output (N, C, *spatial) as the hardware streams it."""
        if self.output_chw is None:
            return values.reshape(len(values), -1)
        return np.moveaxis(values.reshape(len(values), *self.output_chw), 1, -1).reshape(len(values), -1)

    def from_stream_order(self, values: np.ndarray) -> np.ndarray:
        """Hardware output rows as the tail takes them."""
        if self.output_chw is None:
            return values
        channels_last = values.reshape(len(values), *self.output_chw[1:], self.output_chw[0])
        return np.moveaxis(channels_last, -1, 1)

    @property
    def layers(self) -> list[MVAULayer]:
        return [s for s in self.stages if isinstance(s, MVAULayer)]

    def cycles_per_frame(self) -> int:
        return max(stage.cycles() for stage in self.stages)

    def emulate(self, frames: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """What the hardware and the host together compute, stage by stage in integers.

        Returns the hardware's output integers ``(N, out_count)`` and the model outputs after the
        host tail. The RTL is checked against the model itself, not against this; this is the
        quick way to see what a folding-independent hardware description computes.
        """
        name = self.head.inputs[0].name
        values = execute(self.head, {name: frames})[self.hw_input]
        x = self.to_stream_order(np.rint(values).astype(np.int64))
        for stage in self.stages:
            x = stage.emulate(x)
        tail_input = self.from_stream_order(x).astype(np.float32)
        outputs = execute(self.tail, {self.hw_output: tail_input})[self.tail.outputs[0].name]
        return x, outputs


def hardware_name(source: str, taken: set[str]) -> str:
    """A Verilog-safe, unique identifier for a node name such as ``/features.2/MatMul``."""
    base = re.sub(r"[^A-Za-z0-9_]+", "_", source).strip("_") or "layer"
    if base[0].isdigit():
        base = "l_" + base
    name, i = base, 1
    while name in taken:
        name, i = f"{base}_{i}", i + 1
    taken.add(name)
    return name


def _window(name: str, source: str, in_shape, out_shape, kernel, strides, pads_begin, pads_end, dilations,
            dtype: DataType, pad_value: int) -> WindowStage:
    """A sliding window in 2-D terms: a 1-D convolution is one row high."""
    if len(kernel) == 1:
        in_shape, out_shape = (1, *in_shape), (1, *out_shape)
        kernel, strides, dilations = (1, *kernel), (1, *strides), (1, *dilations)
        pads_begin, pads_end = (0, *pads_begin), (0, *pads_end)
    if len(kernel) != 2:
        raise LoweringError(f"node {source!r}: {len(kernel)}-D windows are not supported; 1-D and 2-D are")
    return WindowStage(name=name, source=source, in_shape=tuple(in_shape), out_shape=tuple(out_shape[:2]),
                       kernel=tuple(kernel), strides=tuple(strides),
                       padding=(pads_begin[0], pads_begin[1], pads_end[0], pads_end[1]),
                       dilations=tuple(dilations), dtype=dtype, pad_value=pad_value)


def _stages(spec: dict, taken: set[str], flatten: dict | None) -> list[Stage]:
    name = hardware_name(spec["name"], taken)
    if spec["kind"] == "lut":
        return [LUTStage(name=name, source=spec["name"], table=spec["table"], in_dtype=spec["in_dtype"],
                         out_dtype=spec["out_dtype"], count=0)]
    if spec["kind"] == "maxpool":
        attrs, channels = spec["attrs"], spec["in_shape"][0]
        if attrs.get("ceil_mode", 0) or attrs.get("auto_pad", "NOTSET") not in ("NOTSET", "VALID"):
            raise LoweringError(f"node {spec['name']!r} (MaxPool): ceil_mode and auto_pad SAME are not supported yet")
        kernel = tuple(attrs["kernel_shape"])
        pads = list(attrs.get("pads", [0] * 2 * len(kernel)))
        window = _window(hardware_name(spec["name"] + "_window", taken), spec["name"],
                         (*spec["in_shape"][1:], channels), spec["out_shape"][1:], kernel,
                         attrs.get("strides", [1] * len(kernel)), pads[:len(kernel)], pads[len(kernel):],
                         attrs.get("dilations", [1] * len(kernel)), spec["dtype"], spec["dtype"].min)
        pool = PoolStage(name=name, source=spec["name"], channels=channels, window=int(np.prod(kernel)),
                         vectors=int(np.prod(spec["out_shape"][1:])), dtype=spec["dtype"])
        return [window, pool]
    weights = spec["weights"]
    if flatten is not None:
        # The model flattened (C, *spatial); the stream carries (*spatial, C).
        chw = flatten["in_shape"]
        weights = np.moveaxis(weights.reshape(weights.shape[0], *chw), 1, -1).reshape(weights.shape[0], -1)
    conv = spec.get("conv")
    layer = MVAULayer(name=name, source=spec["name"], weights=weights, in_dtype=spec["in_dtype"],
                      weight_dtype=spec["weight_dtype"], thresholds=spec["thresholds"], out_dtype=spec["out_dtype"],
                      out_bias=spec["out_bias"], acc_lo=spec["acc_lo"], acc_hi=spec["acc_hi"],
                      requant=spec.get("requant"),
                      vectors=int(np.prod(conv["out_shape"][:-1])) if conv else 1)
    if not conv:
        return [layer]
    window = _window(hardware_name(spec["name"] + "_window", taken), spec["name"], conv["in_shape"],
                     conv["out_shape"][:-1], conv["kernel"], conv["strides"], conv["pads_begin"], conv["pads_end"],
                     conv["dilations"], spec["in_dtype"], 0)
    return [window, layer]


def to_hw(graph: Graph) -> Dataflow:
    """Split a streamlined graph at its integer chain and choose each layer's output stage."""
    positions = [i for i, n in enumerate(graph.nodes) if n.op_type in HW_OPS]
    if not positions:
        raise LoweringError("the streamlined graph has no MatMul: run the streamline step first")
    hw_input = graph.meta["hw_input"]
    first = next(i for i, n in enumerate(graph.nodes) if hw_input in n.inputs)
    last = positions[-1]
    stray = [n for n in graph.nodes[first:last + 1] if n.op_type not in HW_OPS | BETWEEN_OPS]
    if stray:
        raise LoweringError(f"{stray[0].describe()} sits between hardware layers; it cannot run in hardware")
    hw_output = graph.nodes[last].outputs[0]
    taken: set[str] = set()
    stages: list[Stage] = []
    flatten = None
    for spec in graph.meta["stages"]:
        if spec["kind"] == "flatten":
            flatten = spec
            continue
        new = _stages(spec, taken, flatten)
        flatten = None
        for stage in new:
            if isinstance(stage, LUTStage):
                stage.count = stages[-1].out_count
        stages += new
    shapes = tensor_shapes(graph)
    input_chw = shapes[hw_input][1:] if isinstance(stages[0], WindowStage) else None
    output_chw = shapes[hw_output][1:] if len(shapes[hw_output]) > 2 else None
    head = Graph(nodes=graph.nodes[:first], constants=graph.constants, inputs=graph.inputs,
                 outputs=[TensorInfo(hw_input, (1, stages[0].in_count))], opset=graph.opset,
                 qonnx_opset=graph.qonnx_opset, name="head")
    tail = Graph(nodes=graph.nodes[last + 1:], constants=graph.constants,
                 inputs=[TensorInfo(hw_output, (1, stages[-1].out_count))], outputs=graph.outputs,
                 opset=graph.opset, qonnx_opset=graph.qonnx_opset, name="tail")
    return Dataflow(head=head, stages=stages, tail=tail, hw_input=hw_input, hw_output=hw_output,
                    boundary=graph.meta.get("boundary", {}), input_chw=input_chw, output_chw=output_chw)
