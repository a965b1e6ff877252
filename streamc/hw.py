"""The hardware view of a streamlined graph: host head, a graph of hardware stages, host tail.

Stages are kept in topological order; each names the stages it reads (``sources``, -1 for the
hardware input). Streams are channels-last: a tensor (C, H, W) flows as (H, W, C).
"""

from __future__ import annotations

import os
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np
from threadpoolctl import threadpool_limits

from .errors import LoweringError
from .execute import execute, tensor_shapes
from .input_thresholds import InputThresholds, input_thresholds
from .ir import Graph, TensorInfo
from .stages import STAGE_KINDS, LUTStage, MVAULayer, Stage, sliding_window

#: Elements of the widest stream (the input codes or a stage's output) one batch of :meth:`Dataflow.integers`
#: holds: small enough that a batch's arrays stay in the caches and below the size glibc maps fresh pages for
#: on every allocation (page faults took most of CNV-w2a2's time at 2**25), large enough that numpy's calls
#: are long against their overhead.
BATCH_ELEMENTS = 1 << 21
#: Frames a batch holds at least: a layer converts its weights to floats once a batch (CNV-w2a2's 4-frame batches
#: spent about a tenth of their time on its fully connected layers' weights; at 16 frames, 177 -> 232 to 253
#: frames per CPU second, one thread, in two runs at load ~13).
BATCH_FRAMES = 16


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
    # The head as thresholds on the input (False: it is not one), found on first use.
    head_thresholds: InputThresholds | None | bool = field(default=None, repr=False, compare=False)

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

    @property
    def tables(self) -> list[LUTStage]:
        return [s for s in self.stages if isinstance(s, LUTStage)]

    def cycles_per_frame(self) -> int:
        return max(stage.cycles() for stage in self.stages)

    def consumers(self, index: int) -> list[int]:
        """The stages reading stage ``index`` (-1: the hardware input), once per input they read it on."""
        return [k for k, stage in enumerate(self.stages) for source in stage.sources if source == index]

    def input_codes(self, frames: np.ndarray) -> np.ndarray:
        """The host head: model inputs ``(N, *input shape)`` to the integer codes the hardware takes,
        one row per frame in stream order."""
        return self.narrow_input_codes(frames).astype(np.int64, copy=False)

    def narrow_input_codes(self, frames: np.ndarray) -> np.ndarray:
        """:meth:`input_codes` in the narrowest integers the head's thresholds give (int64 from the executor):
        counted on :attr:`head_thresholds` where the head is a chain of monotonic ops
        (:mod:`streamc.input_thresholds`), else the head in the executor."""
        if self.head_thresholds is None:
            self.head_thresholds = input_thresholds(self.head, self.to_stream_order) or False
        codes = self.head_thresholds.codes(frames) if self.head_thresholds else None
        if codes is not None:
            return codes
        codes = execute(self.head, {self.head.inputs[0].name: frames})[self.hw_input]
        return self.to_stream_order(np.rint(codes).astype(np.int64))

    def run_stages(self, codes: np.ndarray) -> np.ndarray:
        """Each stage's integer arithmetic (its ``emulate``) in dataflow order: input codes to the hardware's
        output integers, one row per frame."""
        values = {-1: codes}
        for index, stage in enumerate(self.stages):
            values[index] = stage.emulate(*[values[source] for source in stage.sources])
        return values[len(self.stages) - 1]

    def integers(self, frames: np.ndarray) -> np.ndarray:
        """The hardware's output integers for model inputs ``frames``, one row per frame: head and stages on
        batches of about :data:`BATCH_ELEMENTS` elements (or :data:`BATCH_FRAMES` frames), a batch per core at a
        time.

        Each batch's BLAS calls run on one thread: the cores are busy with batches, and OpenBLAS's threads
        waiting for each other on a shared, loaded machine made CNV-w2a2 half as fast."""
        widest = max([int(np.prod(self.head.outputs[0].shape[1:]))] + [stage.out_count for stage in self.stages])
        batch = max(BATCH_FRAMES, BATCH_ELEMENTS // widest)
        starts = range(0, len(frames), batch)
        self.narrow_input_codes(frames[:1])   # finds the head's thresholds once, before the threads
        with threadpool_limits(1, user_api="blas"), ThreadPoolExecutor(os.cpu_count() or 1) as pool:
            parts = list(pool.map(lambda start: self.run_stages(self.narrow_input_codes(frames[start:start + batch])),
                                  starts))
        if not parts:
            return np.zeros((0, self.stages[-1].out_count), np.int64)
        return np.concatenate(parts).astype(np.int64, copy=False)

    def outputs_of(self, hw: np.ndarray) -> np.ndarray:
        """The host tail: the hardware's output integers (rows in stream order) to the model's outputs."""
        tail_input = self.from_stream_order(hw).astype(np.float32)
        return execute(self.tail, {self.hw_output: tail_input})[self.tail.outputs[0].name]

    def emulate(self, frames: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """What the hardware and the host together compute, stage by stage in integers.

        Returns the hardware's output integers ``(N, out_count)`` and the model outputs after the
        host tail. The RTL is checked against the model itself, not against this; this is the
        quick way to see what a folding-independent hardware description computes.
        """
        x = self.run_stages(self.input_codes(frames)).astype(np.int64, copy=False)
        return x, self.outputs_of(x)


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


def _stream_positions(shape: tuple[int, ...]) -> np.ndarray:
    """Where each element of a frame of ``shape`` (C, *spatial) sits in its stream: channels last."""
    count = int(np.prod(shape, dtype=int))
    if len(shape) < 2:
        return np.arange(count).reshape(shape)
    return np.moveaxis(np.arange(count).reshape(*shape[1:], shape[0]), -1, 0)


def _stages(record: dict, taken: set[str], positions: np.ndarray | None, in_count: int) -> list[Stage]:
    """The stages of one record of the streamline step, in stream order: the stage, behind the sliding
    window it reads through if it has one. ``positions``: where each element of a dense layer's input sits
    in the stream, if shape ops reordered it (None: in order)."""
    kind = STAGE_KINDS[record["kind"]]
    stage = kind.from_record(record, name=hardware_name(record["name"], taken), in_count=in_count,
                             positions=positions)
    window = kind.window_of(record)
    if window is None:
        return [stage]
    return [sliding_window(hardware_name(record["name"] + "_window", taken), record["name"], **window), stage]


def to_hw(graph: Graph) -> Dataflow:
    """Split a streamlined graph into host head, hardware stages and host tail."""
    if "stages" not in graph.meta:
        raise LoweringError("the graph is not streamlined: run the streamline step first")
    meta = graph.meta
    hw_input, hw_output = meta["hw_input"], meta["hw_output"]
    shapes = tensor_shapes(graph)
    producer = {hw_input: -1}
    # Tensors that shape ops reordered: where each element sits in the stream carrying it.
    reordered: dict[str, np.ndarray] = {}
    taken: set[str] = set()
    stages: list[Stage] = []
    for spec in meta["stages"]:
        if spec["kind"] == "alias":
            (source,) = spec["inputs"]
            producer[spec["output"]] = producer[source]
            positions = reordered.get(source)
            if positions is None:
                positions = _stream_positions(shapes[source][1:])
            if spec["perm"] is not None:
                positions = positions.transpose([axis - 1 for axis in spec["perm"][1:]])
            positions = positions.reshape(shapes[spec["output"]][1:])
            if not np.array_equal(positions, _stream_positions(positions.shape)):
                reordered[spec["output"]] = positions
            continue
        # A dense layer takes its one input reordered (its weights follow); nothing else does.
        dense = spec["kind"] in ("mvau", "vvau") and not spec.get("conv")
        if any(tensor in reordered for tensor in spec["inputs"][1 if dense else 0:]):
            raise LoweringError(f"node {spec['name']!r}: its input is a stream reordered by shape ops (a Transpose, "
                                "or a Flatten of an image); streamc reorders a stream only where it enters a dense layer")
        sources = [producer[t] for t in spec["inputs"]]
        in_count = stages[sources[0]].out_count if sources[0] >= 0 else int(np.prod(shapes[hw_input][1:]))
        new = _stages(spec, taken, reordered.get(spec["inputs"][0]), in_count)
        new[0].sources = sources
        for offset, stage in enumerate(new[1:]):
            stage.sources = [len(stages) + offset]
        stages += new
        producer[spec["output"]] = len(stages) - 1
    if producer.get(hw_output) != len(stages) - 1:
        raise LoweringError(f"tensor {hw_output!r} leaves the hardware but is not made by its last stage (a streamc bug)")
    input_chw = shapes[hw_input][1:] if len(shapes[hw_input]) > 2 else None
    output_chw = shapes[hw_output][1:] if len(shapes[hw_output]) > 2 else None
    head_end, tail_start = meta["head_count"], len(graph.nodes) - meta["tail_count"]
    head = Graph(nodes=graph.nodes[:head_end], constants=graph.constants, inputs=graph.inputs,
                 outputs=[TensorInfo(hw_input, (1, int(np.prod(shapes[hw_input][1:]))))], opset=graph.opset,
                 qonnx_opset=graph.qonnx_opset, name="head")
    tail = Graph(nodes=graph.nodes[tail_start:], constants=graph.constants,
                 inputs=[TensorInfo(hw_output, (1, stages[-1].out_count))], outputs=graph.outputs,
                 opset=graph.opset, qonnx_opset=graph.qonnx_opset, name="tail")
    return Dataflow(head=head, stages=stages, tail=tail, hw_input=hw_input, hw_output=hw_output,
                    boundary=meta.get("boundary", {}), input_chw=input_chw, output_chw=output_chw)
