"""How many cycles a frame takes through the empty accelerator: predicted per stage and end to end.

A stage takes at most one beat a cycle on each input port, once its producer has put it out (and the link's
register has passed it on). It can put out an output beat once its ports have taken what that beat needs
(the data dependencies :mod:`streamc.fifo_sizing` sizes FIFOs from) and its kernels' pipelines have carried
it through (their ``latency``), and no sooner than ``beat_interval`` cycles after its output beat before (an
MVAU computes a beat in SIMD folds; the other kinds put out a beat a cycle). Both are a running maximum:
with ``ready[b]`` the cycle beat ``b`` has what it needs and ``pace`` cycles between beats, beat ``b`` leaves at
``max(ready[j] + (b - j) * pace for j <= b)``, one pass over a frame's beats. The input comes in at full rate,
a beat a cycle, as the testbench sends it.

The prediction is compared with what Verilator measures (``latency_cycles`` of a full-rate frame through
the empty pipeline) in ``reports/rtlsim.json``; how close it comes is in the docstring of
:func:`predicted_latency`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .fifo_sizing import need
from .hw import Dataflow

INPUT = -1
#: Cycles a link adds: the output register of the FIFO or converter on it (the input's too: a testbench beat is
#: taken the cycle after it is offered).
LINK_CYCLES = 1


@dataclass(frozen=True)
class StageLatency:
    """When a stage's first and last output beats of a frame leave, counted from the frame's first input beat."""

    name: str
    pipeline: int   # cycles through the stage's kernels (their ``latency``)
    first: int      # its first output beat
    last: int       # its last output beat


def pipeline_cycles(stage) -> int:
    """Cycles from a stage's input to its output through its kernels, as the rtl step builds them."""
    return sum(kernel.latency for kernel in stage.components())


def stage_latencies(dataflow: Dataflow) -> list[StageLatency]:
    """Every stage's first and last output beat of a frame through the empty accelerator, in cycles after
    the frame's first input beat."""
    stages = dataflow.stages
    first = stages[0]
    element_times = {INPUT: np.arange(first.in_count) // first.in_elems - LINK_CYCLES}
    rows = []
    for index, stage in enumerate(stages):
        beats = stage.out_count // stage.out_elems
        pipeline = pipeline_cycles(stage)
        ready = np.zeros(beats, np.int64)
        for port, source in enumerate(stage.sources):
            taken = _taken(element_times[source] + LINK_CYCLES, stage.port_count(port), stage.in_elems)
            # the inputs the last element of each beat needs, and when the last of them was taken
            needed = need(stage, port)[np.arange(1, beats + 1) * stage.out_elems]
            ready = np.maximum(ready, taken[np.maximum(needed, 1) - 1])
        leave = _paced(ready + pipeline, stage.beat_interval)
        element_times[index] = np.repeat(leave, stage.out_elems)
        rows.append(StageLatency(stage.name, pipeline, int(leave[0]), int(leave[-1])))
    return rows


def _paced(ready: np.ndarray, interval: float) -> np.ndarray:
    """When each beat goes, ``ready`` the cycle it could at the earliest, at least ``interval`` after the one before."""
    steps = np.arange(len(ready)) * interval
    return np.ceil(steps + np.maximum.accumulate(ready - steps)).astype(np.int64)


def _taken(arrived: np.ndarray, count: int, elems: int) -> np.ndarray:
    """When a port takes each of its ``count`` elements, given when each arrived: a beat of ``elems`` a cycle."""
    elems = elems if count % elems == 0 else 1
    beats = _paced(arrived[elems - 1:count:elems], 1)
    return np.repeat(beats, elems)


def predicted_latency(dataflow: Dataflow) -> int:
    """Cycles from a frame's first input beat to its first output beat through the empty accelerator."""
    return stage_latencies(dataflow)[-1].first
